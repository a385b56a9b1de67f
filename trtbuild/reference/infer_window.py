"""The helpers of the windowed layers' inference, where earlier code imports them from; they live
in trtbuild/reference/ops (common.py, window.py)."""

from .ops.common import FLOATS, INT8_QUANTIZED, fail, need_float  # noqa: F401
from .ops.window import window_out  # noqa: F401

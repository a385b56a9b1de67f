"""Inference helpers importable under this name (quantize.py and user code import `fail` from here);
they are defined in trtbuild/reference/ops (common.py, window.py), beside the layer types using them."""

from .ops.common import FLOATS, INT8_QUANTIZED, fail, need_float  # noqa: F401
from .ops.window import window_out  # noqa: F401

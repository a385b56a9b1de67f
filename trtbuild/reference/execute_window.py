"""The helpers of the windowed layers' execution, where earlier code imports them from; they live
in trtbuild/reference/ops (convolution.py, common.py, window.py)."""

from .ops.common import f32 as _f, weights_like as _weights_like  # noqa: F401
from .ops.convolution import deconv_crop  # noqa: F401
from .ops.window import pad_spatial as _pad_spatial, pads as _pads  # noqa: F401

"""Execution helpers of the windowed layers importable under this name (`deconv_crop`, ...); they are
defined in trtbuild/reference/ops (convolution.py, common.py, window.py), beside the layer types using them."""

from .ops.common import f32 as _f, weights_like as _weights_like  # noqa: F401
from .ops.convolution import deconv_crop  # noqa: F401
from .ops.window import pad_spatial as _pad_spatial, pads as _pads  # noqa: F401

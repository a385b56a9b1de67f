"""Layer classes of the reference backend, importable from one place.

Each class lives in the module of its layer type under trtbuild/reference/ops, with that type's
inference and execution; this module re-exports them (trtbuild.reference.layers.IConvolutionLayer, ...).
"""

from __future__ import annotations

from .ops.activation import IActivationLayer
from .ops.base import ILayer, _is_int, check_params  # noqa: F401 - _is_int: safetensors_blob's check
from .ops.cast import ICastLayer
from .ops.concatenation import IConcatenationLayer
from .ops.constant import IConstantLayer
from .ops.cumulative import ICumulativeLayer
from .ops.convolution import IConvolutionLayer, IDeconvolutionLayer
from .ops.elementwise import IElementWiseLayer
from .ops.gather import IGatherLayer
from .ops.identity import IIdentityLayer
from .ops.lrn import ILRNLayer
from .ops.matrix_multiply import IMatrixMultiplyLayer
from .ops.normalization import INormalizationLayer
from .ops.one_hot import IOneHotLayer
from .ops.padding import IPaddingLayer
from .ops.parametric_relu import IParametricReLULayer
from .ops.plugin_v3 import IPluginV3Layer
from .ops.pooling import IPoolingLayer
from .ops.qdq import IDequantizeLayer, IQuantizeLayer
from .ops.reduce import IReduceLayer
from .ops.resize import IResizeLayer
from .ops.registry import registered
from .ops.scale import IScaleLayer
from .ops.select import ISelectLayer
from .ops.shuffle import IShuffleLayer
from .ops.slice import ISliceLayer
from .ops.softmax import ISoftMaxLayer
from .ops.squeeze import ISqueezeLayer
from .ops.unary import IUnaryLayer
from .ops.unsqueeze import IUnsqueezeLayer

__all__ = ["ILayer", "IActivationLayer", "ICastLayer", "IConcatenationLayer", "IConstantLayer", "IConvolutionLayer",
           "IDeconvolutionLayer", "IElementWiseLayer", "IIdentityLayer", "ILRNLayer", "IMatrixMultiplyLayer",
           "INormalizationLayer", "IPaddingLayer", "IPluginV3Layer", "IPoolingLayer", "IQuantizeLayer",
           "IDequantizeLayer", "IReduceLayer", "IScaleLayer", "IShuffleLayer", "ISliceLayer", "ISoftMaxLayer",
           "IUnaryLayer", "check_params", "ISqueezeLayer", "IUnsqueezeLayer",
           "IParametricReLULayer", "ISelectLayer", "IGatherLayer", "ICumulativeLayer",
           "IOneHotLayer", "IResizeLayer"]


def __getattr__(name):
    if name == "LAYER_CLASSES":  # every registered layer class, by type
        return {ltype: op.cls for ltype, op in registered().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

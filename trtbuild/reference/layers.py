"""Layer classes of the reference backend.

Each layer keeps its parameters in `_params` (JSON-friendly values) and `_weights` (Weights), so
the same description drives shape inference (infer.py), execution (execute.py) and the plan
(plan.py). Attribute names are TensorRT's; the conformance test checks them.
"""

from __future__ import annotations



from .core import Dims, NetworkError
from .enums import (DataType, PaddingMode)
from .ops.base import (ILayer, _is_int, check_params, param as _param, setter_value as _setter_value,  # noqa: F401
                       weights as _weights)
from .ops.constant import IConstantLayer  # noqa: F401
from .ops.scale import IScaleLayer  # noqa: F401
from .ops.reduce import IReduceLayer  # noqa: F401
from .ops.elementwise import IElementWiseLayer  # noqa: F401
from .ops.unary import IUnaryLayer  # noqa: F401
from .ops.activation import IActivationLayer  # noqa: F401
from .ops.softmax import ISoftMaxLayer  # noqa: F401
from .ops.cast import ICastLayer  # noqa: F401
from .ops.identity import IIdentityLayer  # noqa: F401
from .ops.convolution import IConvolutionLayer, IDeconvolutionLayer  # noqa: F401
from .ops.pooling import IPoolingLayer  # noqa: F401
from .ops.lrn import ILRNLayer  # noqa: F401
from .ops.padding import IPaddingLayer  # noqa: F401
from .ops.normalization import INormalizationLayer  # noqa: F401
from .ops.shuffle import IShuffleLayer  # noqa: F401
from .ops.concatenation import IConcatenationLayer  # noqa: F401
from .ops.slice import ISliceLayer  # noqa: F401
from .ops.matrix_multiply import IMatrixMultiplyLayer  # noqa: F401
from .ops.qdq import IQuantizeLayer, IDequantizeLayer  # noqa: F401
from .ops.plugin_v3 import IPluginV3Layer  # noqa: F401
from .ops.registry import registered


def _non_negative(value):
    return "padding must be >= 0" if any(v < 0 for v in value) else None


def _unit_interval(value):
    return "blend_factor must be in [0, 1]" if not 0.0 <= value <= 1.0 else None


class _ConvLike(ILayer):
    _MAX_INPUTS = 2  # input 1: the kernel as a tensor (a dequantized weight), with empty kernel weights
    num_output_maps = _param("num_output_maps", "int")
    kernel_size_nd = _param("kernel_size_nd", "dims")
    stride_nd = _param("stride_nd", "dims")
    dilation_nd = _param("dilation_nd", "dims")
    pre_padding = _param("pre_padding", "dims", _non_negative)
    post_padding = _param("post_padding", "dims", _non_negative)
    padding_mode = _param("padding_mode", PaddingMode)
    num_groups = _param("num_groups", "int")
    kernel = _weights("kernel")
    bias = _weights("bias")

    @property
    def padding_nd(self) -> Dims:
        return Dims(self._params["pre_padding"])

    @padding_nd.setter
    def padding_nd(self, value) -> None:
        value = _setter_value("dims", value, lambda: f"layer '{self.name}': padding_nd = {value!r}")
        if _non_negative(value):
            raise NetworkError(f"layer '{self.name}': padding_nd = {tuple(Dims(value))} is refused: "
                               "padding must be >= 0")
        self._params["pre_padding"] = tuple(Dims(value))
        self._params["post_padding"] = tuple(Dims(value))
        self._network._touch()


class _QuantizeLike(ILayer):
    """Inputs: 0 the tensor, 1 the scale (2, TensorRT's zero point, is refused when set)."""

    _MAX_INPUTS = 3
    axis = _param("axis", "int")
    to_type = _param("to_type", DataType)


def __getattr__(name):
    if name == "LAYER_CLASSES":  # every registered layer class, by type
        return {ltype: op.cls for ltype, op in registered().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

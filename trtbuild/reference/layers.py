"""Layer classes of the reference backend.

Each layer keeps its parameters in `_params` (JSON-friendly values) and `_weights` (Weights), so
the same description drives shape inference (infer.py), execution (execute.py) and the plan
(plan.py). Attribute names are TensorRT's; the conformance test checks them.
"""

from __future__ import annotations



from .core import Dims, NetworkError
from .enums import (DataType, LayerType, MatrixOperation,
                    PaddingMode, SampleMode)
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


class INormalizationLayer(ILayer):
    _TYPE = LayerType.NORMALIZATION
    epsilon = _param("epsilon", "float")
    axes = _param("axes", "int")
    num_groups = _param("num_groups", "int")

    @property
    def is_v2(self) -> bool:
        return bool(self._params["is_v2"])


class IShuffleLayer(ILayer):
    _TYPE = LayerType.SHUFFLE
    first_transpose = _param("first_transpose", "perm")
    second_transpose = _param("second_transpose", "perm")
    reshape_dims = _param("reshape_dims", "dims")
    zero_is_placeholder = _param("zero_is_placeholder", "bool")


class IConcatenationLayer(ILayer):
    _TYPE = LayerType.CONCATENATION
    axis = _param("axis", "int")


class ISliceLayer(ILayer):
    _TYPE = LayerType.SLICE
    _MAX_INPUTS = 6
    start = _param("start", "dims")
    shape = _param("shape", "dims")
    stride = _param("stride", "dims")
    mode = _param("mode", SampleMode)


class IMatrixMultiplyLayer(ILayer):
    _TYPE = LayerType.MATRIX_MULTIPLY
    op0 = _param("op0", MatrixOperation)
    op1 = _param("op1", MatrixOperation)


class _QuantizeLike(ILayer):
    """Inputs: 0 the tensor, 1 the scale (2, TensorRT's zero point, is refused when set)."""

    _MAX_INPUTS = 3
    axis = _param("axis", "int")
    to_type = _param("to_type", DataType)


class IQuantizeLayer(_QuantizeLike):
    _TYPE = LayerType.QUANTIZE


class IDequantizeLayer(_QuantizeLike):
    _TYPE = LayerType.DEQUANTIZE


class IPluginV3Layer(ILayer):
    _TYPE = LayerType.PLUGIN_V3

    def __init__(self, network, inputs, plugin, num_outputs):
        self._plugin = plugin
        super().__init__(network, inputs, {}, num_outputs=num_outputs)

    @property
    def plugin(self):
        return self._plugin


def __getattr__(name):
    if name == "LAYER_CLASSES":  # every registered layer class, by type
        return {ltype: op.cls for ltype, op in registered().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

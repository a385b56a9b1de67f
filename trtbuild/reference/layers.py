"""Layer classes of the reference backend.

Each layer keeps its parameters in `_params` (JSON-friendly values) and `_weights` (Weights), so
the same description drives shape inference (infer.py), execution (execute.py) and the plan
(plan.py). Attribute names are TensorRT's; the conformance test checks them.
"""

from __future__ import annotations

from collections.abc import Iterable


from .argtypes import BAD, CONVERTERS as _ARGUMENT, api_types
from .core import Dims, ITensor, NetworkError, Permutation, as_weights
from .enums import (ActivationType, DataType, ElementWiseOperation, LayerType, MatrixOperation,
                    PaddingMode, PoolingType, ReduceOperation, SampleMode, ScaleMode, UnaryOperation)

_CONVERTERS = {
    "dims": lambda v: None if v is None else Dims(v),
    "perm": lambda v: Permutation(v),
    "int": int, "float": float, "bool": bool,
}


class _Param(property):
    """A property that remembers its `_params` key, kind and check, so that a deserialized plan's
    params can be checked against the layer class (see `check_params`)."""

    key: str
    kind: object
    check: object


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_JSON_KINDS = {
    "int": _is_int, "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "dims": lambda v: isinstance(v, (list, tuple)) and len(v) <= 8 and all(_is_int(d) for d in v),
    "perm": lambda v: isinstance(v, (list, tuple)) and sorted(v) == list(range(len(v))) and all(_is_int(d) for d in v),
}


def check_params(ltype: LayerType, params: dict, name: str) -> None:
    """Raise NetworkError naming the first param of a deserialized layer whose value is not of the
    kind its layer class stores (an enum member, an int, a list of ints, ...) or that the class's
    setter would refuse."""
    classes = [c for c in _layer_classes() if c._TYPE == ltype]
    for cls in classes[:1]:
        for attr in dir(cls):
            prop = getattr(cls, attr, None)
            if not isinstance(prop, _Param):
                continue
            if prop.key not in params:
                raise NetworkError(f"layer '{name}': the {ltype.name} param {prop.key} is missing")
            v, kind = params[prop.key], prop.kind
            if v is None and isinstance(kind, str):  # unset optional values (reshape_dims, ...)
                continue
            ok = _JSON_KINDS[kind](v) if isinstance(kind, str) else _is_int(v) and v in kind._value2member_map_
            if not ok:
                what = kind if isinstance(kind, str) else f"{kind.__name__} value"
                raise NetworkError(f"layer '{name}': param {prop.key} = {v!r} is not a valid {what}")
            why = prop.check(_CONVERTERS[kind](v) if isinstance(kind, str) else kind(v)) if prop.check else None
            if why:
                raise NetworkError(f"layer '{name}': param {prop.key} = {v!r} is refused: {why}")


def _layer_classes():
    out, todo = [], [ILayer]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in out if c._TYPE is not None]


def _setter_value(kind, value, where):
    """`value` as TensorRT's Python bindings take it for an attribute of this kind: pybind11's casters, the
    same as for method arguments (argtypes.py, checked against TensorRT-RTX 1.7): an enum only as its own
    enum type; bool from None (False) or a number that is no enum; int from an integer, never a Python
    float or None; float from a real number; dims from a sequence of integers, permutations from a
    sequence. Anything else is a TypeError, as the bindings raise."""
    if not isinstance(kind, str):
        ok = isinstance(value, kind)
    elif kind == "perm":  # any sequence of integers (Permutation checks the elements)
        ok = isinstance(value, Iterable) and not isinstance(value, (str, bytes))
    else:
        got = _ARGUMENT[kind](value)
        if got is not BAD:
            return got
        ok = False
    if not ok:
        what = kind if isinstance(kind, str) else kind.__name__
        raise TypeError(f"{where()}: incompatible function arguments: a {what} is needed, got {type(value).__name__}")
    return _CONVERTERS[kind](value) if isinstance(kind, str) else value


def _param(key: str, kind: str, check=None):
    """A layer attribute stored in `_params[key]`; `kind` is a converter name or an enum class.
    `check(value)` returns why a value is refused (TensorRT refuses it in the setter), or None."""
    conv = _CONVERTERS[kind] if isinstance(kind, str) else kind

    def get(self):
        v = self._params[key]
        return conv(v) if v is not None else None

    def set_(self, value):
        value = _setter_value(kind, value, lambda: f"layer '{self.name}': {key} = {value!r}")
        why = check(value) if check is not None and value is not None else None
        if why:
            raise NetworkError(f"layer '{self.name}': {key} = {tuple(value) if isinstance(value, tuple) else value} "
                               f"is refused: {why}")
        self._params[key] = (tuple(value) if isinstance(value, tuple) else value)
        self._network._touch()

    prop = _Param(get, set_)
    prop.key, prop.kind, prop.check = key, kind, check
    return prop


def _weights(key: str):
    def get(self):
        return self._weights[key]

    def set_(self, value):
        self._weights[key] = as_weights(value, f"layer '{self.name}': {key}")
        self._network._touch()

    return property(get, set_)


@api_types
class ILayer:
    """Base class of every layer: name, type, inputs and outputs."""

    _TYPE: LayerType = None

    def __init__(self, network, inputs, params: dict, weights: dict | None = None, num_outputs: int = 1):
        from .core import ITensor

        self._network = network
        self._inputs = list(inputs)
        self._params = dict(params)
        self._weights = {k: as_weights(v, f"{type(self).__name__}: {k}") for k, v in (weights or {}).items()}
        self._name = network._auto_layer_name(self._type_label())
        self._outputs = [ITensor(network, "", DataType.FLOAT, producer=self, index=i) for i in range(num_outputs)]
        for t in self._outputs:
            network._register_tensor(t)
        network._name_outputs(self)
        self._metadata = ""
        self._cache = None

    @classmethod
    def _type_label(cls) -> str:
        return {"CONVOLUTION": "Convolution", "DECONVOLUTION": "Deconvolution", "ELEMENTWISE": "ElementWise",
                "MATRIX_MULTIPLY": "Matrix Multiply", "PLUGIN_V3": "PluginV3", "SOFTMAX": "Softmax",
                "CONCATENATION": "Concatenation"}.get(cls._TYPE.name, cls._TYPE.name.capitalize())

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._network._rename_layer(self, value)

    @property
    def type(self) -> LayerType:
        return self._TYPE

    @property
    def metadata(self) -> str:
        return self._metadata

    @metadata.setter
    def metadata(self, value) -> None:
        from .network import _name_argument  # TensorRT checks metadata as it checks names

        value = _name_argument(self._network, value, "ILayer::setMetadata")
        if value is not None:
            self._metadata = value


    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_input(self, index: int):
        return self._inputs[index] if 0 <= index < len(self._inputs) else None

    def get_output(self, index: int):
        return self._outputs[index] if 0 <= index < len(self._outputs) else None

    #: how many inputs set_input may address; TensorRT's slice takes up to 6 (start, size, stride, fill, axes)
    _MAX_INPUTS = 1

    def set_input(self, index: int, tensor: ITensor) -> None:
        limit = max(len(self._inputs), self._MAX_INPUTS)
        if not 0 <= index < limit:
            raise NetworkError(f"layer '{self.name}': input index {index} out of range (it takes at "
                               f"most {limit} inputs)")
        while len(self._inputs) <= index:  # as in TensorRT, skipped optional inputs stay empty
            self._inputs.append(None)
        self._inputs[index] = tensor
        self._network._touch()

    def get_output_type(self, index: int) -> DataType:
        return self._outputs[index].dtype

    # -- inference ------------------------------------------------------------------------
    def _infer(self):
        """(output shapes, output dtypes), cached until the network changes."""
        stamp = self._network._version
        if self._cache is None or self._cache[0] != stamp:
            from .infer import infer_layer

            shapes, dtypes = infer_layer(self._TYPE, self._params, self._weights,
                                         [t.shape if t is not None else None for t in self._inputs],
                                         [t.dtype if t is not None else None for t in self._inputs],
                                         self.name, plugin=getattr(self, "_plugin", None))
            self._cache = (stamp, [Dims(s) for s in shapes], list(dtypes))
        return self._cache[1], self._cache[2]


class IScaleLayer(ILayer):
    _TYPE = LayerType.SCALE
    mode = _param("mode", ScaleMode)
    channel_axis = _param("channel_axis", "int")
    shift = _weights("shift")
    scale = _weights("scale")
    power = _weights("power")


class IReduceLayer(ILayer):
    _TYPE = LayerType.REDUCE
    op = _param("op", ReduceOperation)
    axes = _param("axes", "int")
    keep_dims = _param("keep_dims", "bool")


class IElementWiseLayer(ILayer):
    _TYPE = LayerType.ELEMENTWISE
    op = _param("op", ElementWiseOperation)


class IUnaryLayer(ILayer):
    _TYPE = LayerType.UNARY
    op = _param("op", UnaryOperation)


class IActivationLayer(ILayer):
    _TYPE = LayerType.ACTIVATION
    type = _param("type", ActivationType)
    alpha = _param("alpha", "float")
    beta = _param("beta", "float")


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


class IConvolutionLayer(_ConvLike):
    _TYPE = LayerType.CONVOLUTION


class IDeconvolutionLayer(_ConvLike):
    _TYPE = LayerType.DECONVOLUTION


class IPoolingLayer(ILayer):
    _TYPE = LayerType.POOLING
    type = _param("type", PoolingType)
    window_size_nd = _param("window_size_nd", "dims")
    stride_nd = _param("stride_nd", "dims")
    pre_padding = _param("pre_padding", "dims", _non_negative)
    post_padding = _param("post_padding", "dims", _non_negative)
    padding_mode = _param("padding_mode", PaddingMode)
    blend_factor = _param("blend_factor", "float", _unit_interval)
    average_count_excludes_padding = _param("average_count_excludes_padding", "bool")

    padding_nd = _ConvLike.padding_nd


class ILRNLayer(ILayer):
    _TYPE = LayerType.LRN
    window_size = _param("window_size", "int")
    alpha = _param("alpha", "float")
    beta = _param("beta", "float")
    k = _param("k", "float")


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


class IPaddingLayer(ILayer):
    _TYPE = LayerType.PADDING
    pre_padding_nd = _param("pre_padding_nd", "dims")
    post_padding_nd = _param("post_padding_nd", "dims")


class IMatrixMultiplyLayer(ILayer):
    _TYPE = LayerType.MATRIX_MULTIPLY
    op0 = _param("op0", MatrixOperation)
    op1 = _param("op1", MatrixOperation)


class ISoftMaxLayer(ILayer):
    _TYPE = LayerType.SOFTMAX
    axes = _param("axes", "int")


class ICastLayer(ILayer):
    _TYPE = LayerType.CAST
    to_type = _param("to_type", DataType)


class IIdentityLayer(ILayer):
    _TYPE = LayerType.IDENTITY


class _QuantizeLike(ILayer):
    """Inputs: 0 the tensor, 1 the scale (2, TensorRT's zero point, is refused when set)."""

    _MAX_INPUTS = 3
    axis = _param("axis", "int")
    to_type = _param("to_type", DataType)


class IQuantizeLayer(_QuantizeLike):
    _TYPE = LayerType.QUANTIZE


class IDequantizeLayer(_QuantizeLike):
    _TYPE = LayerType.DEQUANTIZE


class IConstantLayer(ILayer):
    _TYPE = LayerType.CONSTANT
    shape = _param("shape", "dims")
    weights = _weights("weights")


class IPluginV3Layer(ILayer):
    _TYPE = LayerType.PLUGIN_V3

    def __init__(self, network, inputs, plugin, num_outputs):
        self._plugin = plugin
        super().__init__(network, inputs, {}, num_outputs=num_outputs)

    @property
    def plugin(self):
        return self._plugin


LAYER_CLASSES = {cls._TYPE: cls for cls in (
    IScaleLayer, IReduceLayer, IElementWiseLayer, IUnaryLayer, IActivationLayer, IConvolutionLayer,
    IDeconvolutionLayer, IPoolingLayer, ILRNLayer, INormalizationLayer, IShuffleLayer, IConcatenationLayer,
    ISliceLayer, IPaddingLayer, IMatrixMultiplyLayer, ISoftMaxLayer, ICastLayer, IIdentityLayer,
    IConstantLayer, IPluginV3Layer, IQuantizeLayer, IDequantizeLayer)}

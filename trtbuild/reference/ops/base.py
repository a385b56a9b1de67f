"""The base of every layer class: ILayer, and the attribute descriptors layer classes declare.

A layer keeps its parameters in `_params` (JSON-friendly values) and `_weights` (Weights), so the
same description drives shape inference, execution and the plan. Attribute names are TensorRT's;
the conformance test checks them. Each layer type's class lives in its own module of this package.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..argtypes import BAD, CONVERTERS as _ARGUMENT, api_types
from ..core import Dims, ITensor, NetworkError, Permutation, as_weights
from ..enums import DataType, LayerType
from .registry import op_for

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
    op = op_for(ltype)
    for cls in [op.cls] if op is not None else []:
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


def setter_value(kind, value, where):
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


def param(key: str, kind: str, check=None, shape_input: int | None = None):
    """A layer attribute stored in `_params[key]`; `kind` is a converter name or an enum class.
    `check(value)` returns why a value is refused (TensorRT refuses it in the setter), or None.
    `shape_input`: the input whose shape tensor replaces the attribute; while it is set the attribute reads
    None, as TensorRT-RTX's getters return ("works only for static ...")."""
    conv = _CONVERTERS[kind] if isinstance(kind, str) else kind

    def get(self):
        if shape_input is not None and self.get_input(shape_input) is not None:
            return None
        v = self._params[key]
        return conv(v) if v is not None else None

    def set_(self, value):
        value = setter_value(kind, value, lambda: f"layer '{self.name}': {key} = {value!r}")
        why = check(value) if check is not None and value is not None else None
        if why:
            raise NetworkError(f"layer '{self.name}': {key} = {tuple(value) if isinstance(value, tuple) else value} "
                               f"is refused: {why}")
        self._params[key] = (tuple(value) if isinstance(value, tuple) else value)
        self._network._touch()

    prop = _Param(get, set_)
    prop.key, prop.kind, prop.check = key, kind, check
    return prop


def weights(key: str):
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
        self._TYPE = type(self)._TYPE  # in the shared state, so that a base-class view (get_layer) has its type
        self._self = self  # the layer itself, for a view

    def _as_base(self) -> ILayer:
        """What TensorRT's INetworkDefinition.get_layer returns: an object of the base class ILayer (its `type`
        is the LayerType, even where the subclass's `type` is an ActivationType or PoolingType), sharing this
        layer's state, so that a rename or set_input through it reaches the layer, and `view.__class__ =
        trt.IActivationLayer` gives the subclass's attributes, as with TensorRT's bindings. A new object per call,
        as there: it is not `==` to the layer add_* returned."""
        view = object.__new__(ILayer)
        view.__dict__ = self.__dict__
        return view

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
        from ..network_names import _name_argument  # TensorRT checks metadata as it checks names

        value = _name_argument(self._network, value, "ILayer::setMetadata")
        if value is not None:
            self._metadata = value


    @property
    def num_ranks(self) -> int:
        """Ranks of multi-device execution: always 1, since only IDistCollectiveLayer (a multi-GPU collective,
        which the reference refuses) takes more."""
        return 1

    @num_ranks.setter
    def num_ranks(self, value) -> None:
        if not isinstance(value, int):  # pybind11's int caster: a bool passes (True is 1), a float does not
            raise TypeError(f"num_ranks must be an int, got {type(value).__name__}")
        if value != 1:  # TensorRT-RTX 1.7 refuses 0, -1 and 2 alike, with this message
            raise RuntimeError("Failed to set num_ranks. Only IDistCollectiveLayer supports num_ranks > 1 via ILayer.")

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

    #: whether inputs after the first may stay unset (a slice's start/size/stride/fill/axes)
    _OPTIONAL_INPUTS = False
    #: whether input 0 may stay unset too (a fill's dims)
    _FIRST_INPUT_OPTIONAL = False
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

    def _check_in_network(self) -> None:
        """Checks that need the whole network (which tensors are network inputs and outputs, which layers share
        a tensor), made when the network is built; none unless a layer type defines them."""

    # -- inference ------------------------------------------------------------------------
    def _infer(self):
        """(output shapes, output dtypes), cached until the network changes."""
        stamp = self._network._version
        if self._cache is None or self._cache[0] != stamp:
            from ..infer import infer_layer

            shapes, dtypes = infer_layer(self._TYPE, self._params, self._weights,
                                         [t.shape if t is not None else None for t in self._inputs],
                                         [t.dtype if t is not None else None for t in self._inputs],
                                         self.name, plugin=getattr(self, "_plugin", None),
                                         values=self._shape_input_values(), keys=[id(t) for t in self._inputs])
            self._cache = (stamp, [Dims(s) for s in shapes], list(dtypes))
        return self._cache[1], self._cache[2]

    def _shape_input_values(self) -> list | None:
        """The build-time values of the shape inputs (None elsewhere): trtbuild.reference.shape_values."""
        from ..shape_values import reads

        if not getattr(self, "_SHAPE_INPUTS", None):
            return None
        return [t._value() if t is not None and reads(type(self), i) else None for i, t in enumerate(self._inputs)]

    def _values(self) -> list:
        """The build-time values of the outputs, each None where nothing of it is known (cached until the
        network changes); computed only where a shape input needs them."""
        stamp = self._network._version
        cached = getattr(self, "_values_cache", None)
        if cached is None or cached[0] != stamp:
            from ..infer import bind
            from ..shape_values import output_values

            shapes, dtypes = self._infer()
            ins = [t.shape if t is not None else None for t in self._inputs]
            in_types = [t.dtype if t is not None else None for t in self._inputs]
            only_shapes = getattr(self, "_READS_ONLY_SHAPES", False)
            values = [None if t is None or only_shapes else t._value() for t in self._inputs]
            keys = [id(t) for t in self._inputs]
            op = op_for(self._TYPE)
            p = bind(type(self), self._params, ins, in_types, values, keys, self.name)
            cached = (stamp, output_values(op, p, self._weights, ins, in_types, values, keys, shapes, dtypes,
                                           self.name))
            self._values_cache = cached
        return cached[1]


def non_negative(value):
    """The setter check of padding attributes."""
    return "padding must be >= 0" if any(v < 0 for v in value) else None


class PaddedWindow:
    """`padding_nd` of the windowed layers: TensorRT's setter writes pre and post padding at once."""

    @property
    def padding_nd(self) -> Dims:
        return Dims(self._params["pre_padding"])

    @padding_nd.setter
    def padding_nd(self, value) -> None:
        value = setter_value("dims", value, lambda: f"layer '{self.name}': padding_nd = {value!r}")
        if non_negative(value):
            raise NetworkError(f"layer '{self.name}': padding_nd = {tuple(Dims(value))} is refused: "
                               "padding must be >= 0")
        self._params["pre_padding"] = tuple(Dims(value))
        self._params["post_padding"] = tuple(Dims(value))
        self._network._touch()

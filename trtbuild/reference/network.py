"""INetworkDefinition of the reference backend, with TensorRT's parameter names and defaults and the checks
TensorRT applies when a layer is added and at build.

Its parts are mixins, one responsibility each: names (network_names.py), inputs and outputs (network_io.py),
the add_* methods of reference/layers.py's types (network_layers.py), debug marks (debug.py) and weight names
(weight_names.py); the layer types with a module in reference/ops/ attach their add_* methods here."""

from __future__ import annotations

from .argtypes import api_types
from .core import ITensor, NetworkError
from .enums import DataType, LayerType, NetworkDefinitionCreationFlag
from . import layers as L
from .quantize import validate as validate_quantization
from .debug import NetworkDebugMarks
from .weight_names import NetworkWeightNames
from .missing_api import TENSORRT_ADD_METHODS, missing_method
from .network_io import NetworkIO
from .network_layers import NetworkLayers
from .network_names import NetworkNames
from .ops.registry import network_methods


def _with_layer_methods(cls):
    """Attach the add_* methods that the op modules define (trtbuild/reference/ops: a layer type is one
    module, its network method included); a name the class or one of its mixins defines is an error, not
    an override."""
    for name, fn in network_methods().items():
        if any(name in vars(klass) for klass in cls.__mro__):
            raise RuntimeError(f"INetworkDefinition.{name} is defined by the network and by a layer type's module")
        setattr(cls, name, fn)
    return cls


@api_types
@_with_layer_methods
class INetworkDefinition(NetworkDebugMarks, NetworkWeightNames, NetworkNames, NetworkIO, NetworkLayers):
    """A strongly typed network under construction."""

    def __init__(self, flags: int = 0, builder=None):
        if not flags >> int(NetworkDefinitionCreationFlag.STRONGLY_TYPED) & 1:
            raise NetworkError(
                "create_network: the reference backend builds strongly typed networks only (TensorRT 11 has no other "
                "kind); pass flags=1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)")
        self.flags = int(flags)
        self._name = "Unnamed Network 0"
        self._builder = builder
        self._layers: list[L.ILayer] = []
        self._inputs: list[ITensor] = []
        self._outputs: list[ITensor] = []
        self._shape_outputs: set[int] = set()  # ids of the outputs marked with mark_output_for_shapes
        self._version = 0
        # names (see _auto_layer_name and _auto_tensor_name): TensorRT-RTX 1.7's behaviour, probed
        self._layer_counter = 0
        self._suffix_counter = 0
        self._tensors_by_name: dict[str, list[ITensor]] = {}  # every tensor of the network, by its name
        self._explicit_tensors: dict[str, ITensor] = {}  # names given by add_input or a rename
        self._explicit_layers: dict[str, object] = {}  # layer names given by a rename
        self._constructs: list = []  # IIfConditional and ILoop objects, in the order they were added

    # -- bookkeeping ----------------------------------------------------------------------
    def _touch(self) -> None:
        self._version += 1

    def _own(self, tensor, what: str) -> ITensor:
        if not isinstance(tensor, ITensor):
            raise NetworkError(f"{what}: expected an ITensor, got {type(tensor).__name__}")
        if tensor._network is not self:
            raise NetworkError(f"{what}: tensor '{tensor.name}' belongs to another network")
        return tensor

    def _add(self, cls, inputs, params, weights=None, eager=True, **kw):
        inputs = [self._own(t, f"{cls.__name__} input {i}") for i, t in enumerate(inputs)]
        layer = cls(self, inputs, params, weights, **kw) if cls is not L.IPluginV3Layer else cls(self, inputs, **kw)
        self._layers.append(layer)
        self._touch()
        if eager:
            try:
                layer._infer()
            except NetworkError as e:
                self._layers.pop()
                for t in layer._outputs:
                    self._unregister_tensor(t)
                names = ", ".join(f"'{t.name}' {tuple(t.shape)} {t.dtype.name}" for t in inputs)
                raise NetworkError(f"{e} [inputs: {names}]") from None
        return layer

    # -- TensorRT methods the reference lacks ----------------------------------------------
    def __getattr__(self, name: str):
        # only reached for names the class lacks: a TensorRT method not implemented here gets one sentence
        if name in TENSORRT_ADD_METHODS:
            raise missing_method("INetworkDefinition", name)
        raise AttributeError(f"'INetworkDefinition' object has no attribute '{name}'", name=name, obj=self)

    # -- whole-network checks, used by the builder ----------------------------------------
    def _validate(self) -> None:
        if not self._outputs:
            raise NetworkError(f"network '{self.name}' has no outputs: call mark_output on at least one tensor")
        io_names = [t.name for t in self._inputs + self._outputs]
        dup = {n for n in io_names if io_names.count(n) > 1}
        if dup:
            raise NetworkError(f"network '{self.name}': input/output tensor names must be unique, "
                               f"repeated: {sorted(dup)}")
        for layer in self._layers:
            for i, t in enumerate(layer._inputs):
                if t is None and ((i == 0 and not layer._FIRST_INPUT_OPTIONAL) or not layer._OPTIONAL_INPUTS):
                    raise NetworkError(f"layer '{layer.name}': input {i} is not set")
            layer._infer()
            layer._check_in_network()
        self._validate_scopes()
        self._validate_uint8()
        self._validate_shape_outputs()
        validate_quantization(self)

    def _validate_scopes(self) -> None:
        """TensorRT's control-flow rules for the layers the build keeps (ops/_control.py)."""
        from .ops._control import network_steps
        from .plan import _topological

        for construct in self._constructs:  # TensorRT-RTX checks each construct, used or not
            construct._check()
        if self._constructs:
            network_steps(self, _topological(self))

    def _validate_shape_outputs(self) -> None:
        for t in self._outputs:
            if id(t) not in self._shape_outputs:
                continue
            if t.dtype not in (DataType.INT32, DataType.INT64):
                raise NetworkError(f"Output shape tensor {t.name} has type {t.dtype.name} but output shape tensors "
                                   "must have type INT32 or INT64")
            if len(t.shape) > 1 or any(d < 0 for d in t.shape):
                raise NetworkError(f"output shape tensor {t.name} has shape {tuple(t.shape)}; a shape output is 0-D or "
                                   "1-D with its length known at build time")

    def _validate_uint8(self) -> None:
        """TensorRT-RTX: a UINT8 tensor is only a network input or output, and a UINT8 output comes from
        an identity or cast layer (DataType.UINT8: convert with the IdentityLayer "prior to use with
        other TensorRT layers")."""
        consumed = {id(t) for layer in self._layers for t in layer._inputs if t is not None}
        for layer in self._layers:
            for t in layer._outputs:
                if t.dtype != DataType.UINT8:
                    continue
                if t in self._outputs and layer._TYPE not in (LayerType.IDENTITY, LayerType.CAST):
                    raise NetworkError(f"layer '{layer.name}': network output '{t.name}' has type UINT8 but a UINT8 "
                                       "output must be produced by add_identity or add_cast")
                if t not in self._outputs and id(t) in consumed:
                    raise NetworkError(f"layer '{layer.name}': output '{t.name}' has type UINT8 and "
                                       "feeds other layers; TensorRT allows UINT8 only for network inputs and outputs")

"""INetworkDefinition of the reference backend: the add_* methods, with TensorRT's parameter
names and defaults, and the checks TensorRT applies when a layer is added."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .argtypes import api_types
from .core import Dims, ILogger, ITensor, NetworkError, Weights
from .enums import (ActivationType, DataType, ElementWiseOperation, LayerType,
                    MatrixOperation,
                    NetworkDefinitionCreationFlag, PaddingMode, PoolingType, ReduceOperation, SampleMode, ScaleMode,
                    UnaryOperation)
from . import layers as L
from .quantize import validate as validate_quantization
from .debug import NetworkDebugMarks
from .weight_names import NetworkWeightNames
from .missing_api import TENSORRT_ADD_METHODS, missing_method
from .ops.registry import network_methods

if TYPE_CHECKING:  # the annotations' names; argtypes.api_types resolves them itself
    from .plugins import IPluginV3


def _name_argument(network, value, api: str) -> str | None:
    """A name as TensorRT's bindings take it: a str (bytes are decoded as UTF-8); None is TensorRT's null
    name, refused with a logged API usage error (the caller then does nothing); anything else is a TypeError."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    if value is None:
        network._api_usage_error(f"{api}: Error Code 3: API Usage Error (Parameter check failed, condition: "
                                 "(name) != nullptr.)")
        return None
    raise TypeError(f"{api}: incompatible function arguments: a name is a str, got {type(value).__name__}")

_IDENTITY = tuple(range(Dims.MAX_DIMS))
_FLT_MAX = 3.4028234663852886e38
#: alpha and beta that add_activation gives each type (float32 values, as TensorRT stores them):
#: observed on TensorRT-RTX 1.7 (ONNX's defaults; CLIP unbounded); other types get (0, 0).
#: Changing `type` afterwards keeps them, as there.
_ACTIVATION_DEFAULTS = {
    ActivationType.LEAKY_RELU: (0.009999999776482582, 0.0), ActivationType.ELU: (1.0, 0.0),
    ActivationType.SELU: (1.6732631921768188, 1.0507010221481323), ActivationType.SOFTPLUS: (1.0, 1.0),
    ActivationType.CLIP: (-_FLT_MAX, _FLT_MAX), ActivationType.HARD_SIGMOID: (0.20000000298023224, 0.5),
    ActivationType.SCALED_TANH: (1.0, 1.0), ActivationType.THRESHOLDED_RELU: (1.0, 0.0),
}


#: the message for FP8/INT4/FP4 network inputs (tests/helpers/twin.py's REFERENCE_STRICTER matches it: TensorRT-RTX
#: takes INT4 inputs into a shuffle)
QUANTIZED_INPUT = ("holds quantized values that only Q/DQ layers interpret (TensorRT's DataType.INT4: \"Signed 4-bit "
                   "integer representing a quantized floating-point value\"); the reference keeps FP8 only "
                   "between its quantize and dequantize layers and has no storage for 4-bit types")


def _with_layer_methods(cls):
    """Attach the add_* methods that the op modules define (trtbuild/reference/ops: a layer type is one
    module, its network method included); a name the class defines itself is an error, not an override."""
    for name, fn in network_methods().items():
        if name in vars(cls):
            raise RuntimeError(f"INetworkDefinition.{name} is defined by the network and by a layer type's module")
        setattr(cls, name, fn)
    return cls


@api_types
@_with_layer_methods
class INetworkDefinition(NetworkDebugMarks, NetworkWeightNames):
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

    # -- names ------------------------------------------------------------------------------
    # What TensorRT-RTX 1.7 does, probed (tests/reference/test_names.py compares both on the same calls):
    # - a layer is named "(Unnamed Layer* k) [Type]" from a per-network counter; a name a renamed layer
    #   already has is skipped (the counter moves on, so later layers' numbers shift too);
    # - output i of a layer named L is "L_output" (i = 0) or "L_output (i)"; if any tensor already has
    #   that name, "_1", "_2", ... is appended from one counter per network, skipping names in use;
    # - a name given by add_input or a rename is *explicit*: renaming to another tensor's explicit name
    #   is refused (logged), but an automatic name may be taken: its holder is then renamed
    #   "L_output_<counter>" (L its layer; " (i)" is not kept), so names stay unique;
    # - renaming a layer names its automatic outputs again from the new name (its own old names count
    #   as in use); renaming it to another layer's *automatic* name is accepted (two layers then share
    #   a name), to a renamed layer's name refused; renaming a layer to the name it has is not checked and
    #   makes that name no more explicit than it was (a tensor's is made explicit); renaming a layer away
    #   frees its old name, even where another layer shares it explicitly.
    def _auto_layer_name(self, label: str) -> str:
        while True:
            self._layer_counter += 1
            name = f"(Unnamed Layer* {self._layer_counter - 1}) [{label}]"
            if name not in self._explicit_layers:
                return name

    def _auto_tensor_name(self, layer, index: int) -> str:
        base = f"{layer._name}_output" + (f" ({index})" if index else "")
        name = base
        while self._tensors_by_name.get(name):
            self._suffix_counter += 1
            name = f"{base}_{self._suffix_counter}"
        return name

    def _register_tensor(self, tensor: ITensor) -> None:
        self._tensors_by_name.setdefault(tensor._name, []).append(tensor)

    def _unregister_tensor(self, tensor: ITensor) -> None:
        holders = self._tensors_by_name.get(tensor._name, [])
        if tensor in holders:
            holders.remove(tensor)
            if not holders:
                del self._tensors_by_name[tensor._name]
        if self._explicit_tensors.get(tensor._name) is tensor:
            del self._explicit_tensors[tensor._name]

    def _set_tensor_name(self, tensor: ITensor, name: str, explicit: bool) -> None:
        self._unregister_tensor(tensor)
        tensor._name, tensor._explicit = name, explicit
        self._register_tensor(tensor)
        if explicit:
            self._explicit_tensors[name] = tensor
            for other in list(self._tensors_by_name[name]):  # automatic holders give the name up
                if other is not tensor and not other._explicit:
                    self._set_tensor_name(other, self._auto_tensor_name(other._producer, 0), False)

    def _name_outputs(self, layer) -> None:
        """(Re)name the outputs of `layer` that have no explicit name."""
        for i, t in enumerate(layer._outputs):
            if not t._explicit:
                self._set_tensor_name(t, self._auto_tensor_name(layer, i), False)

    def _rename_tensor(self, tensor: ITensor, name: str) -> None:
        name = _name_argument(self, name, "ITensor::setName")
        if name is None:
            return None
        if not name:
            raise NetworkError(f"tensor '{tensor._name}': a tensor name cannot be empty")
        holder = self._explicit_tensors.get(name)
        if holder is not None and holder is not tensor:
            return self._refuse_rename("ITensor", "tensor", tensor._name, name)
        self._set_tensor_name(tensor, name, True)

    def _rename_layer(self, layer, name: str) -> None:
        layer = layer._self  # the layer, where a get_layer view renames it
        name = _name_argument(self, name, "ILayer::setName")
        if name is None:
            return None
        holder = self._explicit_layers.get(name)
        if holder is not None and holder is not layer and name != layer._name:
            return self._refuse_rename("ILayer", "layer", layer._name, name)
        if name != layer._name:  # TensorRT-RTX: renaming a layer to its own name checks and registers nothing
            # the old name is released whoever registered it (TensorRT-RTX: a layer that shares a renamed
            # layer's name, its own automatic one, frees that name by being renamed)
            self._explicit_layers.pop(layer._name, None)
            layer._name = name
            self._explicit_layers[name] = layer
        self._name_outputs(layer)

    def _refuse_rename(self, cls: str, kind: str, old: str, new: str) -> None:
        """A name already in use: TensorRT (and TensorRT-RTX) log an API usage error and keep the old
        name; so does the reference, through its builder's logger (an error without one)."""
        self._api_usage_error(f"{cls}::setName: Error Code 3: API Usage Error (Failed attempt to rename a {kind} "
                              f"from {old} to {new} as the new name is already in use.)")

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value) -> None:
        value = _name_argument(self, value, "INetworkDefinition::setName")
        if value is not None:
            self._name = value

    def _api_usage_error(self, message: str) -> None:
        """TensorRT's way with a misused API call: an error logged through the builder's logger (and the
        call has no effect); without a logger, a NetworkError."""
        logger = getattr(self._builder, "logger", None)
        if logger is None:
            raise NetworkError(message)
        logger.log(ILogger.ERROR, message)

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

    # -- container protocol ---------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self._layers)

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_layer(self, index: int) -> L.ILayer:
        """An ILayer view of the layer (see ILayer._as_base): TensorRT returns the base class here, and None for
        an index out of range (TensorRT-RTX 1.7)."""
        return self._layers[index]._as_base() if 0 <= index < len(self._layers) else None

    def get_input(self, index: int) -> ITensor:
        return self._inputs[index]

    def get_output(self, index: int) -> ITensor:
        return self._outputs[index]

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, index: int):
        return self._layers[index]._as_base()

    def __iter__(self):
        return iter([layer._as_base() for layer in self._layers])

    def mark_output(self, tensor: ITensor) -> None:
        """A network input, or a tensor already an output: TensorRT logs an API usage error and changes
        nothing, and so does the reference."""
        tensor = self._own(tensor, "mark_output")
        if tensor in self._inputs:
            return self._api_usage_error(
                f"INetworkDefinition::markOutput: Error Code 4: API Usage Error (Failed attempt to set a tensor "
                f"{tensor.name} as network-level output. It was previously set as a network-level input. Tensor "
                "can't be both input and output at network level.)")
        if tensor in self._outputs:
            return self._api_usage_error(
                f"INetworkDefinition::markOutput: Error Code 4: API Usage Error (Failed attempt to set a tensor "
                f"{tensor.name} as network-level output as it was already set as network-level output.)")
        self._outputs.append(tensor)
        self._touch()

    def unmark_output(self, tensor: ITensor) -> None:
        if tensor in self._outputs:
            self._outputs.remove(tensor)
            self._shape_outputs.discard(id(tensor))
            self._touch()

    def mark_output_for_shapes(self, tensor: ITensor) -> bool:
        """A network output whose values infer_shapes computes into host memory (an INT32/INT64 tensor of at
        most one dim, checked at build). Marking it twice logs TensorRT-RTX's API usage error and returns False."""
        tensor = self._own(tensor, "mark_output_for_shapes")
        if tensor in self._outputs:
            self._api_usage_error(
                "INetworkDefinition::markOutputForShapes: Error Code 4: API Usage Error (Failed attempt to set a "
                f"shape tensor {tensor.name} as network-level shape output. It was already set as a network-level "
                f"{'shape ' if id(tensor) in self._shape_outputs else ''}output.)")
            return False
        self._outputs.append(tensor)
        self._shape_outputs.add(id(tensor))
        self._touch()
        return True

    def unmark_output_for_shapes(self, tensor: ITensor) -> bool:
        tensor = self._own(tensor, "unmark_output_for_shapes")
        if id(tensor) not in self._shape_outputs:
            self._api_usage_error(
                "INetworkDefinition::unmarkOutputForShapes: Error Code 3: API Usage Error (Failed attempt to unset a "
                f"tensor {tensor.name} as a network-level shape output. It's currently not set as a network-level "
                "shape output.)")
            return False
        self.unmark_output(tensor)
        return True

    # -- layers ---------------------------------------------------------------------------
    def __getattr__(self, name: str):
        # only reached for names the class lacks: a TensorRT method not implemented here gets one sentence
        if name in TENSORRT_ADD_METHODS:
            raise missing_method("INetworkDefinition", name)
        raise AttributeError(f"'INetworkDefinition' object has no attribute '{name}'", name=name, obj=self)

    def add_input(self, name: str | None, dtype: DataType, shape: Dims) -> ITensor | None:
        """A name another input has, or another tensor has explicitly (set by a rename): TensorRT-RTX
        logs an API usage error and returns None, and so does the reference (see _api_usage_error). A
        layer output's automatic name may be taken: that output is renamed (see _auto_tensor_name)."""
        name = _name_argument(self, name, "INetworkDefinition::addInput")
        if name is None:
            return None
        if any(t.name == name for t in self._inputs):
            return self._api_usage_error("INetworkDefinition::addInput: Error Code 3: API Usage Error (Parameter "
                                         "check failed, condition: inName != knownInput->getName().)")
        if name in self._explicit_tensors:
            return self._api_usage_error(f"INetworkDefinition::addInput: Error Code 3: API Usage Error (Failed "
                                         f"attempt to add tensor {name} to the network as it uses an existing name.)")
        shape = Dims(shape)
        if any(d < -1 or d == 0 for d in shape):
            raise NetworkError(f"add_input '{name}': shape {tuple(shape)} may hold positive sizes or -1 (dynamic) only")
        if DataType(dtype) in (DataType.FP8, DataType.INT4, DataType.FP4, DataType.E8M0):
            raise NetworkError(f"add_input '{name}': type {DataType(dtype).name} {QUANTIZED_INPUT}")
        t = ITensor(self, "", DataType(dtype), shape)
        self._register_tensor(t)
        self._set_tensor_name(t, name, True)
        self._inputs.append(t)
        self._touch()
        return t

    def add_constant(self, shape: Dims, weights: Weights) -> L.IConstantLayer:
        if not isinstance(weights, Weights):  # a numpy array (TensorRT's bindings take one as Weights)
            weights = Weights(weights)
        if weights.size == 0 and not weights._null:
            raise NetworkError("add_constant: the weights hold no values but point at memory (an empty numpy array); "
                               "TensorRT requires count > 0 exactly when values is non-null: pass "
                               "trt.Weights(trt.DataType.<type>) for an empty constant")
        return self._add(L.IConstantLayer, [], {"shape": tuple(Dims(shape))}, {"weights": weights})

    def add_scale(self, input: ITensor, mode: ScaleMode, shift: Weights | None = None, scale: Weights | None = None,
                  power: Weights | None = None) -> L.IScaleLayer:
        """ScaleMode.CHANNEL's documentation: "The channel dimension is assumed to be the third to
        last dimension" (dimension 1 of NCHW, but 0 of a rank-3 and 2 of a rank-5 tensor); builders
        use add_scale_nd with an explicit channel_axis."""
        return self.add_scale_nd(input, mode, shift, scale, power, channel_axis=max(len(input.shape) - 3, 0))

    def add_scale_nd(self, input: ITensor, mode: ScaleMode, shift: Weights | None = None, scale: Weights | None = None,
                     power: Weights | None = None, channel_axis: int = None) -> L.IScaleLayer:
        if channel_axis is None:
            raise TypeError("add_scale_nd() missing required argument 'channel_axis'")
        return self._add(L.IScaleLayer, [input], {"mode": int(mode), "channel_axis": int(channel_axis)},
                         {"shift": shift, "scale": scale, "power": power})

    def add_reduce(self, input: ITensor, op: ReduceOperation, axes: int, keep_dims: bool) -> L.IReduceLayer:
        return self._add(L.IReduceLayer, [input], {"op": int(op), "axes": int(axes), "keep_dims": bool(keep_dims)})

    def add_elementwise(self, input1: ITensor, input2: ITensor, op: ElementWiseOperation) -> L.IElementWiseLayer:
        return self._add(L.IElementWiseLayer, [input1, input2], {"op": int(op)})

    def add_unary(self, input: ITensor, op: UnaryOperation) -> L.IUnaryLayer:
        return self._add(L.IUnaryLayer, [input], {"op": int(op)})

    def add_activation(self, input: ITensor, type: ActivationType) -> L.IActivationLayer:
        alpha, beta = _ACTIVATION_DEFAULTS.get(ActivationType(type), (0.0, 0.0))
        return self._add(L.IActivationLayer, [input], {"type": int(type), "alpha": alpha, "beta": beta})

    def _conv_params(self, num_output_maps, kernel_shape):
        ks = Dims(kernel_shape)
        n = len(ks)
        return {"num_output_maps": int(num_output_maps), "kernel_size_nd": tuple(ks), "stride_nd": (1,) * n,
                "dilation_nd": (1,) * n, "pre_padding": (0,) * n, "post_padding": (0,) * n,
                "padding_mode": int(PaddingMode.EXPLICIT_ROUND_DOWN), "num_groups": 1}

    def add_convolution_nd(self, input: ITensor, num_output_maps: int, kernel_shape: Dims, kernel: Weights,
                           bias: Weights | None = None) -> L.IConvolutionLayer:
        return self._add(L.IConvolutionLayer, [input], self._conv_params(num_output_maps, kernel_shape),
                         {"kernel": kernel, "bias": bias}, eager=False)

    def add_deconvolution_nd(self, input: ITensor, num_output_maps: int, kernel_shape: Dims, kernel: Weights,
                             bias: Weights | None = None) -> L.IDeconvolutionLayer:
        return self._add(L.IDeconvolutionLayer, [input], self._conv_params(num_output_maps, kernel_shape),
                         {"kernel": kernel, "bias": bias}, eager=False)

    def add_pooling_nd(self, input: ITensor, type: PoolingType, window_size: Dims) -> L.IPoolingLayer:
        ws = Dims(window_size)
        n = len(ws)
        return self._add(L.IPoolingLayer, [input], {
            "type": int(type), "window_size_nd": tuple(ws), "stride_nd": (1,) * n, "pre_padding": (0,) * n,
            "post_padding": (0,) * n, "padding_mode": int(PaddingMode.EXPLICIT_ROUND_DOWN), "blend_factor": 0.0,
            "average_count_excludes_padding": True}, eager=False)

    def add_lrn(self, input: ITensor, window: int, alpha: float, beta: float, k: float) -> L.ILRNLayer:
        return self._add(L.ILRNLayer, [input], {"window_size": int(window), "alpha": float(alpha),
                                                 "beta": float(beta), "k": float(k)})

    def _normalization(self, input, scale, bias, axesMask, v2):
        return self._add(L.INormalizationLayer, [input, scale, bias],
                         {"axes": int(axesMask), "epsilon": 1e-5, "num_groups": 1, "is_v2": v2}, eager=False)

    def add_normalization(self, input: ITensor, scale: ITensor, bias: ITensor, axesMask: int) -> L.INormalizationLayer:
        return self._normalization(input, scale, bias, axesMask, False)

    def add_normalization_v2(self, input: ITensor, scale: ITensor,
                             bias: ITensor, axesMask: int) -> L.INormalizationLayer:
        return self._normalization(input, scale, bias, axesMask, True)

    def add_shuffle(self, input: ITensor) -> L.IShuffleLayer:
        return self._add(L.IShuffleLayer, [input], {"first_transpose": _IDENTITY, "reshape_dims": None,
                                                     "second_transpose": _IDENTITY, "zero_is_placeholder": True})

    def add_concatenation(self, inputs: Sequence[ITensor]) -> L.IConcatenationLayer:
        inputs = list(inputs)
        if not inputs:
            raise NetworkError("add_concatenation: needs at least one input")
        rank = len(inputs[0].shape)
        return self._add(L.IConcatenationLayer, inputs, {"axis": rank - 3 if rank >= 3 else 0}, eager=False)

    def add_slice(self, input: ITensor, start: Dims, shape: Dims, stride: Dims) -> L.ISliceLayer:
        return self._add(L.ISliceLayer, [input], {"start": tuple(Dims(start)), "shape": tuple(Dims(shape)),
                                                  "stride": tuple(Dims(stride)),
                                                  "mode": int(SampleMode.STRICT_BOUNDS)},
                         eager=False)

    def add_padding_nd(self, input: ITensor, pre_padding: Dims, post_padding: Dims) -> L.IPaddingLayer:
        return self._add(L.IPaddingLayer, [input], {"pre_padding_nd": tuple(Dims(pre_padding)),
                                                     "post_padding_nd": tuple(Dims(post_padding))})

    def add_matrix_multiply(self, input0: ITensor, op0: MatrixOperation,
                            input1: ITensor, op1: MatrixOperation) -> L.IMatrixMultiplyLayer:
        return self._add(L.IMatrixMultiplyLayer, [input0, input1], {"op0": int(MatrixOperation(op0)),
                                                                     "op1": int(MatrixOperation(op1))})

    def add_softmax(self, input: ITensor) -> L.ISoftMaxLayer:
        rank = len(input.shape)
        return self._add(L.ISoftMaxLayer, [input], {"axes": 1 << (rank - 3 if rank >= 3 else 0)}, eager=False)

    def add_cast(self, input: ITensor, to_type: DataType) -> L.ICastLayer:
        return self._add(L.ICastLayer, [input], {"to_type": int(DataType(to_type))})

    def add_identity(self, input: ITensor) -> L.IIdentityLayer:
        return self._add(L.IIdentityLayer, [input], {})

    def add_quantize(self, input: ITensor, scale: ITensor, output_type: DataType = DataType.INT8) -> L.IQuantizeLayer:
        """TensorRT 10's default output_type (INT8); TensorRT 11 requires it. Semantics: quantize.py. Checked
        when a shape or type is read or at build (not here): the axis is usually set after the add."""
        return self._add(L.IQuantizeLayer, [input, scale], {"axis": -1, "to_type": int(DataType(output_type))},
                         eager=False)

    def add_dequantize(self, input: ITensor, scale: ITensor,
                       output_type: DataType = DataType.FLOAT) -> L.IDequantizeLayer:
        """TensorRT 10's default output_type (FLOAT); TensorRT 11 requires it."""
        return self._add(L.IDequantizeLayer, [input, scale], {"axis": -1, "to_type": int(DataType(output_type))},
                         eager=False)

    def add_plugin_v3(self, inputs: Sequence[ITensor],
                      shape_inputs: Sequence[ITensor], plugin: IPluginV3) -> L.IPluginV3Layer:
        from .plugins import IPluginV3

        if list(shape_inputs):
            raise NetworkError("add_plugin_v3: shape inputs are not supported by the reference backend")
        if not isinstance(plugin, IPluginV3):
            raise NetworkError("add_plugin_v3: expected a plugin created by a reference plugin creator, got "
                               f"{type(plugin).__name__}")
        inputs = list(inputs)
        n = len(plugin._output_shapes([tuple(t.shape) for t in inputs]))
        return self._add(L.IPluginV3Layer, inputs, None, plugin=plugin, num_outputs=n)

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

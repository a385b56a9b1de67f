"""Inputs and outputs of the reference INetworkDefinition: add_input, the (shape) output marks, and the
container protocol (num_layers, get_layer, iteration) that TensorRT's bindings give a network."""

from __future__ import annotations

from .core import Dims, ITensor, NetworkError
from .enums import DataType
from . import layers as L
from .network_names import _name_argument

#: the message for FP8/INT4/FP4 network inputs (tests/helpers/twin.py's REFERENCE_STRICTER matches it: TensorRT-RTX
#: takes INT4 inputs into a shuffle)
QUANTIZED_INPUT = ("holds quantized values that only Q/DQ layers interpret (TensorRT's DataType.INT4: \"Signed 4-bit "
                   "integer representing a quantized floating-point value\"); the reference keeps FP8 only "
                   "between its quantize and dequantize layers and has no storage for 4-bit types")


class NetworkIO:
    """The input/output part of INetworkDefinition (a mixin; the state is created in INetworkDefinition.__init__)."""

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

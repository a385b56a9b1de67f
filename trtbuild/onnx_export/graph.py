"""GraphBuilder: collects the ONNX nodes, initializers and value names while a network is lowered.

Value names are the network's tensor names (made unique where the network repeats one), so a
tensor of the TensorRT network and the ONNX value holding it share a name. Helper values that a
multi-node lowering needs are called "<layer name>/<what>". The node that produces a layer's
output carries the layer's name; helper nodes are called "<layer name>/<op>".
"""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtbuild.reference.enums import DataType


class OnnxExportError(ValueError):
    """The network cannot be lowered to ONNX; the message names the layer and the reason."""


#: TensorRT DataType -> ONNX TensorProto element type.
ONNX_TYPE = {
    DataType.FLOAT: TensorProto.FLOAT, DataType.HALF: TensorProto.FLOAT16, DataType.BF16: TensorProto.BFLOAT16,
    DataType.INT32: TensorProto.INT32, DataType.INT64: TensorProto.INT64, DataType.BOOL: TensorProto.BOOL,
    DataType.INT8: TensorProto.INT8, DataType.UINT8: TensorProto.UINT8, DataType.FP8: TensorProto.FLOAT8E4M3FN,
    DataType.INT4: TensorProto.INT4,
}
LOW_FLOATS = (DataType.HALF, DataType.BF16)

#: The name TensorRT (and the reference) give a layer nobody named: "(Unnamed Layer* 3) [ElementWise]".
_AUTO_LAYER_NAME = re.compile(r"\(Unnamed Layer\* (\d+)\) \[(.*)\]")


def node_base_name(layer_name: str) -> str:
    """The ONNX node name for a layer: its own name, except TensorRT's automatic one, which becomes
    "Unnamed Layer 3 [ElementWise]". TensorRT's ONNX parser gives the helper layers it adds for a node
    (Mod adds two ElementWise layers, for instance) automatic names counted in *its* network, and
    rejects a network where two layers share a name ("Repeated layer name", found with TensorRT-RTX
    1.7), so no node may carry a name of that form."""
    m = _AUTO_LAYER_NAME.fullmatch(layer_name)
    return f"Unnamed Layer {m[1]} [{m[2]}]" if m else layer_name


def onnx_type(dtype, where: str) -> int:
    """The ONNX element type of a TensorRT DataType, or a clear error."""
    try:
        return ONNX_TYPE[DataType(dtype)]
    except KeyError:
        raise OnnxExportError(f"{where}: data type {DataType(dtype).name} has no ONNX equivalent that TensorRT's "
                              "ONNX parser reads (FLOAT, HALF, BF16, INT32, INT64, BOOL, INT8, UINT8, FP8, "
                              "INT4)") from None


class GraphBuilder:
    """Accumulates one ONNX graph. `layer` is the layer being lowered (names its helper nodes)."""

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.domains: dict[str, int] = {}
        self.layer = None
        self.writes_graph_output = False
        self._final: set[str] = set()  # output names of the layer being lowered
        self._values: set[str] = set()
        self._node_names: set[str] = set()
        self._tensor_names: dict[int, str] = {}
        self.nested_values: set[int] = set()  # ids of the tensors computed in a subgraph (their value_info is there)

    def nested(self) -> "GraphBuilder":
        """A builder for a subgraph (an If branch, a Loop body): its own nodes; the names (ONNX's are unique
        across a model's graphs), initializers (outer-scope values are visible inside) and domains shared."""
        sub = GraphBuilder(self.opset)
        sub.initializers, sub.domains, sub._values = self.initializers, self.domains, self._values
        sub._node_names, sub._tensor_names = self._node_names, self._tensor_names
        sub.nested_values = self.nested_values
        return sub

    # -- names ----------------------------------------------------------------------------
    def _unique(self, base: str, taken: set[str]) -> str:
        name, i = base, 1
        while name in taken or not name:
            name = f"{base}__{i}"
            i += 1
        taken.add(name)
        return name

    def bind(self, tensor) -> str:
        """Reserve the ONNX value name of a network tensor (its name, uniquified) and return it."""
        key = id(tensor)
        if key not in self._tensor_names:
            self._tensor_names[key] = self._unique(tensor.name, self._values)
        return self._tensor_names[key]

    def name_of(self, tensor) -> str:
        """The ONNX value name bound to a network tensor."""
        try:
            return self._tensor_names[id(tensor)]
        except KeyError:
            raise OnnxExportError(f"tensor '{tensor.name}' is used before the layer producing it was lowered "
                                  "(is it produced by a layer of another network?)") from None

    def tmp(self, what: str) -> str:
        """A fresh helper value name, '<layer name>/<what>'."""
        prefix = self.layer.name if self.layer is not None else "trtbuild"
        return self._unique(f"{prefix}/{what}", self._values)

    def begin_layer(self, layer, outputs: list[str], writes_graph_output: bool = False) -> None:
        """`writes_graph_output`: one of the layer's outputs is a graph output (a constant is then a
        node, not an initializer)."""
        self.layer = layer
        self._final = set(outputs)
        self.writes_graph_output = writes_graph_output

    # -- nodes ----------------------------------------------------------------------------
    def add(self, op: str, inputs: list[str], outputs: list[str] | str | None = None, domain: str = "",
            **attrs) -> str:
        """Append a node; returns its (first) output name. Without `outputs` a helper name is made.
        The node is named after the layer when it writes one of the layer's outputs."""
        if outputs is None:
            outputs = [self.tmp(op.lower())]
        elif isinstance(outputs, str):
            outputs = [outputs]
        base = node_base_name(self.layer.name) if self.layer is not None else op
        if not any(o in self._final for o in outputs):
            base = f"{base}/{op}"
        name = self._unique(base, self._node_names)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs), name=name, domain=domain or None, **attrs))
        return outputs[0]

    # -- constants ------------------------------------------------------------------------
    def const(self, array, elem_type: int, what: str = "const", name: str | None = None) -> str:
        """An initializer holding `array` as ONNX element type `elem_type`; returns its name."""
        name = name or self.tmp(what)
        arr = np.asarray(array)
        if elem_type == TensorProto.BFLOAT16:
            tensor = helper.make_tensor(name, elem_type, arr.shape, arr.astype(np.float32).reshape(-1).tolist())
        else:
            np_type = helper.tensor_dtype_to_np_dtype(elem_type)
            # astype copies in C order and, unlike np.ascontiguousarray, keeps a 0-D array 0-D
            tensor = numpy_helper.from_array(arr.astype(np_type, order="C"), name)
        self.initializers.append(tensor)
        return name

    def ints(self, values, what: str = "shape") -> str:
        """A 1-D INT64 initializer (shapes, axes, pads, starts...)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), TensorProto.INT64, what)

    def scalar_like(self, value: float, dtype, what: str = "const", rank: int = 0) -> str:
        """A float constant of TensorRT type `dtype`, shaped [1]*rank for same-rank broadcasting."""
        return self.const(np.full([1] * rank, value, dtype=np.float32), onnx_type(dtype, self.layer.name), what)

    # -- precision helpers ----------------------------------------------------------------
    def to_float(self, name: str, dtype) -> str:
        """`name` as FLOAT: a Cast for HALF/BF16 values (decompositions compute in FLOAT, as the
        reference computes every layer in fp32 and rounds only its output)."""
        if DataType(dtype) == DataType.FLOAT:
            return name
        return self.add("Cast", [name], None, to=TensorProto.FLOAT)

    def float_target(self, out: str, dtype) -> str:
        """Where the last FLOAT op of a decomposition writes: `out` itself for FLOAT layers."""
        return out if DataType(dtype) == DataType.FLOAT else self.tmp("f32")

    def from_float(self, value: str, out: str, dtype) -> None:
        """Finish a decomposition: cast the FLOAT result `value` back to `dtype` as `out`."""
        if value != out:
            self.add("Cast", [value], [out], to=onnx_type(dtype, self.layer.name))

    def require_opset(self, minimum: int, what: str) -> None:
        if self.opset < minimum:
            raise OnnxExportError(f"layer '{self.layer.name}': {what} needs ONNX opset >= {minimum}, exporting "
                                  f"opset {self.opset}")

    def fail(self, msg: str):
        raise OnnxExportError(f"layer '{self.layer.name}' ({self.layer._TYPE.name}): {msg}")

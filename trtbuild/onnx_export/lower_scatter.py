"""Lowering of Scatter: ScatterMode.ELEMENT -> ONNX ScatterElements with the layer's axis,
ScatterMode.ND -> ONNX ScatterND (INT64 indices, so INT32 ones are cast). Both take negative indices
from the end and leave duplicate indices undefined, as the reference does."""

from __future__ import annotations

from onnx import TensorProto

from trtbuild.reference.enums import DataType, LayerType, ScatterMode
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder


@lowers(LayerType.SCATTER)
def lower_scatter(g: GraphBuilder, layer, ins, outs):
    if ScatterMode(layer._params["mode"]) == ScatterMode.ELEMENT:
        g.add("ScatterElements", ins[:3], outs, axis=layer._params["axis"])
        return
    idx = ins[1]
    if layer.get_input(1).dtype != DataType.INT64:
        idx = g.add("Cast", [idx], None, to=TensorProto.INT64)
    g.add("ScatterND", [ins[0], idx, ins[2]], outs)

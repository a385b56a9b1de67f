"""Lowering of ReverseSequence: ONNX ReverseSequence (INT64 lengths, so INT32 ones are cast). ONNX
takes batch_axis and time_axis in {0, 1} only; for other axes the input is transposed so that the batch axis is 0
and the sequence axis 1, reversed, and transposed back."""

from __future__ import annotations

from onnx import TensorProto

from trtbuild.reference.enums import DataType, LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder


@lowers(LayerType.REVERSE_SEQUENCE)
def lower_reverse_sequence(g: GraphBuilder, layer, ins, outs):
    b, s = layer._params["batch_axis"], layer._params["sequence_axis"]
    lens = ins[1]
    if layer.get_input(1).dtype != DataType.INT64:
        lens = g.add("Cast", [lens], None, to=TensorProto.INT64)
    if {b, s} == {0, 1}:
        g.add("ReverseSequence", [ins[0], lens], outs, batch_axis=b, time_axis=s)
        return
    rank = len(layer.get_input(0).shape)
    perm = [b, s] + [a for a in range(rank) if a not in (b, s)]
    x = g.add("Transpose", [ins[0]], None, perm=perm)
    y = g.add("ReverseSequence", [x, lens], None, batch_axis=0, time_axis=1)
    g.add("Transpose", [y], outs, perm=[perm.index(a) for a in range(rank)])

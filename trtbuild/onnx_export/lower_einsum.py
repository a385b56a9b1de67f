"""Lowering of Einsum: ONNX Einsum with the layer's equation, spaces removed. HALF and BF16 inputs
are computed in FLOAT (as the reference computes) and the result cast back."""

from __future__ import annotations

from trtbuild.reference.enums import DataType, LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder


@lowers(LayerType.EINSUM)
def lower_einsum(g: GraphBuilder, layer, ins, outs):
    dt = layer.get_input(0).dtype
    equation = layer._params["equation"].replace(" ", "")
    out = g.float_target(outs[0], dt)
    g.add("Einsum", [g.to_float(x, dt) for x in ins], [out], equation=equation)
    g.from_float(out, outs[0], DataType(dt))

"""IDynamicQuantizeLayer has no ONNX lowering: ONNX's DynamicQuantizeLinear quantizes a whole tensor to UINT8 with
a zero point, and no ONNX operator computes block scales at run time into FP4/FP8 with FP8/E8M0 scales."""

from __future__ import annotations

from trtbuild.reference.enums import LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder


@lowers(LayerType.DYNAMIC_QUANTIZE)
def lower_dynamic_quantize(g: GraphBuilder, layer, ins, outs):
    g.fail("ONNX has no dynamic block quantization operator (DynamicQuantizeLinear is per-tensor UINT8 with a zero "
           "point), so a dynamic quantize layer cannot be exported")


__all__ = ["lower_dynamic_quantize"]

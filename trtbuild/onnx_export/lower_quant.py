"""Lowering of IQuantizeLayer / IDequantizeLayer to ONNX QuantizeLinear / DequantizeLinear.

Symmetric (zero point 0), per tensor (a scalar scale), per axis (a 1-D scale and the layer's
axis: opset >= 13) or per block (a scale of the input's rank: `axis` is the blocked dimension and
`block_size` its block, opset >= 21). INT4 needs opset >= 21; FP4 (FLOAT4E2M1) needs opset 23, above the
highest opset the exporter writes (21), so it is refused. FP8 E4M3 (FLOAT8E4M3FN) needs opset >= 19,
where QuantizeLinear's default saturate=1 clamps to +-448 as TensorRT does; export_onnx picks the opset
such networks need (needs_opset) unless told otherwise. The reference computes x * (1 / scale) in FLOAT
whatever the input type, so HALF/BF16 inputs and scales are cast to FLOAT first (opset 13 QuantizeLinear
takes FLOAT only); a dequantize to HALF/BF16 computes in FLOAT and casts its result, as the reference
rounds only its output.

onnxruntime's QuantizeLinear divides by the scale, as the ONNX spec writes it; TensorRT's parser turns the
node into a quantize layer, which multiplies by the reciprocal (trtbuild.reference.quantize). Where x / scale
is within a float32 rounding of a tie the two land one step apart; the export keeps the standard node, which
is what TensorRT reads, rather than hiding the scale in a multiply.
"""

from __future__ import annotations

import numpy as np

from trtbuild.reference.enums import DataType, LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder, onnx_type

#: the first opset whose QuantizeLinear/DequantizeLinear take FLOAT8E4M3FN
FP8_OPSET = 19
#: the first opset with INT4 and QuantizeLinear/DequantizeLinear's block_size
BLOCK_OPSET = 21


def _scale(g: GraphBuilder, layer, name: str) -> tuple[str, int | None, int | None]:
    """The FLOAT scale value, the ONNX axis (None for a per-tensor scale, made 0-D) and the block size."""
    s = layer.get_input(1)
    value = g.to_float(name, s.dtype)
    if len(s.shape) >= 2:  # a block scale: the one dimension where it is smaller than the input
        x = tuple(layer.get_input(0).shape)
        g.require_opset(BLOCK_OPSET, "block quantization")
        axis = next(i for i, (a, b) in enumerate(zip(x, s.shape)) if a != b)
        return value, axis, x[axis] // s.shape[axis]
    if len(s.shape) == 1 and s.shape[0] != 1:
        return value, int(layer._params["axis"]), None
    if len(s.shape) != 0:
        value = g.add("Reshape", [value, g.ints([], "scalar_shape")])
    return value, None, None


def _check_type(g: GraphBuilder, dtype) -> None:
    dtype = DataType(dtype)
    if dtype == DataType.FP8:
        g.require_opset(FP8_OPSET, "FP8 (FLOAT8E4M3FN) quantization")
    if dtype == DataType.INT4:
        g.require_opset(BLOCK_OPSET, "INT4 quantization")
    if dtype == DataType.FP4:
        g.fail("FP4 quantization needs ONNX's FLOAT4E2M1 (opset 23), above the highest opset this exporter writes "
               "(21)")


@lowers(LayerType.QUANTIZE)
def lower_quantize(g: GraphBuilder, layer, ins, outs):
    to = DataType(layer._params["to_type"])
    _check_type(g, to)
    x = g.to_float(ins[0], layer.get_input(0).dtype)
    scale, axis, block = _scale(g, layer, ins[1])
    shape = [] if axis is None else list(layer.get_input(1).shape) if block else [layer.get_input(1).shape[0]]
    zero = g.const(np.zeros(shape, np.float32), onnx_type(to, layer.name), "zero_point")
    g.add("QuantizeLinear", [x, scale, zero], outs, axis=axis, block_size=block)


@lowers(LayerType.DEQUANTIZE)
def lower_dequantize(g: GraphBuilder, layer, ins, outs):
    _check_type(g, layer.get_input(0).dtype)
    scale, axis, block = _scale(g, layer, ins[1])
    to = DataType(layer._params["to_type"])
    y = g.float_target(outs[0], to)
    g.add("DequantizeLinear", [ins[0], scale], [y], axis=axis, block_size=block)
    g.from_float(y, outs[0], to)


def uses_fp8(network) -> bool:
    """Whether a Q/DQ layer of `network` quantizes to or from FP8 (the export then needs opset 19)."""
    for layer in network._layers:
        if layer._TYPE == LayerType.QUANTIZE and DataType(layer._params["to_type"]) == DataType.FP8:
            return True
    return False


def needs_opset(network) -> int | None:
    """The lowest opset `network`'s Q/DQ layers need: 21 for INT4 or block scales, 19 for FP8, else None."""
    need = None
    for layer in network._layers:
        if layer._TYPE not in (LayerType.QUANTIZE, LayerType.DEQUANTIZE):
            continue
        quantized = DataType(layer._params["to_type"] if layer._TYPE == LayerType.QUANTIZE
                             else layer.get_input(0).dtype)
        if quantized == DataType.INT4 or len(layer.get_input(1).shape) >= 2:
            return BLOCK_OPSET
        if quantized == DataType.FP8:
            need = FP8_OPSET
    return need


__all__ = ["BLOCK_OPSET", "FP8_OPSET", "lower_dequantize", "lower_quantize", "needs_opset", "uses_fp8"]

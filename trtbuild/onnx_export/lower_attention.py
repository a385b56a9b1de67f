"""Lowering of IAttention's boundary layers: the attention as MatMul / Softmax nodes, the output layer as Identity.

Not ONNX's Attention (opset 23): TensorRT's ONNX parser turns that node into a non-decomposable IAttention,
which TensorRT-RTX 1.7 refuses to build where its target has no fused kernel for the shapes (most small or
FLOAT ones, on sm86); the composition builds everywhere and computes what the reference computes:
MatMul(Q, K^T), the float mask added, the BOOL keep (mask, causality, key/value lengths) applied with Where
(-inf before a softmax, 0 without one), Softmax over the last axis, the optional normalization
Quantize/DequantizeLinear pair, MatMul with V. Everything runs in FLOAT (HALF/BF16 inputs are cast), as the
reference computes in float32 and rounds only the output. Grouped-query key/value heads are repeated with
Unsqueeze / Expand / Reshape. Causal masks and key/value lengths need static sequence lengths.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from trtbuild.reference.enums import AttentionNormalizationOp, CausalMaskKind, DataType, LayerType
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.attention import KEY, KV_LENGTHS, MASK, NORM_SCALE, QUERY, VALUE

from .graph import GraphBuilder, onnx_type
from .lower_quant import FP8_OPSET


def _input(layer, ins, index):
    return (layer.get_input(index), ins[index]) if index < len(ins) and ins[index] is not None else (None, None)


def _repeat_heads(g: GraphBuilder, x: str, shape, heads: int) -> str:
    """[B, Hkv, S, D] -> [B, heads, S, D], each key/value head repeated heads // Hkv times in a row."""
    b, hkv, s, d = shape
    groups = heads // hkv
    if groups == 1:
        return x
    x = g.add("Unsqueeze", [x, g.ints([2], "axes")])
    x = g.add("Expand", [x, g.ints([1, 1, groups, 1, 1], "repeat")])
    return g.add("Reshape", [x, g.ints([0, heads, -1, d], "heads_shape")])


def _keep(g: GraphBuilder, layer, ins, sq: int, skv: int) -> str | None:
    """The BOOL [.., s_q, s_kv] of which keys each query may attend, or None where every key is kept."""
    p, parts = layer._params, []
    kind = CausalMaskKind(p["causal_kind"])
    if kind != CausalMaskKind.NONE or _input(layer, ins, KV_LENGTHS)[0] is not None:
        if sq < 0 or skv < 0:
            g.fail("a causal mask or key/value lengths need static sequence lengths to export")
    if kind != CausalMaskKind.NONE:
        shift = skv - sq if kind == CausalMaskKind.LOWER_RIGHT else 0
        keep = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + shift
        parts.append(g.const(keep.reshape(1, 1, sq, skv), TensorProto.BOOL, "causal"))
    lengths = _input(layer, ins, KV_LENGTHS)[1]
    if lengths is not None:
        n = g.add("Reshape", [g.add("Cast", [lengths], None, to=TensorProto.INT64), g.ints([-1, 1, 1, 1])])
        parts.append(g.add("Less", [g.const(np.arange(skv).reshape(1, 1, 1, skv), TensorProto.INT64, "positions"), n]))
    mask, mask_name = _input(layer, ins, MASK)
    if mask is not None and mask.dtype == DataType.BOOL:
        parts.append(mask_name)
    keep = parts[0] if parts else None
    for other in parts[1:]:
        keep = g.add("And", [keep, other])
    return keep


@lowers(LayerType.ATTENTION_INPUT)
def lower_attention_input(g: GraphBuilder, layer, ins, outs):
    p = layer._params
    qt = layer.get_input(QUERY)
    qshape, kshape = tuple(qt.shape), tuple(layer.get_input(KEY).shape)
    q, k, v = (g.to_float(ins[i], qt.dtype) for i in (QUERY, KEY, VALUE))
    k = _repeat_heads(g, k, kshape, qshape[1])
    v = _repeat_heads(g, v, kshape, qshape[1])
    scores = g.add("MatMul", [q, g.add("Transpose", [k], None, perm=[0, 1, 3, 2])])
    mask, mask_name = _input(layer, ins, MASK)
    if mask is not None and mask.dtype != DataType.BOOL:
        scores = g.add("Add", [scores, g.to_float(mask_name, mask.dtype)])
    keep = _keep(g, layer, ins, qshape[2], kshape[2])
    softmax = AttentionNormalizationOp(p["norm_op"]) == AttentionNormalizationOp.SOFTMAX
    if keep is not None:
        fill = g.const(np.array(-np.inf if softmax else 0.0, np.float32), TensorProto.FLOAT, "excluded")
        scores = g.add("Where", [keep, scores, fill])
    probs = g.add("Softmax", [scores], None, axis=-1) if softmax else scores
    scale_t, scale = _input(layer, ins, NORM_SCALE)
    if p["normalization_quantize_to_type"] is not None and scale_t is not None:
        to = DataType(p["normalization_quantize_to_type"])
        if to == DataType.FP8:
            g.require_opset(FP8_OPSET, "FP8 normalization quantization")
        scale = g.add("Reshape", [g.to_float(scale, scale_t.dtype), g.ints([], "scalar_shape")])
        zero = g.const(np.zeros([], np.float32), onnx_type(to, layer.name), "zero_point")
        probs = g.add("DequantizeLinear", [g.add("QuantizeLinear", [probs, scale, zero]), scale])
    y = g.float_target(outs[0], qt.dtype)
    g.add("MatMul", [probs, v], [y])
    g.from_float(y, outs[0], qt.dtype)


@lowers(LayerType.ATTENTION_OUTPUT)
def lower_attention_output(g: GraphBuilder, layer, ins, outs):
    g.add("Identity", ins[:1], outs)


__all__ = ["lower_attention_input", "lower_attention_output"]

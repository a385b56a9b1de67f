"""Lowering of GridSample (ONNX GridSample), RaggedSoftMax (a masked Softmax), RotaryEmbedding (ONNX's
RotaryEmbedding definition written out: the operator is opset 23) and the refusal of KVCacheUpdate.

GridSample: opset 16 takes rank 4 with modes bilinear/nearest/bicubic; opset 20 any rank with linear/nearest/cubic.
SampleMode FILL/CLAMP/REFLECT are padding_mode zeros/border/reflection; align_corners maps one to one.
RaggedSoftMax: positions at or beyond the bound are masked to -inf before an ONNX Softmax over the last axis and
set to 0 after it (which also turns the NaN of a row with nothing kept into zeros, as the reference gives).
"""

from __future__ import annotations

from onnx import TensorProto

from trtbuild.reference.enums import DataType, InterpolationMode, LayerType, SampleMode
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder, OnnxExportError

_MODE_16 = {InterpolationMode.NEAREST: "nearest", InterpolationMode.LINEAR: "bilinear",
            InterpolationMode.CUBIC: "bicubic"}
_MODE_20 = {InterpolationMode.NEAREST: "nearest", InterpolationMode.LINEAR: "linear",
            InterpolationMode.CUBIC: "cubic"}
_PADDING = {SampleMode.FILL: "zeros", SampleMode.CLAMP: "border", SampleMode.REFLECT: "reflection"}


@lowers(LayerType.GRID_SAMPLE)
def lower_grid_sample(g: GraphBuilder, layer, ins, outs):
    p = layer._params
    rank = len(layer.get_input(0).shape)
    g.require_opset(16 if rank == 4 else 20, f"GridSample of a rank-{rank} input")
    mode = InterpolationMode(p["interpolation_mode"])
    g.add("GridSample", ins[:2], outs, mode=(_MODE_20 if g.opset >= 20 else _MODE_16)[mode],
          padding_mode=_PADDING[SampleMode(p["sample_mode"])], align_corners=int(p["align_corners"]))


@lowers(LayerType.RAGGED_SOFTMAX)
def lower_ragged_softmax(g: GraphBuilder, layer, ins, outs):
    dtype = layer.get_input(0).dtype
    x = g.to_float(ins[0], dtype)
    def scalar(one_element: str) -> str:  # Range takes 0-D inputs; Squeeze drops the one dim
        return g.add("Squeeze", [one_element])

    length = scalar(g.add("Gather", [g.add("Shape", [ins[0]]), g.ints([2], "sequence_dim")], None, axis=0))
    positions = g.add("Range", [scalar(g.ints([0], "start")), length, scalar(g.ints([1], "step"))])
    keep = g.add("Less", [positions, g.add("Cast", [ins[1]], None, to=TensorProto.INT64)])
    masked = g.add("Where", [keep, x, g.scalar_like(float("-inf"), DataType.FLOAT, "minus_inf")])
    y = g.add("Softmax", [masked], None, axis=-1)
    target = g.float_target(outs[0], dtype)
    g.add("Where", [keep, y, g.scalar_like(0.0, DataType.FLOAT, "zero")], [target])
    g.from_float(target, outs[0], dtype)


@lowers(LayerType.ROTARY_EMBEDDING)
def lower_rotary_embedding(g: GraphBuilder, layer, ins, outs):
    """ONNX RotaryEmbedding is opset 23, beyond the export's 21: its definition written out as a FLOAT
    decomposition (Gather of the tables by position_ids, Slice into pairs, Mul/Sub/Add, Concat back)."""
    p = layer._params
    dtype = layer.get_input(0).dtype
    head = layer.get_input(0).shape[3]
    dim = p["rotary_embedding_dim"] or head
    x, cos, sin = (g.to_float(name, dtype) for name in ins[:3])
    if len(ins) > 3 and ins[3] is not None:  # position_ids index the [positions, R/2] tables
        cos, sin = (g.add("Gather", [t, ins[3]], None, axis=0) for t in (cos, sin))
    cos, sin = (g.add("Unsqueeze", [t, g.ints([1], "heads_axis")]) for t in (cos, sin))  # [B, 1, S, R/2]

    def cut(t, start, end, step=1):
        return g.add("Slice", [t, g.ints([start], "start"), g.ints([end], "end"), g.ints([3], "axis"),
                               g.ints([step], "step")])

    x1, x2 = (cut(x, 0, dim, 2), cut(x, 1, dim, 2)) if p["interleaved"] else (cut(x, 0, dim // 2),
                                                                               cut(x, dim // 2, dim))
    real = g.add("Sub", [g.add("Mul", [x1, cos]), g.add("Mul", [x2, sin])])
    imag = g.add("Add", [g.add("Mul", [x1, sin]), g.add("Mul", [x2, cos])])
    if p["interleaved"]:  # (real0, imag0, real1, imag1, ...): pairs stacked on a new last axis, then flattened
        last = g.ints([-1], "last_axis")
        pairs = g.add("Concat", [g.add("Unsqueeze", [real, last]), g.add("Unsqueeze", [imag, last])], None, axis=-1)
        rotated = g.add("Reshape", [pairs, g.add("Shape", [cut(x, 0, dim)])])
    else:
        rotated = g.add("Concat", [real, imag], None, axis=-1)
    target = g.float_target(outs[0], dtype)
    if dim < head:
        g.add("Concat", [rotated, cut(x, dim, head)], [target], axis=-1)
    else:
        g.add("Identity", [rotated], [target])
    g.from_float(target, outs[0], dtype)


@lowers(LayerType.KV_CACHE_UPDATE)
def lower_kv_cache_update(g: GraphBuilder, layer, ins, outs):
    raise OnnxExportError(f"layer '{layer.name}': a KV cache update (an in-place write into a network input) has no "
                          "ONNX equivalent")

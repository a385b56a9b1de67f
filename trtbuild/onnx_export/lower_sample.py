"""Lowering of GridSample (ONNX GridSample), RaggedSoftMax (a masked Softmax), and the refusals of
RotaryEmbedding and KVCacheUpdate.

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
    raise OnnxExportError(f"layer '{layer.name}': ONNX RotaryEmbedding needs opset 23 and the export writes opsets "
                          "up to 21 (the range TensorRT's ONNX parsers read)")


@lowers(LayerType.KV_CACHE_UPDATE)
def lower_kv_cache_update(g: GraphBuilder, layer, ins, outs):
    raise OnnxExportError(f"layer '{layer.name}': a KV cache update (an in-place write into a network input) has no "
                          "ONNX equivalent")

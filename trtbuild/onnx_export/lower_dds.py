"""Lowering of the layers with data-dependent output shapes: NonZero (ONNX NonZero) and NMS (ONNX
NonMaxSuppression); and of the assertion layer, which ONNX has no operator for."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from trtbuild.reference.enums import BoundingBoxFormat, DataType, LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder, OnnxExportError


def _indices(g: GraphBuilder, layer, y: str, outs) -> None:
    """ONNX's indices are INT64; an INT32 `indices_type` is a Cast of them."""
    if DataType(layer._params["indices_type"]) == DataType.INT64:
        g.add("Identity", [y], outs)
    else:
        g.add("Cast", [y], outs, to=TensorProto.INT32)


@lowers(LayerType.NON_ZERO)
def lower_non_zero(g: GraphBuilder, layer, ins, outs):
    """ONNX NonZero has the layer's (rank, count) layout in row-major order. HALF/BF16 go through FLOAT (an exact
    cast, zero stays zero), which onnxruntime's NonZero takes."""
    x = ins[0]
    if layer.get_input(0).dtype in (DataType.HALF, DataType.BF16):
        x = g.to_float(x, layer.get_input(0).dtype)
    _indices(g, layer, g.add("NonZero", [x], None), outs)


def _scalar_or(g: GraphBuilder, layer, ins, index: int, default: float, what: str) -> str:
    """Optional input `index` of an NMS layer, or TensorRT's default as a FLOAT scalar (ONNX's defaults differ:
    no score threshold at all, where TensorRT's 0.0 drops scores <= 0)."""
    if len(ins) > index and ins[index] and layer.get_input(index) is not None:
        return ins[index]
    return g.const(np.asarray(default, np.float32), TensorProto.FLOAT, what)


@lowers(LayerType.NMS)
def lower_nms(g: GraphBuilder, layer, ins, outs):
    """ONNX NonMaxSuppression takes scores as (batch, classes, boxes), a Transpose of the layer's (batch, boxes,
    classes), FLOAT boxes and an INT64 limit, and has the same rules (scores strictly above the threshold, IoU above
    the threshold suppresses). Its rows come by batch, then class; the layer's by batch, then decreasing score:
    two TopKs re-sort them (by score, then by batch; ONNX TopK keeps the lower index first among equal values, so
    equal scores stay by class then box, the reference's order). The count output is the rows' count. There is no
    ONNX form of boxes per class or of a TopK box limit that can drop candidates: both are refused."""
    boxes_t, scores_t = layer.get_input(0), layer.get_input(1)
    if len(boxes_t.shape) == 4:
        g.fail("boxes per class (batch, boxes, classes, 4) have no ONNX NonMaxSuppression form (it takes one box "
               "per index for every class)")
    limit, (_, n, c) = layer._params["topk_box_limit"], tuple(scores_t.shape)
    if n < 0 or c < 0 or limit < n * c:
        g.fail(f"topk_box_limit {limit} can drop candidates of the {n} x {c} (box, class) scores, which ONNX "
               "NonMaxSuppression has no form of (set it to at least boxes x classes)")
    dt = boxes_t.dtype
    boxes, scores = g.to_float(ins[0], dt), g.to_float(ins[1], dt)
    scores = g.add("Transpose", [scores], None, perm=[0, 2, 1])
    limit_in = ins[2]
    if layer.get_input(2).dtype != DataType.INT64:
        limit_in = g.add("Cast", [limit_in], None, to=TensorProto.INT64)
    center = int(BoundingBoxFormat(layer._params["bounding_box_format"]) == BoundingBoxFormat.CENTER_SIZES)
    rows = g.add("NonMaxSuppression", [boxes, scores, limit_in, _scalar_or(g, layer, ins, 3, 0.0, "iou_threshold"),
                                       _scalar_or(g, layer, ins, 4, 0.0, "score_threshold")], None,
                 center_point_box=center)
    count = g.add("Slice", [g.add("Shape", [rows], None), g.ints([0], "start"), g.ints([1], "end")], None)
    score = g.add("GatherND", [scores, rows], None)
    g.add("TopK", [score, count], [g.tmp("sorted"), g.tmp("by_score")], axis=0)
    by_score = g.nodes[-1].output[1]
    rows = g.add("Gather", [rows, by_score], None, axis=0)
    batch = g.add("Gather", [rows, g.const(np.asarray(0, np.int64), TensorProto.INT64, "batch_column")], None, axis=1)
    negative = g.add("Neg", [g.add("Cast", [batch], None, to=TensorProto.FLOAT)], None)
    g.add("TopK", [negative, count], [g.tmp("sorted"), g.tmp("by_batch")], axis=0)
    rows = g.add("Gather", [rows, g.nodes[-1].output[1]], None, axis=0)
    _indices(g, layer, rows, outs[:1])
    g.add("Cast", [g.add("Squeeze", [count, g.ints([0], "axes")], None)], outs[1:2], to=TensorProto.INT32)


@lowers(LayerType.ASSERTION)
def lower_assertion(g: GraphBuilder, layer, ins, outs):
    """ONNX has no operator that fails a run on a condition, and dropping the check would export a model that runs
    where the network refuses to: refused."""
    raise OnnxExportError(f"layer '{layer.name}': an assertion (\"{layer.message}\") has no ONNX equivalent (ONNX "
                          "has no operator that stops a run when a condition is false); remove the add_assertion to "
                          "export the network")

"""Detection post-processing builders: non-maximum suppression through INMSLayer, gathered into detections.

:func:`batched_nms` takes boxes (N, A, 4) and per-class scores (N, A, C) and returns four tensors:

* ``num_detections`` (N,) INT32: how many detections each batch item has;
* ``boxes`` (K, 4): the selected boxes as corners (x1, y1, x2, y2), K = sum(num_detections);
* ``scores`` (K,): their class scores, in the scores' type;
* ``classes`` (K,) INT32: their classes.

K is known only when the engine runs (INMSLayer's output is data-dependent: IOutputAllocator, as
trtbuild.engine.Engine.run handles it). The rows come in INMSLayer's order: by batch item, then by decreasing
score, so item b's detections are rows ``sum(num_detections[:b])`` onwards. TensorRT leaves the order of equal
scores unspecified ("the ordering will be consistent across different runs for the same inputs").

INMSLayer (TensorRT's NMS operator): per batch item, the (box, class) candidates whose score exceeds the score
threshold are sorted by score and at most ``topk_box_limit`` (at most 5000) are kept; per class, in decreasing
score, a box is selected when its IoU with every box already selected for its class is <= the IoU threshold,
up to ``max_output_boxes_per_class``. No TopK layer comes before it: the layer's own TopK box limit already
keeps the best candidates above the score threshold, and a TopK layer over the anchors would both cap them at
3840 (TopK's largest k) and rank them by one class, dropping candidates of the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtbuild.backend import trt_of

from .common import BuilderError, constant, named, out

__all__ = ["NMSOptions", "batched_nms", "NMS_OUTPUTS", "MAX_TOPK_BOX_LIMIT"]

NMS_OUTPUTS = ("num_detections", "boxes", "scores", "classes")
#: TensorRT's largest TopK box limit ("must be less than or equal to ... 5000")
MAX_TOPK_BOX_LIMIT = 5000
#: (x, y, w, h) -> (x1, y1, x2, y2): corners = boxes @ CENTER_TO_CORNERS^T
CENTER_TO_CORNERS = np.array([[1, 0, -0.5, 0], [0, 1, 0, -0.5], [1, 0, 0.5, 0], [0, 1, 0, 0.5]], dtype=np.float64)


@dataclass(frozen=True)
class NMSOptions:
    """``max_det``: INMSLayer's max_output_boxes_per_class; ``iou``: IoU threshold (a box with IoU above it with
    a kept box of its class is suppressed); ``conf``: score threshold (scores must exceed it); ``topk``: the
    layer's TopK box limit; ``center``: the input boxes are (x, y, w, h) (CENTER_SIZES), else corners."""

    max_det: int = 300
    iou: float = 0.7
    conf: float = 0.25
    topk: int = MAX_TOPK_BOX_LIMIT
    center: bool = False

    def check(self, name: str) -> None:
        if not 0.0 <= self.iou <= 1.0:
            raise BuilderError(f"layer '{name}': IoU threshold {self.iou} must be in [0, 1] (TensorRT's NMS operator)")
        if self.max_det < 0:
            raise BuilderError(f"layer '{name}': max_det {self.max_det} must be >= 0")
        if not 0 <= self.topk <= MAX_TOPK_BOX_LIMIT:
            raise BuilderError(f"layer '{name}': topk {self.topk} must be in [0, {MAX_TOPK_BOX_LIMIT}]")


def _int_const(network, values, name: str, dtype=np.int32):
    arr = np.asarray(values, dtype=dtype)
    return out(network.add_constant(arr.shape, trt_of(network).Weights(arr)), name)


def _batch_ids(network, boxes, name: str):
    """(1, N) INT32 0..N-1: a constant for a known batch, else a LINSPACE fill of boxes' batch size."""
    trt = trt_of(network)
    n = int(boxes.shape[0])
    if n >= 0:
        return _int_const(network, np.arange(n).reshape(1, n), f"{name}/batch_ids")
    size = out(network.add_gather(out(network.add_shape(boxes), f"{name}/shape"),
                                  _int_const(network, [0], f"{name}/batch_axis"), 0), f"{name}/batch_size")
    fill = network.add_fill(trt.Dims((1,)), trt.FillOperation.LINSPACE, trt.DataType.INT32)
    fill.set_input(0, size)
    fill.set_input(1, _int_const(network, 0, f"{name}/start"))
    fill.set_input(2, _int_const(network, [1], f"{name}/delta"))
    ids = out(fill, f"{name}/batch_range")
    view = named(network.add_shuffle(ids), f"{name}/batch_ids")
    view.reshape_dims = trt.Dims((1, -1))
    return view.get_output(0)


def batched_nms(network, boxes, scores, name: str, options: NMSOptions = NMSOptions()) -> dict:
    """INMSLayer on ``boxes`` (N, A, 4) and ``scores`` (N, A, C) (FLOAT or HALF), then the selected rows gathered:
    ``{"num_detections", "boxes", "scores", "classes"}`` as the module doc says, tensors ``name/<key>``. Layers
    ``name`` (the NMS; its outputs ``name:0`` the indices (K, 3) of (batch, class, box), ``name:1`` the count) and
    ``name/...``."""
    options.check(name)
    bs, ss = tuple(int(d) for d in boxes.shape), tuple(int(d) for d in scores.shape)
    if len(bs) != 3 or bs[2] != 4 or len(ss) != 3:
        raise BuilderError(f"layer '{name}': boxes must be (N, A, 4) and scores (N, A, C); got '{boxes.name}' {bs} "
                           f"and '{scores.name}' {ss}")
    trt = trt_of(network)
    f32 = np.float32
    layer = named(network.add_nms(boxes, scores, _int_const(network, options.max_det, f"{name}/max_det")), name)
    layer.set_input(3, out(network.add_constant((), trt.Weights(np.array(options.iou, f32))), f"{name}/iou"))
    layer.set_input(4, out(network.add_constant((), trt.Weights(np.array(options.conf, f32))), f"{name}/conf"))
    fmt = trt.BoundingBoxFormat
    layer.bounding_box_format = fmt.CENTER_SIZES if options.center else fmt.CORNER_PAIRS
    layer.topk_box_limit = options.topk
    rows = layer.get_output(0)  # (K, 3): batch, class, box
    classes = out(network.add_gather(rows, _int_const(network, 1, f"{name}/class_column"), 1), f"{name}/classes")
    # scores (N, A, C) indexed by (batch, box, class)
    by_box = out(network.add_gather(rows, _int_const(network, [0, 2, 1], f"{name}/score_columns"), 1),
                 f"{name}/score_index")
    picked = out(network.add_gather_v2(scores, by_box, trt.GatherMode.ND), f"{name}/scores")
    where = out(network.add_gather(rows, _int_const(network, [0, 2], f"{name}/box_columns"), 1), f"{name}/box_index")
    label = f"{name}/boxes_cs" if options.center else f"{name}/boxes"
    chosen = out(network.add_gather_v2(boxes, where, trt.GatherMode.ND), label)
    if options.center:
        m = constant(network, CENTER_TO_CORNERS, boxes, f"{name}/to_corners")
        chosen = out(network.add_matrix_multiply(chosen, trt.MatrixOperation.NONE, m, trt.MatrixOperation.TRANSPOSE),
                     f"{name}/boxes")
    # per batch item: how many rows have its index (K, 1) == (1, N), summed over the rows
    column = named(network.add_shuffle(out(network.add_gather(rows, _int_const(network, 0, f"{name}/batch_column"),
                                                              1), f"{name}/batch")), f"{name}/batch_column_2d")
    column.reshape_dims = trt.Dims((-1, 1))
    hits = out(network.add_elementwise(column.get_output(0), _batch_ids(network, boxes, name),
                                       trt.ElementWiseOperation.EQUAL), f"{name}/hits")
    counts = out(network.add_cast(hits, trt.DataType.INT32), f"{name}/hits_int")
    num = out(network.add_reduce(counts, trt.ReduceOperation.SUM, 1, False), f"{name}/num_detections")
    return {"num_detections": num, "boxes": chosen, "scores": picked, "classes": classes}

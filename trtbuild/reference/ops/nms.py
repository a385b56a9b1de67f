"""INMSLayer: non-maximum suppression per batch item and per class, as TensorRT documents it.

Inputs: boxes (B, N, 4), or (B, N, C, 4) with a box per class; scores (B, N, C) of the boxes' type (FLOAT, HALF
or BF16); max_output_boxes_per_class, a 0-D INT32/INT64 tensor; optional 0-D FLOAT IoU threshold (input 3,
default 0.0) and score threshold (input 4, default 0.0), set with set_input. Outputs: the selected indices
(count, 3) of rows (batch, class, box) in `indices_type` (INT32 by default, or INT64), and their count, a 0-D
INT32. The count is data-dependent: the indices' shape is (-1, 3) until the layer runs.

The algorithm, from TensorRT's NMS operator documentation: per batch item, the (box, class) candidates whose
score exceeds the score threshold (strictly) are sorted by score without regard to class and at most
`topk_box_limit` of them are kept; then, per class, in decreasing score, a box is selected if its IoU with every
box already selected for that class is less than or equal to the IoU threshold, until
max_output_boxes_per_class are selected. Rows come by increasing batch, then decreasing score. TensorRT leaves
the order of equal scores unspecified; here they come by class, then box index (onnxruntime's order), so runs
repeat. Boxes are CORNER_PAIRS (any two diagonal corners) or CENTER_SIZES (x, y, width, height); IoU is computed
in float32 and counts as 0 where the boxes do not overlap or a box has no area.
"""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import BoundingBoxFormat, DataType, LayerType
from .base import ILayer, param
from .common import FLOATS, INT8_QUANTIZED, fail
from .non_zero import check_index_type, index_type_check
from .registry import register

#: TensorRT's largest topk_box_limit (5000; 2000 on SM 5.3 and 6.2 devices, which TensorRT 10/11 no longer build for)
MAX_TOPK = 5000


def _topk_check(value) -> str | None:
    return None if 0 <= value <= MAX_TOPK else f"the TopK box limit must be in [0, {MAX_TOPK}]"


class INMSLayer(ILayer):
    _TYPE = LayerType.NMS
    _MAX_INPUTS = 5
    _OPTIONAL_INPUTS = True
    bounding_box_format = param("bounding_box_format", BoundingBoxFormat)
    topk_box_limit = param("topk_box_limit", "int", check=_topk_check)
    indices_type = param("indices_type", DataType, check=index_type_check)

    @classmethod
    def _type_label(cls) -> str:
        return "NMS"

    def _infer(self):
        """A constant max_output_boxes_per_class is known at build time, where TensorRT refuses a negative one
        (its output would have a negative length); it is kept in params for inference only."""
        t = self._inputs[2] if len(self._inputs) > 2 else None
        prod = getattr(t, "_producer", None)
        value = None
        if prod is not None and prod._TYPE == LayerType.CONSTANT and prod._weights["weights"].size == 1:
            value = int(prod._weights["weights"]._array.reshape(-1)[0])
        if self._params.get("max_output_constant") != value:
            self._params["max_output_constant"] = value
            self._cache = None
        return super()._infer()


def _scalar(name, shape, dtype, what, types):
    if dtype not in types:
        fail(name, f"the {what} has type {dtype.name}; it must be {' or '.join(t.name for t in types)}")
    if len(shape) != 0:
        fail(name, f"the {what} has shape {tuple(shape)}; it must be a 0-D tensor")


def _same(name, what, a, b):
    if a >= 0 and b >= 0 and a != b:
        fail(name, f"boxes and scores differ in {what} ({a} vs {b})")


def infer(p, w, shapes, dtypes, name, plugin):
    b, s = tuple(shapes[0]), tuple(shapes[1])
    if dtypes[0] == DataType.INT8:
        fail(name, f"boxes {INT8_QUANTIZED}")
    if dtypes[0] not in FLOATS:
        fail(name, f"boxes have type {dtypes[0].name}; an NMS layer takes FLOAT, HALF or BF16 boxes")
    if dtypes[1] != dtypes[0]:
        fail(name, f"scores have type {dtypes[1].name} but boxes {dtypes[0].name}; they must have the same type")
    if len(b) not in (3, 4) or b[-1] != 4:
        fail(name, f"boxes have shape {b}; they must be (batch, boxes, 4) or (batch, boxes, classes, 4)")
    if len(s) != 3:
        fail(name, f"scores have shape {s}; they must be (batch, boxes, classes)")
    _same(name, "the batch size", b[0], s[0])
    _same(name, "the number of boxes", b[1], s[1])
    if len(b) == 4:
        _same(name, "the number of classes", b[2], s[2])
    _scalar(name, shapes[2], dtypes[2], "max_output_boxes_per_class tensor", (DataType.INT32, DataType.INT64))
    if (p.get("max_output_constant") or 0) < 0:
        fail(name, f"max_output_boxes_per_class is the constant {p['max_output_constant']}; it must be >= 0")
    for i, what in ((3, "IoU threshold (input 3)"), (4, "score threshold (input 4)")):
        if len(shapes) > i and shapes[i] is not None:
            _scalar(name, shapes[i], dtypes[i], what, (DataType.FLOAT,))
    check_index_type(name, p["indices_type"])
    return [(-1, 3), ()], [DataType(p["indices_type"]), DataType.INT32]


def _corners(boxes: torch.Tensor, fmt: BoundingBoxFormat) -> torch.Tensor:
    """(..., 4) boxes as (x_min, y_min, x_max, y_max)."""
    if fmt == BoundingBoxFormat.CENTER_SIZES:
        xy, half = boxes[..., :2], boxes[..., 2:] / 2
        return torch.cat([xy - half, xy + half], -1)
    a, b = boxes[..., :2], boxes[..., 2:]
    return torch.cat([torch.minimum(a, b), torch.maximum(a, b)], -1)


def _iou(box: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """IoU of one (4,) box with each of (K, 4); 0 without overlap or area."""
    lo, hi = torch.maximum(box[:2], others[:, :2]), torch.minimum(box[2:], others[:, 2:])
    inter = (hi - lo).clamp(min=0).prod(-1)
    a, b = (box[2:] - box[:2]).prod(-1), (others[:, 2:] - others[:, :2]).prod(-1)
    union = a + b - inter
    ok = (inter > 0) & (a > 0) & (b > 0) & (union > 0)
    return torch.where(ok, inter / torch.where(ok, union, torch.ones_like(union)), torch.zeros_like(inter))


def _select(corners, scores, b, max_out, iou_t, score_t, limit):
    """The selected (batch, class, box) rows of batch item b, in output order (decreasing score)."""
    n, c = scores.shape[1:]
    s = scores[b]
    cand = (s > score_t).nonzero()  # (K, 2) rows (box, class), sorted by box then class
    order = torch.argsort(cand[:, 1] * n + cand[:, 0])  # by class, then box: the order kept for equal scores
    cand = cand[order]
    vals = s[cand[:, 0], cand[:, 1]]
    order = torch.argsort(-vals, stable=True)[:limit]
    cand = cand[order]
    picked: dict[int, list[int]] = {}
    out = []
    for box, cls in cand.tolist():
        mine = picked.setdefault(cls, [])
        if len(mine) >= max_out:
            continue
        pick = corners[b, box, cls] if corners.dim() == 4 else corners[b, box]
        if mine:
            kept = corners[b, mine, cls] if corners.dim() == 4 else corners[b, mine]
            if bool((_iou(pick, kept) > iou_t).any()):
                continue
        mine.append(box)
        out.append((b, cls, box))
    return out


def run(p, w, inputs, plugin):
    boxes, scores = inputs[0].float(), inputs[1].float()
    max_out = int(inputs[2])
    iou_t = float(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else 0.0
    score_t = float(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else 0.0
    corners = _corners(boxes, BoundingBoxFormat(p["bounding_box_format"]))
    rows = []
    for b in range(scores.shape[0]):
        rows += _select(corners, scores, b, max(max_out, 0), iou_t, score_t, p["topk_box_limit"])
    dev = scores.device
    selected = torch.tensor(rows, dtype=torch.int64, device=dev).reshape(-1, 3)
    return [selected, torch.tensor(len(rows), dtype=torch.int32, device=dev)]


def add_nms(self, boxes: ITensor, scores: ITensor, max_output_boxes_per_class: ITensor,
            indices_type: DataType = DataType.INT32) -> INMSLayer:
    return self._add(INMSLayer, [boxes, scores, max_output_boxes_per_class],
                     {"bounding_box_format": int(BoundingBoxFormat.CORNER_PAIRS), "topk_box_limit": MAX_TOPK,
                      "indices_type": int(indices_type)}, num_outputs=2)


register(INMSLayer, infer, run, adds=(add_nms,))

"""A plain greedy NMS in float64, written from TensorRT's NMS operator documentation (not from the code under
test): per batch item, the (box, class) candidates with a score strictly above the score threshold, sorted by
decreasing score (equal scores by class, then box), at most `limit` of them; per class, a candidate is kept if
its IoU with each box kept for that class is <= the IoU threshold, until `max_out` are kept. Rows by batch,
then decreasing score. Also the random boxes the NMS tests and the sweep draw."""

from __future__ import annotations

import torch


def corners(box, center: bool):
    """(x1, y1, x2, y2) with x1 <= x2, y1 <= y2 of a CORNER_PAIRS (any diagonal) or CENTER_SIZES box."""
    a, b, c, d = (float(v) for v in box)
    if center:
        return a - c / 2, b - d / 2, a + c / 2, b + d / 2
    return min(a, c), min(b, d), max(a, c), max(b, d)


def iou(p, q) -> float:
    w = min(p[2], q[2]) - max(p[0], q[0])
    h = min(p[3], q[3]) - max(p[1], q[1])
    inter = max(w, 0.0) * max(h, 0.0)
    ap, aq = (p[2] - p[0]) * (p[3] - p[1]), (q[2] - q[0]) * (q[3] - q[1])
    if inter <= 0 or ap <= 0 or aq <= 0:
        return 0.0
    return inter / (ap + aq - inter)


def expected_nms(boxes, scores, max_out, iou_t=0.0, score_t=0.0, center=False, limit=5000) -> list[tuple]:
    """The selected (batch, class, box) rows, in the documented output order."""
    boxes, scores = boxes.double(), scores.double()
    batch, n, c = scores.shape
    rows = []
    for b in range(batch):
        cands = sorted(((float(scores[b, i, k]), k, i) for i in range(n) for k in range(c)
                        if float(scores[b, i, k]) > score_t), key=lambda t: (-t[0], t[1], t[2]))[:limit]
        kept: dict[int, list] = {}
        for _, k, i in cands:
            mine = kept.setdefault(k, [])
            if len(mine) >= max_out:
                continue
            box = corners(boxes[b, i, k] if boxes.dim() == 4 else boxes[b, i], center)
            if all(iou(box, other) <= iou_t for other in mine):
                mine.append(box)
                rows.append((b, k, i))
    return rows


def random_boxes(gen: torch.Generator, batch: int, n: int, classes: int | None = None, center: bool = False,
                 span: float = 4.0) -> torch.Tensor:
    """Boxes that overlap often: corners in [0, span), sizes in [0.5, 3); one per class if `classes`."""
    shape = (batch, n) + ((classes,) if classes else ())
    xy = torch.rand(*shape, 2, generator=gen) * span
    wh = torch.rand(*shape, 2, generator=gen) * 2.5 + 0.5
    return torch.cat([xy + wh / 2, wh], -1) if center else torch.cat([xy, xy + wh], -1)

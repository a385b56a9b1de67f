"""trtbuild.reference: NMS against a plain greedy NMS in float64 written from TensorRT's documentation
(tests/helpers/nms_expected.py): box formats, boxes per class, thresholds (strict score, IoU <= kept), the TopK
box limit, max_output_boxes_per_class, types and the documented output order; each construction also made on
TensorRT-RTX (the `refnet` twin: shapes (-1, 3) and (), dtypes, refusals), which has no NMS kernel to build."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.nms_expected import expected_nms, random_boxes

gen = torch.Generator().manual_seed(83)
CENTER = trt.BoundingBoxFormat.CENTER_SIZES


def const(refnet, value, dtype):
    arr = np.array(value, dtype=dtype)
    return refnet.network.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def nms(refnet, bshape, sshape, max_out=None, dt=trt.float32, iou=None, score=None, indices_type=None,
        max_dtype=np.int32):
    b, s = refnet.input("b", bshape, dt), refnet.input("s", sshape, dt)
    m = const(refnet, 100 if max_out is None else max_out, max_dtype)
    args = (b, s, m) if indices_type is None else (b, s, m, indices_type)
    layer = refnet.network.add_nms(*args)
    if iou is not None:
        layer.set_input(3, const(refnet, iou, np.float32))
    if score is not None:
        layer.set_input(4, const(refnet, score, np.float32))
    return layer


def run(refnet, layer, boxes, scores):
    out = refnet.run({"b": boxes, "s": scores}, sel=layer.get_output(0), cnt=layer.get_output(1))
    assert out["cnt"].dtype == torch.int32 and out["cnt"].dim() == 0
    assert int(out["cnt"]) == out["sel"].shape[0]
    return out["sel"]


def rows(sel) -> list[tuple]:
    return [tuple(r) for r in sel.tolist()]


@pytest.mark.parametrize("iou, score", [(None, None), (0.3, None), (0.6, 0.25), (1.0, -1.0)])
def test_nms_matches_greedy_nms(refnet, iou, score):
    boxes, scores = random_boxes(gen, 2, 10), torch.rand(2, 10, 3, generator=gen)
    layer = nms(refnet, (2, 10, 4), (2, 10, 3), max_out=4, iou=iou, score=score)
    out = layer.get_output(0)
    assert tuple(out.shape) == (-1, 3) and out.dtype == trt.int32
    assert tuple(layer.get_output(1).shape) == () and layer.get_output(1).dtype == trt.int32
    assert layer.bounding_box_format == trt.BoundingBoxFormat.CORNER_PAIRS and layer.topk_box_limit == 5000
    sel = run(refnet, layer, boxes, scores)
    assert sel.dtype == torch.int32
    assert rows(sel) == expected_nms(boxes, scores, 4, iou or 0.0, score or 0.0)


def test_nms_center_sizes(refnet):
    boxes, scores = random_boxes(gen, 1, 12, center=True), torch.rand(1, 12, 2, generator=gen)
    layer = nms(refnet, (1, 12, 4), (1, 12, 2), max_out=5, iou=0.4)
    layer.bounding_box_format = CENTER
    assert rows(run(refnet, layer, boxes, scores)) == expected_nms(boxes, scores, 5, 0.4, center=True)


def test_nms_boxes_per_class(refnet):
    boxes, scores = random_boxes(gen, 2, 7, classes=3), torch.rand(2, 7, 3, generator=gen)
    layer = nms(refnet, (2, 7, 3, 4), (2, 7, 3), max_out=3, iou=0.2)
    assert rows(run(refnet, layer, boxes, scores)) == expected_nms(boxes, scores, 3, 0.2)


def test_nms_corner_pairs_take_any_diagonal(refnet):
    """(x2, y2, x1, y1) is the same box as (x1, y1, x2, y2)."""
    boxes, scores = random_boxes(gen, 1, 9), torch.rand(1, 9, 2, generator=gen)
    swapped = boxes.clone()
    swapped[0, ::2] = boxes[0, ::2][:, [2, 3, 0, 1]]
    layer = nms(refnet, (1, 9, 4), (1, 9, 2), max_out=9, iou=0.3)
    assert rows(run(refnet, layer, swapped, scores)) == expected_nms(boxes, scores, 9, 0.3)


def test_nms_order_is_by_batch_then_decreasing_score(refnet):
    """Disjoint boxes, so nothing is suppressed: every score above 0 comes out, by batch, then by score across
    classes (not by class first, as ONNX NonMaxSuppression's rows come)."""
    boxes = torch.tensor([[[0.0, 0, 1, 1], [2, 0, 3, 1], [4, 0, 5, 1]]] * 2)
    scores = torch.tensor([[[0.1, 0.9], [0.8, 0.2], [0.5, 0.0]], [[0.3, 0.4], [0.0, 0.0], [0.7, 0.6]]])
    sel = run(refnet, nms(refnet, (2, 3, 4), (2, 3, 2)), boxes, scores)
    assert rows(sel) == [(0, 1, 0), (0, 0, 1), (0, 0, 2), (0, 1, 1), (0, 0, 0), (1, 0, 2), (1, 1, 2), (1, 1, 0),
                         (1, 0, 0)]


def test_nms_thresholds_at_their_bounds(refnet):
    """A score equal to the threshold is not selected ("must exceed"); an IoU equal to the threshold is ("less than
    or equal"). Boxes 0 and 1 overlap with IoU exactly 1/2 (intersection 1, union 2)."""
    boxes = torch.tensor([[[0.0, 0, 1, 1], [0, 0, 1, 2], [5, 5, 6, 6]]])
    scores = torch.tensor([[[0.9], [0.8], [0.25]]])
    assert rows(run(refnet, nms(refnet, (1, 3, 4), (1, 3, 1), iou=0.5, score=0.25), boxes, scores)) == \
        [(0, 0, 0), (0, 0, 1)]


def test_nms_iou_just_below_suppresses(refnet):
    boxes = torch.tensor([[[0.0, 0, 1, 1], [0, 0, 1, 2], [5, 5, 6, 6]]])
    scores = torch.tensor([[[0.9], [0.8], [0.25]]])
    assert rows(run(refnet, nms(refnet, (1, 3, 4), (1, 3, 1), iou=0.49), boxes, scores)) == [(0, 0, 0), (0, 0, 2)]


def test_nms_default_thresholds_drop_non_positive_scores_and_any_overlap(refnet):
    boxes = torch.tensor([[[0.0, 0, 2, 2], [1, 1, 3, 3], [2, 2, 4, 4], [10, 10, 11, 11]]])
    scores = torch.tensor([[[0.9], [0.8], [0.7], [0.0]]])
    # 1 overlaps 0; 2 touches 0 at a corner only (no area): kept; 3 scores 0, not above the default 0.0
    assert rows(run(refnet, nms(refnet, (1, 4, 4), (1, 4, 1)), boxes, scores)) == [(0, 0, 0), (0, 0, 2)]


@pytest.mark.parametrize("limit", [0, 1, 4, 5000])
def test_nms_topk_box_limit(refnet, limit):
    boxes, scores = random_boxes(gen, 2, 6, span=12), torch.rand(2, 6, 2, generator=gen)
    layer = nms(refnet, (2, 6, 4), (2, 6, 2), iou=0.5)
    layer.topk_box_limit = limit
    assert layer.topk_box_limit == limit
    got = rows(run(refnet, layer, boxes, scores))
    assert got == expected_nms(boxes, scores, 100, 0.5, limit=limit)
    assert len(got) <= 2 * limit


@pytest.mark.parametrize("max_out, max_dtype", [(0, np.int32), (1, np.int32), (2, np.int64)])
def test_nms_max_output_boxes_per_class(refnet, max_out, max_dtype):
    boxes, scores = random_boxes(gen, 2, 8, span=10), torch.rand(2, 8, 3, generator=gen)
    layer = nms(refnet, (2, 8, 4), (2, 8, 3), max_out=max_out, iou=0.5, max_dtype=max_dtype)
    assert rows(run(refnet, layer, boxes, scores)) == expected_nms(boxes, scores, max(max_out, 0), 0.5)


def test_nms_refuses_a_negative_constant_max_output(refnet):
    """TensorRT-RTX refuses it at build time ("inherently negative length"); the reference when the layer is added."""
    b, s = refnet.input("b", (1, 6, 4)), refnet.input("s", (1, 6, 2))
    with pytest.raises(trt.NetworkError, match="max_output_boxes_per_class is the constant -3; it must be >= 0"):
        refnet.network.add_nms(b, s, const(refnet, -3, np.int32))


def test_nms_max_output_from_a_network_input(refnet):
    """MaxOutputBoxesPerClass need not be a constant: a 0-D INT32 network input works too."""
    boxes, scores = random_boxes(gen, 1, 8), torch.rand(1, 8, 2, generator=gen)
    b, s = refnet.input("b", (1, 8, 4)), refnet.input("s", (1, 8, 2))
    layer = refnet.network.add_nms(b, s, refnet.input("m", (), trt.int32))
    out = refnet.run({"b": boxes, "s": scores, "m": torch.tensor(2, dtype=torch.int32)}, sel=layer.get_output(0))
    assert rows(out["sel"]) == expected_nms(boxes, scores, 2)
    from helpers.refnet import run_plan

    plan = refnet.build()
    for m, count in ((-1, 0), (0, 0), (100, len(expected_nms(boxes, scores, 100)))):  # a negative count selects none
        got = run_plan(plan, {"b": boxes, "s": scores, "m": torch.tensor(m, dtype=torch.int32)})["sel"]
        assert got.shape == (count, 3)


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_nms_half_and_bf16(refnet, dt, torch_dt):
    boxes, scores = random_boxes(gen, 1, 10).to(torch_dt), torch.rand(1, 10, 2, generator=gen).to(torch_dt)
    layer = nms(refnet, (1, 10, 4), (1, 10, 2), max_out=3, iou=0.35, dt=dt)
    assert rows(run(refnet, layer, boxes, scores)) == expected_nms(boxes, scores, 3, 0.35)


def test_nms_indices_type_int64(refnet):
    boxes, scores = random_boxes(gen, 1, 6), torch.rand(1, 6, 2, generator=gen)
    layer = nms(refnet, (1, 6, 4), (1, 6, 2), indices_type=trt.int64)
    assert layer.indices_type == trt.int64 and layer.get_output(0).dtype == trt.int64
    sel = run(refnet, layer, boxes, scores)
    assert sel.dtype == torch.int64 and rows(sel) == expected_nms(boxes, scores, 100)
    layer2 = nms_again = refnet.network.add_nms(layer.get_input(0), layer.get_input(1), layer.get_input(2))
    nms_again.indices_type = trt.int64
    assert layer2.get_output(0).dtype == trt.int64


# -- refusals -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bshape, sshape, words", [
    ((6, 4), (1, 6, 2), r"boxes have shape \(6, 4\); they must be \(batch, boxes, 4\) or \(batch, boxes, classes, 4\)"),
    ((1, 6, 5), (1, 6, 2), r"boxes have shape \(1, 6, 5\)"),
    ((1, 6, 4), (6, 2), r"scores have shape \(6, 2\); they must be \(batch, boxes, classes\)"),
    ((2, 6, 4), (1, 6, 2), r"boxes and scores differ in the batch size \(2 vs 1\)"),
    ((1, 6, 4), (1, 5, 2), r"boxes and scores differ in the number of boxes \(6 vs 5\)"),
    ((1, 6, 3, 4), (1, 6, 2), r"boxes and scores differ in the number of classes \(3 vs 2\)"),
])
def test_nms_refuses_shapes(refnet, bshape, sshape, words):
    b, s = refnet.input("b", bshape), refnet.input("s", sshape)
    with pytest.raises(trt.NetworkError, match=r"NMS\]': " + words):
        refnet.network.add_nms(b, s, const(refnet, 2, np.int32))


@pytest.mark.parametrize("bdt, sdt, words", [
    (trt.float32, trt.float16, "scores have type HALF but boxes FLOAT; they must have the same type"),
    (trt.int32, trt.int32, "boxes have type INT32; an NMS layer takes FLOAT, HALF or BF16 boxes"),
])
def test_nms_refuses_types(refnet, bdt, sdt, words):
    b, s = refnet.input("b", (1, 6, 4), bdt), refnet.input("s", (1, 6, 2), sdt)
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_nms(b, s, const(refnet, 2, np.int32))


@pytest.mark.parametrize("value, words", [
    (np.array([2], np.int32), r"max_output_boxes_per_class tensor has shape \(1,\); it must be a 0-D tensor"),
    (np.array(2.0, np.float32), "max_output_boxes_per_class tensor has type FLOAT; it must be INT32 or INT64"),
])
def test_nms_refuses_max_output(refnet, value, words):
    b, s = refnet.input("b", (1, 6, 4)), refnet.input("s", (1, 6, 2))
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_nms(b, s, refnet.network.add_constant(value.shape, trt.Weights(value)).get_output(0))


@pytest.mark.parametrize("index, value, words", [
    (3, np.array(0.5, np.float16), r"IoU threshold \(input 3\) has type HALF; it must be FLOAT"),
    (3, np.array([0.5], np.float32), r"IoU threshold \(input 3\) has shape \(1,\); it must be a 0-D tensor"),
    (4, np.array(1, np.int32), r"score threshold \(input 4\) has type INT32; it must be FLOAT"),
])
def test_nms_refuses_thresholds(refnet, index, value, words):
    layer = nms(refnet, (1, 6, 4), (1, 6, 2))
    t = refnet.network.add_constant(value.shape, trt.Weights(value)).get_output(0)
    with pytest.raises(trt.NetworkError, match=words):
        layer.set_input(index, t)
        tuple(layer.get_output(0).shape)


def test_nms_has_five_inputs_at_most(refnet):
    layer = nms(refnet, (1, 6, 4), (1, 6, 2))
    with pytest.raises(trt.NetworkError, match="input index 5 out of range"):
        layer.set_input(5, const(refnet, 0.5, np.float32))


@pytest.mark.parametrize("limit", [-1, 5001])
def test_nms_refuses_a_topk_box_limit(refnet, limit):
    layer = nms(refnet, (1, 6, 4), (1, 6, 2))
    with pytest.raises(trt.NetworkError, match=r"topk_box_limit = .* is refused: the TopK box limit must be in \[0, "
                                               "5000\\]"):
        layer.topk_box_limit = limit
    assert layer.topk_box_limit == 5000


def test_nms_refuses_an_indices_type(refnet):
    b, s = refnet.input("b", (1, 6, 4)), refnet.input("s", (1, 6, 2))
    m = const(refnet, 2, np.int32)
    with pytest.raises(trt.NetworkError, match="indices type FLOAT: the indices must be INT32 or INT64"):
        refnet.network.add_nms(b, s, m, trt.float32)
    layer = refnet.network.add_nms(b, s, m)
    with pytest.raises(trt.NetworkError, match="indices_type .* is refused"):
        layer.indices_type = trt.int8

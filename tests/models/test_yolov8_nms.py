"""yolov8n --option nms=on: INMSLayer's detections (num_detections, boxes, scores, classes) against a batched
greedy NMS written here in float64 from TensorRT's NMS operator documentation, run on the PyTorch model's own
output; both box formats into the layer; the TopK box limit; fp16; a dynamic batch; TensorRT-RTX accepting the
network and inferring the same outputs, but having no NMS kernel to build it (the nms=off network it builds:
tests/models/test_yolov8.py).

Ties: TensorRT leaves the order of equal scores unspecified; the expected NMS below sorts equal scores by class,
then box index, and the comparison orders the rows of each batch item by (class, score, box) before comparing, so
only the documented order (batch item first) is asserted row by row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as ref_trt
from trtbuild.engine.build import new_network
from trtbuild.engine.quick import run_spec
from trtbuild.layers.common import BuilderError
from trtbuild.layers.detection import NMSOptions, batched_nms
from trtbuild.models import registry
from trtbuild.weights import WeightMap

OUTS = ["num_detections", "boxes", "scores", "classes"]


def greedy_nms(output0: np.ndarray, conf: float, iou: float, max_det: int, topk: int = 5000):
    """output0 (N, 4 + C, A) with (cx, cy, w, h) boxes, in float64 -> per batch item a list of (class, score,
    x1, y1, x2, y2) rows in decreasing score. Candidates: scores > conf (strict), sorted by score (equal scores by
    class, then box), the first `topk` kept; per class a box is kept when its IoU with each kept box of its class
    is <= iou, up to max_det per class."""
    out = []
    for item in output0.astype(np.float64):
        cxcy, wh, scores = item[:2].T, item[2:4].T, item[4:].T  # (A, 2), (A, 2), (A, C)
        corners = np.concatenate([cxcy - wh / 2, cxcy + wh / 2], 1)
        box, cls = np.nonzero(scores > conf)
        order = np.lexsort((box, cls, -scores[box, cls]))[:topk]
        kept: dict[int, list[int]] = {}
        rows = []
        for a, c in zip(box[order], cls[order]):
            mine = kept.setdefault(int(c), [])
            if len(mine) >= max_det:
                continue
            if mine:
                k = corners[mine]
                lo, hi = np.maximum(corners[a, :2], k[:, :2]), np.minimum(corners[a, 2:], k[:, 2:])
                inter = np.clip(hi - lo, 0, None).prod(1)
                union = np.prod(corners[a, 2:] - corners[a, :2]) + np.prod(k[:, 2:] - k[:, :2], 1) - inter
                if (inter / union > iou).any():
                    continue
            mine.append(int(a))
            rows.append((int(c), scores[a, c], *corners[a]))
        out.append(rows)
    return out


def canonical(rows):
    return sorted(rows, key=lambda r: (r[0], -r[1], r[2], r[3]))


def check_detections(got, expected, atol=1e-4):
    counts = got["num_detections"].tolist()
    assert counts == [len(rows) for rows in expected]
    assert got["classes"].dtype == torch.int32 and got["num_detections"].dtype == torch.int32
    start = 0
    for n, rows in zip(counts, expected):
        cls = got["classes"][start:start + n].tolist()
        sc = got["scores"][start:start + n].double()
        bx = got["boxes"][start:start + n].double()
        assert bool((sc[:-1] >= sc[1:]).all())  # by decreasing score within the batch item
        mine = canonical([(c, float(s), *b.tolist()) for c, s, b in zip(cls, sc, bx)])
        want = canonical(rows)
        assert [r[0] for r in mine] == [r[0] for r in want]
        np.testing.assert_allclose(np.array([r[1:] for r in mine]).reshape(-1, 5),
                                   np.array([r[1:] for r in want]).reshape(-1, 5), atol=atol, rtol=1e-4)
        start += n


@pytest.fixture(scope="module")
def model_and_input():
    model = registry.get_torch_model("yolov8n", small=True)
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        raw = model(x)
    return model, x, raw.numpy()


@pytest.mark.parametrize("boxes", ["xywh", "xyxy"])
def test_detections_match_a_float64_greedy_nms(model_and_input, boxes):
    """Both box formats into INMSLayer (CENTER_SIZES, CORNER_PAIRS) give corner boxes (one batch item each, the
    spec's static input)."""
    model, x, raw = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on", boxes=boxes, conf="0.5", iou="0.45", max_det="100")
    assert spec.output_names == OUTS
    expected = greedy_nms(raw, 0.5, 0.45, 100)
    b = 0 if boxes == "xywh" else 1
    got = run_spec(spec, WeightMap.from_module(model), x[b:b + 1], "fp32", small=True)
    assert got["boxes"].shape == (int(got["num_detections"][0]), 4)
    check_detections(got, expected[b:b + 1])
    assert 50 < len(expected[0]) < 2000  # the case exercises suppression, not an empty or trivial selection


def test_defaults_and_the_topk_box_limit(model_and_input):
    """Ultralytics' defaults (conf 0.25, iou 0.7, max_det 300): the random model scores more than 5000 (box,
    class) candidates above 0.25, so the layer's TopK box limit (5000) decides which are considered."""
    model, x, raw = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on")
    assert int((raw[0, 4:] > 0.25).sum()) > 5000
    got = run_spec(spec, WeightMap.from_module(model), x[:1], "fp32", small=True)
    check_detections(got, greedy_nms(raw[:1], 0.25, 0.7, 300, topk=5000))
    assert len(greedy_nms(raw[:1], 0.25, 0.7, 300, topk=10**6)[0]) != int(got["num_detections"][0])


def test_max_det_caps_each_class(model_and_input):
    """max_det = 3 (any integer when build_network is called; the command line offers a few): at most 3 per
    class, where the model without the cap keeps up to 11 of a class."""
    import dataclasses
    import functools

    model, x, raw = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on", conf="0.5", iou="0.6")
    spec = dataclasses.replace(spec, build_network=functools.partial(spec.build_network, max_det=3))
    got = run_spec(spec, WeightMap.from_module(model), x[1:], "fp32", small=True)
    expected = greedy_nms(raw[1:], 0.5, 0.6, 3)
    check_detections(got, expected)
    per_class = np.bincount(got["classes"].numpy(), minlength=80)
    assert per_class.max() == 3 and max(np.bincount([r[0] for r in greedy_nms(raw[1:], 0.5, 0.6, 300)[0]])) > 3


def test_the_check_fails_on_other_thresholds(model_and_input):
    """The comparison is not vacuous: the same detections against the expected NMS at another IoU threshold."""
    model, x, raw = model_and_input
    got = run_spec(registry.get("yolov8n").with_options(nms="on", conf="0.5", iou="0.45"), WeightMap.from_module(model),
                   x[:1], "fp32", small=True)
    with pytest.raises(AssertionError):
        check_detections(got, greedy_nms(raw[:1], 0.5, 0.5, 300))


def test_a_dynamic_batch_counts_each_item(model_and_input):
    from trtbuild.engine import build_plan
    from trtbuild.engine.runner import Engine

    model, x, raw = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on", conf="0.5", iou="0.5")
    plan = build_plan(ref_trt, spec, weights=WeightMap.from_module(model), small=True, progress=False,
                      batch=(1, 2, 4))
    assert [o["name"] for o in plan.info["outputs"]] == OUTS
    got = Engine(plan, ref_trt).run({"input": x})
    assert got["num_detections"].shape == (2,)
    check_detections(got, greedy_nms(raw, 0.5, 0.5, 300))


def test_fp16_runs_with_half_boxes_and_scores(model_and_input):
    model, x, raw = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on", conf="0.5", iou="0.45")
    got = run_spec(spec, WeightMap.from_module(model), x[:1], "fp16", small=True)
    assert got["boxes"].dtype == torch.float16 and got["scores"].dtype == torch.float16
    n, want = int(got["num_detections"][0]), len(greedy_nms(raw[:1], 0.5, 0.45, 300)[0])
    assert abs(n - want) <= 0.05 * want  # fp16 scores and IoUs move a few borderline decisions
    assert bool((got["scores"].float() > 0.5).all())


def test_tensorrt_rtx_infers_the_outputs_but_has_no_nms_kernel(rtx, model_and_input):
    """TensorRT-RTX accepts every layer (the NMS, the ND gathers of its data-dependent rows, the INT32 sum) and
    infers the reference's output shapes and types; building stops at the NMS layer ("has no runners")."""
    from trtbuild.engine.rtx import set_targets

    model, _, _ = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on")
    found = {}
    for trt in (rtx, ref_trt):
        builder, net, logger = new_network(trt)
        x = net.add_input("input", trt.float32, (-1, 3, 64, 64))
        outs = spec.build_network(net, WeightMap.from_module(model), x)
        found[trt.__name__] = [(k, tuple(v.shape), v.dtype.name) for k, v in outs.items()]
        if trt is rtx:
            for v in outs.values():
                net.mark_output(v)
            config = builder.create_builder_config()
            set_targets(rtx, config, ("8.6",))
            profile = builder.create_optimization_profile()
            profile.set_shape("input", (1, 3, 64, 64), (2, 3, 64, 64), (4, 3, 64, 64))
            config.add_optimization_profile(profile)
            assert builder.build_serialized_network(net, config) is None
            assert "model.22/nms has no runners that implement it" in logger.error_text()
    assert found["tensorrt_rtx"] == found["trtbuild.reference"] == [
        ("num_detections", (-1,), "INT32"), ("boxes", (-1, 4), "FLOAT"), ("scores", (-1,), "FLOAT"),
        ("classes", (-1,), "INT32")]


def test_refusals():
    spec = registry.get("yolov8n")
    with pytest.raises(ValueError, match="nms='yes' is not one of 'off', 'on'"):
        spec.with_options(nms="yes")
    assert spec.with_options(nms="off").output_names == ["output0"]
    net = new_network(ref_trt)[1]
    model = registry.get_torch_model("yolov8n", small=True)
    x = net.add_input("x", ref_trt.float32, (1, 3, 64, 64))
    with pytest.raises(BuilderError, match="yolov8: max_det='many', iou='0.7' and conf='0.25' must be"):
        spec.build_network(net, WeightMap.from_module(model), x, nms="on", max_det="many")
    b, s = net.add_input("b", ref_trt.float32, (1, 5, 4)), net.add_input("s", ref_trt.float32, (1, 5, 2))
    with pytest.raises(BuilderError, match=r"layer 'n': IoU threshold 1.5 must be in \[0, 1\]"):
        batched_nms(net, b, s, "n", NMSOptions(iou=1.5))
    with pytest.raises(BuilderError, match=r"layer 'n': topk 6000 must be in \[0, 5000\]"):
        batched_nms(net, b, s, "n", NMSOptions(topk=6000))
    with pytest.raises(BuilderError, match=r"layer 'n': boxes must be \(N, A, 4\) and scores \(N, A, C\)"):
        batched_nms(net, s, s, "n")


def test_onnx_export_where_the_topk_box_limit_drops_nothing(rtx, model_and_input):
    """At 32x32 (21 anchors x 80 classes <= 5000 candidates) the NMS lowers to ONNX NonMaxSuppression and
    onnxruntime gives the reference's rows; TensorRT-RTX parses it and has no kernel for it either. At 64x64
    (84 x 80 > 5000) the layer's TopK box limit could drop candidates, which ONNX's NMS has no form of: refused."""
    from trtbuild.onnx_export import OnnxExportError, export_onnx, parse_with_tensorrt_rtx, run_onnxruntime
    from trtbuild.onnx_export.verify import run_reference

    model, _, _ = model_and_input
    spec = registry.get("yolov8n").with_options(nms="on", conf="0.5")
    for size in (32, 64):
        net = new_network(ref_trt)[1]
        outs = spec.build_network(net, WeightMap.from_module(model), net.add_input("input", ref_trt.float32,
                                                                                    (2, 3, size, size)))
        for name in OUTS:
            net.mark_output(outs[name])
        if size == 64:
            with pytest.raises(OnnxExportError, match="topk_box_limit 5000 can drop candidates of the 84 x 80"):
                export_onnx(net)
            continue
        onnx_model = export_onnx(net)
        x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(9))
        got, want = run_onnxruntime(onnx_model, {"input": x}), run_reference(net, {"input": x})
        assert int(got["num_detections"].sum()) > 100
        for name in OUTS:
            np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-4, rtol=1e-5)
        parsed = parse_with_tensorrt_rtx(onnx_model, rtx)
        assert not parsed.ok and "NonMaxSuppression" in parsed.reason() and "has no runners" in parsed.reason()

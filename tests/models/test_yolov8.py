"""yolov8n: Ultralytics' state-dict keys and shapes (written out by hand from yolov8.yaml at scale n),
the head's anchors / DFL / decode by hand, the network against the PyTorch model on the reference
(fp32, fp16, both box formats, layerwise), TensorRT-RTX building it with a dynamic batch, the refusals
(tests/parity/test_zoo.py runs it at batch 2 with every zoo model).
Tolerances as in tests/models/test_zoo_parity.py (helpers.model_checks)."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as ref_trt
from trtbuild.engine import build_plan
from trtbuild.engine.build import new_network
from trtbuild.engine.quick import run_spec
from trtbuild.layers.common import BuilderError
from trtbuild.models import registry
from trtbuild.models.pytorch.yolov8 import DFL, dist2bbox, make_anchors, yolov8n
from trtbuild.weights import WeightMap

from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32

# -- the keys: yolov8.yaml at width 0.25 (channels 16/32/64/128/256), depth 0.33 (C2f repeats 1/2/2/1, neck 1) -------
# Conv modules (conv.weight + bn.*) in registration order: prefix -> (out, in, kernel)
_C2F = {  # C2f prefix -> (in, out, repeats): cv1 (out, in, 1), cv2 (out, (2 + n) * out / 2, 1), m.J.cv1/cv2 (out/2)
    "model.2": (32, 32, 1), "model.4": (64, 64, 2), "model.6": (128, 128, 2), "model.8": (256, 256, 1),
    "model.12": (384, 128, 1), "model.15": (192, 64, 1), "model.18": (192, 128, 1), "model.21": (384, 256, 1),
}
_PLAIN = {"model.0": (16, 3, 3), "model.1": (32, 16, 3), "model.3": (64, 32, 3), "model.5": (128, 64, 3),
          "model.7": (256, 128, 3), "model.16": (64, 64, 3), "model.19": (128, 128, 3)}


def _conv_keys(p, o, i, k):
    return [(f"{p}.conv.weight", (o, i, k, k))] + [(f"{p}.bn.{n}", (o,)) for n in
                                                  ("weight", "bias", "running_mean", "running_var")] + \
        [(f"{p}.bn.num_batches_tracked", ())]


def expected_keys():
    keys = []
    for idx in range(22):
        p = f"model.{idx}"
        if p in _PLAIN:
            keys += _conv_keys(p, *_PLAIN[p])
        elif p in _C2F:
            cin, cout, n = _C2F[p]
            keys += _conv_keys(f"{p}.cv1", cout, cin, 1) + _conv_keys(f"{p}.cv2", cout, (2 + n) * cout // 2, 1)
            for j in range(n):
                keys += _conv_keys(f"{p}.m.{j}.cv1", cout // 2, cout // 2, 3)
                keys += _conv_keys(f"{p}.m.{j}.cv2", cout // 2, cout // 2, 3)
        elif p == "model.9":  # SPPF(256, 256): cv1 to 128, cv2 from 4 x 128
            keys += _conv_keys("model.9.cv1", 128, 256, 1) + _conv_keys("model.9.cv2", 256, 512, 1)
    # Detect: ch (64, 128, 256); box width max(16, 64 // 4, 16 * 4) = 64, class width max(64, min(80, 100)) = 80
    for branch, width, last in (("cv2", 64, 64), ("cv3", 80, 80)):
        for level, ch in enumerate((64, 128, 256)):
            q = f"model.22.{branch}.{level}"
            keys += _conv_keys(f"{q}.0", width, ch, 3) + _conv_keys(f"{q}.1", width, width, 3)
            keys += [(f"{q}.2.weight", (last, width, 1, 1)), (f"{q}.2.bias", (last,))]
    return keys + [("model.22.dfl.conv.weight", (1, 16, 1, 1))]


def test_state_dict_is_ultralytics_yolov8n():
    sd = yolov8n().state_dict()
    assert [(k, tuple(v.shape)) for k, v in sd.items()] == expected_keys()
    assert len(sd) == 355
    # Ultralytics' model summary of yolov8n: 3,157,200 parameters (BN running statistics are buffers)
    assert sum(p.numel() for p in yolov8n().parameters()) == 3_157_200
    assert torch.equal(sd["model.22.dfl.conv.weight"].flatten(), torch.arange(16.0))


def test_small_variant_keeps_the_keys():
    full, small = registry.get_torch_model("yolov8n"), registry.get_torch_model("yolov8n", small=True)
    assert [(k, v.shape) for k, v in full.state_dict().items()] == [(k, v.shape) for k, v in small.state_dict().items()]
    spec = registry.get("yolov8n")
    assert spec.input_shape(False) == (1, 3, 640, 640) and spec.input_shape(True) == (1, 3, 64, 64)
    with torch.no_grad():  # anchors: 12*20 + 6*10 + 3*5 cells at strides 8, 16, 32
        assert tuple(small(torch.zeros(1, 3, 96, 160)).shape) == (1, 84, 315)


# -- the head by hand -----------------------------------------------------------------------------------------

def test_make_anchors_are_cell_centres_row_major():
    points, strides = make_anchors([(2, 3), (1, 1)], (8, 16))
    assert points.tolist() == [[0.5, 0.5], [1.5, 0.5], [2.5, 0.5], [0.5, 1.5], [1.5, 1.5], [2.5, 1.5], [0.5, 0.5]]
    assert strides.flatten().tolist() == [8.0] * 6 + [16.0]


def test_dist2bbox_by_hand():
    dist = torch.tensor([[[1.0], [2.0], [3.0], [4.0]]])  # (l, t, r, b) for one anchor
    anchor = torch.tensor([[[10.0], [20.0]]])
    assert dist2bbox(dist, anchor, xywh=False).flatten().tolist() == [9.0, 18.0, 13.0, 24.0]
    assert dist2bbox(dist, anchor, xywh=True).flatten().tolist() == [11.0, 21.0, 4.0, 6.0]


def test_dfl_is_the_expected_bin():
    logits = torch.full((1, 64, 1), -1e4)
    for side, b in enumerate((0, 3, 15, 7)):  # one-hot distributions: the expectation is the bin index
        logits[0, side * 16 + b, 0] = 0.0
    assert DFL(16)(logits).flatten().tolist() == [0.0, 3.0, 15.0, 7.0]
    flat = DFL(16)(torch.zeros(1, 64, 1))  # uniform: the mean of 0..15
    assert torch.allclose(flat, torch.full_like(flat, 7.5))


# -- the network on the reference ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    spec = registry.get("yolov8n")
    model = registry.get_torch_model("yolov8n", small=True)
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(x)
    return spec, model, x, ref


def test_small_model_matches_torch_in_fp16_from_flat_weights(small):
    """fp16, from weights stored flat as tensorrtx .wts files keep them (the builder passes every shape)."""
    spec, model, x, ref = small
    flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in model.state_dict().items()})
    out = run_spec(spec, flat, x[:1], "fp16", small=True)
    check_fp16(out["output0"], ref[:1], "yolov8n fp16")
    assert [k for k in flat.unused() if not k.endswith("num_batches_tracked")] == []


def test_xyxy_option_matches_torch_corners(small):
    spec, model, x, _ = small
    model.model[22].boxes = "xyxy"
    try:
        with torch.no_grad():
            ref = model(x[:1])
    finally:
        model.model[22].boxes = "xywh"
    out = run_spec(spec.with_options(boxes="xyxy"), WeightMap.from_module(model), x[:1], "fp32", small=True)
    check_fp32(out["output0"], ref, "yolov8n xyxy")
    with pytest.raises(ValueError, match="boxes='cxcy' is not one of 'xywh', 'xyxy'"):
        spec.with_options(boxes="cxcy")


def test_fp32_output_and_every_mapped_tensor_match_torch(small):
    spec, model, x, _ = small
    modules = dict(model.named_modules())
    assert set(spec.layer_map.values()) <= set(modules)
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: model(x[:1]))
    extra = [t for t in spec.layer_map if t not in spec.output_names]
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x[:1], "fp32", small=True, extra_outputs=extra)
    assert [k for k in wm.unused() if not k.endswith("num_batches_tracked")] == []
    scores = out["output0"][:, 4:]  # sigmoid scores in (0, 1); the output itself is checked with the map below
    assert bool(((scores > 0) & (scores < 1)).all()) and out["output0"].shape == (1, 84, 84)
    # by hand: 7 Convs, 8 C2f x (cv1, cv2) + 10 bottlenecks x (cv1, output), SPPF cv1/cv2, 2 upsamples,
    # 4 concats, 3 levels x 2 branches x 3 convs, the DFL and the output: 7 + 36 + 2 + 6 + 18 + 2
    assert len(spec.layer_map) == 71
    for tname, mname in spec.layer_map.items():
        assert len(captured[mname]) == 1, f"module {mname} ran {len(captured[mname])} times"
        check_fp32(out[tname], captured[mname][0], f"tensor {tname} vs module {mname}")


def test_tensorrt_rtx_builds_it_with_the_same_tensors(rtx, small):
    spec, model, _, _ = small
    plan = build_plan(ref_trt, spec, weights=WeightMap.from_module(model), small=True, progress=False,
                      cross_check=True, batch=(1, 2, 4))
    cross = plan.info["cross_check"]  # CrossCheckError otherwise
    assert cross["tensors_compared"] > 200 and cross["rtx_engine_bytes"] > 0
    assert plan.info["outputs"] == [{"name": "output0", "shape": [-1, 84, 84], "dtype": "FLOAT"}]


def test_refusals_name_the_model(small):
    spec, model, _, _ = small
    wm = WeightMap.from_module(model)
    net = new_network(ref_trt)[1]
    with pytest.raises(BuilderError, match=r"yolov8: input 'x' \(1, 3, 100, 128\) needs H and W .* multiples of 32"):
        spec.build_network(net, wm, net.add_input("x", ref_trt.float32, (1, 3, 100, 128)))
    with pytest.raises(BuilderError, match="yolov8: boxes='ltrb' is not one of"):
        spec.build_network(net, wm, net.add_input("y", ref_trt.float32, (1, 3, 64, 64)), boxes="ltrb")
    with pytest.raises(ValueError, match="YOLOv8: input H and W must be multiples of 32"):
        model(torch.zeros(1, 3, 100, 128))


@pytest.mark.slow
def test_full_size_matches_torch():
    spec = registry.get("yolov8n")
    model = registry.get_torch_model("yolov8n")
    x = torch.rand(1, 3, 640, 640, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x)
    wm = WeightMap.from_module(model)
    check_fp32(run_spec(spec, wm, x, "fp32")["output0"], ref, "yolov8n 640 fp32")
    check_fp16(run_spec(spec, wm, x, "fp16")["output0"], ref, "yolov8n 640 fp16")


def test_layerwise_parity_with_the_automatic_map(small):
    """Without a layer_map, layerwise parity maps tensors to modules by name (trtbuild.parity.automap): every
    Conv, C2f, Bottleneck, SPPF, upsample, concat, head conv and the DFL and Detect modules; left unmapped are
    only the parts no module returns (the splits and concats inside C2f and SPPF, the pool SPPF runs three times)."""
    import dataclasses

    from trtbuild.parity.check import check_model_parity

    spec, model, _, _ = small
    report = check_model_parity(dataclasses.replace(spec, layer_map={}), ref_trt, small=True, layerwise=True,
                                module=model)
    assert report.passed, report.to_table()
    assert report.meta["layer_map"] == "automatic (from the layer names)"
    c2f = [p for p in ("model.2", "model.4", "model.6", "model.8", "model.12", "model.15", "model.18", "model.21")]
    assert sorted(report.meta["unmapped_layers"]) == sorted(
        [f"{p}/{part}" for p in c2f for part in ("split:0", "split:1", "cat")]
        + ["model.9.m/0", "model.9.m/1", "model.9.m/2", "model.9/cat"])
    compared = {row.name for row in report.layers}
    assert set(spec.layer_map) <= compared  # every tensor the hand-written map compares, and more
    assert {row.name: row.module for row in report.layers}["output0"] == "model.22"


def test_spec_fields():
    spec = registry.get("yolov8n")
    assert spec.name in registry.names() and spec.output_names == ["output0"] and spec.input_name == "input"
    assert spec.value_range == (0.0, 1.0) and spec.uses_plugins is False  # images scaled to [0, 1], as Ultralytics
    assert spec.options["boxes"] == ("xywh", "xyxy") and spec.options["nms"] == ("off", "on")
    # Ultralytics' predict defaults come first (tests/models/test_yolov8_nms.py checks what they do)
    assert [spec.options[k][0] for k in ("max_det", "iou", "conf")] == ["300", "0.7", "0.25"]
    assert set(spec.output_names) <= set(spec.layer_map)
    a, b = registry.get_torch_model("yolov8n", seed=0), registry.get_torch_model("yolov8n", seed=1)
    assert not a.training and not torch.equal(a.model[0].conv.weight, b.model[0].conv.weight)
    bn = a.model[0].bn
    assert bn.eps == 1e-3 and not torch.all(bn.running_var == 1)  # Ultralytics' eps, statistics randomized


def test_other_scales_and_class_counts_build_from_their_weights():
    """The builder reads widths, C2f repeats and classes from the weights: a scale with width 0.125, depth 0.67
    (repeats 2/4/4/2 and 2 in the neck) and 3 classes, against its PyTorch model."""
    from trtbuild.engine.quick import run_network
    from trtbuild.models.pytorch import randomize_bn_, seeded
    from trtbuild.models.pytorch.yolov8 import YOLOv8

    with seeded(0):
        model = randomize_bn_(YOLOv8(nc=3, width=0.125, depth=0.67), 2).eval()
    assert len(model.model[4].m) == 4 and model.model[22].cv3[0][2].out_channels == 3
    x = torch.rand(1, 3, 64, 96, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = model(x)

    def define(network):
        x_in = network.add_input("input", ref_trt.float32, (1, 3, 64, 96))
        return registry.get("yolov8n").build_network(network, WeightMap.from_module(model), x_in)

    got = run_network(define, {"input": x})["output0"]
    assert tuple(got.shape) == (1, 7, 8 * 12 + 4 * 6 + 2 * 3)
    check_fp32(got, ref, "yolov8 width 0.125 depth 0.67, 3 classes")

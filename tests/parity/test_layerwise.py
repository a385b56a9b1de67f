"""Layerwise parity on the reference backend: forward-hook capture, network order, first jump,
seeded inputs, and the check_parity entry point with a deliberately broken layer."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import Engine, build_plan
from trtbuild.parity import (TensorStats, capture_module_outputs, check_parity, find_jump, make_inputs)

from helpers.tiny_net import TINY_LAYER_MAP, TINY_SHAPE, TinyNet, tiny_define


@pytest.fixture(scope="module")
def net():
    return TinyNet(seed=4)


def _engine(net, precision="fp32", corrupt=False):
    plan = build_plan(trt, tiny_define(net, corrupt_conv2=corrupt), input_shape=TINY_SHAPE, precision=precision,
                      progress=False, extra_outputs=list(TINY_LAYER_MAP))
    return Engine(plan, trt, sidecar=plan.info), plan.info["extra_outputs"]


def test_hooks_capture_before_inplace_relu(net):
    x = torch.rand(TINY_SHAPE) * 2 - 1
    result, captured, calls = capture_module_outputs(net, ["conv1", "relu"], x)
    conv1 = net.conv1(x)
    assert (conv1 < 0).any()  # the in-place ReLU would have clipped these without the clone
    torch.testing.assert_close(captured["conv1"], conv1)
    torch.testing.assert_close(captured["relu"], torch.relu(conv1))
    torch.testing.assert_close(result, net(x))
    assert calls == {"conv1": 1, "relu": 1}
    assert not net.conv1._forward_hooks  # hooks removed


def test_unknown_module_name_suggests_close_ones(net):
    with pytest.raises(ValueError, match=r"'conv3' \(closest: \['conv2', 'conv1'\]\)"):
        capture_module_outputs(net, ["conv3"], torch.rand(TINY_SHAPE))


def test_correct_network_has_no_jump(net):
    engine, output_of = _engine(net)
    report = check_parity(engine, net, make_inputs({"input": TINY_SHAPE}, seed=1), output_names=["y"],
                          layer_map=TINY_LAYER_MAP, layer_order=list(output_of), output_of=output_of,
                          meta={"precision": "fp32"})
    assert report.passed
    assert [r.name for r in report.layers] == ["conv1", "relu1", "conv2"]
    assert [r.module for r in report.layers] == ["conv1", "relu", "conv2"]
    assert all(r.passed for r in report.layers) and report.first_jump is None and report.suspect_layer is None
    assert "no layer shows an error jump or a failure" in report.to_table()


def test_broken_layer_is_found(net):
    engine, output_of = _engine(net, corrupt=True)
    report = check_parity(engine, net, make_inputs({"input": TINY_SHAPE}, seed=1), output_names=["y"],
                          layer_map=TINY_LAYER_MAP, layer_order=list(output_of), output_of=output_of,
                          meta={"precision": "fp32"})
    assert not report.passed
    assert [r.passed for r in report.layers] == [True, True, False]
    assert report.first_failure == "conv2" and report.first_jump == "conv2" and report.suspect_layer == "conv2"
    table = report.to_table()
    assert "JUMP FIRST FAIL" in table and "first layer where the error jumps or fails: conv2" in table
    html = report.to_html()
    assert "Layerwise" in html and html.count("<svg") == 1 + 3 + 1  # output, 3 layer histograms, depth chart


def test_fp16_layers_show_rounding_but_pass(net):
    engine, output_of = _engine(net, precision="fp16")
    report = check_parity(engine, net, make_inputs({"input": TINY_SHAPE}, seed=2), output_names=["y"],
                          layer_map=TINY_LAYER_MAP, layer_order=list(output_of), output_of=output_of,
                          meta={"precision": "fp16"})
    assert report.passed and report.atol_relative
    assert all(0 < r.rel_l2 < 5e-3 for r in report.layers)  # fp16 rounding, nothing more
    assert report.first_jump is None


def test_find_jump_rules():
    def rows(*errs):
        return [TensorStats(f"l{i}", [1], 1, 0, 0, True, rel_l2=e) for i, e in enumerate(errs)]

    assert find_jump(rows(1e-4, 2e-4, 3e-3, 4e-3), factor=10, floor=1e-4) == "l2"
    assert find_jump(rows(1e-4, 2e-4, 1.9e-3), factor=10, floor=1e-4) is None
    assert find_jump(rows(1e-4, 2e-4), factor=10, floor=1e-6) == "l0"  # the first layer vs the floor
    assert find_jump(rows(0.0, 1e-7, 5e-7), factor=10, floor=1e-6) is None  # below the noise floor
    assert find_jump(rows(0.0, 2e-5), factor=10, floor=1e-6) == "l1"
    assert find_jump(rows(1e-3, float("nan")), factor=10, floor=1e-3) == "l1"


def test_make_inputs_seeded_and_in_range():
    a = make_inputs({"x": (1000,)}, seed=7, value_range=(-2, 3))["x"]
    b = make_inputs({"x": (1000,)}, seed=7, value_range=(-2, 3))["x"]
    c = make_inputs({"x": (1000,)}, seed=8, value_range=(-2, 3))["x"]
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.dtype == torch.float32 and a.min() >= -2 and a.max() <= 3 and a.max() > 2.5 and a.min() < -1.5
    n = make_inputs({"x": (20000,)}, seed=0, value_range=(-1, 3), distribution="normal")["x"]
    assert abs(n.mean().item() - 1.0) < 0.05 and abs(n.std().item() - 2.0) < 0.05
    big = make_inputs({"x": (1000,)}, seed=0, distribution="large", large_scale=1e4)["x"]
    assert big.abs().max() > 9000 and big.abs().max() <= 1e4
    with pytest.raises(ValueError, match="lo < hi"):
        make_inputs({"x": (2,)}, value_range=(1, 1))
    with pytest.raises(ValueError, match="distribution 'cauchy'"):
        make_inputs({"x": (2,)}, distribution="cauchy")


def test_large_inputs_overflow_fp16(net):
    """Large magnitudes overflow fp16 activations: the report counts the infs on the engine side."""
    engine, output_of = _engine(net, precision="fp16")
    inputs = make_inputs({"input": TINY_SHAPE}, seed=0, distribution="large", large_scale=3e4)
    report = check_parity(engine, net, inputs, output_names=["y"], meta={"precision": "fp16"},
                          layer_map=TINY_LAYER_MAP, layer_order=list(output_of), output_of=output_of)
    conv1 = report.layers[0]
    assert conv1.inf_actual > 0 and conv1.inf_expected == 0 and not conv1.passed  # |conv1| > 65504 in fp16
    y = report.outputs[0]
    assert y.nan_actual + y.inf_actual > 0 and y.nan_expected + y.inf_expected == 0 and not y.passed
    assert y.expected_max_abs > 65504 and report.first_failure == "conv1"


@pytest.mark.parametrize("scale", [0.0, -1e4, float("inf"), float("nan")])
def test_make_inputs_rejects_a_scale_that_is_not_positive(scale):
    with pytest.raises(ValueError, match="large_scale \\(--scale\\) must be a positive finite number"):
        make_inputs({"x": (2,)}, distribution="large", large_scale=scale)


def test_a_models_own_tolerances_replace_the_defaults_for_its_precision(net):
    """ModelSpec.tolerances reach check_parity: a relative atol of 0.5 instead of fp32's 1e-4; other precisions
    keep the defaults, and an explicit atol still wins."""
    engine, output_of = _engine(net)
    inputs = make_inputs({"input": TINY_SHAPE}, seed=1)
    own = check_parity(engine, net, inputs, output_names=["y"], meta={"precision": "fp32"},
                       tolerances={"fp32": (0.5, 0.25)})
    expected_max = float(net(inputs["input"]).detach().abs().max())
    assert own.rtol == 0.25 and own.outputs[0].atol == pytest.approx(0.5 * expected_max, rel=1e-6)
    other = check_parity(engine, net, inputs, output_names=["y"], meta={"precision": "fp32"},
                         tolerances={"int8": (0.5, 0.25)})
    assert other.rtol == 1e-3 and other.outputs[0].atol == pytest.approx(1e-4 * expected_max, rel=1e-6)
    explicit = check_parity(engine, net, inputs, output_names=["y"], meta={"precision": "fp32"}, atol=0.0,
                            tolerances={"fp32": (0.5, 0.25)})
    assert explicit.outputs[0].atol == 0.0 and explicit.rtol == 0.25


def test_unet_gn_deconv_carries_its_measured_int8_and_fp8_budget():
    from trtbuild.engine import get_spec

    assert get_spec("unet_gn_deconv").tolerances == {"int8": (0.2, 0.2), "fp8": (0.35, 0.35)}
    assert get_spec("unet").tolerances == {}

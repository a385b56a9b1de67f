"""Parity that cannot be fooled (issue 12, part 2): non-finite outputs, wrong-shape weights,
engines that do not fit the weights or the model, unused weights, and tolerances / precision /
renamed outputs taken from the engine's sidecar."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.cli import main
from trtbuild.engine import build_model
from trtbuild.models import registry
from trtbuild.parity import check_parity, compare, compare_tensor, layerwise_rows, load_weights_into, make_inputs
from trtbuild.weights import WeightMap, WeightsError

REF = ["--backend", "reference"]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ 1. non-finite outputs


def test_nan_on_both_sides_fails_unless_allowed():
    nan = torch.full((2, 3), math.nan)
    row = compare({"y": nan}, {"y": nan.clone()}).outputs[0]
    assert not row.passed and row.failed == 6
    assert row.nonfinite_actual == 6 and row.nonfinite_expected == 6 and row.nan_actual == 6
    assert math.isnan(row.cosine)  # not 1.0: no finite pair
    assert "6 of 6 actual values are NaN/Inf" in row.note and "--allow-nonfinite" in row.note
    allowed = compare({"y": nan}, {"y": nan.clone()}, allow_nonfinite=True).outputs[0]
    assert allowed.passed and allowed.nonfinite_actual == 6 and math.isnan(allowed.cosine)


def test_inf_in_the_actual_output_fails_and_cosine_uses_the_finite_pairs():
    a = torch.tensor([1.0, 2.0, math.inf, 3.0])
    e = torch.tensor([1.0, 2.0, math.inf, -3.0])
    row = compare_tensor("y", a, e, atol=10.0, rtol=10.0)  # tolerances that would pass every finite element
    assert not row.passed and row.failed == 1 and row.inf_actual == 1 and row.nonfinite_expected == 1
    # cosine of (1, 2, 3) and (1, 2, -3), by hand: (1 + 4 - 9) / 14
    assert row.cosine == pytest.approx(-4 / 14) and "over the 3 of 4 elements finite on both sides" in row.note
    assert compare_tensor("y", a, e, 10.0, 10.0, allow_nonfinite=True).passed
    d = compare({"y": a}, {"y": e}, 10.0, 10.0).to_dict()["outputs"][0]
    assert d["nonfinite_actual"] == 1 and d["nonfinite_expected"] == 1 and d["passed"] is False


def test_nonfinite_expected_with_finite_actual_still_fails_when_allowed():
    row = compare_tensor("y", torch.zeros(3), torch.tensor([0.0, math.nan, 0.0]), 1.0, 1.0, allow_nonfinite=True)
    assert not row.passed and row.failed == 1


def test_a_nonfinite_layer_tensor_fails_its_layerwise_row():
    rows = layerwise_rows({"conv": torch.tensor([math.nan, 1.0])}, {"m": torch.tensor([math.nan, 1.0])},
                          {"conv": "m"}, ["conv"], {}, 1e-4, 1e-3)
    assert not rows[0].passed and rows[0].nonfinite_actual == 1


@pytest.mark.parametrize("atol, rtol", [(math.nan, 1e-3), (1e-4, math.inf), (-1.0, 1e-3), (1e-4, -0.5)])
def test_nonfinite_or_negative_tolerances_are_refused(atol, rtol):
    x = {"y": torch.ones(2)}
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        compare(x, x, atol, rtol)


@pytest.mark.parametrize("kw", [dict(value_range=(-math.inf, math.inf)), dict(value_range=(0.0, math.nan)),
                                dict(distribution="large", large_scale=math.inf)])
def test_make_inputs_refuses_nonfinite_ranges_and_scales(kw):
    with pytest.raises(ValueError, match="finite"):
        make_inputs({"x": (1, 2)}, **kw)


def _tiny_engine():
    spec = registry.get("resnet18")
    module = registry.get_torch_model("resnet18", seed=0, small=True)
    from trtbuild.engine import Engine

    plan = build_model(spec, WeightMap.from_module(module), trt, "fp32", small=True, progress=False)
    return Engine(plan, trt, sidecar=plan.info), module, spec


def test_check_parity_refuses_a_nan_tolerance():
    engine, module, spec = _tiny_engine()
    inputs = make_inputs({"input": spec.input_shape(True)})
    with pytest.raises(ValueError, match="atol must be a finite number >= 0, got nan"):
        check_parity(engine, module, inputs, atol=math.nan)


def test_cli_parity_with_huge_inputs_fails_on_nan_outputs(cwd, capsys):
    code, out, _ = _run(capsys, ["parity", "resnet18", "--small", "--distribution", "large", "--scale", "1e300", *REF])
    assert code == 1 and "result: FAIL" in out and "1.000000" not in out
    assert "actual values are NaN/Inf" in out
    code, out, _ = _run(capsys, ["parity", "resnet18", "--small", "--distribution", "large", "--scale", "1e300",
                                 "--allow-nonfinite", *REF])
    assert code == 0 and "result: PASS" in out and "1.000000" not in out and " n/a " in out


@pytest.mark.parametrize("argv, flag", [(["--range=-inf,inf"], "--range"), (["--atol", "nan"], "--atol"),
                                        (["--rtol", "inf"], "--rtol"), (["--atol=-1"], "--atol"),
                                        (["--distribution", "large", "--scale", "1e400"], "--scale")])
def test_cli_refuses_nonfinite_range_scale_and_tolerances(cwd, capsys, argv, flag):
    with pytest.raises(SystemExit) as info:
        main(["parity", "resnet18", "--small", *argv, *REF])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"argument {flag}:" in err and "finite" in err


# ------------------------------------------------------------------ 2. wrong-shape weights


def _resnet18_state():
    return registry.get_torch_model("resnet18", seed=0, small=True).state_dict()


def test_wrong_shape_weights_in_safetensors_are_refused_by_builder_and_torch_side(tmp_path):
    state = {k: v.clone() for k, v in _resnet18_state().items()}
    assert tuple(state["conv1.weight"].shape) == (8, 3, 7, 7)
    state["conv1.weight"] = state["conv1.weight"].reshape(3, 8, 7, 7).contiguous()  # same count, wrong shape
    path = tmp_path / "bad.safetensors"
    WeightMap.from_state_dict(state).save(path)
    with pytest.raises(WeightsError) as info:
        build_model("resnet18", path, trt, "fp32", small=True, progress=False)
    msg = str(info.value)
    assert "'conv1.weight'" in msg and "(3, 8, 7, 7)" in msg and "(8, 3, 7, 7)" in msg and "bad.safetensors" in msg
    module = registry.get_torch_model("resnet18", seed=1, small=True)
    with pytest.raises(WeightsError, match=r"'conv1.weight'.*\(3, 8, 7, 7\)"):
        load_weights_into(module, WeightMap.load(path))


def test_flat_wts_rows_are_still_reshaped(tmp_path):
    flat = {k: v.reshape(-1) for k, v in _resnet18_state().items() if v.dtype.is_floating_point}
    module = registry.get_torch_model("resnet18", seed=1, small=True)
    load_weights_into(module, WeightMap.from_state_dict(flat))
    torch.testing.assert_close(module.conv1.weight, _resnet18_state()["conv1.weight"], rtol=0, atol=0)
    build_model("resnet18", WeightMap.from_state_dict(flat), trt, "fp32", small=True, progress=False)


@pytest.mark.parametrize("name", registry.names())
def test_every_zoo_model_builds_from_a_shaped_pt_file(tmp_path, name):
    path = tmp_path / f"{name}.pt"
    torch.save(registry.get_torch_model(name, seed=0, small=True).state_dict(), path)
    wm = WeightMap.load(path)
    assert any(len(a.shape) >= 2 for _, a in wm.items())
    build_model(name, wm, trt, "fp32", small=True, progress=False)

"""Parity that cannot be fooled: non-finite outputs, wrong-shape weights,
engines that do not fit the weights or the model, unused weights, and tolerances / precision /
renamed outputs taken from the engine's sidecar."""

from __future__ import annotations

import math
import re

import pytest
import torch

import trtbuild.reference as trt
from trtbuild.cli import main
from trtbuild.engine import build_model
from trtbuild.models import registry
from trtbuild.parity import check_parity, compare, compare_tensor, layerwise_rows, load_weights_into, make_inputs
from trtbuild.weights import WeightMap, WeightsError

from helpers.cli_run import REF, run_cli


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


@pytest.mark.parametrize("atol, rtol, message", [(math.nan, 1e-3, "atol must be a finite number >= 0, got nan"),
                                                  (1e-4, math.inf, "rtol must be a finite number >= 0, got inf"),
                                                  (-1.0, 1e-3, "atol must be a finite number >= 0, got -1.0"),
                                                  (1e-4, -0.5, "rtol must be a finite number >= 0, got -0.5")])
def test_nonfinite_or_negative_tolerances_are_refused(atol, rtol, message):
    x = {"y": torch.ones(2)}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):  # the tolerance named, and its value
        compare(x, x, atol, rtol)


@pytest.mark.parametrize("kw, message", [
    (dict(value_range=(-math.inf, math.inf)), "value range (--range) must be finite, got [-inf, inf]"),
    (dict(value_range=(0.0, math.nan)), "value range (--range) must be finite, got [0.0, nan]"),
    (dict(distribution="large", large_scale=math.inf),
     "large_scale (--scale) must be a positive finite number, got inf")])
def test_make_inputs_refuses_nonfinite_ranges_and_scales(kw, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):  # which option, and its value
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
    code, out, _ = run_cli(capsys, ["parity", "resnet18", "--small", "--distribution", "large", "--scale", "1e300",
                                    *REF])
    assert code == 1 and "result: FAIL" in out and "1.000000" not in out
    assert "actual values are NaN/Inf" in out and "inputs: 12288 values of 'input' are NaN/Inf" in out
    code, out, _ = run_cli(capsys, ["parity", "resnet18", "--small", "--distribution", "large", "--scale", "1e300",
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


# ------------------------------------------------------------------ 3. mismatches named


@pytest.fixture(scope="module")
def saved_resnet(tmp_path_factory):
    """(dir, engine path, its weights, other weights) for resnet18 --small, fp32, reference."""
    from trtbuild.engine import build_and_save
    from trtbuild.engine.model import export_seeded_weights

    d = tmp_path_factory.mktemp("saved")
    export_seeded_weights("resnet18", d / "a.wts", seed=0, small=True)
    export_seeded_weights("resnet18", d / "b.wts", seed=1, small=True)
    engine, _ = build_and_save("resnet18", d / "a.wts", d / "r.engine", trt, "fp32", small=True, progress=False)
    return d, engine, d / "a.wts", d / "b.wts"


def test_engine_built_from_other_weights_is_named(saved_resnet, capsys):
    from trtbuild.engine.serialize import sha256_file
    from trtbuild.parity import check_model_parity

    _, engine, good, other = saved_resnet
    assert check_model_parity("resnet18", trt, engine=engine, weights=good, small=True).passed
    with pytest.raises(ValueError) as info:
        check_model_parity("resnet18", trt, engine=engine, weights=other, small=True)
    msg = str(info.value)
    assert f"engine {engine} was built from other weights" in msg
    assert sha256_file(good)[:12] in msg and sha256_file(other)[:12] in msg and str(other) in msg
    code, _, err = run_cli(capsys, ["parity", "resnet18", "--small", "--engine", str(engine), "--weights",
                                    str(other), *REF])
    assert code == 1 and "was built from other weights" in err


def _save_resnet_at(path, size, wm):
    """A resnet18 (small) network built for size x size inputs, saved with a sidecar that names no model."""
    from trtbuild.engine import build_plan, save_engine
    from trtbuild.engine.serialize import make_sidecar

    spec = registry.get("resnet18")
    plan = build_plan(trt, lambda network, x: spec.build_network(network, wm, x), input_shape=(1, 3, size, size),
                      progress=False)
    save_engine(path, plan, make_sidecar(trt, plan))
    return path


def test_engine_whose_input_does_not_fit_the_model_is_named(tmp_path):
    from trtbuild.parity import check_model_parity

    wm = WeightMap.from_module(registry.get_torch_model("resnet18", seed=0, small=True))
    path = _save_resnet_at(tmp_path / "r48.engine", 48, wm)
    with pytest.raises(ValueError) as info:
        check_model_parity("resnet18", trt, engine=path, small=True)
    msg = str(info.value)
    assert "input 'input' of shape (1, 3, 48, 48)" in msg and "'resnet18' (small) expects ('N', 3, 64, 64)" in msg


def test_check_parity_names_input_shapes_the_module_cannot_take():
    from trtbuild.engine import Engine, build_plan

    plan = build_plan(trt, lambda network, x: {"y": network.add_activation(x, trt.ActivationType.RELU).get_output(0)},
                      input_shape=(1, 4), progress=False)
    module = torch.nn.Sequential(torch.nn.Linear(6, 2))
    with pytest.raises(ValueError, match=r"PyTorch module failed on the engine's input shapes \('input' \(1, 4\)\)"):
        check_parity(Engine(plan, trt), module, {"input": torch.ones(1, 4)})


def _edit_sidecar(path, **changes):
    import json

    side = path.with_name(path.name + ".json")
    data = json.loads(side.read_text())
    data.update(changes)
    side.write_text(json.dumps(data))


def _copy_engine(src, dst):
    import shutil

    shutil.copy(src, dst)
    shutil.copy(src.with_name(src.name + ".json"), dst.with_name(dst.name + ".json"))
    return dst


def test_sidecar_with_an_unknown_format_version_is_refused(saved_resnet, tmp_path):
    from trtbuild.engine import load_engine
    from trtbuild.engine.errors import EngineFileError

    path = _copy_engine(saved_resnet[1], tmp_path / "e.engine")
    _edit_sidecar(path, format=99)
    with pytest.raises(EngineFileError, match="has format version 99 but trtbuild .* reads format 1 only"):
        load_engine(path, trt)


def test_sidecar_precision_contradicting_the_plan_is_refused(saved_resnet, tmp_path):
    from trtbuild.engine import build_and_save, load_engine
    from trtbuild.engine.errors import EngineFileError

    path, _ = build_and_save("resnet18", saved_resnet[2], tmp_path / "h.engine", trt, "fp16", small=True,
                             progress=False, fp32_io=False)
    assert load_engine(path, trt).tensors["input"].trt_dtype == "HALF"
    _edit_sidecar(path, precision="fp32")
    with pytest.raises(EngineFileError, match="says the engine computes in fp32 with float32 I/O, but its input "
                                              "'input' is HALF"):
        load_engine(path, trt)
    _edit_sidecar(path, precision="bf16")
    with pytest.raises(EngineFileError, match="computes in bf16, but its input 'input' is HALF"):
        load_engine(path, trt)


def test_sidecar_of_another_engine_is_refused(saved_resnet, tmp_path):
    import json

    from trtbuild.engine import load_engine
    from trtbuild.engine.errors import EngineFileError

    wm = WeightMap.from_module(registry.get_torch_model("resnet18", seed=0, small=True))
    path = _save_resnet_at(tmp_path / "r48.engine", 48, wm)
    other = json.loads(saved_resnet[1].with_name("r.engine.json").read_text())
    _edit_sidecar(path, inputs=other["inputs"])  # a planted description: [1, 3, 64, 64]
    with pytest.raises(EngineFileError, match=r"describes input 'input' as \[1, 3, 64, 64\] FLOAT but the engine "
                                              r"has \[1, 3, 48, 48\] FLOAT"):
        load_engine(path, trt)


# ------------------------------------------------------------------ 4. unused weights


@pytest.fixture(scope="module")
def extra_weights(tmp_path_factory):
    state = dict(_resnet18_state())
    for i in range(7):
        state[f"fc.extra{i}"] = torch.full((3,), float(i))
    path = tmp_path_factory.mktemp("extra") / "extra.safetensors"
    WeightMap.from_state_dict(state).save(path)
    return path


def test_build_records_and_prints_unused_weights(extra_weights, cwd, capsys):
    import json

    code, out, _ = run_cli(capsys, ["build", "resnet18", "--small", "--weights", str(extra_weights), "--out",
                                    "e.engine", *REF])
    assert code == 0
    assert "weights: 7 of 109 tensors unused (no builder read them): fc.extra0, fc.extra1, fc.extra2, fc.extra3, " \
           "fc.extra4, … (2 more; -v lists all)" in out
    side = json.loads((cwd / "e.engine.json").read_text())
    assert side["unused_weights"] == [f"fc.extra{i}" for i in range(7)] and side["weight_tensors"] == 109
    code, out, _ = run_cli(capsys, ["-v", "build", "resnet18", "--small", "--weights", str(extra_weights), "--out",
                                    "e.engine", *REF])
    assert code == 0 and ", ".join(f"fc.extra{i}" for i in range(7)) in out
    code, out, _ = run_cli(capsys, ["parity", "resnet18", "--small", "--engine", "e.engine", "--weights",
                                    str(extra_weights), *REF])
    assert code == 0 and "weights: 7 of 109 tensors unused" in out


def test_parity_in_memory_prints_unused_weights(extra_weights, cwd, capsys):
    code, out, _ = run_cli(capsys, ["parity", "resnet18", "--small", "--weights", str(extra_weights), *REF])
    assert code == 0 and "weights: 7 of 109 tensors unused" in out
    code, out, _ = run_cli(capsys, ["parity", "resnet18", "--small", *REF])
    assert code == 0 and "weights: all 102 tensors used" in out


# ------------------------------------------------------------------ 5. precision and renamed outputs from the engine


@pytest.fixture(scope="module")
def fp16_engine():
    from trtbuild.engine import Engine

    spec = registry.get("resnet18")
    module = registry.get_torch_model("resnet18", seed=0, small=True)
    plan = build_model(spec, WeightMap.from_module(module), trt, "fp16", small=True, progress=False,
                       extra_outputs=["logits", "layer1.0.conv1"])
    assert plan.info["extra_outputs"]["logits"] == "logits/half"  # marked under another name
    return Engine(plan, trt, sidecar=plan.info), module, make_inputs({"input": spec.input_shape(True)})


def test_fp16_engine_is_judged_with_fp16_tolerances_and_its_extra_outputs(fp16_engine):
    engine, module, inputs = fp16_engine
    report = check_parity(engine, module, inputs, layer_map={"logits": "fc", "layer1.0.conv1": "layer1.0.bn1"})
    assert report.passed and report.meta["precision"] == "fp16" and report.rtol == 1e-2
    assert [s.name for s in report.outputs] == ["logits"]
    assert [r.name for r in report.layers] == ["logits", "layer1.0.conv1"] and all(r.passed for r in report.layers)
    # the logits layer row is the HALF tensor marked as "logits/half": it differs from the fp32 output's values
    assert report.layers[0].count == 10


def test_explicit_precision_contradicting_the_engine_is_refused(fp16_engine):
    engine, module, inputs = fp16_engine
    with pytest.raises(ValueError, match="precision fp32 was requested but engine .* computes in fp16"):
        check_parity(engine, module, inputs, meta={"precision": "fp32"})


def test_good_fp16_engine_passes_without_meta():
    from trtbuild.engine import Engine

    spec = registry.get("resnet18")
    module = registry.get_torch_model("resnet18", seed=0, small=True)
    plan = build_model(spec, WeightMap.from_module(module), trt, "fp16", small=True, progress=False)
    report = check_parity(Engine(plan, trt), module, make_inputs({"input": spec.input_shape(True)}))  # plan.info
    assert report.passed and report.meta["precision"] == "fp16"
    assert report.outputs[0].max_abs > 1e-4  # a real fp16 error, which fp32 tolerances would fail


def test_engine_without_weights_option_is_compared_with_the_weights_it_was_built_from(saved_resnet, tmp_path):
    """b.wts (seed 1) differs from the seeded PyTorch model (seed 0): without --weights, parity must use
    the file the sidecar records rather than report a spurious failure."""
    from trtbuild.engine import build_and_save
    from trtbuild.parity import check_model_parity

    d, _, _, other = saved_resnet
    engine, _ = build_and_save("resnet18", other, tmp_path / "b.engine", trt, "fp32", small=True, progress=False)
    report = check_model_parity("resnet18", trt, engine=engine, small=True)
    assert report.passed and report.meta["weights"] == str(other)


def test_against_onnxruntime_refuses_allow_nonfinite(cwd, capsys):
    code, _, err = run_cli(capsys, ["parity", "resnet18", "--small", "--against", "onnxruntime", "--allow-nonfinite",
                                    *REF])
    assert code == 1 and "cannot honour --allow-nonfinite" in err

"""Zoo models through trtbuild.engine + trtbuild.parity on the reference backend (small variants):
build -> serialize -> load -> run -> parity, plus .wts weights (flat tensors) and missing weights."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt

from trtbuild.engine import build_and_save, build_model, load_engine
from trtbuild.engine.model import export_seeded_weights, load_model_weights
from trtbuild.models import registry
from trtbuild.parity import check_model_parity, load_weights_into
from trtbuild.weights import WeightMap, WeightsError


@pytest.fixture(scope="module")
def alexnet_wts(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "alexnet-small.wts"
    export_seeded_weights("alexnet", path, seed=3, small=True)
    return path


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_alexnet_small_parity_with_layers(precision):
    report = check_model_parity("alexnet", trt, precision=precision, small=True, layerwise=True)
    assert report.passed, report.to_table()
    spec = registry.get("alexnet")
    assert [r.name for r in report.layers][:3] == ["features.0", "features.1", "features.2"]
    assert len(report.layers) == len(spec.layer_map) and report.first_jump is None
    if precision == "fp32":
        assert report.outputs[0].max_abs < 1e-5
    else:
        out = report.outputs[0]
        assert out.max_abs > 0  # fp16 really rounds...
        # ...but stays within fp16 accuracy of the fp32 PyTorch output (observed: ~6e-5 against max|exp| ~0.14)
        assert out.max_abs <= 1e-2 * out.expected_max_abs and out.cosine > 0.9999, report.to_table()


@pytest.mark.parametrize("name", registry.names())
def test_every_zoo_model_small_parity_at_batch_2(name):
    """Batch > 1 through the whole pipeline (build at batch 2, run, compare with PyTorch on the same batch):
    a builder that folds the batch into channels or flattens it away fails here, never at batch 1."""
    report = check_model_parity(name, trt, small=True, batch=2)
    assert report.meta["batch"] == 2 and report.passed, report.to_table()
    assert all(out.shape[0] == 2 for out in report.outputs)


@pytest.mark.parametrize("name", ["resnet18", "repvgg_a0"])
def test_small_model_fp16_parity_at_batch_3(name):
    report = check_model_parity(name, trt, precision="fp16", small=True, batch=3)
    assert report.meta["batch"] == 3 and report.passed, report.to_table()
    assert all(out.shape[0] == 3 and out.cosine > 0.999 for out in report.outputs)


def test_full_pipeline_from_wts_file(alexnet_wts, tmp_path):
    """.wts stores tensors flat; the builders pass every weight's shape, so the file builds as is."""
    wm = load_model_weights(alexnet_wts)
    assert wm.shape_of("features.0.weight") == (12 * 3 * 11 * 11,)
    out, sidecar = build_and_save("alexnet", alexnet_wts, tmp_path / "a.engine", trt, "fp32", small=True,
                                  batch=(1, 2, 2), progress=False)
    assert sidecar["weights"]["path"] == str(alexnet_wts) and sidecar["model"] == "alexnet"
    engine = load_engine(out)
    report = check_model_parity("alexnet", trt, weights=alexnet_wts, engine=engine, small=True, batch=2)
    assert report.passed and report.meta["batch"] == 2


def test_wrong_weights_fail_parity(alexnet_wts):
    """The engine gets seed-3 weights; the PyTorch side keeps seed 0: parity must fail."""
    plan = build_model("alexnet", alexnet_wts, trt, "fp32", small=True, progress=False)
    from trtbuild.engine import Engine

    engine = Engine(plan, trt, sidecar=plan.info)
    report = check_model_parity("alexnet", trt, engine=engine, small=True, weights_seed=0)
    assert not report.passed and report.outputs[0].cosine < 0.99


def test_missing_weights_name_the_path(tmp_path):
    missing = tmp_path / "nope.wts"
    with pytest.raises(WeightsError, match=str(missing)):
        build_model("alexnet", missing, trt, small=True, progress=False)


def test_load_weights_into_reports_missing_tensors():
    module = registry.get_torch_model("alexnet", small=True)
    wm = WeightMap.from_module(module)
    partial = WeightMap({k: v for k, v in wm.items() if k != "classifier.6.bias"})
    with pytest.raises(ValueError, match="lack 1 tensors .*classifier.6.bias"):
        load_weights_into(module, partial)
    fresh = registry.get_torch_model("alexnet", seed=9, small=True)
    load_weights_into(fresh, wm)
    torch.testing.assert_close(fresh.state_dict()["features.0.weight"], module.state_dict()["features.0.weight"])


def test_layerwise_with_engine_file_is_refused(alexnet_wts, tmp_path):
    out, _ = build_and_save("alexnet", alexnet_wts, tmp_path / "a.engine", trt, "fp32", small=True, progress=False)
    with pytest.raises(ValueError, match="omit --engine"):
        check_model_parity("alexnet", trt, engine=out, small=True, layerwise=True)


def test_unknown_model():
    with pytest.raises(ValueError, match="unknown model 'alexnot'; known models: alexnet"):
        check_model_parity("alexnot", trt)


# ------------------------------------------------ a given engine must match the request


@pytest.fixture(scope="module")
def small_engines(tmp_path_factory, alexnet_wts):
    """alexnet-small engine files: fp32 static batch 1, fp32 dynamic batch (1, 2, 3), fp16 static."""
    d = tmp_path_factory.mktemp("engines")
    static, _ = build_and_save("alexnet", alexnet_wts, d / "a-fp32.engine", trt, "fp32", small=True, progress=False)
    dynamic, _ = build_and_save("alexnet", alexnet_wts, d / "a-dyn.engine", trt, "fp32", small=True,
                                batch=(1, 2, 3), progress=False)
    half, _ = build_and_save("alexnet", alexnet_wts, d / "a-fp16.engine", trt, "fp16", small=True, progress=False)
    return {"static": static, "dynamic": dynamic, "fp16": half}


def test_engine_of_another_model_is_refused(small_engines):
    with pytest.raises(ValueError, match=r"built for model 'alexnet' but parity was requested for 'resnet18'"):
        check_model_parity("resnet18", trt, engine=small_engines["static"], small=True)


def test_engine_of_the_other_size_variant_is_refused(small_engines):
    with pytest.raises(ValueError, match=r"built for the small variant of 'alexnet' but parity was requested for the "
                                         r"full-size model \(no --small\)"):
        check_model_parity("alexnet", trt, engine=small_engines["static"], small=False)


def test_explicit_precision_must_match_the_engine(small_engines, alexnet_wts):
    with pytest.raises(ValueError, match="computes in fp32 but --precision fp16 was requested"):
        check_model_parity("alexnet", trt, engine=small_engines["static"], small=True, precision="fp16")
    with pytest.raises(ValueError, match="computes in fp16 but --precision fp32 was requested"):
        check_model_parity("alexnet", trt, engine=small_engines["fp16"], small=True, precision="fp32")
    report = check_model_parity("alexnet", trt, weights=alexnet_wts, engine=small_engines["fp16"], small=True)
    assert report.meta["precision"] == "fp16" and report.passed  # not given: the engine's precision is used


def test_explicit_batch_must_fit_the_engine(small_engines, alexnet_wts):
    with pytest.raises(ValueError, match=r"static batch of 1 .* but batch 2 was requested"):
        check_model_parity("alexnet", trt, engine=small_engines["static"], small=True, batch=2)
    with pytest.raises(ValueError, match=r"batch 4 is outside the batch range \[1, 3\]"):
        check_model_parity("alexnet", trt, engine=small_engines["dynamic"], small=True, batch=4)
    report = check_model_parity("alexnet", trt, weights=alexnet_wts, engine=small_engines["dynamic"], small=True,
                                batch=3)
    assert report.meta["batch"] == 3 and list(report.outputs[0].shape) == [3, 10] and report.passed
    default = check_model_parity("alexnet", trt, weights=alexnet_wts, engine=small_engines["dynamic"], small=True)
    assert default.meta["batch"] == 1


def test_engine_without_model_in_its_sidecar_is_not_checked_against_the_name(alexnet_wts):
    """An engine with no recorded model (a custom network) cannot be checked, so it is accepted."""
    from trtbuild.engine import Engine

    plan = build_model("alexnet", alexnet_wts, trt, "fp32", small=True, progress=False)
    engine = Engine(plan, trt, sidecar=dict(plan.info, model=None, small=None))
    assert check_model_parity("alexnet", trt, weights=alexnet_wts, engine=engine, small=True).passed

"""check_model_parity(options=BuildOptions(...)): the build options of the engine built in memory as one
typed value, its keyword arguments kept as the shorthand, never both."""

from __future__ import annotations

import pytest

from trtbuild.backend import load_trt
from trtbuild.engine import build_and_save
from trtbuild.engine.options import BatchProfile, BuildOptions
from trtbuild.parity import check_model_parity
from trtbuild.parity.options import ParityOptions
from trtbuild.parity.profiles import check_model_parity_profiles

REF = load_trt("reference")


def _rows(report):
    return [(r.name, r.shape, r.max_abs, r.expected_max_abs) for r in report.outputs]


def test_options_build_the_engine_the_keywords_describe():
    by_kw = check_model_parity("alexnet", REF, small=True, precision="fp16", batch=2)
    by_options = check_model_parity("alexnet", REF, options=BuildOptions(precision="fp16", small=True, progress=False,
                                                                         profiles=(BatchProfile(1, 2, 2),)), batch=2)
    assert by_kw.passed and by_options.passed
    assert by_options.meta["precision"] == "fp16" and by_options.meta["batch"] == 2
    assert by_options.meta["model"] == "alexnet (small)"
    assert _rows(by_options) == _rows(by_kw)  # the same engine on the same seeded inputs
    assert by_options.outputs[0].max_abs > 0  # fp16 against PyTorch's fp32: not trivially equal


def test_batch_picks_the_inputs_within_the_options_profile():
    options = BuildOptions(small=True, progress=False, profiles=(BatchProfile(1, 2, 4),))
    assert check_model_parity("alexnet", REF, options=options).meta["batch"] == 1  # the profile's smallest
    assert check_model_parity("alexnet", REF, options=options, batch=3).meta["batch"] == 3
    with pytest.raises(ValueError, match=r"batch 5 is outside the batch range \[1, 4\]"):
        check_model_parity("alexnet", REF, options=options, batch=5)


def test_layerwise_marks_the_layer_tensors_on_top_of_the_options():
    report = check_model_parity("alexnet", REF, options=BuildOptions(small=True, progress=False), layerwise=True)
    assert report.passed and len(report.layers) > 3 and report.meta["layerwise_via"] == "debug tensors"


def test_options_and_their_keywords_together_is_one_sentence():
    with pytest.raises(ValueError) as e:
        check_model_parity("alexnet", REF, options=BuildOptions(small=True), precision="fp16", cross_check=True)
    assert str(e.value) == ("check_model_parity: pass either options=BuildOptions(...) or keyword arguments "
                            "(cross_check, precision), not both")
    with pytest.raises(ValueError, match=r"^check_model_parity: options must be a BuildOptions, got dict$"):
        check_model_parity("alexnet", REF, options={"precision": "fp16"})


def test_a_given_engine_must_have_the_options_precision(tmp_path):
    path, _ = build_and_save("alexnet", _weights(tmp_path), tmp_path / "a.engine", REF,
                             options=BuildOptions(small=True, progress=False, profiles=(BatchProfile(1, 2, 4),)))
    [report] = check_model_parity_profiles("alexnet", REF, engine=path, options=BuildOptions(small=True),
                                           weights=_weights(tmp_path))
    assert report.passed and report.meta["profile"] == 0 and report.meta["batch"] == 2  # the profile's opt
    with pytest.raises(ValueError, match=r"engine .*a\.engine computes in fp32 but --precision fp16 was requested"):
        check_model_parity_profiles("alexnet", REF, engine=path, options=BuildOptions(precision="fp16", small=True))


def _weights(root):
    from trtbuild.models import registry
    from trtbuild.weights import export_weights

    path = root / "w.wts"
    if not path.exists():
        export_weights(registry.get_torch_model("alexnet", seed=0, small=True), path)
    return path


# -- ParityOptions ---------------------------------------------------------------------------------

def test_parity_options_make_the_same_report_as_their_keywords():
    kw = dict(seed=3, value_range=(-2.0, 0.5), distribution="normal", atol=1e-3, rtol=1e-3)
    by_kw = check_model_parity("alexnet", REF, small=True, **kw)
    by_parity = check_model_parity("alexnet", REF, small=True, parity=ParityOptions(**kw))
    assert _rows(by_parity) == _rows(by_kw) and by_parity.meta["inputs"] == "normal(mean=-0.75, std=1.25)"
    assert by_parity.meta["seed"] == 3 and by_parity.outputs[0].atol == 1e-3
    other_seed = check_model_parity("alexnet", REF, small=True, parity=ParityOptions(**{**kw, "seed": 4}))
    assert _rows(other_seed) != _rows(by_kw)  # the seed reaches the inputs


@pytest.mark.parametrize("kwargs, message", [
    (dict(distribution="cauchy"), r"distribution 'cauchy' is not one of uniform, normal, large"),
    (dict(value_range=(1.0, -1.0)), r"value range needs lo < hi, got \[1.0, -1.0\]"),
    (dict(value_range=(0, 1, 2)), r"parity option value_range must be \(lo, hi\) numbers, got \(0, 1, 2\)"),
    (dict(large_scale=0.0), r"large_scale \(--scale\) must be a positive finite number, got 0.0"),
    (dict(atol=-1), r"atol must be a finite number >= 0, got -1"),
    (dict(rtol="tight"), r"rtol must be a number >= 0, got 'tight'"),
    (dict(seed=1.5), r"parity option seed must be an integer, got 1.5"),
    (dict(layerwise="yes"), r"parity option layerwise must be True or False, got 'yes'"),
    (dict(layerwise_via="logs"), r"layerwise_via 'logs' is not one of 'debug tensors', 'unfused debug tensors'"),
])
def test_parity_options_refuse_bad_values_in_one_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message) as e:
        ParityOptions(**kwargs)
    assert "\n" not in str(e.value)


def test_a_bad_tolerance_is_refused_before_anything_is_built(monkeypatch):
    import trtbuild.engine as engine

    monkeypatch.setattr(engine, "build_model", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(ValueError, match=r"^atol must be a finite number >= 0, got -1"):
        check_model_parity("alexnet", REF, small=True, atol=-1)


def test_parity_and_its_keywords_together_is_one_sentence():
    with pytest.raises(ValueError) as e:
        check_model_parity("alexnet", REF, parity=ParityOptions(), seed=2, layerwise=True)
    assert str(e.value) == ("check_model_parity: pass either parity=ParityOptions(...) or keyword arguments "
                            "(layerwise, seed), not both")

"""BuildOptions (checked when made), the explicit entry points build_spec_plan / build_network_plan,
and the typed Sidecar / BuildInfo: build_plan's keyword arguments and a BuildOptions give the same
plan and sidecar, and a sidecar written by trtbuild before these types existed still loads."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import (BatchProfile, BuildInfo, BuildOptions, EngineFileError, ShapeProfile, Sidecar,
                             build_and_save, build_network_plan, build_plan, export_seeded_weights, load_engine,
                             make_sidecar, read_sidecar, save_engine)
from trtbuild.engine.records import TensorRecord
from trtbuild.engine.serialize import sidecar_backend, sidecar_path
from trtbuild.engine.sidecar import SIDECAR_FORMAT

#: written by trtbuild at commit 8d32275 (before BuildOptions/Sidecar):
#: build_and_save("alexnet", "alexnet-small.wts", ..., "fp16", small=True, batch=(1, 2, 4)) on the reference
OLD_SIDECAR = Path(__file__).parent / "data" / "sidecar_v1_alexnet_small_fp16.json"


# -- BuildOptions ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(precision="fp64"), r"precision 'fp64' is not supported; choose one of fp32, fp16, bf16, int8, fp8"),
    (dict(profiles=(BatchProfile(1, 2, 4), ShapeProfile((2, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8)))),
     r"optimization profiles must all be batch ranges \(BatchProfile, --batch\) or all input shapes"),
    (dict(profiles=((1, 2, 4),)), r"profiles must be BatchProfile or ShapeProfile objects, got \(1, 2, 4\)"),
    (dict(refit="yes"), r"build option refit must be one of 'off', 'identical', 'any' \(or True / False\), got 'yes'"),
    (dict(strip_weights=1), r"build option strip_weights must be True or False, got 1"),
    (dict(workspace=-1), r"workspace must be a number of bytes \(an integer >= 0\), got -1"),
    (dict(workspace=1.5), r"workspace must be a number of bytes"),
    (dict(fp32_io="no"), r"build option fp32_io must be True or False, got 'no'"),
    (dict(progress="yes"), r"build option progress must be True, False or None, got 'yes'"),
    (dict(extra_outputs="conv1"), r"extra_outputs must be a list of tensor names, not the string 'conv1'"),
    (dict(debug_tensors=[1]), r"debug_tensors must be tensor names \(strings\), got \[1\]"),
    (dict(timing_cache=3), r"timing_cache must be a file path, got 3"),
    (dict(targets="sm90"), r"target 'sm90' \(compute capability 9.0\) is not one TensorRT-RTX builds for"),
    (dict(quant="int8"), r"quant must be a trtbuild.quant.QuantPlan, got str"),
    (dict(input_shape=(1, 3, 8, 8), profiles=(ShapeProfile((1, 3, 8), (1, 3, 8), (1, 3, 8)),)),
     r"profile shapes \(1, 3, 8\), \(1, 3, 8\), \(1, 3, 8\) must all have the input's rank 4"),
])
def test_build_options_refuse_bad_values_in_one_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        BuildOptions(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("make, message", [
    (lambda: BatchProfile(4, 2, 8), r"batch profile needs 1 <= min <= opt <= max, got min=4, opt=2, max=8"),
    (lambda: ShapeProfile((1, 3, 64), (1, 3, 32), (1, 3, 128)),
     r"profile needs 1 <= min <= opt <= max in every dim, got min \(1, 3, 64\), opt \(1, 3, 32\)"),
    (lambda: BuildOptions.from_kwargs(batch=(1, 2, 4), profile=((1, 3), (1, 3), (2, 3))),
     r"pass either batch or profile, not both"),
    (lambda: BuildOptions.from_kwargs(batch=(1, "two", 4)), r"batch must be \(min, opt, max\) integers"),
])
def test_profiles_refuse_bad_ranges(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_unknown_keyword_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'precison'"):
        build_plan(trt, _define, input_shape=(1, 2, 4, 4), precison="fp16")


def test_from_kwargs_maps_batch_and_profile_to_typed_profiles():
    opts = BuildOptions.from_kwargs(batch=[1, 2, 4], timing_cache="t.cache", targets="sm86,SM_89",
                                    extra_outputs=["a", "b"])
    assert opts.profiles == (BatchProfile(1, 2, 4),) and opts.batch == (1, 2, 4) and opts.shape_profile is None
    assert opts.timing_cache == Path("t.cache") and opts.targets == ("8.6", "8.9")
    assert opts.extra_outputs == ("a", "b")
    shaped = BuildOptions.from_kwargs(profile=([1, 3, 8, 8], [1, 3, 16, 16], [2, 3, 32, 32]))
    assert shaped.profiles == (ShapeProfile((1, 3, 8, 8), (1, 3, 16, 16), (2, 3, 32, 32)),)
    assert shaped.shape_profile.input_shape() == (-1, 3, -1, -1) and shaped.batch is None
    with pytest.raises(AttributeError):
        shaped.precision = "fp16"  # frozen


# -- the entry points --------------------------------------------------------------------------

W = np.linspace(-1, 1, 4 * 2 * 3 * 3, dtype=np.float32).reshape(4, 2, 3, 3)


def _define(network, x):
    conv = network.add_convolution_nd(x, 4, (3, 3), trt.Weights(W.astype(np.float16) if x.dtype == trt.float16
                                                                 else W), trt.Weights())
    conv.padding_nd = (1, 1)
    conv.name = "conv"
    conv.get_output(0).name = "conv_out"
    relu = network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    relu.name = "relu"
    return {"y": relu.get_output(0)}


def test_options_or_both_is_refused_in_one_sentence():
    with pytest.raises(ValueError, match=r"build_plan: pass either options=BuildOptions\(\.\.\.\) or keyword "
                                         r"arguments \(precision\), not both"):
        build_plan(trt, _define, BuildOptions(input_shape=(1, 2, 4, 4)), precision="fp16")


def test_keyword_arguments_and_options_build_the_same_plan_and_sidecar():
    kwargs = dict(input_shape=(1, 2, 4, 4), precision="fp16", batch=(1, 2, 3), extra_outputs=["conv_out"],
                  network_name="tiny", progress=False, workspace=1 << 20)
    by_kwargs = build_plan(trt, _define, **kwargs)
    options = BuildOptions(input_shape=(1, 2, 4, 4), precision="fp16", profiles=(BatchProfile(1, 2, 3),),
                           extra_outputs=("conv_out",), network_name="tiny", progress=False, workspace=1 << 20)
    by_options = build_plan(trt, _define, options)
    direct = build_network_plan(_define, trt, options)
    assert bytes(by_kwargs) == bytes(by_options) == bytes(direct)
    assert isinstance(by_options.info, BuildInfo)
    assert by_kwargs.info.to_dict() == by_options.info.to_dict() == direct.info.to_dict()
    # what the info says, checked against the request (not against another build)
    info = by_options.info
    assert (info.network, info.precision, info.model, info.small, info.workspace) == ("tiny", "fp16", None, None,
                                                                                      1 << 20)
    assert info.profile == {"input": {"min": [1, 2, 4, 4], "opt": [2, 2, 4, 4], "max": [3, 2, 4, 4]}}
    assert info.extra_outputs == {"conv_out": "conv_out"} and info.model_outputs == ["y"]
    side_k, side_o = make_sidecar(trt, by_kwargs), make_sidecar(trt, by_options)
    assert {**side_k.to_dict(), "created": None} == {**side_o.to_dict(), "created": None}
    # the engine computes what numpy computes (float64) from the same weights
    x = torch.linspace(-1, 1, 2 * 2 * 16).reshape(2, 2, 4, 4)
    from trtbuild.engine import Engine

    got = Engine(by_options, trt).run({"input": x})["y"].cpu().double().numpy()
    xp = np.pad(x.half().double().numpy(), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = W.astype(np.float16).astype(np.float64)
    want = np.maximum(np.einsum("nchwij,ocij->nohw", np.lib.stride_tricks.sliding_window_view(
        xp, (3, 3), axis=(2, 3)), w), 0)
    np.testing.assert_allclose(got, want, atol=2e-2, rtol=1e-2)


def test_a_spec_is_built_the_same_by_keywords_and_options_as_by_the_trtbuild_before_them(tmp_path):
    """The sidecar of the same build as OLD_SIDECAR's, made today with a BuildOptions and with build_plan's
    keyword arguments, equals the old one key by key (in the same order), the creation time and the
    engine's checksum and size aside (the reference plan format has changed since, and the plan now holds the
    names of alexnet's weights, trtbuild.layers.weight_names); the two engines of today are the same bytes (the
    reference plan is deterministic)."""
    old = json.loads(OLD_SIDECAR.read_text())
    weights = tmp_path / "alexnet-small.wts"
    export_seeded_weights("alexnet", weights, seed=0, small=True)
    options = BuildOptions(precision="fp16", small=True, profiles=(BatchProfile(1, 2, 4),), progress=False)
    path, side = build_and_save("alexnet", weights, tmp_path / "a.engine", trt, options=options)
    path_k, side_k = build_and_save("alexnet", weights, tmp_path / "b.engine", trt, "fp16", small=True,
                                    batch=(1, 2, 4), progress=False)
    for p in (path, path_k):
        new = json.loads(sidecar_path(p).read_text())
        assert list(new) == list(old)
        differ = {k for k in old if new[k] != old[k]}
        assert differ <= {"created", "weights", "engine_sha256", "engine_bytes"} and "weights" in differ, differ
        assert new["weights"]["sha256"] == old["weights"]["sha256"]
        assert new["engine_sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert path.read_bytes() == path_k.read_bytes()


# -- Sidecar / BuildInfo -----------------------------------------------------------------------

def test_old_sidecar_reads_as_typed_and_as_a_dict():
    text = OLD_SIDECAR.read_text()
    side = Sidecar.from_json(text, source=OLD_SIDECAR)
    assert side.schema_version == SIDECAR_FORMAT == 1 and side.backend == "reference"
    assert side.build.precision == "fp16" and side.build.small is True and side.build.model == "alexnet"
    assert side.build.weight_tensors == 16 and side.engine_bytes == 248964
    assert side.weights_path == "alexnet-small.wts"
    # read like the dict it was
    raw = json.loads(text)
    assert side == raw and dict(side) == raw and side["precision"] == "fp16" and "targets" not in side
    assert side.get("targets") is None and side.get("targets", []) == [] and len(side) == len(raw)
    # written back as it was read, key order included
    assert side.to_json() == json.dumps(raw, indent=2) + "\n"


def test_sidecar_round_trips_through_json():
    plan = build_plan(trt, _define, input_shape=(1, 2, 4, 4), precision="fp16", progress=False,
                      debug_tensors=["conv_out"])
    side = make_sidecar(trt, plan, note="kept")
    again = Sidecar.from_json(side.to_json())
    assert again == side and again.to_dict() == side.to_dict()
    assert {k: v for k, v in again.build.items() if k != "note"} == plan.info
    assert again.build.debug_tensors == {"conv_out": "conv_out"} and again.build.precision == "fp16"
    assert again.build.extra == {"note": "kept"} and again["note"] == "kept"
    assert again.to_json() == side.to_json()


def test_a_sidecar_without_a_format_version_or_newer_keys_loads(tmp_path):
    """A sidecar of a trtbuild older than the "format", "backend", "plugins" and "build_phases" keys
    loads, is format 1 and reads as TensorRT-built where it names no backend; what is absent stays absent."""
    raw = json.loads(OLD_SIDECAR.read_text())
    for key in ("format", "backend", "plugins", "build_phases"):
        del raw[key]
    side = Sidecar.from_json(json.dumps(raw), source="old.engine.json")
    assert side.schema_version == 1 and side.to_dict() == raw and "format" not in side.to_json()
    assert side.build.plugins is None and sidecar_backend(side) == "reference"  # tensorrt_version says it
    raw["tensorrt_version"] = "10.16.1.11"
    assert sidecar_backend(Sidecar.from_dict(raw)) == "tensorrt"
    # and an engine with it loads: its checks read the typed fields
    plan = build_plan(trt, _define, input_shape=(1, 2, 4, 4), progress=False)
    path = save_engine(tmp_path / "m.engine", plan, make_sidecar(trt, plan))
    written = json.loads(sidecar_path(path).read_text())
    for key in ("format", "backend", "plugins", "build_phases"):
        del written[key]
    sidecar_path(path).write_text(json.dumps(written))
    engine = load_engine(path, trt)
    assert engine.sidecar == written and engine.sidecar.build.model_outputs == ["y"]


def test_a_sidecar_of_a_future_format_is_refused_naming_the_file(tmp_path):
    plan = build_plan(trt, _define, input_shape=(1, 2, 4, 4), progress=False)
    path = save_engine(tmp_path / "m.engine", plan, make_sidecar(trt, plan))
    raw = json.loads(sidecar_path(path).read_text())
    sidecar_path(path).write_text(json.dumps({**raw, "format": 2, "refit": True}))
    with pytest.raises(EngineFileError, match=rf"engine sidecar {sidecar_path(path)} has format version 2 but "
                                              r"trtbuild \S+ reads format 1 only; rebuild the engine") as info:
        read_sidecar(path)
    assert "\n" not in str(info.value)
    with pytest.raises(EngineFileError, match="has format version 2"):
        load_engine(path, trt)
    with pytest.raises(EngineFileError, match=r"engine sidecar x.json lacks 'tensorrt_version', so it is not a "
                                              r"trtbuild sidecar"):
        Sidecar.from_json('{"model": "alexnet"}', source="x.json")
    with pytest.raises(EngineFileError, match=r"engine sidecar x.json is not valid JSON"):
        Sidecar.from_json("{", source="x.json")


def test_a_dict_sidecar_is_still_accepted_where_one_is_passed(tmp_path):
    """save_engine and check_compatible take the dicts users built before the types existed."""
    from trtbuild.engine import check_compatible

    plan = build_plan(trt, _define, input_shape=(1, 2, 4, 4), progress=False)
    side = dict(make_sidecar(trt, plan))
    assert isinstance(side, dict)
    check_compatible(side, trt, "m.engine")
    path = save_engine(tmp_path / "m.engine", plan, side)
    assert read_sidecar(path).to_dict() == {**side, "engine_sha256": read_sidecar(path).engine_sha256}
    build = load_engine(path, trt).sidecar.build
    assert build["outputs"] == [{"name": "y", "shape": [1, 4, 4, 4], "dtype": "FLOAT"}]  # the JSON value
    assert build.outputs == (TensorRecord("y", (1, 4, 4, 4), "FLOAT"),)  # the typed one


def test_the_names_build_py_had_still_import_from_it():
    """build.py was split into options, define, network and records; its public names stay importable."""
    import trtbuild.engine.build as build
    from trtbuild.engine import define, errors, network, options

    assert build.BuildError is errors.BuildError and build.serialize_network is network.serialize_network
    assert build.definition_step is define.definition_step and build.check_profile is options.check_profile
    for name in ("PRECISIONS", "QUANTIZED", "Plan", "new_network", "tensors_by_name", "batch_profile_shapes",
                 "check_batch", "check_precision", "check_quant", "check_spec_outputs", "profile_input_shape",
                 "dtype_name", "describe_tensor", "quant_info", "DefinedNetwork", "make_logger"):
        assert hasattr(build, name), name


def test_build_model_takes_options_or_keywords_not_both():
    from trtbuild.engine import build_model

    with pytest.raises(ValueError, match=r"build_model: pass either options=BuildOptions\(\.\.\.\) or precision, "
                                         r"small, not both"):
        build_model("alexnet", "never-read.wts", trt, "fp16", options=BuildOptions(), small=True)

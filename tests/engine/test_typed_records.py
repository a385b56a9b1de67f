"""The values inside BuildInfo / NetworkInfo are typed (TensorRecord, ProfileInfo of ShapeRanges), their
JSON is the sidecar's as ever, and the records' Mapping view still gives the JSON values."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import trtbuild.reference as ref
from trtbuild.engine import BuildInfo, Sidecar, build_plan, load_engine, make_sidecar, save_engine
from trtbuild.engine.options import BatchProfile, ShapeProfile, _show_profile, format_range
from trtbuild.engine.records import NetworkInfo, ProfileInfo, ShapeRange, TensorRecord

#: written by trtbuild at commit 8d32275: alexnet small fp16, batch (1, 2, 4), on the reference
OLD_SIDECAR = Path(__file__).parent / "data" / "sidecar_v1_alexnet_small_fp16.json"


def _define(network, x):
    w = np.linspace(-1, 1, 4 * 2 * 9, dtype=np.float32)
    conv = network.add_convolution_nd(x, 4, (3, 3), ref.Weights(w), ref.Weights())
    conv.name = "conv"
    relu = network.add_activation(conv.get_output(0), ref.ActivationType.RELU)
    relu.name = "relu"
    return {"y": relu.get_output(0)}


def test_the_old_sidecar_reads_typed_and_writes_back_byte_for_byte():
    text = OLD_SIDECAR.read_text()
    build = Sidecar.from_json(text, source=OLD_SIDECAR).build
    assert build.inputs == (TensorRecord("input", (-1, 3, 96, 96), "FLOAT"),)  # the values in the file
    assert build.outputs[0].name == "logits" and build.outputs[0].shape == (-1, 10)
    assert build.profile["input"] == ShapeRange((1, 3, 96, 96), (2, 3, 96, 96), (4, 3, 96, 96))
    assert build.profile["input"].opt == (2, 3, 96, 96) and build.all_profiles == [build.profile]
    raw = json.loads(text)
    assert build["inputs"][0]["shape"] == [-1, 3, 96, 96] and build["profile"] == raw["profile"]  # JSON values
    assert Sidecar.from_json(text).to_json() == json.dumps(raw, indent=2) + "\n"


def test_a_value_of_another_form_is_kept_and_written_back_unchanged():
    raw = json.loads(OLD_SIDECAR.read_text())
    raw["inputs"] = [{"name": "input", "shape": "dynamic", "dtype": "FLOAT", "note": "hand-edited"}]
    raw["profile"] = ["not", "a", "profile"]
    side = Sidecar.from_dict(raw)
    assert side.build.inputs[0].shape == "dynamic" and side.build.inputs[0].extra == {"note": "hand-edited"}
    assert side.build.profile == ["not", "a", "profile"] and side.to_dict() == raw


def test_a_build_records_typed_tensors_and_profiles_that_match_the_engine(tmp_path):
    plan = build_plan(ref, _define, input_shape=(1, 2, 6, 6), batch=(1, 2, 3), progress=False)
    info = plan.info
    assert isinstance(info.inputs[0], TensorRecord) and isinstance(info.profile, ProfileInfo)
    path = save_engine(tmp_path / "e.engine", plan, make_sidecar(ref, plan))
    engine = load_engine(path, ref)
    for t in (*info.inputs, *info.outputs):
        assert t.shape == tuple(engine.tensors[t.name].shape)  # the engine's own (-1 where dynamic)
    assert info.outputs[0] == {"name": "y", "shape": [-1, 4, 4, 4], "dtype": "FLOAT"}  # 6 - 3 + 1 = 4
    (lo, hi), = engine.profiles[0].values()
    assert (info.profile["input"].min, info.profile["input"].max) == (tuple(lo), tuple(hi)) == ((1, 2, 6, 6),
                                                                                               (3, 2, 6, 6))
    assert info.profile["input"].opt == (2, 2, 6, 6)
    assert json.loads(path.with_name("e.engine.json").read_text())["profile"] == {
        "input": {"min": [1, 2, 6, 6], "opt": [2, 2, 6, 6], "max": [3, 2, 6, 6]}}


def test_records_made_from_dicts_or_typed_values_are_equal():
    tensors = [{"name": "x", "shape": [1, 3], "dtype": "HALF"}]
    profile = {"x": {"min": [1, 3], "opt": [1, 3], "max": [2, 3]}}
    from_json = NetworkInfo(network="n", inputs=tensors, profile=profile)
    typed = NetworkInfo(network="n", inputs=(TensorRecord("x", (1, 3), "HALF"),),
                        profile=ProfileInfo({"x": ShapeRange((1, 3), (1, 3), (2, 3))}))
    assert from_json == typed and from_json.to_dict() == typed.to_dict() and typed["inputs"] == tensors
    assert BuildInfo.of(typed).inputs == typed.inputs and BuildInfo.of(typed)["profile"] == profile
    assert typed.profile == profile and typed.profile != {"x": {"min": [1, 3], "opt": [1, 3], "max": [3, 3]}}
    with pytest.raises(dataclasses.FrozenInstanceError):
        typed.inputs[0].shape = (2, 3)


def test_format_range_writes_the_profile_syntax():
    assert format_range((1, 3, 224, 224), (8, 3, 224, 224)) == "1x3x224x224..8x3x224x224"
    assert format_range([1, 3], [2, 3]) == "1x3..2x3" and format_range(1, 8) == "1..8"
    assert _show_profile(ShapeProfile((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 16, 16))) == "1x3x8x8..4x3x16x16"
    assert _show_profile(BatchProfile(1, 2, 4)) == "1..4"

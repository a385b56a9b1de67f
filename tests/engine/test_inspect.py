"""trtbuild.engine.inspect: EngineReports of engines built here, the diff of two, and the parser of both of
TensorRT's inspector JSON schemas (fixtures from NVIDIA's repository and documentation: helpers/inspector_json.py).

Expected values are what the tests built (the network's names, shapes, types, profile and targets written out
here; the weight names are the PyTorch state_dict keys of the weight file), never read back from the report code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trtbuild.reference as trt
from trtbuild.engine.inspect import InspectError, inspect_engine
from trtbuild.engine.inspect_diff import diff_reports
from trtbuild.engine.inspect_json import InspectorJSONError, dtype_name, parse_engine_information
from trtbuild.weights.formats import read_weights

from helpers.inspect_engines import build_inspect_engines, conv_relu_plan
from helpers.inspector_json import TENSORRT_10_JSON, TENSORRT_11_IO_JSON


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_inspect_engines(tmp_path_factory.mktemp("inspect"), "sm86,sm89")


def _network_plan(flags=(), verbosity=trt.ProfilingVerbosity.DETAILED):
    """A two-layer reference network (conv "stem" with named weights, relu "act") built with `flags`."""
    return conv_relu_plan(trt.Logger(), verbosity, flags=flags, name_bias=True)


def test_reference_fp32_report_matches_the_build(built):
    r = inspect_engine(built / "fp32.engine")
    assert (r.backend, r.loaded, r.targets, r.layer_source) == ("reference", True, ("any",), "plan")
    assert r.plan_bytes == (built / "fp32.engine").stat().st_size
    io = {t.name: t for t in r.io}
    assert (io["input"].mode, io["input"].shape, io["input"].dtype) == ("input", (-1, 3, 64, 64), "FLOAT")
    assert [(p.min, p.opt, p.max) for p in io["input"].profiles] == [((1, 3, 64, 64), (2, 3, 64, 64),
                                                                      (4, 3, 64, 64))]
    assert (io["logits"].mode, io["logits"].shape) == ("output", (-1, 10))
    assert r.num_profiles == 1 and r.refittable is False and r.stripped is False
    assert r.num_layers == len(r.layers) and r.layers[0].name == "conv1" and r.layers[0].type == "CONVOLUTION"
    assert r.layers[0].inputs == ("input",) and r.layers[-1].outputs == ("logits",)
    assert {x.precision for x in r.layers} == {("FLOAT",)}
    # every weight is named after a key of the PyTorch state_dict it came from (a conv+BN fold takes the conv's
    # weight and the BN's bias names)
    state_dict, _ = read_weights(built / "weights" / "resnet18-small.wts")
    named = {w.name for w in r.weights}
    assert None not in named and named <= set(state_dict)
    assert {"conv1.weight", "bn1.bias", "fc.weight", "fc.bias"} <= named and "bn1.weight" not in named
    assert r.sidecar["precision"] == "fp32" and r.sidecar["model"] == "resnet18"


def test_reference_fp16_layers_compute_in_half(built):
    r = inspect_engine(built / "fp16.engine")
    layers = {x.name: x for x in r.layers}
    assert layers["conv1"].precision == ("HALF",)
    assert layers["input/to_fp16"].type == "CAST" and layers["input/to_fp16"].precision == ("HALF",)
    assert [t.dtype for t in r.io] == ["FLOAT", "FLOAT"]  # float32 I/O with casts inside (the default)
    assert r.precision_counts()["HALF"] > r.precision_counts()["FLOAT"]


def test_diff_fp32_fp16_shows_precision_and_profile_changes(built):
    diffs = diff_reports(inspect_engine(built / "fp32.engine"), inspect_engine(built / "fp16.engine"))
    by_item = {(d.section, d.item): d for d in diffs}
    assert (by_item[("layer", "conv1 precision")].a, by_item[("layer", "conv1 precision")].b) == (("FLOAT",),
                                                                                                 ("HALF",))
    assert by_item[("layer", "input/to_fp16")].change == "added"
    assert by_item[("io", "input shape")].b == (1, 3, 64, 64)
    assert by_item[("profile", "input")].b == "static"
    assert by_item[("sidecar", "precision")].a == "fp32" and by_item[("sidecar", "precision")].b == "fp16"
    assert not any(d.section == "weight" for d in diffs)  # the same names: the same state_dict


def test_diff_of_an_engine_with_itself_and_with_a_copy_is_empty(built, tmp_path):
    a = inspect_engine(built / "fp32.engine")
    assert diff_reports(a, inspect_engine(built / "fp32.engine")) == []
    copy = tmp_path / "copy.engine"
    copy.write_bytes((built / "fp32.engine").read_bytes())
    side = json.loads((built / "fp32.engine.json").read_text())
    side["created"] = "2000-01-01T00:00:00+00:00"  # a later build of the same: only the time differs
    (tmp_path / "copy.engine.json").write_text(json.dumps(side))
    assert diff_reports(a, inspect_engine(copy)) == []


def test_rtx_engine_without_gpu_is_described_from_its_sidecar(built):
    r = inspect_engine(built / "rtx.engine")
    assert r.backend == "tensorrt-rtx" and r.loaded is False
    assert "cannot deserialize it here" in r.note and "no CUDA GPU is visible" in r.note
    assert r.targets == ("8.6", "8.9")
    assert [(t.name, t.mode, t.shape, t.dtype) for t in r.io] == [("input", "input", (1, 3, 64, 64), "FLOAT"),
                                                                  ("logits", "output", (1, 10), "FLOAT")]
    assert r.layers is None and r.refittable is None and r.version == r.sidecar["tensorrt_version"]


def test_refittable_stripped_plan_names_its_weights(tmp_path):
    plan = _network_plan((trt.BuilderFlag.REFIT, trt.BuilderFlag.STRIP_PLAN))
    (tmp_path / "s.engine").write_bytes(bytes(plan))  # no sidecar
    r = inspect_engine(tmp_path / "s.engine")
    assert r.sidecar is None and r.refittable is True and r.stripped is True
    assert {(w.name, w.layer, w.key, w.refittable, w.stripped) for w in r.weights} == {
        ("stem.weight", "stem", "Weights", True, True), ("stem.bias", "stem", "Bias", True, True)}
    plain = _network_plan()
    (tmp_path / "p.engine").write_bytes(bytes(plain))
    p = inspect_engine(tmp_path / "p.engine")
    assert p.refittable is False and not any(w.refittable or w.stripped for w in p.weights)
    changes = {(d.section, d.item) for d in diff_reports(p, r)}
    assert {("engine", "refittable"), ("engine", "stripped"), ("weight", "stem.weight refittable"),
            ("weight", "stem.weight stripped")} <= changes


def test_parser_reads_the_reference_inspector_like_its_plan(tmp_path):
    """The reference's DETAILED inspector JSON (TensorRT 11.x's schema) parses to the layers read from its plan."""
    plan = _network_plan()
    (tmp_path / "d.engine").write_bytes(bytes(plan))
    from_plan = inspect_engine(tmp_path / "d.engine")
    engine = trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan)
    info = parse_engine_information(engine.create_engine_inspector().get_engine_information(
        trt.LayerInformationFormat.JSON))
    assert info.schema == "11.x"
    assert [(x.name, x.type, x.precision, x.inputs, x.outputs) for x in info.layers] == [
        ("stem", "CONVOLUTION", ("FLOAT",), ("x",), ("stem_output",)), ("act", "ACTIVATION", ("FLOAT",),
                                                                       ("stem_output",), ("y",))]
    assert [(x.name, x.type, x.precision, x.inputs, x.outputs) for x in from_plan.layers] == \
        [(x.name, x.type, x.precision, x.inputs, x.outputs) for x in info.layers]
    assert [(w.key, w.type, w.count, w.name) for w in info.layers[0].weights] == [
        ("Weights", "FLOAT", 216, "stem.weight"), ("Bias", "FLOAT", 8, "stem.bias")]
    assert [(t.name, t.mode, t.shape, t.dtype) for t in info.io] == [("x", "input", (2, 3, 5, 5), "FLOAT"),
                                                                     ("y", "output", (2, 8, 3, 3), "FLOAT")]


def test_parser_tensorrt_10_schema_from_nvidia():
    info = parse_engine_information(TENSORRT_10_JSON)
    assert info.schema == "10.x"
    assert [(t.name, t.mode) for t in info.io] == [("input.1", ""), ("191", "")]  # 10.x: names only
    reformat, conv, last = info.layers
    assert (conv.name, conv.type, conv.precision) == ("Conv_0 + Relu_1", "CaskConvolution", ("HALF",))
    assert [(w.key, w.type, w.count, w.name) for w in conv.weights] == [("Weights", "HALF", 9408, None),
                                                                       ("Bias", "HALF", 64, None)]
    assert reformat.inputs == ("input.1",) and reformat.precision == ("HALF",)
    assert last.outputs == ("191",) and last.precision == ("FLOAT",)  # "Row major linear FP32"


def test_parser_tensorrt_11_schema_from_nvidia():
    info = parse_engine_information(TENSORRT_11_IO_JSON)
    assert info.schema == "11.x"
    assert [x.name for x in info.layers] == ["conv1", "relu1", "fc"] and info.layers[0].type is None
    inp, out = info.io
    assert (inp.name, inp.mode, inp.shape, inp.dtype, inp.shape_tensor) == ("input_0", "input", (1, 3, 224, 224),
                                                                             "FLOAT", False)
    assert [(p.min, p.opt, p.max) for p in inp.profiles] == [((1, 3, 224, 224),) * 3]
    assert inp.format == "Row major linear FP32 format (kLINEAR)"
    assert (out.name, out.mode, out.shape, out.profiles) == ("output_0", "output", (1, 1000), ())


@pytest.mark.parametrize("text, fmt", [("Half", "HALF"), ("Channel major FP16 format where channel % 8 == 0", "HALF"),
                                       ("Row major linear FP32", "FLOAT"), ("BFloat16", "BF16"), ("UInt8", "UINT8"),
                                       ("Row major Int8 format", "INT8"), ("Unknown", None)])
def test_dtype_names(text, fmt):
    assert dtype_name(text) == fmt


@pytest.mark.parametrize("text, message", [
    ("not json", "is not JSON"), ("[1]", "no \"Layers\" list"),
    ('{"Layers": []}', "neither \"I/O Tensors\" (TensorRT 11.x) nor \"Bindings\" (TensorRT 10.x)"),
    ('{"Layers": [7], "Bindings": []}', "layer 0 of the inspector's JSON is neither a name nor an object")])
def test_parser_refuses_other_json(text, message):
    with pytest.raises(InspectorJSONError) as e:
        parse_engine_information(text)
    assert message in str(e.value)


def test_bad_files_are_refused_in_one_sentence(built, tmp_path):
    with pytest.raises(InspectError, match=r"^engine file .*nope.engine does not exist$"):
        inspect_engine(tmp_path / "nope.engine")
    (tmp_path / "notes.txt").write_text("hello, world\n")
    with pytest.raises(InspectError, match=r"notes.txt is not an engine: it starts neither like a trtbuild "
                                           r"reference plan nor like a TensorRT or TensorRT-RTX engine$"):
        inspect_engine(tmp_path / "notes.txt")
    (tmp_path / "empty.engine").write_bytes(b"")
    with pytest.raises(InspectError, match="is empty, so it is not an engine"):
        inspect_engine(tmp_path / "empty.engine")
    data = (built / "fp32.engine").read_bytes()
    (tmp_path / "cut.engine").write_bytes(data[:len(data) // 2])  # no sidecar: the plan's own checks
    with pytest.raises(InspectError, match="cut.engine could not be loaded by .*truncated"):
        inspect_engine(tmp_path / "cut.engine")
    (tmp_path / "cut2.engine").write_bytes(data[:1000])
    (tmp_path / "cut2.engine.json").write_text((built / "fp32.engine.json").read_text())
    with pytest.raises(InspectError, match=r"does not match the sha256 in its sidecar \(it has 1000 bytes, the "
                                           r"sidecar says \d+\), so it was changed or truncated after the build"):
        inspect_engine(tmp_path / "cut2.engine")


def test_the_tensorrt_route_on_the_reference_api(tmp_path):
    """inspector_layers (how TensorRT and TensorRT-RTX engines are read: inspector JSON + Refitter) run on the
    reference, which answers the same calls: the layers of the plan, the Refitter's names, stripped ones missing."""
    from trtbuild.engine.inspect import inspector_layers

    logger = trt.Logger()
    for flags, refittable in (((trt.BuilderFlag.REFIT, trt.BuilderFlag.STRIP_PLAN), True), ((), False)):
        plan = _network_plan(flags)
        engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
        layers, weights, stripped = inspector_layers(engine, trt, logger)
        assert [(x.name, x.type, x.precision) for x in layers] == [("stem", "CONVOLUTION", ("FLOAT",)),
                                                                   ("act", "ACTIVATION", ("FLOAT",))]
        assert stripped is refittable
        if refittable:  # a Refitter names them; the layer holding each is not its to say
            assert {(w.name, w.refittable, w.stripped) for w in weights} == {("stem.weight", True, True),
                                                                            ("stem.bias", True, True)}
        else:  # the inspector's named weights
            assert {(w.name, w.layer, w.key, w.refittable) for w in weights} == {
                ("stem.weight", "stem", "Weights", False), ("stem.bias", "stem", "Bias", False)}
    names_only = trt.Runtime(logger).deserialize_cuda_engine(_network_plan(
        verbosity=trt.ProfilingVerbosity.LAYER_NAMES_ONLY))
    layers, weights, _ = inspector_layers(names_only, trt, logger)
    assert [(x.name, x.type, x.precision) for x in layers] == [("stem", None, ()), ("act", None, ())]
    assert weights == ()


def test_diff_with_an_engine_not_loaded_says_unknown_once(built):
    diffs = diff_reports(inspect_engine(built / "fp32.engine"), inspect_engine(built / "rtx.engine"))
    by_item = {(d.section, d.item): d for d in diffs}
    assert (by_item[("engine", "backend")].a, by_item[("engine", "backend")].b) == ("reference", "tensorrt-rtx")
    assert by_item[("engine", "targets")].b == ("8.6", "8.9")
    assert by_item[("engine", "refittable")].b == "unknown (not loaded)"
    assert by_item[("layer", "list")].b == "unknown (not loaded)"
    assert not any(d.section == "weight" for d in diffs)  # not "every weight removed"
    assert by_item[("sidecar", "targets")].change == "added"

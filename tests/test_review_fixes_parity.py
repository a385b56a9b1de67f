"""Review findings on parity, calibration and own models (after issues 12-14): a sidecar cannot
loosen parity by naming another precision, a calibration file is tied to its weights, bad
--calibration paths, uint8 calibration data, own-model factories and forgotten batch dimensions."""

from __future__ import annotations

import json
import shutil

import pytest

import trtbuild.reference as trt
from trtbuild.cli import main


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """resnet18 --small on the reference backend: the seeded weights, other (trained) weights, a
    calibration file made with the seeded weights, and fp32 and int8 engines (with sidecars)."""
    from trtbuild.engine import build_and_save
    from trtbuild.engine.model import export_seeded_weights

    d = tmp_path_factory.mktemp("review")
    export_seeded_weights("resnet18", d / "seeded.wts", seed=0, small=True)
    export_seeded_weights("resnet18", d / "trained.wts", seed=1, small=True)
    assert main(["calibrate", "resnet18", "--small", "--data", "random", "--weights", str(d / "seeded.wts"),
                 "-o", str(d / "calib.json"), "--no-progress"]) == 0
    fp32, _ = build_and_save("resnet18", d / "seeded.wts", d / "r32.engine", trt, "fp32", small=True, progress=False)
    assert main(["build", "resnet18", "--small", "--weights", str(d / "seeded.wts"), "--precision", "int8",
                 "--calibration", str(d / "calib.json"), "-o", str(d / "r8.engine"), "--backend", "reference",
                 "--no-progress"]) == 0
    return {"dir": d, "fp32": fp32, "int8": d / "r8.engine"}


def _edited_copy(src, dst, **changes):
    shutil.copy(src, dst)
    side = json.loads(src.with_name(src.name + ".json").read_text())
    side.update(changes)
    dst.with_name(dst.name + ".json").write_text(json.dumps(side))
    return dst


# ------------------------------------------------------------------ finding 3: precision read from the plan


@pytest.mark.parametrize("claimed", ["int8", "fp8", "fp16", "bf16"])
def test_fp32_engine_whose_sidecar_claims_a_looser_precision_is_refused(engines, tmp_path, claimed):
    from trtbuild.engine import load_engine
    from trtbuild.engine.errors import EngineFileError

    path = _edited_copy(engines["fp32"], tmp_path / "e.engine", precision=claimed)
    with pytest.raises(EngineFileError, match=f"sidecar says {claimed} but its plan computes in fp32"):
        load_engine(path, trt)


@pytest.mark.parametrize("claimed, actual", [("fp8", "int8"), ("fp16", "int8"), ("bf16", "int8")])
def test_int8_engine_whose_sidecar_claims_another_precision_is_refused(engines, tmp_path, claimed, actual):
    from trtbuild.engine import load_engine
    from trtbuild.engine.errors import EngineFileError

    assert load_engine(engines["int8"], trt).sidecar["precision"] == "int8"  # the true one loads
    path = _edited_copy(engines["int8"], tmp_path / "e.engine", precision=claimed)
    with pytest.raises(EngineFileError, match=f"sidecar says {claimed} but its plan computes in {actual}"):
        load_engine(path, trt)


def test_parity_of_an_engine_with_an_edited_sidecar_precision_does_not_pass(engines, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(engines["dir"])
    path = _edited_copy(engines["fp32"], tmp_path / "r2.engine", precision="int8")
    code, text = _run(capsys, ["parity", "resnet18", "--small", "--weights", "seeded.wts", "--engine", str(path)])
    assert code != 0 and "PASS" not in text
    assert "sidecar says int8 but its plan computes in fp32" in text and "Traceback" not in text


# ------------------------------------------------------------------ finding 4: a calibration file is tied to its weights


def test_calibration_file_records_the_sha256_of_the_weights_it_was_made_with(engines):
    import hashlib

    import numpy as np

    from trtbuild.weights import WeightMap

    data = json.loads((engines["dir"] / "calib.json").read_text())
    wm = WeightMap.load(engines["dir"] / "seeded.wts")  # by hand: names + float32 values in state-dict order
    from trtbuild.models import registry

    digest = hashlib.sha256()
    for name, t in registry.get_torch_model("resnet18", seed=0, small=True).state_dict().items():
        if t.is_floating_point():
            digest.update(name.encode() + b"\0" + np.asarray(wm.arrays()[name], "<f4").tobytes())
    assert data["weights_sha256"] == digest.hexdigest()


@pytest.mark.parametrize("command", ["build", "parity", "export-onnx"])
def test_calibration_made_with_other_weights_is_refused(engines, tmp_path, capsys, monkeypatch, command):
    d = engines["dir"]
    monkeypatch.chdir(tmp_path)
    shutil.copy(d / "calib.json", "calib.json")
    shutil.copy(d / "trained.wts", "trained.wts")
    out = {"build": ["-o", "t.engine", "--backend", "reference"], "parity": ["--backend", "reference"],
           "export-onnx": ["-o", "t.onnx"]}[command]
    code, text = _run(capsys, [command, "resnet18", "--small", "--weights", "trained.wts", "--precision", "int8",
                               "--calibration", "calib.json", *out])
    assert code != 0 and "Traceback" not in text
    assert "calib.json was calibrated with other weights" in text and "recalibrate with --weights trained.wts" in text
    assert not (tmp_path / "t.engine").exists() and not (tmp_path / "t.onnx").exists()


def test_calibration_with_the_same_weights_from_a_file_or_the_seeded_model_is_accepted(engines, tmp_path, capsys,
                                                                                      monkeypatch):
    """calib.json was made from seeded.wts; the seeded model itself (no --weights) has the same weights."""
    d = engines["dir"]
    monkeypatch.chdir(tmp_path)
    code, text = _run(capsys, ["parity", "resnet18", "--small", "--precision", "int8", "--calibration",
                               str(d / "calib.json"), "--backend", "reference"])
    assert code == 0 and "result: PASS" in text


def test_calibration_file_without_a_weights_hash_is_used_with_a_warning(engines, tmp_path, caplog):
    from trtbuild.engine import quant_plan

    data = json.loads((engines["dir"] / "calib.json").read_text())
    del data["weights_sha256"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    with caplog.at_level("WARNING"):
        plan = quant_plan("resnet18", "int8", tmp_path / "old.json", small=True, weights=engines["dir"] / "trained.wts")
    assert plan is not None and "records no weights sha256" in caplog.text


# ------------------------------------------------------------------ finding 5: --calibration paths


@pytest.mark.parametrize("command", ["build", "parity", "export-onnx"])
@pytest.mark.parametrize("what", ["directory", "missing"])
def test_calibration_path_that_is_a_directory_or_missing_is_named(tmp_path, capsys, monkeypatch, command, what):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "engines").mkdir()
    name = "engines" if what == "directory" else "missing.json"
    out = {"build": ["-o", "t.engine", "--backend", "reference"], "parity": ["--backend", "reference"],
           "export-onnx": ["-o", "t.onnx"]}[command]
    code, text = _run(capsys, [command, "resnet18", "--small", "--precision", "int8", "--calibration", name, *out])
    want = ("--calibration engines is a directory, not a calibration file" if what == "directory" else
            "--calibration missing.json does not exist")
    assert code != 0 and want in text and "Traceback" not in text and "Errno" not in text


# ------------------------------------------------------------------ finding 8: own networks and quant=

NET = '''
import torch
from torch import nn

from trtbuild.layers.basic import conv, global_avg_pool, linear, read_linear, relu
from trtbuild.layers.planned import planned_conv, planned_linear


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.relu(self.conv1(x))), 1))


def make_model():
    return Small().eval()


def plain(network, weights, x):
    y = relu(network, conv(network, x, weights.get("conv1.weight", (8, 3, 3, 3)), weights.get("conv1.bias"), "conv1",
                           padding=1), "relu")
    return {"logits": linear(network, global_avg_pool(network, y, "pool"), *read_linear(weights, "fc"), "fc")}


def planned(network, weights, x, quant=None):
    y = planned_conv(network, x, weights.get("conv1.weight", (8, 3, 3, 3)), weights.get("conv1.bias"), "conv1", quant,
                     padding=1)
    y = relu(network, y, "relu")
    return {"logits": planned_linear(network, global_avg_pool(network, y, "pool"), *read_linear(weights, "fc"), "fc",
                                     quant)}
'''


@pytest.fixture
def own_net(tmp_path, monkeypatch):
    from trtbuild.models import registry

    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET)
    before = set(registry.MODELS)
    yield tmp_path
    for name in set(registry.MODELS) - before:
        registry.MODELS.pop(name, None)
        registry.ORIGINS.pop(name, None)


OWN = ["--input", "input:1x3x16x16", "--torch", "net.py:make_model"]


@pytest.mark.parametrize("extra, given", [(["--precision", "int8", "--calibration", "c.json"], "--calibration c.json"),
                                          (["--precision", "fp16", "--keep", "fp32:conv1"], "--keep")])
def test_plain_network_function_with_calibration_or_keep_says_it_needs_quant(own_net, capsys, extra, given):
    (own_net / "c.json").write_text("{}")
    for torch in ([], ["--torch", "net.py:make_model"]):  # the reason comes first, with or without --torch
        code, text = _run(capsys, ["build", "net.py:plain", "--input", "input:1x3x16x16", *torch, *extra,
                                   "--backend", "reference", "-o", "p.engine"])
        assert code != 0 and "Traceback" not in text and "has no PyTorch model" not in text
        assert f"its network function takes no quant= parameter, so {given} cannot reach its layers" in text
        assert "trtbuild.layers.planned" in text and not (own_net / "p.engine").exists()


def test_network_function_taking_quant_builds_int8_from_a_calibration_file(own_net, capsys):
    from trtbuild.engine import load_engine

    assert main(["calibrate", "net.py:planned", *OWN, "--data", "random", "-o", "c.json", "--no-progress"]) == 0
    code, text = _run(capsys, ["build", "net.py:planned", *OWN, "--precision", "int8", "--calibration", "c.json",
                               "--backend", "reference", "-o", "q.engine", "--no-progress"])
    assert code == 0, text
    assert "2 convolutions/matmuls" in text  # conv1 and fc quantized
    engine = load_engine(own_net / "q.engine", trt)
    assert engine.sidecar["precision"] == "int8"


# ------------------------------------------------------------------ finding 13: errors inside a --torch factory


FACTORIES = '''
def buggy():
    raise TypeError("inner bug")


def needs_arg(width):
    return None
'''


@pytest.mark.parametrize("factory, want", [
    ("buggy", "--torch f.py:buggy raised TypeError: inner bug ("),
    ("needs_arg", "--torch f.py:needs_arg cannot be called without arguments")])
def test_torch_factory_errors_are_told_apart(tmp_path, monkeypatch, factory, want):
    from trtbuild.models.user import load_module_factory

    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.py").write_text(FACTORIES)
    with pytest.raises(ValueError) as info:
        load_module_factory(f"f.py:{factory}")(0, False)
    assert want in str(info.value)
    if factory == "buggy":
        assert str(info.value).endswith("f.py, line 3)")  # the user's own raise, file and line


# ------------------------------------------------------------------ finding 14: integer calibration data


def test_calibrate_refuses_uint8_pixels_naming_the_file_and_dtype(tmp_path, capsys, monkeypatch):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    (tmp_path / "calib").mkdir()
    pixels = np.random.default_rng(0).integers(0, 255, (3, 64, 64), dtype=np.uint8)  # amax would be ~254
    np.save(tmp_path / "calib" / "a.npy", pixels)
    code, text = _run(capsys, ["calibrate", "resnet18", "--small", "--data", "calib", "-o", "c.json",
                               "--no-progress"])
    assert code != 0 and "Traceback" not in text and not (tmp_path / "c.json").exists()
    assert "calibration data file calib/a.npy has dtype uint8, not a floating-point type" in text


# ------------------------------------------------------------------ finding 16: a forgotten batch dimension


def test_rank_3_input_of_a_conv_network_says_the_batch_comes_first(own_net, capsys):
    code, text = _run(capsys, ["build", "net.py:plain", "--input", "input:3x16x16", "--torch", "net.py:make_model",
                               "--backend", "reference", "-o", "p.engine"])
    assert code != 0 and "Traceback" not in text and not (own_net / "p.engine").exists()
    assert "--input input:3x16x16 has rank 3, but --input gives the batch first, e.g. input:1x3x16x16" in text
    code, text = _run(capsys, ["build", "net.py:plain", "--input", "input:1x3x16x16", "--torch", "net.py:make_model",
                               "--backend", "reference", "-o", "p.engine"])
    assert code == 0 and (own_net / "p.engine").is_file()  # with the batch it builds


def test_calibration_data_function_with_a_bug_inside_is_reported_as_its_own_error(tmp_path, monkeypatch):
    from trtbuild.quant import iterable_source

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.py").write_text("def samples():\n    return len(5)\n\n\ndef needs(n):\n    return []\n")
    with pytest.raises(ValueError) as info:
        iterable_source("d.py:samples", (3, 8, 8))
    assert "--data d.py:samples raised TypeError: object of type 'int' has no len()" in str(info.value)
    assert str(info.value).endswith("d.py, line 2)")
    with pytest.raises(ValueError, match="--data d.py:needs cannot be called without arguments"):
        iterable_source("d.py:needs", (3, 8, 8))

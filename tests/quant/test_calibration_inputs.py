"""What a calibration file may be used with and what calibration data may be: the file records the
sha256 of the weights it was made with and is refused with other weights; a --calibration path that
is a directory or missing is named; integer pixels and a data function with a bug inside are refused
in one sentence."""

from __future__ import annotations

import json
import shutil

import pytest

from trtbuild.cli import main


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err


def test_calibration_file_records_the_sha256_of_the_weights_it_was_made_with(calibrated):
    import hashlib

    import numpy as np

    from trtbuild.weights import WeightMap

    data = json.loads((calibrated["dir"] / "calib.json").read_text())
    wm = WeightMap.load(calibrated["dir"] / "seeded.wts")  # by hand: names + float32 values in state-dict order
    from trtbuild.models import registry

    digest = hashlib.sha256()
    for name, t in registry.get_torch_model("resnet18", seed=0, small=True).state_dict().items():
        if t.is_floating_point():
            digest.update(name.encode() + b"\0" + np.asarray(wm.arrays()[name], "<f4").tobytes())
    assert data["weights_sha256"] == digest.hexdigest()


@pytest.mark.parametrize("command", ["build", "parity", "export-onnx"])
def test_calibration_made_with_other_weights_is_refused(calibrated, tmp_path, capsys, monkeypatch, command):
    d = calibrated["dir"]
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


def test_calibration_with_the_same_weights_from_a_file_or_the_seeded_model_is_accepted(calibrated, tmp_path, capsys,
                                                                                      monkeypatch):
    """calib.json was made from seeded.wts; the seeded model itself (no --weights) has the same weights."""
    d = calibrated["dir"]
    monkeypatch.chdir(tmp_path)
    code, text = _run(capsys, ["parity", "resnet18", "--small", "--precision", "int8", "--calibration",
                               str(d / "calib.json"), "--backend", "reference"])
    assert code == 0 and "result: PASS" in text


def test_calibration_file_without_a_weights_hash_is_used_with_a_warning(calibrated, tmp_path, caplog):
    from trtbuild.engine import quant_plan

    data = json.loads((calibrated["dir"] / "calib.json").read_text())
    del data["weights_sha256"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    with caplog.at_level("WARNING"):
        plan = quant_plan("resnet18", "int8", tmp_path / "old.json", small=True,
                          weights=calibrated["dir"] / "trained.wts")
    assert plan is not None and "records no weights sha256" in caplog.text


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

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


@pytest.mark.parametrize("claimed, actual", [("fp8", "int8"), ("fp32", "int8"), ("fp16", "int8")])
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

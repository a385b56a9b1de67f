"""An engine's sidecar cannot loosen parity by naming another precision: the precision is read from
the plan, and a sidecar that claims another is refused, by load_engine and by `trtbuild parity`."""

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


def _edited_copy(src, dst, **changes):
    shutil.copy(src, dst)
    side = json.loads(src.with_name(src.name + ".json").read_text())
    side.update(changes)
    dst.with_name(dst.name + ".json").write_text(json.dumps(side))
    return dst


@pytest.mark.parametrize("claimed", ["int8", "fp8", "fp16", "bf16"])
def test_fp32_engine_whose_sidecar_claims_a_looser_precision_is_refused(calibrated, tmp_path, claimed):
    from trtbuild.engine import load_engine
    from trtbuild.engine.errors import EngineFileError

    path = _edited_copy(calibrated["fp32"], tmp_path / "e.engine", precision=claimed)
    with pytest.raises(EngineFileError, match=f"sidecar says {claimed} but its plan computes in fp32"):
        load_engine(path, trt)


@pytest.mark.parametrize("claimed, actual", [("fp8", "int8"), ("fp16", "int8"), ("bf16", "int8")])
def test_int8_engine_whose_sidecar_claims_another_precision_is_refused(calibrated, tmp_path, claimed, actual):
    from trtbuild.engine import load_engine
    from trtbuild.engine.errors import EngineFileError

    assert load_engine(calibrated["int8"], trt).sidecar["precision"] == "int8"  # the true one loads
    path = _edited_copy(calibrated["int8"], tmp_path / "e.engine", precision=claimed)
    with pytest.raises(EngineFileError, match=f"sidecar says {claimed} but its plan computes in {actual}"):
        load_engine(path, trt)


def test_parity_of_an_engine_with_an_edited_sidecar_precision_does_not_pass(calibrated, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(calibrated["dir"])
    path = _edited_copy(calibrated["fp32"], tmp_path / "r2.engine", precision="int8")
    code, text = _run(capsys, ["parity", "resnet18", "--small", "--weights", "seeded.wts", "--engine", str(path)])
    assert code != 0 and "PASS" not in text
    assert "sidecar says int8 but its plan computes in fp32" in text and "Traceback" not in text

"""`trtbuild inspect ENGINE [ENGINE2] [--json] [--layers]`: the table, the JSON, the diff and its exit status
(0 equal, 1 different, 2 bad input), on engines built here; nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtbuild.cli import main

from helpers.inspect_engines import build_inspect_engines
from helpers.cli_run import run_cli


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_inspect_engines(tmp_path_factory.mktemp("cli_inspect"), "sm89")


def _files(root: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")}


def test_table_shows_io_profile_precision_weights_and_sidecar(built, capsys):
    before = _files(built)
    code, out, err = run_cli(capsys, ["inspect", str(built / "fp32.engine")])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"engine    {built / 'fp32.engine'} ({(built / 'fp32.engine').stat().st_size:,} bytes)"
    assert "built by  reference backend (trtbuild" in out and "runs on   any device" in out
    row = next(line for line in lines if line.strip().startswith("input "))
    assert row.split()[:4] == ["input", "input", "[-1,3,64,64]", "FLOAT"]
    assert row.endswith("[1,3,64,64] / [2,3,64,64] / [4,3,64,64]")
    assert any(line.split()[:3] == ["conv1.weight", "conv1", "Weights"] for line in lines)
    assert any(line.split() == ["precision", "fp32"] for line in lines)  # a sidecar field
    assert _files(built) == before  # nothing written


def test_layers_and_json(built, capsys):
    code, out, _ = run_cli(capsys, ["inspect", str(built / "fp16.engine"), "--layers"])
    assert code == 0
    row = next(line for line in out.splitlines() if line.split()[:2] == ["1", "conv1"])
    assert row.split()[2:4] == ["CONVOLUTION", "HALF"] and "conv1.weight,bn1.bias" in row
    code, out, _ = run_cli(capsys, ["inspect", str(built / "fp16.engine"), "--json"])
    data = json.loads(out)
    assert code == 0 and data["backend"] == "reference" and data["loaded"] is True
    assert data["layers"][0]["name"] == "input/to_fp16" and data["layers"][0]["precision"] == ["HALF"]
    assert data["io"][0]["shape"] == [1, 3, 64, 64] and data["sidecar"]["precision"] == "fp16"


def test_rtx_engine_is_shown_from_its_sidecar(built, capsys):
    code, out, err = run_cli(capsys, ["inspect", str(built / "rtx.engine")])
    assert code == 0, err
    assert "built by  TensorRT-RTX " in out and "runs on   compute capability 8.9" in out
    assert "not loaded: TensorRT-RTX cannot deserialize it here:" in out and "no CUDA GPU is visible" in out
    assert any(line.split()[:4] == ["output", "logits", "[1,10]", "FLOAT"] for line in out.splitlines())


def test_diff_exit_status(built, capsys):
    code, out, _ = run_cli(capsys, ["inspect", str(built / "fp32.engine"), str(built / "fp32.engine")])
    assert code == 0 and out.strip().endswith("no differences")
    code, out, _ = run_cli(capsys, ["inspect", str(built / "fp32.engine"), str(built / "fp16.engine")])
    assert code == 1
    assert "  layer conv1 precision: [FLOAT] -> [HALF]" in out.splitlines()
    assert "  layer input/to_fp16: only in B (CAST)" in out.splitlines()
    assert "  sidecar precision: fp32 -> fp16" in out.splitlines()
    code, out, _ = run_cli(capsys, ["inspect", str(built / "fp32.engine"), str(built / "fp16.engine"), "--json"])
    data = json.loads(out)
    assert code == 1 and data["equal"] is False
    assert {"section": "layer", "item": "conv1 precision", "a": ["FLOAT"], "b": ["HALF"],
            "change": "changed"} in data["differences"]


def test_bad_input_exits_2_with_one_sentence(built, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello\n")
    data = (built / "fp32.engine").read_bytes()
    (tmp_path / "cut.engine").write_bytes(data[:len(data) // 3])
    cases = {str(tmp_path / "missing.engine"): "does not exist",
             str(tmp_path / "notes.txt"): "is not an engine: it starts neither like a trtbuild reference plan",
             str(tmp_path / "cut.engine"): "truncated"}
    for path, words in cases.items():
        code, out, err = run_cli(capsys, ["inspect", path])
        assert code == 2 and out == ""
        assert err.startswith("trtbuild: error: ") and words in err and path in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, ["inspect", str(built / "fp32.engine"), str(tmp_path / "missing.engine")])
    assert code == 2 and "missing.engine does not exist" in err


def test_help_states_the_exit_status(capsys):
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 (shown, or the two engines are equal), 1 (the two engines differ), 2" in out

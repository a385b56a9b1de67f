"""`trtbuild build --version-compatible [--exclude-lean-runtime] --hardware-compat ...` on the reference: the sidecar
records the options, the plan honours them, `trtbuild inspect` shows them, the engine loads and runs; the refusals are
one sentence and write nothing."""

from __future__ import annotations

import json

import pytest
import torch

from trtbuild.cli import main
from trtbuild.engine import load_engine
from trtbuild.reference.plan import plan_header


def test_build_records_inspect_shows_and_load_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["build", "resnet18", "--small", "--backend", "reference", "--no-progress", "--version-compatible",
                 "--hardware-compat", "ampere+", "-o", "vc.engine"]) == 0
    out = capsys.readouterr().out
    assert ("compat: version-compatible, lean runtime embedded (loaded with engine_host_code_allowed, from this "
            "sidecar); hardware compatibility ampere+") in out
    side = json.loads((tmp_path / "vc.engine.json").read_text())
    assert (side["version_compatible"], side["exclude_lean_runtime"], side["hardware_compat"]) == (True, False,
                                                                                                  "ampere+")
    header = plan_header((tmp_path / "vc.engine").read_bytes())
    assert (header["version_compatible"], header["lean_runtime"], header["hardware_compatibility_level"]) == \
        (True, True, 1)
    assert main(["inspect", "vc.engine"]) == 0
    assert ("compat    version-compatible, lean runtime embedded (host code: loads only where trusted); hardware "
            "compatibility ampere+") in capsys.readouterr().out
    engine = load_engine(tmp_path / "vc.engine")  # the sidecar says so: host code allowed
    assert engine(torch.zeros(1, 3, 64, 64))["logits"].shape == (1, 10)
    assert main(["inspect", "--json", "vc.engine"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["version_compatible"], report["lean_runtime"], report["hardware_compat"]) == (True, True, "ampere+")


def test_exclude_lean_runtime_and_a_plain_build(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["build", "resnet18", "--small", "--backend", "reference", "--no-progress", "--version-compatible",
                 "--exclude-lean-runtime", "-o", "lean.engine"]) == 0
    assert "compat: version-compatible, lean runtime excluded; hardware compatibility none" in capsys.readouterr().out
    assert plan_header((tmp_path / "lean.engine").read_bytes())["lean_runtime"] is False
    assert main(["inspect", "lean.engine"]) == 0
    assert "compat    version-compatible, lean runtime excluded; hardware compatibility none" in capsys.readouterr().out
    assert main(["build", "resnet18", "--small", "--backend", "reference", "--no-progress", "-o", "p.engine"]) == 0
    assert "compat:" not in capsys.readouterr().out
    assert "version_compatible" not in json.loads((tmp_path / "p.engine.json").read_text())


@pytest.mark.parametrize("args, message", [
    (["--backend", "reference", "--exclude-lean-runtime"],
     "exclude_lean_runtime (--exclude-lean-runtime) applies only to a version-compatible build"),
    (["--backend", "tensorrt-rtx", "--version-compatible"], "--version-compatible does not apply to TensorRT-RTX"),
    (["--backend", "tensorrt-rtx", "--hardware-compat", "same-cc"],
     "--hardware-compat same-cc does not apply to TensorRT-RTX"),
])
def test_refusals_are_one_sentence_and_write_nothing(tmp_path, monkeypatch, capsys, args, message):
    if "tensorrt-rtx" in args:
        pytest.importorskip("tensorrt_rtx")
    monkeypatch.chdir(tmp_path)
    assert main(["build", "resnet18", "--small", "--no-progress", *args, "-o", "x.engine"]) != 0
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_unknown_hardware_level_is_refused_by_argparse(capsys):
    with pytest.raises(SystemExit):
        main(["build", "resnet18", "--hardware-compat", "ampere"])
    assert "invalid choice: 'ampere' (choose from" in capsys.readouterr().err


def test_inspect_diff_names_the_compatibility_that_differs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for extra, out in (([], "a.engine"), (["--version-compatible", "--exclude-lean-runtime"], "b.engine")):
        assert main(["build", "resnet18", "--small", "--backend", "reference", "--no-progress", *extra, "-o", out]) == 0
    capsys.readouterr()
    assert main(["inspect", "a.engine", "b.engine"]) == 1
    out = capsys.readouterr().out
    assert "engine version_compatible: False -> True" in out
    assert "engine lean_runtime" not in out and "engine hardware_compat" not in out  # equal: False / none

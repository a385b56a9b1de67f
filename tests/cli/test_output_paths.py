"""Nothing a user owns is overwritten: every command refuses, before any work, an output path that
names one of its inputs, another of its outputs, a directory or an existing file of another kind,
and leaves every file byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from trtbuild.cli import main

from helpers.cli_run import REF, main_in


def _tree(root) -> dict[str, str]:
    """{relative path: sha256} of every file under root (symlinks by their target's name)."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                files[rel] = "-> " + os.readlink(path)
            else:
                with open(path, "rb") as f:
                    files[rel] = hashlib.sha256(f.read()).hexdigest()
    return files


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A .wts weight file, a reference engine (+ sidecar) built from it and a calibration file, made once."""
    root = tmp_path_factory.mktemp("made")
    main_in(root, ["export-weights", "--model", "resnet18", "--small", "--out", "s/r.wts"],
            ["build", "resnet18", "--small", "--weights", "s/r.wts", "--out", "e.engine", "--no-progress", *REF],
            ["calibrate", "resnet18", "--small", "--weights", "s/r.wts", "--data", "random", "--batches", "1",
             "--out", "c.json"])
    return root


@pytest.fixture
def cwd(tmp_path, monkeypatch, made):
    """A fresh directory holding s/r.wts, s/r2.wts (a second weight file), e.engine, e.engine.json and the
    calibration file c.json."""
    (tmp_path / "s").mkdir()
    shutil.copy(made / "s" / "r.wts", tmp_path / "s" / "r.wts")
    shutil.copy(made / "s" / "r.wts", tmp_path / "s" / "r2.wts")
    shutil.copy(made / "e.engine", tmp_path / "e.engine")
    shutil.copy(made / "e.engine.json", tmp_path / "e.engine.json")
    shutil.copy(made / "c.json", tmp_path / "c.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(capsys, cwd, argv, *phrases):
    """Run argv; it must fail with one error line containing `phrases`, and change no file."""
    before = _tree(cwd)
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "error: " in lines[0], err
    for phrase in phrases:
        assert phrase in lines[0], err
    assert _tree(cwd) == before  # byte for byte, and no new file (no temp file, no exported weights)
    return lines[0]


# ----------------------------------------------------------------------------- the four cases and more

BUILD = ["build", "resnet18", "--small", "--weights", "s/r.wts", *REF]
PARITY = ["parity", "resnet18", "--small", *REF]


@pytest.mark.parametrize("argv, message", [
    (BUILD + ["--out", "s/r.wts"], "--out s/r.wts is the same file as the input --weights s/r.wts"),
    (PARITY + ["--engine", "e.engine", "--json", "e.engine"],
     "--json e.engine is the same file as the input --engine e.engine"),
    (PARITY + ["--engine", "e.engine", "--json", "e.engine.json"],
     "--json e.engine.json is the same file as the input --engine's sidecar e.engine.json"),
    (PARITY + ["--html", "s/r2.wts"], "--html s/r2.wts exists and is a .wts weight file, not an HTML file"),
    # today the cache is written there, then replaced by the engine
    (BUILD + ["--timing-cache", "x.engine", "--out", "x.engine"],
     "--timing-cache x.engine is the same file as --out x.engine"),
    (BUILD + ["--out", "s/r2.wts"], "--out s/r2.wts exists and is a .wts weight file, not an engine"),
    (PARITY + ["--json", "r.html", "--html", "r.html"], "--html r.html is the same file as --json r.html"),
], ids=["build-out-on-its-weights", "parity-json-on-its-engine", "parity-json-on-the-engines-sidecar",
        "parity-html-on-weights", "timing-cache-on-out", "build-out-on-other-weights", "two-outputs-one-path"])
def test_refused(cwd, capsys, argv, message):
    _refused(capsys, cwd, argv, message)


def test_build_out_on_the_default_weights_before_they_are_exported(cwd, capsys):
    """The default weights (exported on first use) are an input too: nothing is exported or built."""
    _refused(capsys, cwd, ["build", "resnet18", "--small", "--out", "weights/resnet18-small.wts", *REF],
             "--out weights/resnet18-small.wts is the same file as the input --weights")
    assert not (cwd / "weights").exists()


def test_build_out_whose_sidecar_would_replace_a_weight_file(cwd, capsys):
    (cwd / "s" / "w.engine.json").write_bytes((cwd / "s" / "r2.wts").read_bytes())
    _refused(capsys, cwd, BUILD + ["--out", "s/w.engine"],
             "--out's sidecar s/w.engine.json exists and is a .wts weight file, not an engine sidecar")


def test_output_through_a_symlink_or_hard_link_to_an_input(cwd, capsys):
    os.symlink("s/r.wts", cwd / "link.json")
    os.link(cwd / "s" / "r.wts", cwd / "hard.json")
    for name in ("link.json", "hard.json"):
        _refused(capsys, cwd, ["parity", "resnet18", "--small", "--weights", "s/r.wts", "--json", name, *REF],
                 f"--json {name} is the same file as the input --weights s/r.wts")


def test_output_that_is_a_directory(cwd, capsys):
    (cwd / "reports").mkdir()
    _refused(capsys, cwd, ["parity", "resnet18", "--small", "--json", "reports", *REF],
             "--json reports is a directory")


def test_export_onnx_over_weights_and_export_weights_over_an_engine(cwd, capsys):
    _refused(capsys, cwd, ["export-onnx", "resnet18", "--small", "--out", "s/r2.wts"],
             "--out s/r2.wts exists and is a .wts weight file, not an ONNX model")
    _refused(capsys, cwd, ["export-onnx", "resnet18", "--small", "--weights", "s/r.wts", "--out", "s/r.wts"],
             "--out s/r.wts is the same file as the input --weights s/r.wts")
    _refused(capsys, cwd, ["export-weights", "--model", "resnet18", "--small", "--out", "e.engine", "--format", "wts"],
             "--out e.engine exists and is a reference engine, not a .wts weight file")
    _refused(capsys, cwd, ["export-weights", "--checkpoint", "s/r.wts", "--out", "e.engine.json", "--format",
                           "safetensors"],
             "--out e.engine.json exists and is a trtbuild engine sidecar, not a safetensors weight file")


def test_demo_html_on_the_weights(cwd, capsys):
    _refused(capsys, cwd, ["demo", "--model", "resnet18", "--small", "--weights", "s/r.wts", "--html", "s/r.wts",
                           "--no-cross-check", *REF],
             "--html s/r.wts is the same file as the input --weights s/r.wts")


def test_same_kind_is_replaced(cwd, capsys):
    """An engine and its sidecar over an engine and its sidecar, a parity report over a parity report, a
    calibration file over a calibration file: allowed, and written."""
    before = {name: (cwd / name).read_bytes() for name in ("e.engine", "e.engine.json", "c.json")}
    code = main(["build", "resnet18", "--small", "--weights", "s/r.wts", "--out", "e.engine", "--precision", "fp16",
                 "--no-progress", *REF])
    assert code == 0, capsys.readouterr().err
    assert (cwd / "e.engine").read_bytes() != before["e.engine"]
    assert json.loads((cwd / "e.engine.json").read_text())["precision"] == "fp16"
    for _ in range(2):
        code = main(["parity", "resnet18", "--small", "--engine", "e.engine", "--json", "r.json", *REF])
        assert code == 0, capsys.readouterr().err
        assert json.loads((cwd / "r.json").read_text())["outputs"][0]["name"] == "logits"
    code = main(["calibrate", "resnet18", "--small", "--weights", "s/r.wts", "--data", "random", "--batches", "1",
                 "--seed", "7", "--out", "c.json"])
    assert code == 0, capsys.readouterr().err
    assert (cwd / "c.json").read_bytes() != before["c.json"]


@pytest.mark.parametrize("argv, message", [
    (PARITY + ["--json", "e.engine.json"],
     "--json e.engine.json exists and is a trtbuild engine sidecar, not a parity report"),
    (["calibrate", "resnet18", "--small", "--weights", "s/r.wts", "--data", "random", "--batches", "1", "-o",
      "e.engine.json"], "--out e.engine.json exists and is a trtbuild engine sidecar, not a calibration file"),
    (BUILD + ["-o", "c", "--no-progress"],
     "--out's sidecar c.json exists and is a trtbuild calibration file, not an engine sidecar"),
    (PARITY + ["--json", "c.json"], "--json c.json exists and is a trtbuild calibration file, not a parity report"),
], ids=["parity-report-over-a-sidecar", "calibration-over-a-sidecar", "sidecar-over-a-calibration",
        "parity-report-over-a-calibration"])
def test_json_of_one_kind_does_not_replace_another(cwd, capsys, argv, message):
    """An engine's sidecar, a calibration file and a parity report are all JSON, but none replaces another."""
    _refused(capsys, cwd, argv, message)


def test_parity_report_does_not_replace_the_users_own_json(cwd, capsys):
    (cwd / "notes.json").write_text('{"my": "notes"}')
    _refused(capsys, cwd, PARITY + ["--json", "notes.json"], "--json notes.json exists and is a JSON file, not a "
                                                              "parity report")


def test_output_on_the_users_model_file(cwd, capsys):
    """The model file named by MODEL (or --torch) is an input: no command writes over the user's net.py."""
    (cwd / "net.py").write_text("import torch\n\n\ndef make_model():\n    return torch.nn.Linear(2, 2).eval()\n")
    _refused(capsys, cwd, ["export-weights", "net.py:make_model", "--out", "net.py", "--format", "wts"],
             "--out net.py is the same file as the model file net.py (of net.py:make_model), so writing")
    _refused(capsys, cwd, ["parity", "resnet18", "--small", "--torch", "net.py:make_model", "--json", "net.py", *REF],
             "--json net.py is the same file as the model file net.py (of --torch net.py:make_model), so writing")


def test_output_ending_in_a_separator_writes_nothing(cwd, capsys):
    """`-o newdir/` would otherwise write a file called newdir (and newdir.json)."""
    _refused(capsys, cwd, BUILD + ["-o", "newdir/", "--no-progress"],
             "--out newdir/ ends in a path separator, so it names a directory")


def test_output_under_a_file_is_refused_before_any_work(cwd, capsys):
    _refused(capsys, cwd, ["calibrate", "resnet18", "--small", "--weights", "s/r.wts", "--data", "random", "--batches",
                           "1", "-o", "c.json/x.json"],
             "the parent c.json of --out c.json/x.json is a file, not a directory")
    _refused(capsys, cwd, BUILD + ["-o", "c.json/sub/x.engine", "--no-progress"],
             "the parent c.json of --out c.json/sub/x.engine is a file, not a directory")

"""Nothing a user owns is overwritten: every command refuses, before any work, an output path that
names one of its inputs, another of its outputs, a directory or an existing file of another kind,
and leaves every file byte for byte as it was (issue 12, part 3)."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from trtbuild.cli import main

REF = ["--backend", "reference"]


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
    """A .wts weight file and a reference engine (+ sidecar) built from it, made once."""
    root = tmp_path_factory.mktemp("made")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["export-weights", "--model", "resnet18", "--small", "--out", "s/r.wts"]) == 0
        assert main(["build", "resnet18", "--small", "--weights", "s/r.wts", "--out", "e.engine", "--no-progress",
                     *REF]) == 0
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture
def cwd(tmp_path, monkeypatch, made):
    """A fresh directory holding s/r.wts, s/r2.wts (a second weight file), e.engine and e.engine.json."""
    (tmp_path / "s").mkdir()
    shutil.copy(made / "s" / "r.wts", tmp_path / "s" / "r.wts")
    shutil.copy(made / "s" / "r.wts", tmp_path / "s" / "r2.wts")
    shutil.copy(made / "e.engine", tmp_path / "e.engine")
    shutil.copy(made / "e.engine.json", tmp_path / "e.engine.json")
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
             "--out's sidecar s/w.engine.json exists and is a .wts weight file, not a JSON file")


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
             "--out e.engine.json exists and is a JSON file, not a safetensors weight file")


def test_demo_html_on_the_weights(cwd, capsys):
    _refused(capsys, cwd, ["demo", "--model", "resnet18", "--small", "--weights", "s/r.wts", "--html", "s/r.wts",
                           "--no-cross-check", *REF],
             "--html s/r.wts is the same file as the input --weights s/r.wts")


def test_same_kind_is_replaced(cwd, capsys):
    """An engine over an engine, JSON over JSON: allowed, and written."""
    (cwd / "old.json").write_text('{"old": true}')
    before = (cwd / "e.engine").read_bytes()
    code = main(["build", "resnet18", "--small", "--weights", "s/r.wts", "--out", "e.engine", "--precision", "fp16",
                 "--no-progress", *REF])
    assert code == 0, capsys.readouterr().err
    assert (cwd / "e.engine").read_bytes() != before
    code = main(["parity", "resnet18", "--small", "--engine", "e.engine", "--json", "old.json", *REF])
    assert code == 0, capsys.readouterr().err
    assert '"old"' not in (cwd / "old.json").read_text()


def test_output_on_the_users_model_file(cwd, capsys):
    """The model file named by MODEL (or --torch) is an input: no command writes over the user's net.py."""
    (cwd / "net.py").write_text("import torch\n\n\ndef make_model():\n    return torch.nn.Linear(2, 2).eval()\n")
    _refused(capsys, cwd, ["export-weights", "net.py:make_model", "--out", "net.py", "--format", "wts"],
             "--out net.py is the same file as the input the model net.py:make_model")
    _refused(capsys, cwd, ["parity", "resnet18", "--small", "--torch", "net.py:make_model", "--json", "net.py", *REF],
             "--json net.py is the same file as the input --torch net.py")

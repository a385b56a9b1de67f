"""Ctrl-C during a build: "interrupted", exit code 130, no traceback, no abort from inside TensorRT
("terminate called ... pybind11::error_already_set"), and nothing written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import trtbuild
from trtbuild.cli import main

TREE = str(Path(trtbuild.__file__).resolve().parents[1])  # the trtbuild under test, for the child process
CHILD = "import sys; from trtbuild.cli import main; sys.exit(main(sys.argv[1:]))"
#: a child whose own logging handler sends it SIGINT when TensorRT logs its first build message: the
#: signal is then handled inside the logger callback that TensorRT called from C++.
CHILD_SIGNAL_IN_CALLBACK = """
import logging, os, signal, sys
from trtbuild.cli import main

class SigintOnBuild(logging.Handler):
    sent = False
    def emit(self, record):
        if not SigintOnBuild.sent and "Detected" in record.getMessage():
            SigintOnBuild.sent = True
            os.kill(os.getpid(), signal.SIGINT)

log = logging.getLogger("trtbuild.tensorrt")
log.addHandler(SigintOnBuild())
log.setLevel(logging.INFO)
sys.exit(main(sys.argv[1:]))
"""


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _interrupt(cwd: Path, argv: list[str], marker: str) -> tuple[int, str]:
    """Run the CLI in a child; send it SIGINT once a line containing `marker` appears (a build is
    then running); return (exit code, everything it printed)."""
    env = dict(os.environ, PYTHONPATH=TREE, PYTHONUNBUFFERED="1")
    child = subprocess.Popen([sys.executable, "-c", CHILD, *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in child.stdout:
        seen.append(line)
        if marker in line:
            child.send_signal(signal.SIGINT)
            break
    rest, _ = child.communicate(timeout=120)
    return child.returncode, "".join(seen) + rest


def _assert_interrupted(code: int, output: str) -> None:
    assert code == 130, output
    assert "trtbuild: interrupted" in output, output
    assert "Traceback" not in output and "terminate called" not in output, output


@pytest.fixture(scope="module")
def resnet50_weights(tmp_path_factory) -> Path:
    """Full-size ResNet-50 weights (its build lasts long enough to be interrupted), exported once."""
    path = tmp_path_factory.mktemp("w") / "resnet50.wts"
    assert main(["export-weights", "--model", "resnet50", "--out", str(path)]) == 0
    return path


def test_ctrl_c_during_a_reference_build(tmp_path, resnet50_weights):
    code, output = _interrupt(tmp_path, ["build", "resnet50", "--weights", str(resnet50_weights), "--backend",
                                         "reference", "--no-progress", "--out", "out/r.engine"], marker="weights: ")
    _assert_interrupted(code, output)
    assert _files(tmp_path) == []  # no engine, no sidecar, no temp file


def test_ctrl_c_during_a_tensorrt_rtx_build(rtx, tmp_path, resnet50_weights):
    """The SIGINT arrives while TensorRT-RTX's builder runs (with trtbuild's progress monitor):
    it is handled in a callback TensorRT calls from C++, or right after the build returns."""
    code, output = _interrupt(tmp_path, ["-v", "build", "resnet50", "--weights", str(resnet50_weights), "--backend",
                                         "tensorrt-rtx", "--no-progress", "--out", "out/r.engine"], marker="Detected")
    _assert_interrupted(code, output)
    assert _files(tmp_path) == []


def test_ctrl_c_inside_tensorrts_logger_callback(rtx, tmp_path):
    """Deterministic: the signal is handled inside ILogger.log, called by TensorRT-RTX from C++.
    Today TensorRT swallows the KeyboardInterrupt and the build completes (or the process aborts)."""
    env = dict(os.environ, PYTHONPATH=TREE)
    run = subprocess.run([sys.executable, "-c", CHILD_SIGNAL_IN_CALLBACK, "build", "resnet18", "--small",
                          "--backend", "tensorrt-rtx", "--out", "out/r.engine"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    _assert_interrupted(run.returncode, run.stdout + run.stderr)
    assert not (tmp_path / "out").exists() and _files(tmp_path) == ["weights/resnet18-small.wts"]


def test_keyboard_interrupt_in_a_build_step(tmp_path, monkeypatch, capsys):
    import trtbuild.reference as ref

    def interrupted(self, network, config):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ref.Builder, "build_serialized_network", interrupted)
    try:
        code = main(["build", "alexnet", "--small", "--backend", "reference", "--no-progress", "--out", "e/a.engine"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped trtbuild.cli.main (a traceback for the user)")
    err = capsys.readouterr().err
    assert code == 130 and err.strip() == "trtbuild: interrupted", err
    assert _files(tmp_path) == ["weights/alexnet-small.wts"]


def test_interrupt_between_the_engine_and_sidecar_renames_finishes_the_pair(tmp_path, monkeypatch):
    """A Ctrl-C right after the engine is renamed into place: the sidecar follows, so the pair stays
    consistent (today: a new engine next to the old sidecar)."""
    from trtbuild.engine import read_engine_file, save_engine
    from trtbuild.files import atomic

    plan_a, plan_b = b"TRTBREF\x01" + b"a" * 64, b"TRTBREF\x01" + b"b" * 64
    path = save_engine(tmp_path / "x.engine", plan_a, {"tensorrt_version": "reference"})
    real_replace, calls = os.replace, []

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_engine(path, plan_b, {"tensorrt_version": "reference"})
    monkeypatch.undo()
    assert read_engine_file(path)[0] == plan_b  # the sidecar's sha256 matches the new engine
    assert _files(tmp_path) == ["x.engine", "x.engine.json"]


def test_calling_tensorrt_defers_sigint_to_the_end_of_the_call(rtx):
    """Inside the block (a call into TensorRT) SIGINT is only recorded: what follows still runs, the
    progress monitor would cancel, and KeyboardInterrupt comes when the block ends."""
    import trtbuild.reference as ref
    from trtbuild.engine.interrupts import calling_tensorrt, interrupt_pending

    ran_on = []
    with pytest.raises(KeyboardInterrupt):
        with calling_tensorrt(rtx):
            signal.raise_signal(signal.SIGINT)
            ran_on.append(interrupt_pending())
    assert ran_on == [True] and not interrupt_pending()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # the reference calls back from Python: raised at once
        with calling_tensorrt(ref):
            signal.raise_signal(signal.SIGINT)
            ran_on.append("reference")
    assert ran_on == [True]


def test_ctrl_c_while_the_parser_is_made(monkeypatch, capsys):
    """Ctrl-C in the first second or so (make_parser imports torch and every command) is handled too."""
    import trtbuild.cli.build as build_command

    def interrupted(subparsers):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_command, "add_parser", interrupted)
    try:
        code = main(["build", "alexnet", "--small"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped trtbuild.cli.main while it made its parser")
    err = capsys.readouterr().err
    assert code == 130 and err.strip() == "trtbuild: interrupted", err


@pytest.mark.parametrize("error, message", [
    (IsADirectoryError(21, "Is a directory", "engines"), "trtbuild: error: engines: Is a directory"),
    (PermissionError(13, "Permission denied", "r.engine"), "trtbuild: error: r.engine: Permission denied"),
    (OSError(28, "No space left on device"), "trtbuild: error: [Errno 28] No space left on device"),
])
def test_os_error_is_one_sentence_naming_the_file(tmp_path, monkeypatch, capsys, error, message):
    """An OSError that no command turned into its own message is one line, not a traceback."""
    from trtbuild.engine import serialize

    def failing(*args, **kwargs):
        raise error

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(serialize, "atomic_write_files", failing)
    code = main(["build", "alexnet", "--small", "--backend", "reference", "--no-progress", "--out", "a.engine"])
    err = capsys.readouterr().err
    assert code == 1 and err.strip().splitlines() == [message], err  # the only line: no traceback before it
    assert not (tmp_path / "a.engine").exists()

"""A Python-backend stub killed (kill -9) while the server runs: Triton alone would keep the server and
the model "ready" while failing every request to it. `trtbuild serve` and `python -m
trtbuild.serving.tritonserver` notice, say so in one line, stop the server (readiness turns false: the
port closes) and exit with 1, leaving no process, shared-memory segment or model folder behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.serve_process import REPO, Served, pids_naming, stub_of
from helpers.triton_models import build_user, skip_or_fail

from trtbuild.cli import main
from trtbuild.serving.tritonserver import free_ports

pytestmark = pytest.mark.triton

READY_GONE_S = 20  # from the kill until readiness is false
EXIT_S = 40


@pytest.fixture
def stub_runs():
    from trtbuild.serving.python_env import stub_problem

    problem = stub_problem()
    if problem:
        skip_or_fail(problem)


def _ready(http: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _kill_stub_and_check(http: int, stub: int, proc: subprocess.Popen) -> None:
    """kill -9 the server's stub; readiness must turn false and the process exit with 1."""
    assert _ready(http)
    os.kill(stub, signal.SIGKILL)
    deadline = time.monotonic() + READY_GONE_S
    while _ready(http):
        assert time.monotonic() < deadline, f"still ready {READY_GONE_S} s after its stub {stub} was killed"
        time.sleep(0.2)
    assert proc.wait(timeout=EXIT_S) == 1


def _nothing_left(workspace: str, shm: set, copy: Path | None) -> None:
    """No server process, none of the stub's segments, not its work directory nor Triton's copy of the model."""
    assert pids_naming(workspace) == []
    assert sorted(p for p in shm if p.exists()) == []
    assert not Path(workspace).exists() and (copy is None or not copy.exists())


def _clean(workspace, shm, folder) -> None:
    """What a failed test must not leave: the server's processes, shared memory, work directory, model copy."""
    for pid in pids_naming(workspace) if workspace else []:
        os.kill(pid, signal.SIGKILL)
    if workspace:
        shutil.rmtree(workspace, ignore_errors=True)
    for path in shm:
        path.unlink(missing_ok=True)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def test_serve_exits_when_its_stub_dies(stub_runs, tmp_path):
    served = Served(["resnet18", "--small"], tmp_path)
    workspace, shm, folder = None, set(), None
    try:
        served.wait_serving()
        workspace = served.workspace()
        stub, shm, folder = stub_of(workspace)
        _kill_stub_and_check(served.http, stub, served.proc)
        time.sleep(0.2)
        output = "\n".join(served.lines)
        assert (f"serve: the Python-backend stub of model instance 'resnet18_0_0' (pid {stub}) died, and Triton keeps "
                "reporting the model ready while failing every request to it: stopping Triton Inference Server, so "
                "that readiness turns false and a supervisor can start a fresh one (exit code 1)") in output, output
        assert folder.name.startswith("folder")  # PyTriton's model runs from Triton's temporary copy
        _nothing_left(workspace, shm, folder)
    finally:
        served.kill()
        _clean(workspace, shm, folder)


def test_tritonserver_entry_point_exits_when_a_stub_dies(stub_runs, tmp_path):
    user_ref, engine = build_user(tmp_path)
    repo, tmp = tmp_path / "repo", tmp_path / "tmp"
    tmp.mkdir()
    assert main(["export-triton", user_ref, "--engine", str(engine), "--repo", str(repo), "--kind", "python"]) == 0
    http, grpc, metrics = free_ports(3)
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-m", "trtbuild.serving.tritonserver", str(repo), "--http-port", str(http),
                             "--grpc-port", str(grpc), "--metrics-port", str(metrics), "--timeout", "60"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    workspace, shm, folder = None, set(), None
    try:
        ready_line = proc.stdout.readline()  # blocks until ready, or "" once it exited
        assert ready_line.startswith("tritonserver ready"), (ready_line, proc.poll())
        (workspace,) = [str(p) for p in tmp.iterdir() if p.name.startswith("trtbuild-triton-")]
        stub, shm, folder = stub_of(workspace)
        _kill_stub_and_check(http, stub, proc)
        err = proc.stderr.read()
        assert (f"tritonserver: the Python-backend stub of model instance 'smallnet_0_0' (pid {stub}) died") in err, err
        assert "stopping the server, so that readiness turns false" in err
        assert folder == repo / "smallnet"  # the stub ran the repository's own model directory: kept
        _nothing_left(workspace, shm, None)
        assert (folder / "1" / "model.py").is_file()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _clean(workspace, shm, None)

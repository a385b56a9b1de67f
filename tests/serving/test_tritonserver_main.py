"""`python -m trtbuild.serving.tritonserver REPO` as a shell starts it in the background (SIGINT ignored,
as a non-interactive shell's `cmd &` does) and as Docker or Kubernetes stops it (SIGTERM): either signal
stops the server, no tritonserver is left and its trtbuild-triton-* work directory is removed."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.triton_models import skip_or_fail

import trtbuild
from trtbuild.serving.tritonserver import free_ports

pytestmark = pytest.mark.triton

REPO = Path(trtbuild.__file__).resolve().parents[1]
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def _server_pids(http_port: int) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"tritonserver .*--http-port={http_port} "], capture_output=True,
                         text=True, check=False).stdout
    return [int(p) for p in out.split()]


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_background_server_stops_on_signal_and_cleans_up(tmp_path, sig):
    from trtbuild.serving.python_env import stub_problem

    problem = stub_problem()
    if problem:
        skip_or_fail(problem)
    repo, tmp = tmp_path / "empty-repo", tmp_path / "tmp"
    repo.mkdir()
    tmp.mkdir()
    http, grpc, metrics = free_ports(3)
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtbuild.serving.tritonserver", str(repo), "--http-port", str(http), "--grpc-port",
         str(grpc), "--metrics-port", str(metrics), "--timeout", str(START_TIMEOUT_S)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # noqa: PLW1509 - as `cmd &` in a script
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S + 10
        while not any(line.startswith("tritonserver ready") for line in seen):
            assert time.monotonic() < deadline and proc.poll() is None, seen
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            assert line is not None, seen
            seen.append(line)
        assert _server_pids(http) and [p.name for p in tmp.iterdir()][0].startswith("trtbuild-triton-")
        proc.send_signal(sig)
        code = proc.wait(timeout=STOP_TIMEOUT_S)
        time.sleep(0.2)
        output = seen + [line for line in iter(lines.get, None)]
        assert code == 0, output
        said = "SIGINT (Ctrl-C)" if sig == signal.SIGINT else "SIGTERM"
        assert f"{said}: tritonserver stopped" in output, output
        assert _server_pids(http) == []
        assert list(tmp.iterdir()) == []  # the work directory (log, backend directory) is gone
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _server_pids(http):  # the server runs in its own process group, with its stubs
            os.killpg(pid, signal.SIGKILL)

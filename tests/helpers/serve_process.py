"""`trtbuild serve ARGS` in a subprocess on free loopback ports, its output lines collected (tests/serving)."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import trtbuild
from trtbuild.serving.tritonserver import free_ports

#: the checkout whose trtbuild this test process imported: the subprocess runs the same code
REPO = Path(trtbuild.__file__).resolve().parents[1]
START_TIMEOUT_S = 90


class Served:
    """`trtbuild serve ARGS` in a subprocess (its own session) with its output lines collected."""

    def __init__(self, args: list[str], cwd: Path, sigint_ignored: bool = False):
        self.http, self.grpc, self.metrics = free_ports(3)
        env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "TRTBUILD_BACKEND": "reference"}
        code = "import sys; from trtbuild.cli import main; sys.exit(main(sys.argv[1:]))"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "serve", *args, "--http-port", str(self.http), "--grpc-port",
             str(self.grpc), "--metrics-port", str(self.metrics)], cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None)  # noqa: PLW1509
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def wait_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith("serving '"):
                return
        self.kill()
        pytest.fail("trtbuild serve did not start serving:\n" + "\n".join(self.lines))

    def server_pids(self) -> list[int]:
        """tritonserver processes listening on this server's HTTP port."""
        out = subprocess.run(["pgrep", "-f", f"tritonserver .*--http-port {self.http} "], capture_output=True,
                             text=True).stdout
        return [int(p) for p in out.split()]

    def workspace(self) -> str:
        """The server's private directory (/tmp/trtbuild-serve-XXXX), read from tritonserver's command line."""
        pids = self.server_pids()
        assert len(pids) == 1, (pids, self.lines)
        cmdline = Path(f"/proc/{pids[0]}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        return re.search(r"--model-repository (\S+?)/workspace/", cmdline).group(1)

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10).read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + "{"))

    def kill(self):
        """SIGKILL a serve still running (a failed test), and remove what its server held: the processes
        naming its work directory, their shared memory, the work directory and Triton's model copy."""
        if self.proc.poll() is not None:
            return
        workspace, shm, folders = None, set(), set()
        pids = self.server_pids()
        if len(pids) == 1:
            workspace = self.workspace()
            for pid in pids_naming(workspace):
                shm |= _shm_of(pid)
                args = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
                folders |= {Path(a).parents[1] for a in args[1:2] if a.endswith("/model.py")}
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if workspace:
            for pid in pids_naming(workspace):
                os.kill(pid, signal.SIGKILL)
            for path in shm:
                path.unlink(missing_ok=True)
            for folder in [Path(workspace), *(f for f in folders if f.name.startswith("folder"))]:
                shutil.rmtree(folder, ignore_errors=True)


def pids_naming(text: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", text], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, killed and waiting for its parent to reap it, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _shm_of(pid: int) -> set[Path]:
    """The /dev/shm files process `pid` maps or names on its command line."""
    try:
        args = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return set()
    shm = {Path(line.split()[-1]) for line in maps if " /dev/shm/" in line}
    return shm | {Path("/dev/shm", a) for a in args if "/" not in a and Path("/dev/shm", a).is_file()}


def stub_of(workspace: str) -> tuple[int, set[Path], Path]:
    """(pid of the server's one stub, the /dev/shm files the server's processes map or name, the folder of the
    stub's model.py): what a test must find gone afterwards, and remove itself if the test fails."""
    pids = [p for p in pids_naming(workspace)
            if b"triton_python_backend_stub" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(pids) == 1, pids
    args = [a.decode() for a in Path(f"/proc/{pids[0]}/cmdline").read_bytes().split(b"\0") if a]
    shm = set().union(*(_shm_of(p) for p in pids_naming(workspace)))
    model_py = Path(args[1])
    assert model_py.name == "model.py", args
    return pids[0], shm, model_py.parents[1]

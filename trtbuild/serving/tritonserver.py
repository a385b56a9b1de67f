"""Start the tritonserver that nvidia-pytriton bundles on a model repository, on loopback ports.

    with TritonServer("models") as server:           # waits until ready (or raises, quoting the log)
        client = tritonclient.http.InferenceServerClient(server.http_url)
        ...
    # stopped: SIGINT, then SIGKILL of its process group after `stop_timeout` seconds

From a shell (serves until Ctrl-C, SIGINT or SIGTERM, also as a background job, then stops the server and
removes its work directory; ports 8000/8001/8002 unless given, still on 127.0.0.1)::

    python -m trtbuild.serving.tritonserver models [--http-port 8000 --grpc-port 8001 --metrics-port 8002]

HTTP, gRPC and metrics listen on 127.0.0.1 only, on free ports by default. The server runs in its own process
group with the environment of trtbuild.serving.python_env, so its Python backend embeds this
interpreter (torch and trtbuild importable). Its log goes to a file in a private work directory;
:class:`TritonServerError` quotes its error lines in one sentence when it fails to start or to load a model.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .leftovers import Removed, clean_up, snapshot
from .python_env import python_backend_dir, server_environment, tritonserver_binary
from .stub_watch import StubWatch

LOOPBACK = "127.0.0.1"
_ERROR_LINE = re.compile(r"^E\d{4} |error|failed|Traceback|Error:", re.IGNORECASE)
#: error lines that every start on a machine without a GPU logs, and that say nothing about the models
_NOISE = re.compile(r"CudaDriverHelper has not been initialized")


class TritonServerError(RuntimeError):
    """tritonserver did not start, or did not become ready (one sentence quoting its log)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies (Linux
    PR_SET_PDEATHSIG), so that no tritonserver outlives a killed test run or command."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports that were free a moment ago (all bound at once, then released)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def error_lines(log: str, limit: int = 6) -> list[str]:
    """The log's error lines (Triton prefixes them with E<mmdd>), each trimmed, the first `limit`."""
    found = []
    for line in log.splitlines():
        line = line.strip()
        if line and _ERROR_LINE.search(line) and not _NOISE.search(line) and line not in found:
            found.append(line[:300])
    return found[:limit]


class TritonServer:
    """A tritonserver process on `repository` (see the module docstring).

    ready_timeout: seconds to wait for readiness (models loaded); stop_timeout: seconds between
    SIGINT and SIGKILL; args: more tritonserver options (e.g. ``["--log-verbose=1"]``); ports:
    (http, grpc, metrics), default free ones. On Linux the server gets SIGTERM when the thread
    that started it ends (PR_SET_PDEATHSIG): start it from a thread that outlives it."""

    def __init__(self, repository, *, ready_timeout: float = 60.0, stop_timeout: float = 10.0, args=(),
                 ports: tuple | None = None):
        self.repository = Path(repository).resolve()
        self.ready_timeout, self.stop_timeout, self.args = ready_timeout, stop_timeout, list(args)
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.ports = ports  # (http, grpc, metrics); None: free ports
        self.http_port = self.grpc_port = self.metrics_port = None
        self.watch: StubWatch | None = None
        self.leftovers = Removed()  # what the last stop removed after the server's processes

    @property
    def http_url(self) -> str:
        return f"{LOOPBACK}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{LOOPBACK}:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "tritonserver.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except (OSError, TypeError):
            return ""

    def command(self) -> list[str]:
        return [str(tritonserver_binary()), f"--model-repository={self.repository}",
                f"--backend-directory={python_backend_dir(self.workdir)}",
                f"--http-address={LOOPBACK}", f"--http-port={self.http_port}",
                f"--grpc-address={LOOPBACK}", f"--grpc-port={self.grpc_port}",
                f"--metrics-address={LOOPBACK}", f"--metrics-port={self.metrics_port}",
                "--allow-gpu-metrics=false", f"--exit-timeout-secs={max(1, int(self.stop_timeout) - 2)}", *self.args]

    def start(self) -> TritonServer:
        """Start the server and wait until it is ready; TritonServerError (quoting the log) otherwise."""
        if not self.repository.is_dir():
            raise TritonServerError(f"model repository {self.repository} is not a directory")
        env = server_environment()  # StubError (one sentence) where the Python backend cannot run here
        self.workdir = Path(tempfile.mkdtemp(prefix="trtbuild-triton-"))
        self.http_port, self.grpc_port, self.metrics_port = self.ports or tuple(free_ports(3))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                            preexec_fn=_die_with_parent if sys.platform == "linux" else None)  # noqa: PLW1509
        try:
            self._wait_ready()
            self.watch = StubWatch(str(self.workdir), self.http_url)
        except BaseException:
            self.stop()
            raise
        return self

    def stub_death(self) -> str | None:
        """One sentence if a Python-backend stub died while Triton reports its model ready (stub_watch)."""
        return self.watch.check() if self.watch is not None else None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _failure(self, what: str) -> TritonServerError:
        lines = error_lines(self.log())
        quoted = "; ".join(lines) if lines else "no error lines; see its log " + str(self.log_path)
        return TritonServerError(f"tritonserver on {self.repository} {what}: {quoted}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise self._failure(f"exited with code {code} before it was ready")
            if self.ready():
                return
            time.sleep(0.2)
        raise self._failure(f"was not ready after {self.ready_timeout:.0f} s")

    def stop(self) -> int | None:
        """SIGINT (Triton unloads its models and exits), SIGKILL to the process group after
        stop_timeout seconds; returns the exit code. The work directory is removed."""
        process, code = self.process, None
        marker = str(self.workdir) if self.workdir is not None else None
        before = {**(self.watch.seen if self.watch is not None else {}), **(snapshot(marker) if marker else {})}
        self.watch = None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    pass
            try:  # the Python-backend stubs are in the server's process group
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            code = process.wait()
        if marker:  # a stub that died or was orphaned leaves shared memory and its model folder
            self.leftovers = clean_up(marker, before)
        if self.workdir is not None and self.workdir.exists():
            keep = os.environ.get("TRTBUILD_KEEP_TRITON_LOG")
            if keep:
                shutil.copy2(self.log_path, keep)
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.process = None
        return code

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    """python -m trtbuild.serving.tritonserver REPO: serve a model repository until Ctrl-C, SIGINT or SIGTERM."""
    import argparse

    from .python_env import StubError
    from .stop_signals import stop_on_signals

    p = argparse.ArgumentParser(prog="python -m trtbuild.serving.tritonserver", description=main.__doc__)
    p.add_argument("repository", help="model repository (trtbuild export-triton --repo DIR)")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the models to load")
    p.add_argument("args", nargs="*", help="more tritonserver options, after --")
    args = p.parse_args(argv)
    server = TritonServer(args.repository, ready_timeout=args.timeout, args=args.args,
                          ports=(args.http_port, args.grpc_port, args.metrics_port))
    received, restore = stop_on_signals()  # also while the models load: start() stops what it started
    try:
        server.start()
        print(f"tritonserver ready on {args.repository}: HTTP {server.http_url}, gRPC {server.grpc_url}, "
              f"metrics {LOOPBACK}:{server.metrics_port} (Ctrl-C stops it)", flush=True)
        while server.process.poll() is None:
            death = server.stub_death()
            if death:
                print(f"tritonserver: {death}: stopping the server, so that readiness turns false and a supervisor "
                      "can start a fresh one (exit code 1)", file=sys.stderr, flush=True)
                return 1
            time.sleep(0.5)
        print(f"tritonserver exited with code {server.process.returncode}", file=sys.stderr)
        return 1
    except (StubError, TritonServerError) as e:
        print(f"trtbuild: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        server.stop()
        print(f"{received[0] if received else 'SIGINT (Ctrl-C)'}: tritonserver stopped", flush=True)
        return 0
    finally:
        server.stop()
        restore()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

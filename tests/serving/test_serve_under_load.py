"""Ctrl-C of `trtbuild serve` while 32 clients keep it busy: tritonserver can die while stopping under
load and leave its Python-backend stub running (PPID 1, ignoring SIGTERM, holding its shared memory
and a temporary copy of the model directory). When the command returns, the stub, its shared-memory
segments and its model folder must be gone."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers.serve_process import Served, pids_naming, running, stub_of
from helpers.triton_models import skip_or_fail

pytestmark = pytest.mark.triton

CLIENTS = 32
LOAD_S = 3  # load before Ctrl-C
MAX_REQUESTS = 400  # per client, a bound besides the time


def _load(port: int, stop: threading.Event, done: list[int]) -> None:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=10, network_timeout=10)
    x = httpclient.InferInput("input", [1, 3, 64, 64], "FP32")
    x.set_data_from_numpy(np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32))
    try:
        for _ in range(MAX_REQUESTS):
            if stop.is_set():
                return
            try:
                client.infer("resnet18", [x])
                done.append(1)
            except Exception:  # noqa: BLE001 - the server is going away
                time.sleep(0.05)
    finally:
        client.close()


def test_ctrl_c_under_load_leaves_no_stub_shared_memory_or_folder(tmp_path):
    from trtbuild.serving.python_env import stub_problem

    problem = stub_problem()
    if problem:
        skip_or_fail(problem)
    served = Served(["resnet18", "--small"], tmp_path)
    stop, done, threads = threading.Event(), [], []
    stub, shm, folder, workspace = None, set(), None, None
    try:
        served.wait_serving()
        workspace = served.workspace()
        stub, shm, folder = stub_of(workspace)
        assert shm and folder.is_dir()
        threads = [threading.Thread(target=_load, args=(served.http, stop, done), daemon=True) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + LOAD_S
        while time.monotonic() < deadline:
            time.sleep(0.1)
        assert done, "no request was answered"
        os.killpg(served.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C, while the clients keep sending
        code = served.proc.wait(timeout=60)
        stop.set()
        output = "\n".join(served.lines)
        assert code == 130, output
        assert not running(stub), f"the stub {stub} outlived `trtbuild serve`:\n{output}"
        assert pids_naming(workspace) == []
        assert sorted(p for p in shm if p.exists()) == [], output
        assert not folder.exists() and not Path(workspace).exists()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
        served.kill()
        for pid in pids_naming(workspace) if workspace else []:
            os.kill(pid, signal.SIGKILL)
        if workspace:  # a killed serve could not remove it
            shutil.rmtree(workspace, ignore_errors=True)
        for path in shm:
            path.unlink(missing_ok=True)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

"""`trtbuild serve`: a real Triton Inference Server (nvidia-pytriton's tritonserver) serving trtbuild
engines, started as a subprocess on loopback ports, hit by 32 concurrent tritonclient clients over
HTTP and gRPC, every response compared with a direct `Engine` run of the same input in this process,
then stopped with SIGINT: exit code 130 and no tritonserver (or Python-backend stub) left.

Bit-exact comparison under dynamic batching: on the reference backend (PyTorch on CPU) a row's
result depends on the batch size it ran in, not on its position or the other rows (checked below),
so a response must equal, bit for bit, the direct run of its input zero-padded to one of the batch
sizes the batcher could have formed. Where Triton's Python-backend stub cannot run this Python the
tests skip with python_env.stub_problem()'s sentence; under CI=true they fail instead."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.serve_process import Served

from trtbuild.serving.tritonserver import free_ports

pytestmark = pytest.mark.triton

CLIENTS, REQUESTS, MAX_BATCH = 32, 64, 4


@pytest.fixture(scope="module")
def triton_ok():
    """Skip (fail under CI=true) with one sentence where Triton's Python backend cannot run here."""
    from trtbuild.serving.python_env import stub_problem

    problem = stub_problem()
    if problem is None:
        try:
            import tritonclient.grpc
            import tritonclient.http  # noqa: F401
        except ImportError as e:
            problem = f"tritonclient is not installed ({e}); pip install \"trtbuild[serve]\""
    if problem:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the Triton serving tests, but: {problem}")
        pytest.skip(problem)


def send_all(served: Served, model: str, inputs: list[np.ndarray], input_name: str, output_name: str):
    """REQUESTS requests from CLIENTS concurrent clients, alternating HTTP and gRPC, input k % len(inputs).
    Returns [(input index, protocol, output ndarray)]; any failed request raises."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    local, opened = threading.local(), []

    def one(i: int):
        k, proto = i % len(inputs), ("http", "grpc")[i % 2]
        if not hasattr(local, proto):
            setattr(local, proto, httpclient.InferenceServerClient(f"127.0.0.1:{served.http}") if proto == "http"
                    else grpcclient.InferenceServerClient(f"127.0.0.1:{served.grpc}"))
            opened.append(getattr(local, proto))
        lib = httpclient if proto == "http" else grpcclient
        x = inputs[k]
        feed = lib.InferInput(input_name, list(x.shape), "FP32")
        feed.set_data_from_numpy(x)
        result = getattr(local, proto).infer(model, [feed], outputs=[lib.InferRequestedOutput(output_name)])
        return k, proto, result.as_numpy(output_name)

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            return list(pool.map(one, range(REQUESTS)))  # re-raises the first failed request
    finally:
        for client in opened:
            client.close()


def direct_runs(engine, x: np.ndarray, sizes) -> dict[int, torch.Tensor]:
    """{n: engine output for x zero-padded to batch n, first len(x) rows}."""
    name, out = engine.input_names[0], engine.output_names[0]
    t = torch.from_numpy(x)
    return {n: engine.run({name: torch.cat([t, t.new_zeros((n - len(t), *t.shape[1:]))])})[out][:len(t)].clone()
            for n in sizes}


def stop_and_check(served: Served, group: bool, sig=signal.SIGINT) -> None:
    """`sig` (to the process only, or to its whole group as a terminal's Ctrl-C does): exit 130, the
    stop line printed, no tritonserver or stub of this server left, its directory removed."""
    workspace = served.workspace()
    assert Path(workspace).is_dir()
    if group:
        os.killpg(served.proc.pid, sig)
    else:
        served.proc.send_signal(sig)
    try:
        code = served.proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        served.kill()
        pytest.fail(f"trtbuild serve did not exit within 40 s of {sig.name}:\n" + "\n".join(served.lines))
    time.sleep(0.2)
    output = "\n".join(served.lines)
    assert code == 130, output
    said = "SIGINT (Ctrl-C)" if sig == signal.SIGINT else sig.name
    assert f"serve: {said}: Triton Inference Server stopped" in output and "trtbuild: interrupted" in output, output
    left = subprocess.run(["pgrep", "-f", workspace], capture_output=True, text=True).stdout.split()
    assert left == [], f"processes of {workspace} left after SIGINT: {left}"
    assert served.server_pids() == []
    assert not Path(workspace).exists()


def test_rows_depend_on_batch_size_only():
    """What the bit-exact comparisons below rely on: on the reference backend, a row's result is the
    same wherever it sits in a batch and whatever the other rows are, for a given batch size."""
    from trtbuild.engine import Engine, build_model
    from trtbuild.models import registry
    from trtbuild.weights import WeightMap
    import trtbuild.reference as trt

    module = registry.get_torch_model("resnet18", small=True)
    plan = build_model("resnet18", WeightMap.from_module(module), trt, small=True, batch=(1, 4, 4), progress=False)
    engine = Engine(plan, trt)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1, 3, 64, 64, generator=g)
    for n in (2, 3, 4):
        others = torch.rand(n, 3, 64, 64, generator=g)
        for pos in (0, n - 1):
            batch = others.clone()
            batch[pos] = x[0]
            padded = torch.cat([x, torch.zeros(n - 1, 3, 64, 64)])
            assert torch.equal(engine.run({"input": batch})["logits"][pos], engine.run({"input": padded})["logits"][0])


def test_serve_zoo_engine_with_dynamic_batching(triton_ok, tmp_path):
    """resnet18 --small engine file (profile 1..4), dynamic batching: 64 requests of batch 1 and 2 from
    32 concurrent HTTP and gRPC clients all succeed, each equals a direct run bit for bit, and Triton's
    own counters show that requests were merged into fewer executions. Started with SIGINT ignored
    (a background job of a non-interactive shell), `kill -INT` still stops it cleanly."""
    from trtbuild.engine import build_and_save, load_engine
    from trtbuild.models import registry
    from trtbuild.weights import export_weights
    import trtbuild.reference as trt

    export_weights(registry.get_torch_model("resnet18", small=True), tmp_path / "r18.wts")
    path, _ = build_and_save("resnet18", tmp_path / "r18.wts", tmp_path / "r18.engine", trt, small=True,
                             batch=(1, 2, MAX_BATCH), progress=False)
    # as a background job of a non-interactive shell starts it: SIGINT ignored; `kill -INT` must still stop it
    served = Served(["resnet18", "--small", "--engine", str(path)], tmp_path, sigint_ignored=True)
    try:
        served.wait_serving()
        assert served.lines[0].startswith("backend: reference"), served.lines
        assert any(line.startswith("batching: dynamic") and f"up to {MAX_BATCH}" in line for line in served.lines)
        assert any(line.startswith("threads: 1 PyTorch thread(s) run the engine") for line in served.lines)  # default
        rng = np.random.default_rng(0)
        inputs = [rng.random((1 + k % 2, 3, 64, 64), dtype=np.float32) for k in range(8)]
        results = send_all(served, "resnet18", inputs, "input", "logits")
        executions = served.metric("nv_inference_exec_count")
        requests = served.metric("nv_inference_request_success")
        stop_and_check(served, group=False)
    finally:
        served.kill()
    engine = load_engine(path, trt)
    expected = [direct_runs(engine, x, range(len(x), MAX_BATCH + 1)) for x in inputs]
    assert len(results) == REQUESTS and {p for _, p, _ in results} == {"http", "grpc"}
    for k, proto, y in results:
        matches = [n for n, e in expected[k].items() if torch.equal(torch.from_numpy(y), e)]
        assert matches, (k, proto, {n: (torch.from_numpy(y) - e).abs().max().item() for n, e in expected[k].items()})
    assert requests == REQUESTS
    assert executions < REQUESTS, f"dynamic batching merged nothing: {executions} executions for {requests} requests"


def test_serve_user_network_built_in_memory(triton_ok, tmp_path):
    """The docs' own network (docs/your-own-model.md) (net.py:tinynet), built in memory from --weights, dynamic batching
    off: every one of 64 concurrent HTTP/gRPC responses equals the direct run at its own batch size, one
    execution per request; a terminal's Ctrl-C (SIGINT to the process group) stops it cleanly."""
    from helpers.own_model_page import section_blocks
    from trtbuild.engine import Engine, build_model
    from trtbuild.models.registry import ModelSpec
    from trtbuild.weights import WeightMap, export_weights
    import trtbuild.reference as trt

    files, _, _ = section_blocks()
    (tmp_path / "net.py").write_text(files["net.py"])
    namespace: dict = {}
    exec(compile(files["net.py"], str(tmp_path / "net.py"), "exec"), namespace)
    torch.manual_seed(0)
    export_weights(namespace["make_model"](), tmp_path / "tiny.wts")
    served = Served(["net.py:tinynet", "--input", "input:1x3x32x32", "--weights", "tiny.wts", "--max-batch",
                     str(MAX_BATCH), "--no-dynamic-batching", "--threads", "2"], tmp_path)
    try:
        served.wait_serving()
        assert any(line.startswith("batching: dynamic batching off") for line in served.lines), served.lines
        assert any(line.startswith("threads: 2 PyTorch thread(s)") for line in served.lines), served.lines
        rng = np.random.default_rng(1)
        inputs = [rng.random((1 + k % MAX_BATCH, 3, 32, 32), dtype=np.float32) for k in range(8)]
        results = send_all(served, "tinynet", inputs, "input", "logits")
        executions = served.metric("nv_inference_exec_count")
        stop_and_check(served, group=True)
    finally:
        served.kill()
    spec = ModelSpec(name="tinynet_direct", description="", torch_factory=None, build_network=namespace["tinynet"],
                     input_shape=lambda small=False: (1, 3, 32, 32), output_names=["logits"])
    plan = build_model(spec, WeightMap.load(tmp_path / "tiny.wts"), trt, batch=(1, MAX_BATCH, MAX_BATCH),
                       progress=False)
    engine = Engine(plan, trt)
    expected = [direct_runs(engine, x, [len(x)])[len(x)] for x in inputs]
    assert len(results) == REQUESTS
    for k, proto, y in results:
        assert torch.equal(torch.from_numpy(y), expected[k]), (k, proto)
    assert executions == REQUESTS


def test_serve_refusals_name_the_option(triton_ok, tmp_path, capsys):
    """Refused in one sentence before any server starts: a port in use, two equal ports, --max-batch
    beyond the engine's profile."""
    from trtbuild.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        base = ["serve", "resnet18", "--small", "--backend", "reference"]
        http, grpc, metrics = free_ports(3)
        assert main([*base, "--http-port", str(port), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]) == 1
        err = capsys.readouterr().err
        assert f"--http-port {port}: cannot listen on 127.0.0.1:{port}" in err, err
    assert main([*base, "--http-port", str(http), "--grpc-port", str(http), "--metrics-port", str(metrics)]) == 1
    assert f"--grpc-port {http}: --http-port is {http} too" in capsys.readouterr().err
    from trtbuild.engine import build_and_save
    from trtbuild.models import registry
    from trtbuild.weights import export_weights
    import trtbuild.reference as trt

    export_weights(registry.get_torch_model("resnet18", small=True), tmp_path / "r18.wts")
    path, _ = build_and_save("resnet18", tmp_path / "r18.wts", tmp_path / "r18.engine", trt, small=True,
                             batch=(1, 2, 2), progress=False)
    assert main([*base, "--engine", str(path), "--max-batch", "3", "--http-port", str(http), "--grpc-port",
                 str(grpc), "--metrics-port", str(metrics)]) == 1
    err = capsys.readouterr().err
    assert "--max-batch 3: engine" in err and "runs batches of 1 to 2" in err, err


def test_serve_static_batch_engine_and_sigterm(triton_ok, tmp_path):
    """A static-batch engine (batch 1, no profile) is served unbatched: the batching line says so, a
    request of its shape over HTTP and gRPC equals the direct run, another batch is refused by Triton
    naming the shape, and so is (--reject-nonfinite) an input holding NaN; SIGTERM (what Docker and Kubernetes
    send) stops it as cleanly as Ctrl-C."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    from trtbuild.engine import build_and_save, load_engine
    from trtbuild.models import registry
    from trtbuild.weights import export_weights
    import trtbuild.reference as trt

    export_weights(registry.get_torch_model("resnet18", small=True), tmp_path / "r18.wts")
    path, _ = build_and_save("resnet18", tmp_path / "r18.wts", tmp_path / "static.engine", trt, small=True,
                             progress=False)
    served = Served(["resnet18", "--small", "--engine", str(path), "--name", "r18_static", "--reject-nonfinite"],
                    tmp_path)
    x = np.random.default_rng(2).random((1, 3, 64, 64), dtype=np.float32)
    try:
        served.wait_serving()
        assert any(line.startswith("batching: none: the engine has a static batch of 1") for line in served.lines)
        outputs = []
        for lib, port in ((httpclient, served.http), (grpcclient, served.grpc)):
            client = lib.InferenceServerClient(f"127.0.0.1:{port}")
            try:
                feed = lib.InferInput("input", [1, 3, 64, 64], "FP32")
                feed.set_data_from_numpy(x)
                outputs.append(client.infer("r18_static", [feed]).as_numpy("logits"))
                wrong = lib.InferInput("input", [2, 3, 64, 64], "FP32")
                wrong.set_data_from_numpy(np.concatenate([x, x]))
                with pytest.raises(InferenceServerException, match=r"unexpected shape for input 'input'"):
                    client.infer("r18_static", [wrong])
                nan = lib.InferInput("input", [1, 3, 64, 64], "FP32")  # --reject-nonfinite: refused, named
                with_nan = x.copy()
                with_nan[0, 1, 2, 3] = np.nan
                nan.set_data_from_numpy(with_nan)
                with pytest.raises(InferenceServerException, match=r"input 'input' holds 1 NaN and 0 infinite "
                                                                   r"value\(s\) of 12288, and this model rejects "
                                                                   r"non-finite inputs \(--reject-nonfinite\)"):
                    client.infer("r18_static", [nan])
            finally:
                client.close()
        stop_and_check(served, group=False, sig=signal.SIGTERM)
    finally:
        served.kill()
    expected = load_engine(path, trt).run({"input": torch.from_numpy(x)})["logits"]
    for y in outputs:
        assert torch.equal(torch.from_numpy(y), expected)

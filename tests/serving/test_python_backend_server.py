"""A real Triton Inference Server (the tritonserver nvidia-pytriton bundles) serving a repository that
`trtbuild export-triton --kind python` wrote: zoo models (vit_tiny among them, with a dynamic batch) and a
user network, 32 concurrent tritonclient clients over HTTP and gRPC, every response equal to a direct
Engine run on the same input (bit-exact on the reference), and no server process left afterwards.
Loopback only; one server for the module."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from helpers.triton_models import build_user, build_zoo, skip_or_fail

from trtbuild.cli import main

pytestmark = pytest.mark.triton

CLIENTS = 32
REQUESTS = 64  # per protocol and model
TIMEOUT_S = 60
VIT_PROFILE = (1, 2, 4)  # vit_tiny's batch profile (--batch 1,2,4): Triton's max_batch_size 4
VIT_BATCHES = (1, 3)  # the batch sizes of its requests, alternating


def _stub_problem() -> str | None:
    try:
        import tritonclient.grpc
        import tritonclient.http  # noqa: F401
    except ImportError as e:
        return f"tritonclient is not installed ({e}); `pip install -e .[test]` installs it"
    from trtbuild.serving.python_env import stub_problem

    return stub_problem()


def _still_running(repo) -> list[str]:
    """Processes whose command line names the repository (the server; its stubs name the models)."""
    found = subprocess.run(["pgrep", "-af", str(repo)], capture_output=True, text=True, check=False).stdout
    return [line for line in found.splitlines() if "pgrep" not in line]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    problem = _stub_problem()
    if problem:
        skip_or_fail(problem)
    from trtbuild.serving.tritonserver import TritonServer

    work = tmp_path_factory.mktemp("triton-serve")
    repo = work / "repo"
    user_ref, user_engine = build_user(work)
    engines = {"resnet18": build_zoo(work, "resnet18", batch=(1, 4, 8)), "smallnet": user_engine,
               "rednet": build_zoo(work, "rednet"), "vit_tiny": build_zoo(work, "vit_tiny", batch=VIT_PROFILE)}
    export = [("resnet18", engines["resnet18"], ["--small"]), (user_ref, user_engine, []),
              ("rednet", engines["rednet"], ["--small"]), ("vit_tiny", engines["vit_tiny"], ["--small"]),
              ("resnet18", engines["resnet18"], ["--small", "--name", "resnet18_concat", "--batching", "concatenate"]),
              (user_ref, user_engine, ["--name", "smallnet_finite", "--batching", "concatenate", "--reject-nonfinite"])]
    for model, engine, more in export:
        assert main(["export-triton", model, "--engine", str(engine), "--repo", str(repo), "--kind", "python",
                     *more]) == 0
    server = TritonServer(repo, ready_timeout=TIMEOUT_S)
    server.start()  # TritonServerError unless ready (all six models loaded) within TIMEOUT_S
    from trtbuild.engine import load_engine

    direct = {name: load_engine(path) for name, path in engines.items()}
    yield {"server": server, "repo": repo, "direct": direct, "expected": {}, "work": work}
    server.stop()


def _requests(name: str, shape, count: int, max_batch: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_batch + 1, (count,), generator=gen).tolist() if max_batch else [None] * count
    return [torch.rand(*(shape if b is None else (b, *shape[1:])), generator=gen) for b in sizes]


def _infer(module, url: str, model: str, inputs: list, input_name: str, output: str) -> list[np.ndarray]:
    """Send `inputs` from CLIENTS threads, each with its own client; return the responses in order."""

    http = module.__name__.endswith("http")
    timeouts = {"connection_timeout": TIMEOUT_S, "network_timeout": TIMEOUT_S} if http else {}
    per_call = {} if http else {"client_timeout": TIMEOUT_S}

    def one(i):
        client = module.InferenceServerClient(url, **timeouts)
        try:
            results = []
            for x in inputs[i::CLIENTS]:
                arg = module.InferInput(input_name, list(x.shape), "FP32")
                arg.set_data_from_numpy(x.numpy())
                results.append(client.infer(model, [arg], outputs=[module.InferRequestedOutput(output)],
                                            **per_call).as_numpy(output))
            return results
        finally:
            client.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        per_client = list(pool.map(one, range(CLIENTS)))
    answers = [None] * len(inputs)
    for i, results in enumerate(per_client):
        answers[i::CLIENTS] = results
    return answers


@pytest.mark.parametrize("protocol, model, input_name, output, max_batch", [
    ("http", "resnet18", "input", "logits", 1),  # requests of 1 sample: resnet18 is the slow one on a CPU
    ("grpc", "resnet18", "input", "logits", 1),
    ("http", "smallnet", "input", "scores", 4),  # the user network (net.py:smallnet): requests of 1..4 samples
    ("grpc", "smallnet", "input", "scores", 4),
    ("grpc", "rednet", "input", "logits", 0),  # static batch 1; the involution plugin's reference twin
])
def test_concurrent_requests_equal_direct_runs(served, protocol, model, input_name, output, max_batch):
    import tritonclient.grpc
    import tritonclient.http

    module = tritonclient.http if protocol == "http" else tritonclient.grpc
    server, engine = served["server"], served["direct"][model]
    url = server.http_url if protocol == "http" else server.grpc_url
    shape = engine.tensors[input_name].max_shape if max_batch else engine.tensors[input_name].shape
    count = REQUESTS if model != "rednet" else CLIENTS  # rednet: one request of its static batch 1 per client
    inputs = _requests(model, shape, count, max_batch, seed=len(model))  # the same over HTTP and gRPC
    answers = _infer(module, url, model, inputs, input_name, output)
    expected = served["expected"].setdefault(model, [engine(x)[output] for x in inputs])  # direct runs, once
    for x, answer, want in zip(inputs, answers, expected):
        assert torch.equal(torch.from_numpy(answer), want), f"{model} over {protocol}: batch {tuple(x.shape)}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_vit_tiny_dynamic_batch_equals_direct_runs_and_pytorch(served, protocol):
    """A zoo model with a dynamic batch (vit_tiny, small: 48x48, built with --batch 1,2,4): the server loaded
    it with max_batch_size 4 and per-sample dims, and concurrent requests of batch 1 and 3 each come back
    equal, bit for bit, to a direct Engine run of the same input and within the fp32 tolerance of
    PyTorch's vit_tiny with the engine's weights."""
    import tritonclient.grpc
    import tritonclient.http
    from helpers.model_checks import check_fp32

    from trtbuild.models.registry import get_torch_model
    from trtbuild.parity.check import load_weights_into
    from trtbuild.weights import WeightMap

    module = tritonclient.http if protocol == "http" else tritonclient.grpc
    server, engine = served["server"], served["direct"]["vit_tiny"]
    url = server.http_url if protocol == "http" else server.grpc_url
    client = module.InferenceServerClient(url)
    try:
        cfg = client.get_model_config("vit_tiny", **({} if protocol == "http" else {"as_json": True}))
    finally:
        client.close()
    cfg = cfg.get("config", cfg)  # gRPC wraps it in {"config": ...}
    assert int(cfg["max_batch_size"]) == VIT_PROFILE[-1]
    assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["input"]] == [
        ("input", "TYPE_FP32", [3, 48, 48])]  # without the batch dimension
    assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["output"]] == [
        ("logits", "TYPE_FP32", [1000])]
    assert [int(b) for b in cfg["dynamic_batching"]["preferred_batch_size"]] == [2, 4]

    gen = torch.Generator().manual_seed(21)
    inputs = [torch.rand(VIT_BATCHES[i % 2], 3, 48, 48, generator=gen) for i in range(CLIENTS)]
    answers = _infer(module, url, "vit_tiny", inputs, "input", "logits")
    if "vit_tiny" not in served["expected"]:
        # On the instance's thread count (trtbuild_threads, default 1): at batch 1, PyTorch's CPU matrix
        # multiplies split their sums by thread, so a direct run on 2 threads differs in the last bits.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            served["expected"]["vit_tiny"] = [engine(x)["logits"] for x in inputs]
        finally:
            torch.set_num_threads(threads)
    expected = served["expected"]["vit_tiny"]
    if "vit_tiny_torch" not in served["expected"]:
        model = load_weights_into(get_torch_model("vit_tiny", small=True),
                                  WeightMap.load(served["work"] / "vit_tiny-small.wts"))
        with torch.no_grad():
            served["expected"]["vit_tiny_torch"] = [model(x) for x in inputs]
    for i, (x, answer, want, ref) in enumerate(zip(inputs, answers, expected, served["expected"]["vit_tiny_torch"])):
        got = torch.from_numpy(answer)
        assert torch.equal(got, want), f"vit_tiny over {protocol}: request {i}, batch {tuple(x.shape)}"
        check_fp32(got, ref, f"vit_tiny over {protocol}: request {i} against PyTorch")
    assert {a.shape[0] for a in answers} == set(VIT_BATCHES)


def test_vit_tiny_refuses_a_batch_over_max_batch_size(served):
    import tritonclient.http
    from tritonclient.utils import InferenceServerException

    client = tritonclient.http.InferenceServerClient(served["server"].http_url)
    try:
        arg = tritonclient.http.InferInput("input", [5, 3, 48, 48], "FP32")
        arg.set_data_from_numpy(np.zeros((5, 3, 48, 48), np.float32))
        with pytest.raises(InferenceServerException, match=r"batch.size must be <= 4 for 'vit_tiny'"):
            client.infer("vit_tiny", [arg])
    finally:
        client.close()


def test_dynamic_batching_concatenates_requests(served):
    """--batching concatenate: Triton's dynamic batcher hands the model several requests at once and the
    engine runs them as one batch. On the reference a row's result depends only on the batch size it ran
    in (test_triton_serve.test_rows_depend_on_batch_size_only), so every answer must equal, bit for bit,
    the direct run of its input zero-padded to some batch size, and some answer must equal only a run at a
    batch size above 1: one engine run served several requests (Triton's execution count alone would not
    tell, as the model could run the requests it is handed one by one)."""
    import tritonclient.http

    server, engine = served["server"], served["direct"]["resnet18"]
    inputs = _requests("resnet18_concat", (8, 3, 64, 64), CLIENTS, 1, seed=7)  # one request per client, at once
    answers = _infer(tritonclient.http, server.http_url, "resnet18_concat", inputs, "input", "logits")

    def batch_sizes(x, answer):
        """The engine batch sizes whose direct run of x (zero-padded) equals `answer` bit for bit."""
        y = torch.from_numpy(answer)
        return [n for n in range(1, 9)
                if torch.equal(y, engine(torch.cat([x, x.new_zeros((n - 1, *x.shape[1:]))]))["logits"][:1])]

    sizes = [batch_sizes(x, answer) for x, answer in zip(inputs, answers)]
    assert all(sizes), [i for i, s in enumerate(sizes) if not s]  # every answer is one engine run's row
    assert any(1 not in s for s in sizes), f"every answer equals its batch-1 run: nothing was concatenated {sizes}"
    client = tritonclient.http.InferenceServerClient(server.http_url)
    try:
        stats = client.get_inference_statistics("resnet18_concat")["model_stats"][0]
    finally:
        client.close()
    assert int(stats["inference_count"]) == sum(x.shape[0] for x in inputs)
    assert int(stats["execution_count"]) < len(inputs)  # some executions were handed several requests


def test_bad_request_fails_alone(served):
    import tritonclient.http
    from tritonclient.utils import InferenceServerException

    client = tritonclient.http.InferenceServerClient(served["server"].http_url)
    try:
        arg = tritonclient.http.InferInput("input", [1, 3, 32, 32], "FP32")  # the engine takes 64x64
        arg.set_data_from_numpy(np.zeros((1, 3, 32, 32), np.float32))
        # refused by Triton against config.pbtxt's dims, before the model runs, naming the input and the shapes
        with pytest.raises(InferenceServerException, match=r"unexpected shape for input 'input' for model 'resnet18'\. "
                                                           r"Expected \[-1,3,64,64\], got \[1,3,32,32\]"):
            client.infer("resnet18", [arg])
        assert client.is_server_ready()
        good = tritonclient.http.InferInput("input", [1, 3, 64, 64], "FP32")  # the next request is served
        x = np.random.default_rng(3).random((1, 3, 64, 64), dtype=np.float32)
        good.set_data_from_numpy(x)
        answer = client.infer("resnet18", [good]).as_numpy("logits")
        assert torch.equal(torch.from_numpy(answer), served["direct"]["resnet18"](torch.from_numpy(x))["logits"])
    finally:
        client.close()


def test_nonfinite_inputs_are_refused_where_configured(served):
    """--reject-nonfinite: a request holding NaN or Inf is refused in one sentence naming the input and the
    counts, and only that request (sent at once with finite ones, which Triton may batch with it); without
    it (the default) the engine runs the request."""
    import tritonclient.http
    from tritonclient.utils import InferenceServerException

    url, engine = served["server"].http_url, served["direct"]["smallnet"]
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    bad = x.clone()
    bad[0, 0, 0, :3] = torch.tensor([float("nan"), float("inf"), float("nan")])

    def send(model, value):
        client = tritonclient.http.InferenceServerClient(url, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)
        try:
            arg = tritonclient.http.InferInput("input", list(value.shape), "FP32")
            arg.set_data_from_numpy(value.numpy())
            return client.infer("smallnet_finite" if model else "smallnet", [arg]).as_numpy("scores")
        except InferenceServerException as e:
            return e
        finally:
            client.close()

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(send, [True] * 4, [x, bad, x, x]))
    refused = answers[1]
    assert isinstance(refused, InferenceServerException), refused
    assert ("input 'input' holds 2 NaN and 1 infinite value(s) of 1536, and this model rejects non-finite inputs "
            "(trtbuild_reject_nonfinite: true)") in str(refused), str(refused)
    for answer in answers[::2] + answers[3:]:
        assert torch.equal(torch.from_numpy(answer), engine(x)["scores"])
    passed = send(False, bad)  # the default: not checked, the engine runs it
    assert not isinstance(passed, Exception) and np.isnan(passed[0]).all() and np.isfinite(passed[1]).all()


def test_each_instance_sets_its_own_torch_threads(served):
    """Every model instance (a stub process of its own) set PyTorch's threads from config.pbtxt (default 1)
    when Triton loaded it, and said so in Triton's log."""
    log = served["server"].log()
    for model in ("resnet18", "smallnet", "rednet", "vit_tiny", "resnet18_concat", "smallnet_finite"):
        assert f"trtbuild: model '{model}' instance '{model}_0_0' runs 1 PyTorch thread(s)" in log, model


def test_server_stops_cleanly(served):
    server = served["server"]
    process = server.process
    assert _still_running(served["repo"])  # the server runs now, so pgrep finds it
    server.stop()
    assert process.poll() is not None
    assert _still_running(served["repo"]) == []


def test_model_that_fails_to_load_is_reported_in_one_sentence(served, tmp_path):
    """A tampered engine: the model's initialize fails (sha256 mismatch), Triton exits, and the error
    quotes the server log's lines."""
    from trtbuild.serving.tritonserver import TritonServer, TritonServerError

    repo = tmp_path / "repo"
    shutil.copytree(served["repo"] / "smallnet", repo / "smallnet")
    engine = repo / "smallnet" / "1" / "model.engine"
    data = bytearray(engine.read_bytes())
    data[-1] ^= 1
    engine.write_bytes(bytes(data))
    with pytest.raises(TritonServerError) as info:
        TritonServer(repo, ready_timeout=TIMEOUT_S).start()
    message = str(info.value)
    assert "failed to load 'smallnet'" in message and "does not match the sha256" in message
    assert "\n" not in message, message  # one sentence: the log's error lines are quoted on one line
    assert _still_running(repo) == []


def test_server_dies_with_the_process_that_started_it(tmp_path):
    """A test run killed with SIGKILL leaves no tritonserver behind (PR_SET_PDEATHSIG)."""
    problem = _stub_problem()
    if problem:
        skip_or_fail(problem)
    repo = tmp_path / "empty-repo"
    repo.mkdir()
    script = ("import sys, time\nfrom trtbuild.serving.tritonserver import TritonServer\n"
              f"s = TritonServer({str(repo)!r}, ready_timeout={TIMEOUT_S}).start()\n"
              "print(s.process.pid, s.workdir, flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid, workdir = parent.stdout.readline().split()
        pid = int(pid)
        assert _still_running(repo)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 20
    while _still_running(repo) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _still_running(repo)
    shutil.rmtree(workdir, ignore_errors=True)  # the killed starter could not remove it
    if left:
        os.killpg(pid, signal.SIGKILL)  # its own process group (the server and its stubs)
    assert left == [], f"tritonserver {pid} outlived the process that started it"

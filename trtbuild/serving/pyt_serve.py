"""Serve a trtbuild engine through a real Triton Inference Server, with PyTriton.

    layout = triton_layout(engine, max_batch=8)           # what Triton is told: tensors, batching
    with PytritonServer(engine, "resnet18", layout, Ports(8000, 8001, 8002)) as server:
        server.wait()                                      # until Ctrl-C or the server dies

PyTriton starts nvidia-pytriton's bundled ``tritonserver`` and binds a Python model whose requests
come back to *this* process: the engine runs here, with trtbuild's ``Engine`` (TensorRT where it
runs, else the reference backend). Triton's Python-backend stub must embed this interpreter, so
the server starts with ``python_env.server_environment()``'s LD_LIBRARY_PATH (or not at all: one
sentence from ``stub_problem()``).

Batching: an engine with a batch profile is served with ``max_batch_size`` = the largest batch any
of its optimization profiles takes (or ``max_batch``) and Triton's dynamic batcher, which merges
concurrent requests into one execution; a static-batch engine is served with ``max_batch_size`` 0
(requests carry the full shape). Triton may form any batch up to ``max_batch_size``: one that no
profile takes (below the smallest, or between two) is zero-padded to the smallest batch a profile
that takes the other dimensions runs, and the padding is cut from the outputs; a request that no
profile takes at all is refused with Engine.run's sentence listing every profile.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .leftovers import Removed, clean_up, snapshot
from .model_options import ModelOptions
from .padding import batch_range, padded_batch, run_padded  # noqa: F401 - padded_batch: also served from here
from .python_env import StubError, server_environment
from .stub_watch import StubWatch

#: Triton waits this long for in-flight requests when stopping (its default is 30 s).
EXIT_TIMEOUT_S = 5
#: How long the dynamic batcher holds a request waiting for others to batch with.
QUEUE_DELAY_US = 200
NUMPY_DTYPES = {torch.float32: np.float32, torch.float16: np.float16, torch.int32: np.int32, torch.int64: np.int64,
                torch.int8: np.int8, torch.uint8: np.uint8, torch.bool: np.bool_}
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: type  # numpy dtype
    dims: tuple  # without the batch dimension when the model batches


@dataclass(frozen=True)
class Layout:
    """How Triton sees the engine: tensors, max_batch_size (0: no batching) and the batch range."""

    inputs: tuple
    outputs: tuple
    triton_max_batch: int  # Triton's max_batch_size (0: no batching)
    min_batch: int = 1
    dynamic_batching: bool = True
    static_batch: int | None = None
    profile: tuple | None = None  # (min, max) batch over every optimization profile of the engine
    batch_ranges: tuple = ()  # ((min, max) batch of each optimization profile), in index order

    def describe(self) -> str:
        """One line on batching, for the command's output."""
        if self.static_batch is not None:
            return (f"batching: none: the engine has a static batch of {self.static_batch}, so Triton serves it with "
                    "max_batch_size 0 and every request carries the full shape; build with --batch MIN,OPT,MAX "
                    "for dynamic batching")
        lo, hi = self.profile
        ranges = self.batch_ranges or (self.profile,)
        engine = (f"engine profile {lo}..{hi}" if len(ranges) == 1 else
                  "engine profiles " + ", ".join(f"{a}..{b}" for a, b in ranges))
        if not self.dynamic_batching:
            return (f"batching: dynamic batching off: each request runs alone (1..{self.triton_max_batch} per "
                    f"request; {engine})")
        pad = f"; executions smaller than {lo} are zero-padded to the profile's min" if lo > 1 else ""
        gaps = [(a + 1, c - 1) for (_, a), (c, _) in zip(sorted(ranges), sorted(ranges)[1:]) if c > a + 1]
        if gaps:
            pad += ("; executions of " + ", ".join(f"{a}..{b}" for a, b in gaps) +
                    " (between profiles) are zero-padded to the next profile's min")
        return (f"batching: dynamic (Triton's dynamic batcher merges concurrent requests into executions of up to "
                f"{self.triton_max_batch}, waiting at most {QUEUE_DELAY_US} µs; {engine}){pad}")


@dataclass(frozen=True)
class Ports:
    http: int = 8000
    grpc: int = 8001
    metrics: int = 8002
    host: str = "127.0.0.1"

    def check(self) -> None:
        """ValueError in one sentence for repeated ports or a port already taken on `host`."""
        named = (("--http-port", self.http), ("--grpc-port", self.grpc), ("--metrics-port", self.metrics))
        for i, (flag, port) in enumerate(named):
            if not 1 <= port <= 65535:
                raise ValueError(f"{flag} {port}: a port is a number from 1 to 65535")
            for other, same in named[:i]:
                if same == port:
                    raise ValueError(f"{flag} {port}: {other} is {same} too; HTTP, gRPC and metrics need three ports")
            with socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET) as s:
                try:
                    s.bind((self.host, port))
                except OSError as e:
                    raise ValueError(f"{flag} {port}: cannot listen on {self.host}:{port} ({e.strerror}); another "
                                     "server may be using it, choose another port") from None


def numpy_dtype(info) -> type:
    """The numpy dtype PyTriton carries an engine tensor in; ValueError naming the tensor if none."""
    if info.dtype not in NUMPY_DTYPES:
        raise ValueError(f"engine tensor '{info.name}' has dtype {info.dtype}, which PyTriton cannot carry (numpy has "
                         "no such type); build the engine with float32 I/O (drop --native-io)")
    return NUMPY_DTYPES[info.dtype]


def profile_batch_ranges(engine) -> tuple:
    """((min, max) batch) of each optimization profile of a dynamic-batch `engine`: the batches every input takes."""
    return tuple(batch_range(p) for p in engine.profiles)


def triton_layout(engine, max_batch: int | None = None, dynamic_batching: bool = True) -> Layout:
    """The Layout serving `engine`: batched over the first dimension when every input's first dimension
    is dynamic (the batch profile), up to `max_batch` (default the largest batch any optimization profile
    takes); else not batched."""
    ins = [engine.tensors[n] for n in engine.input_names]
    outs = [engine.tensors[n] for n in engine.output_names]
    batched = all(t.shape and t.shape[0] < 0 for t in ins)
    if not batched:
        static = ins[0].shape[0] if ins and ins[0].shape else 1
        if max_batch is not None:
            raise ValueError(f"--max-batch {max_batch}: engine {engine.name} has a static batch of {static} "
                             f"(input '{ins[0].name}' {tuple(ins[0].shape)}), so Triton cannot batch its requests; "
                             "omit --max-batch or build the engine with --batch MIN,OPT,MAX")
        return Layout(tuple(TensorSpec(t.name, numpy_dtype(t), tuple(t.shape)) for t in ins),
                      tuple(TensorSpec(t.name, numpy_dtype(t), tuple(t.shape)) for t in outs), 0,
                      dynamic_batching=False, static_batch=static)
    ranges = profile_batch_ranges(engine)
    lo, hi = min(a for a, _ in ranges), max(b for _, b in ranges)
    if max_batch is not None and not 1 <= max_batch <= hi:
        which = "its profile" if len(ranges) == 1 else \
            "its profiles " + ", ".join(f"{a}..{b}" for a, b in ranges)
        raise ValueError(f"--max-batch {max_batch}: engine {engine.name} runs batches of {lo} to {hi} ({which}), "
                         f"so the largest batch Triton may form must be 1 to {hi}")
    return Layout(tuple(TensorSpec(t.name, numpy_dtype(t), tuple(t.shape[1:])) for t in ins),
                  tuple(TensorSpec(t.name, numpy_dtype(t), tuple(t.shape[1:])) for t in outs),
                  max_batch or hi, min_batch=lo, dynamic_batching=dynamic_batching, profile=(lo, hi),
                  batch_ranges=ranges)


def infer_function(engine, layout: Layout, options: ModelOptions | None = None):
    """The callable PyTriton calls with a batch of requests ({input: ndarray}, merged by @batch): runs
    `engine` (one execution at a time), zero-pads a batch no profile takes (padding.run_padded), returns numpy.
    options.reject_nonfinite refuses a batch holding NaN or Inf (PyTriton answers an execution as a whole)."""
    from pytriton.decorators import batch

    lock = threading.Lock()
    options = options or ModelOptions()

    @batch
    def infer(**inputs):
        feeds = {}
        for name, value in inputs.items():
            x = torch.from_numpy(np.ascontiguousarray(value)).to(engine.tensors[name].dtype)
            options.check_finite(name, x, "--reject-nonfinite")
            feeds[name] = x.to(engine.device)
        with lock:
            out = run_padded(engine, feeds) if layout.triton_max_batch else engine.run(feeds, synchronize=True)
        return {k: v.cpu().numpy() for k, v in out.items()}

    return infer


def check_model_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise ValueError(f"--name {name!r}: Triton model names may contain only letters, digits, '.', '_' and '-'")
    return name


@dataclass
class PytritonServer:
    """A tritonserver (PyTriton) serving `engine` as model `name`; a context manager that starts it
    on enter (returning once the model is ready) and stops it, process gone, on exit."""

    engine: object
    name: str
    layout: Layout
    ports: Ports = field(default_factory=Ports)
    verbose: bool = False
    log_path: Path | None = None
    options: ModelOptions = field(default_factory=ModelOptions)
    leftovers: Removed = field(default_factory=Removed)  # what the last stop had to clean up after Triton
    stub_death: str | None = None  # why wait() returned with the server still running, if it did
    _watch: StubWatch | None = None
    _triton: object = None
    _workdir: object = None

    def __enter__(self) -> "PytritonServer":
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig

        check_model_name(self.name)
        self.ports.check()
        env = server_environment()  # StubError (one sentence) where the stub cannot run this Python
        os.environ["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]  # PyTriton starts tritonserver with os.environ
        self._workdir = tempfile.TemporaryDirectory(prefix="trtbuild-serve-")
        if self.log_path is None and not self.verbose:
            self.log_path = Path(self._workdir.name) / "tritonserver.log"
        p = self.ports
        config = TritonConfig(http_address=p.host, http_port=p.http, grpc_address=p.host, grpc_port=p.grpc,
                              metrics_address=p.host, metrics_port=p.metrics, exit_timeout_secs=EXIT_TIMEOUT_S,
                              log_file=self.log_path, allow_gpu_metrics=torch.cuda.is_available())
        layout = self.layout
        batcher = DynamicBatcher(max_queue_delay_microseconds=QUEUE_DELAY_US) if layout.dynamic_batching else None
        self._triton = Triton(config=config, workspace=Path(self._workdir.name) / "workspace")
        try:
            self._triton.bind(
                model_name=self.name, infer_func=infer_function(self.engine, layout, self.options),
                inputs=[Tensor(name=t.name, dtype=t.dtype, shape=t.dims) for t in layout.inputs],
                outputs=[Tensor(name=t.name, dtype=t.dtype, shape=t.dims) for t in layout.outputs],
                config=ModelConfig(batching=layout.triton_max_batch > 0, max_batch_size=layout.triton_max_batch,
                                   batcher=batcher), strict=True)
            self._triton.run()
            if not self._triton.is_alive():
                raise RuntimeError("it exited while loading the model")
            self._check_ready()
            self._watch = StubWatch(self._workdir.name, self._client_url())
        except BaseException as e:
            log = self.log_tail()
            self.__exit__()
            if isinstance(e, (KeyboardInterrupt, StubError)):
                raise
            raise RuntimeError(f"Triton Inference Server did not start serving '{self.name}': {e}"
                               + (f"; the end of its log:\n{log}" if log else "")) from None
        return self

    def _client_url(self) -> str:
        """host:port of the HTTP endpoint, from this machine (a wildcard address through loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.ports.host, self.ports.host)
        return f"[{host}]:{self.ports.http}" if ":" in host else f"{host}:{self.ports.http}"

    def _check_ready(self) -> None:
        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(self._client_url())
        try:
            if not client.is_model_ready(self.name):
                raise RuntimeError(f"model '{self.name}' is not ready")
        finally:
            client.close()

    def alive(self) -> bool:
        return self._triton is not None and self._triton.is_alive()

    def wait(self, poll_s: float = 0.5) -> None:
        """Block while the server is alive and its Python-backend stub too (KeyboardInterrupt passes
        through to the caller). A dead stub leaves Triton ready but failing every request: then this
        returns with ``stub_death`` saying so, for the caller to stop the server."""
        while self.alive():
            death = self._watch.check() if self._watch is not None else None
            if death:
                self.stub_death = death
                return
            time.sleep(poll_s)

    def log_tail(self, lines: int = 15) -> str:
        path = self.log_path
        if path is None or not Path(path).is_file():
            return ""
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])

    def __exit__(self, *_) -> None:
        """Stop tritonserver and remove the workspace. tritonserver can die while stopping under load and
        leave its Python-backend stub running, so whatever still names the workspace is killed and its
        shared memory and model folder removed (``self.leftovers`` says what): all gone when this returns."""
        marker = self._workdir.name if self._workdir is not None else None
        before = {**(self._watch.seen if self._watch is not None else {}), **(snapshot(marker) if marker else {})}
        self._watch = None
        if self._triton is not None:
            self._triton.stop()
            self._triton = None
        if marker:
            self.leftovers = clean_up(marker, before)
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

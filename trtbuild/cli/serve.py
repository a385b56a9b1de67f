"""``trtbuild serve``: serve an engine through a real Triton Inference Server (PyTriton).

    trtbuild serve resnet18 --small                           # build in memory (batch 1..8), serve on 127.0.0.1
    trtbuild serve resnet50 --engine engines/r50.engine --http-port 9000 --grpc-port 9001 --metrics-port 9002
    trtbuild serve net.py:tinynet --input input:1x3x32x32 --weights weights/tinynet.wts --max-batch 16
    trtbuild serve resnet18 --small --host 0.0.0.0            # reachable from other machines

Triton (the tritonserver that nvidia-pytriton bundles) answers HTTP/REST and gRPC (KServe v2
protocol) and Prometheus metrics; the engine runs in this process with trtbuild's Engine:
TensorRT where it runs, else the reference backend (the first line says which). Without
--engine, the model is built in memory with a batch profile 1..--max-batch (default 8) from
--weights or the seeded PyTorch model. Triton's dynamic batcher merges concurrent requests into
one execution of up to --max-batch (default: the engine's profile max); a static-batch engine
is served unbatched (requests carry its full shape). Ctrl-C (SIGINT) or SIGTERM stops the server
(the tritonserver process is gone when the command exits, with code 130). Needs `pip install "trtbuild[serve]"`.
"""

from __future__ import annotations

import argparse

from trtbuild.serving.model_options import DEFAULT_THREADS, ModelOptions

from .build import backend_and_model
from .options import add_backend_options, add_model_command, non_negative_int, number_type, positive_int

DEFAULT_MAX_BATCH = 8


#: argparse type of the port options: an integer in 1..65535.
port = number_type(int, lambda v: 1 <= v <= 65535, "a port is a number from 1 to 65535", "a port number")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``serve``."""
    p = add_model_command(subparsers, "serve", "serve an engine through Triton Inference Server (PyTriton)", __doc__,
                          weights_help="weight file (.wts/.safetensors/.pt) of the engine built in memory (default: "
                                       "the seeded PyTorch model's weights, nothing written); not with --engine",
                          seed_help="seed of the PyTorch model whose weights an in-memory build takes without "
                                    "--weights")
    add_backend_options(p)
    p.add_argument("--engine", default=None, help="engine file to serve (default: build one in memory)")
    p.add_argument("--max-batch", type=positive_int, default=None, metavar="N",
                   help=f"largest batch Triton's dynamic batcher forms (default: the engine's profile max; "
                        f"{DEFAULT_MAX_BATCH} for an engine built in memory, whose profile is 1..N)")
    p.add_argument("--no-dynamic-batching", action="store_true",
                   help="run every request alone (Triton still accepts batched requests up to --max-batch)")
    p.add_argument("--threads", type=non_negative_int, default=DEFAULT_THREADS, metavar="N",
                   help=f"PyTorch threads running the engine in this process (default {DEFAULT_THREADS}: Triton, "
                        "PyTriton and the clients need cores too; 0: PyTorch's default, one per core)")
    p.add_argument("--reject-nonfinite", action="store_true",
                   help="refuse inputs holding NaN or Inf (default: off, the engine runs them); with dynamic "
                        "batching, the requests Triton merged into the same execution are refused with it")
    p.add_argument("--name", default=None, help="Triton model name (default: the model's name)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address the server listens on (default 127.0.0.1, this machine only; 0.0.0.0: all)")
    p.add_argument("--http-port", type=port, default=8000, help="HTTP/REST port (default 8000)")
    p.add_argument("--grpc-port", type=port, default=8001, help="gRPC port (default 8001)")
    p.add_argument("--metrics-port", type=port, default=8002, help="Prometheus metrics port (default 8002)")
    p.set_defaults(func=run)
    return p


def _check_engine(engine, spec, args) -> None:
    """ValueError if the --engine's sidecar says it was built for another model, variant or precision."""
    from trtbuild.engine.records import BuildInfo, build_info_of
    from trtbuild.parity.check import check_engine_input_fits

    side = build_info_of(engine.sidecar) or BuildInfo()
    for key, wanted, flag in (("model", spec.name, "MODEL"), ("small", bool(args.small), "--small"),
                              ("precision", args.precision, "--precision")):
        built = getattr(side, key)
        if wanted is not None and built is not None and built != wanted:
            raise ValueError(f"--engine {args.engine} was built with {key} {built!r} but {flag} asks for {wanted!r}; "
                             "serve the engine with matching options or build another")
    check_engine_input_fits(engine, spec, args.small, args.engine)


def load_or_build(trt, spec, args):
    """(Engine, one line saying where it comes from): --engine loaded, or built in memory."""
    from trtbuild.engine import BatchProfile, BuildOptions, Engine, build_model, load_engine

    if args.engine is not None:
        if args.weights is not None:
            raise ValueError(f"--weights applies to an engine built in memory; --engine {args.engine} was built "
                             "already (its sidecar records its weights)")
        engine = load_engine(args.engine, trt)
        _check_engine(engine, spec, args)
        return engine, f"engine: {args.engine}"
    from trtbuild.models import registry
    from trtbuild.weights import WeightMap

    precision = args.precision or "fp32"
    if args.weights is not None:
        weights, source = WeightMap.load(args.weights), args.weights
    else:
        try:
            module = registry.get_torch_model(spec.name, seed=args.seed, small=args.small)
        except ValueError as e:
            raise ValueError(f"{e}; or serve it from a weight file with --weights FILE") from None
        weights = WeightMap.from_module(module)
        source = f"the seeded PyTorch model (seed {args.seed})"
    top = args.max_batch or DEFAULT_MAX_BATCH
    options = BuildOptions(precision=precision, small=args.small, profiles=(BatchProfile(1, top, top),), progress=False)
    plan = build_model(spec, weights, trt, options=options)
    variant = " (small)" if args.small else ""
    engine = Engine(plan, trt, sidecar=plan.info, name=f"{spec.name}{variant} ({precision}, in memory)")
    return engine, f"engine: {spec.name}{variant} [{precision}] built in memory, batch 1..{top}, weights from {source}"


def _check_runs_here(trt) -> None:
    from trtbuild.backend import is_rtx

    if is_rtx(trt):
        from trtbuild.engine.rtx import can_run_here

        runs, why = can_run_here(trt)
        if not runs:
            raise ValueError(f"--backend tensorrt-rtx: {why}, so TensorRT-RTX engines cannot run here and cannot be "
                             "served; serve with --backend reference, or on a GPU among the engine's targets")


def run(args) -> int:
    """Start Triton, print where it listens, serve until Ctrl-C (exit 130) or the server dies (exit 1)."""
    from trtbuild.serving.pyt_serve import Ports, PytritonServer, check_model_name, triton_layout
    from trtbuild.serving.python_env import server_environment
    from trtbuild.serving.stop_signals import stop_on_signals

    trt, spec = backend_and_model(args)
    name = check_model_name(args.name or spec.name)
    ports = Ports(args.http_port, args.grpc_port, args.metrics_port, args.host)
    ports.check()
    server_environment()  # refuse in one sentence where Triton's Python-backend stub cannot run this Python
    _check_runs_here(trt)
    engine, origin = load_or_build(trt, spec, args)
    layout = triton_layout(engine, None if args.engine is None else args.max_batch,
                           dynamic_batching=not args.no_dynamic_batching)
    print(origin)
    for kind, tensors in (("inputs", layout.inputs), ("outputs", layout.outputs)):
        batch = ["-1"] if layout.triton_max_batch else []
        print(f"{kind}: " + ", ".join(f"{t.name} [{', '.join(batch + [str(d) for d in t.dims])}] "
                                      f"{t.dtype.__name__}" for t in tensors))
    print(layout.describe())
    options = ModelOptions(threads=args.threads, reject_nonfinite=args.reject_nonfinite)
    threads = options.apply_threads()
    print(f"threads: {threads} PyTorch thread(s) run the engine (--threads N; 0: PyTorch's default, one per core)",
          flush=True)
    server = PytritonServer(engine, name, layout, ports, verbose=getattr(args, "verbose", False), options=options)
    received, restore = stop_on_signals()
    try:
        with server:
            from importlib.metadata import version

            h = ports.host
            print(f"serving '{name}' with Triton Inference Server (nvidia-pytriton {version('nvidia-pytriton')}): "
                  f"HTTP {h}:{ports.http}, gRPC {h}:{ports.grpc}, metrics http://{h}:{ports.metrics}/metrics; "
                  "Ctrl-C stops", flush=True)
            try:
                server.wait()
            except KeyboardInterrupt:
                server.__exit__()
                print(f"serve: {received[0] if received else 'SIGINT (Ctrl-C)'}: Triton Inference Server stopped",
                      flush=True)
                if server.leftovers:
                    print(f"serve: Triton left its Python-backend stub behind: {server.leftovers.describe()}",
                          flush=True)
                raise
            log = server.log_tail()
            if server.stub_death:
                print(f"serve: {server.stub_death}: stopping Triton Inference Server, so that readiness turns false "
                      "and a supervisor can start a fresh one (exit code 1)", flush=True)
                server.__exit__()
                if server.leftovers:
                    print(f"serve: removed what the stub left: {server.leftovers.describe()}", flush=True)
                raise RuntimeError(f"{server.stub_death}; Triton Inference Server was stopped")
    finally:
        restore()
    raise RuntimeError("Triton Inference Server exited on its own" + (f"; the end of its log:\n{log}" if log else ""))


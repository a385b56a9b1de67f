#!/usr/bin/env python3
"""Serving overhead: requests/s and p50/p99 latency through Triton Inference Server (`trtbuild
serve`, HTTP and gRPC, dynamic batching on and off) against direct in-process `Engine` calls, in
the same run, on the reference backend on CPU.

The engine (default resnet18 --small, batch profile 1..--max-batch) is built once and saved to a
temp dir; `trtbuild serve --engine` runs it in a subprocess (a real tritonserver from
nvidia-pytriton; the engine executes in the serve process). --clients concurrent tritonclient
clients (threads of this process) send --requests batch-1 requests per configuration after a
warm-up; one client alone gives the round trip's own cost (latency with no queueing). Direct calls run in this process:
batch 1 one call after another (the baseline of the
ratios), and batch --max-batch (the best any batching can reach, in rows/s). Client and server
share this machine's cores, so the figures include that contention. PyTorch runs --threads
intra-op threads (default 1) here and in the server: with more, on a busy shared machine, one
descheduled thread stalls every operator.

    python scripts/bench_serving.py [--model resnet18] [--full] [--clients 16] [--requests 300] [--max-batch 8]
                                    [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import trtbuild.reference as trt  # noqa: E402
from trtbuild.engine import build_and_save, export_seeded_weights, load_engine  # noqa: E402
from trtbuild.serving.python_env import stub_problem  # noqa: E402
from trtbuild.serving.tritonserver import free_ports  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment  # noqa: E402


def stats(latencies: list[float], wall: float, rows_per_request: int = 1) -> dict:
    lat = np.asarray(latencies) * 1e3
    return {"req_s": len(lat) / wall, "rows_s": len(lat) * rows_per_request / wall,
            "p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99))}


def direct(engine, x: torch.Tensor, n: int) -> dict:
    name = engine.input_names[0]
    for _ in range(5):  # warm-up
        engine.run({name: x})
    latencies, start = [], time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        engine.run({name: x})
        latencies.append(time.perf_counter() - t)
    return stats(latencies, time.perf_counter() - start, len(x))


class Server:
    """`python -m trtbuild serve ARGS` on free loopback ports, until stop()."""

    def __init__(self, args: list[str], threads: int):
        self.http, self.grpc, metrics = free_ports(3)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TRTBUILD_BACKEND": "reference", "OMP_NUM_THREADS": str(threads)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trtbuild", "serve", *args, "--http-port", str(self.http), "--grpc-port",
             str(self.grpc), "--metrics-port", str(metrics)], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stdout] + [lines.put(None)],
                         daemon=True).start()
        seen = []
        while True:
            line = lines.get(timeout=120)
            if line is None:
                raise RuntimeError("trtbuild serve exited:\n" + "".join(seen))
            seen.append(line)
            if line.startswith("serving '"):
                return

    def stop(self) -> int:
        self.proc.send_signal(2)
        return self.proc.wait(timeout=60)


def through_triton(server: Server, proto: str, model: str, x: np.ndarray, clients: int, n: int) -> dict:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    lib = httpclient if proto == "http" else grpcclient
    url = f"127.0.0.1:{server.http if proto == 'http' else server.grpc}"
    local, opened = threading.local(), []

    def one(_):
        if not hasattr(local, "client"):
            local.client = lib.InferenceServerClient(url)
            opened.append(local.client)
        feed = lib.InferInput("input", list(x.shape), "FP32")
        feed.set_data_from_numpy(x)
        t = time.perf_counter()
        local.client.infer(model, [feed])
        return time.perf_counter() - t

    try:
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(one, range(2 * clients)))  # warm-up: every client connected once
            start = time.perf_counter()
            latencies = list(pool.map(one, range(n)))
            wall = time.perf_counter() - start
    finally:
        for c in opened:
            c.close()
    return stats(latencies, wall)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fragment_option(ap, "bench_serving")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--full", action="store_true", help="the full-size model (default: --small)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=300, help="requests per configuration (default 300)")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="PyTorch intra-op threads, here and in the server")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    problem = stub_problem()
    if problem:
        print(f"cannot benchmark Triton here: {problem}")
        return 1
    small = not args.full
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        weights, path = Path(tmp) / "w.wts", Path(tmp) / "m.engine"
        export_seeded_weights(args.model, weights, small=small)
        build_and_save(args.model, weights, path, trt, small=small, batch=(1, args.max_batch, args.max_batch),
                       progress=False)
        engine = load_engine(path, trt)
        shape = tuple(engine.tensors[engine.input_names[0]].max_shape[1:])
        x1 = torch.rand(1, *shape, generator=torch.Generator().manual_seed(0))
        print(f"model: {args.model}{' (small)' if small else ''} fp32, input {shape}; backend: reference (PyTorch) on "
              f"CPU, torch {torch.__version__}, {torch.get_num_threads()} PyTorch thread(s) here and in the server, "
              f"{os.cpu_count()} cores; {args.clients} concurrent clients x {args.requests} batch-1 requests per "
              "Triton configuration")
        rows = [("direct Engine, batch 1, sequential", direct(engine, x1, args.requests)),
                (f"direct Engine, batch {args.max_batch}, sequential",
                 direct(engine, x1.repeat(args.max_batch, *[1] * len(shape)),
                        max(10, args.requests // args.max_batch)))]
        del engine
        for dynamic in (False, True):
            server = Server([args.model, *([] if args.full else ["--small"]), "--engine", str(path),
                             *([] if dynamic else ["--no-dynamic-batching"])], args.threads)
            try:
                for proto in ("http", "grpc"):
                    if not dynamic:  # one client: the per-request cost of the round trip through Triton
                        rows.append((f"Triton {proto.upper():4s} 1 client", through_triton(
                            server, proto, args.model, x1.numpy(), 1, args.requests)))
                    label = f"Triton {proto.upper():4s} dynamic batching {'on ' if dynamic else 'off'}"
                    rows.append((label, through_triton(server, proto, args.model, x1.numpy(), args.clients,
                                                       args.requests)))
            finally:
                code = server.stop()
            if code != 130:
                print(f"warning: trtbuild serve exited with {code}, not 130")
    base = rows[0][1]
    print(f"{'configuration':42s} {'req/s':>8s} {'rows/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} "
          f"{'rows/s vs direct b1':>20s}")
    for label, s in rows:
        print(f"{label:42s} {s['req_s']:8.1f} {s['rows_s']:8.1f} {s['p50']:8.2f} {s['p99']:8.2f} "
              f"{s['rows_s'] / base['rows_s']:19.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(run_writing_fragment(main, "bench_serving"))

#!/usr/bin/env python3
"""Benchmark each layer type's reference execution against the equivalent PyTorch op on this CPU.

For each case: a one-layer network on trtbuild's reference backend (its inputs are network inputs, its
parameters constants), built with `build_plan`, loaded as an `Engine` and timed with
``IExecutionContext.execute_async_v3`` on buffers bound once; and the PyTorch call that computes the same
thing on the same tensors. Both are timed interleaved in rounds (median of ``--runs``), and the script checks
that the two results agree before timing. Prints one line per case with both medians and the ratio
reference/PyTorch, and the cases over ``--limit`` (1.5 by default: a layer may cost the reference at most half
again what the op costs in PyTorch). Two reference timings: the layer alone (the plan graph's run, with its
per-layer bookkeeping), which the limit judges, and the whole ``execute_async_v3``, which adds one copy of the
output into the caller's buffer (a cost per network output, not per layer; TensorRT writes outputs in place).

Example::

    python scripts/bench_layers.py --runs 30
    python scripts/bench_layers.py --only resize_bilinear,gather --runs 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment


@dataclass(frozen=True)
class Case:
    """One layer: `inputs` are the network inputs (name -> tensor); `layer(trt, network, tensors)` adds the
    layer and returns its output; `torch_op(**inputs)` is the PyTorch equivalent."""

    name: str
    inputs: Callable[[torch.Generator], dict[str, torch.Tensor]]
    layer: Callable
    torch_op: Callable


def _const(trt, network, array: np.ndarray):
    return network.add_constant(array.shape, trt.Weights(np.ascontiguousarray(array))).get_output(0)


def _resize(mode: str):
    def layer(trt, network, t):
        r = network.add_resize(t["x"])
        r.scales = [1.0, 1.0, 2.0, 2.0]
        if mode == "bilinear":
            r.resize_mode = trt.InterpolationMode.LINEAR
            r.coordinate_transformation = trt.ResizeCoordinateTransformation.HALF_PIXEL
        return r.get_output(0)

    def op(x):
        return F.interpolate(x, scale_factor=2, mode=mode, **({"align_corners": False} if mode == "bilinear" else {}))
    return layer, op


def _images(g):
    return {"x": torch.randn(1, 64, 128, 128, generator=g)}


def _gather_layer(trt, network, t):
    idx = np.arange(0, 256, 2, dtype=np.int32)
    return network.add_gather(t["x"], _const(trt, network, idx), 1).get_output(0)


def _cumulative_layer(trt, network, t):
    return network.add_cumulative(t["x"], _const(trt, network, np.array(3, np.int32)),
                                  trt.CumulativeOperation.SUM, False, False).get_output(0)


def _one_hot_layer(trt, network, t):
    values = _const(trt, network, np.array([0.0, 1.0], np.float32))
    return network.add_one_hot(t["i"], values, _const(trt, network, np.array(100, np.int32)), -1).get_output(0)


def _select_layer(trt, network, t):
    cond = network.add_elementwise(t["x"], t["y"], trt.ElementWiseOperation.GREATER).get_output(0)
    return network.add_select(cond, t["x"], t["y"]).get_output(0)


def _prelu_layer(trt, network, t):
    slopes = np.linspace(0.01, 0.3, 64, dtype=np.float32).reshape(1, 64, 1, 1)
    return network.add_parametric_relu(t["x"], _const(trt, network, slopes)).get_output(0)


def _squeeze_layer(trt, network, t):
    return network.add_squeeze(t["u"], _const(trt, network, np.array([1], np.int32))).get_output(0)


def _topk_layer(trt, network, t):
    return network.add_topk(t["x"], trt.TopKOperation.MAX, 16, 1 << 1).get_output(0)


_SCATTER_INDEX = torch.randperm(256, generator=torch.Generator().manual_seed(7))[:64].reshape(1, 64, 1).expand(
    64, 64, 256).contiguous()


def _scatter_layer(trt, network, t):
    layer = network.add_scatter(t["x"], _const(trt, network, _SCATTER_INDEX.numpy().astype(np.int32)), t["u"],
                                trt.ScatterMode.ELEMENT)
    layer.axis = 1
    return layer.get_output(0)


def _einsum_layer(trt, network, t):
    return network.add_einsum([t["a"], t["b"]], "bij,bjk->bik").get_output(0)


def _grid_sample_layer(trt, network, t):
    layer = network.add_grid_sample(t["x"], t["grid"])
    layer.align_corners = False
    return layer.get_output(0)


def _reverse_sequence_layer(trt, network, t):
    lens = _const(trt, network, np.full(64, 200, np.int32))
    return network.add_reverse_sequence(t["s"], lens).get_output(0)


def _attention_layer(trt, network, t):
    return network.add_attention(t["q"], t["k"], t["v"], trt.AttentionNormalizationOp.SOFTMAX, False).get_output(0)


def _reverse_first(s):
    return torch.cat([s[:200].flip(0), s[200:]], 0)


_bilinear = _resize("bilinear")
_nearest = _resize("nearest")
_SLOPES = torch.linspace(0.01, 0.3, 64).reshape(1, 64, 1, 1)

CASES = [
    Case("resize_nearest", _images, _nearest[0], _nearest[1]),
    Case("resize_bilinear", _images, _bilinear[0], _bilinear[1]),
    Case("gather", lambda g: {"x": torch.randn(64, 256, 256, generator=g)}, _gather_layer,
         lambda x: torch.index_select(x, 1, torch.arange(0, 256, 2))),
    Case("cumulative", _images, _cumulative_layer, lambda x: torch.cumsum(x, 3)),
    Case("one_hot", lambda g: {"i": torch.randint(0, 100, (64, 1024), generator=g, dtype=torch.int32)},
         _one_hot_layer, lambda i: F.one_hot(i.long(), 100).float()),
    Case("select", lambda g: {"x": torch.randn(1, 64, 128, 128, generator=g),
                              "y": torch.randn(1, 64, 128, 128, generator=g)},
         _select_layer, lambda x, y: torch.where(x > y, x, y)),
    Case("parametric_relu", _images, _prelu_layer, lambda x: torch.where(x >= 0, x, x * _SLOPES)),
    Case("squeeze", lambda g: {"u": torch.randn(64, 1, 256, 256, generator=g)}, _squeeze_layer,
         lambda u: u.squeeze(1).clone()),
    Case("topk", lambda g: {"x": torch.randn(256, 4096, generator=g)}, _topk_layer,
         lambda x: torch.topk(x, 16, 1).values),
    Case("scatter", lambda g: {"x": torch.randn(64, 256, 256, generator=g), "u": torch.randn(64, 64, 256, generator=g)},
         _scatter_layer, lambda x, u: torch.scatter(x, 1, _SCATTER_INDEX.long(), u)),
    Case("einsum", lambda g: {"a": torch.randn(64, 128, 128, generator=g), "b": torch.randn(64, 128, 128, generator=g)},
         _einsum_layer, lambda a, b: torch.einsum("bij,bjk->bik", a, b)),
    Case("grid_sample", lambda g: {"x": torch.randn(1, 64, 128, 128, generator=g),
                                   "grid": torch.rand(1, 128, 128, 2, generator=g) * 2 - 1},
         _grid_sample_layer, lambda x, grid: F.grid_sample(x, grid, align_corners=False)),
    Case("reverse_sequence", lambda g: {"s": torch.randn(256, 64, 256, generator=g)}, _reverse_sequence_layer,
         _reverse_first),
    Case("attention", lambda g: {n: torch.randn(1, 4, 512, 64, generator=g) for n in "qkv"}, _attention_layer,
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0)),
]

_DTYPES = {torch.float32: "FLOAT", torch.int32: "INT32", torch.int64: "INT64", torch.bool: "BOOL"}


class ReferenceLayer:
    """The case's one-layer network on the reference backend, with its buffers bound once."""

    def __init__(self, case: Case, inputs: dict[str, torch.Tensor]):
        import trtbuild.reference as trt
        from trtbuild.engine import Engine, build_plan

        def define(network):
            tensors = {name: network.add_input(name, getattr(trt.DataType, _DTYPES[v.dtype]), tuple(v.shape))
                       for name, v in inputs.items()}
            return {"out": case.layer(trt, network, tensors)}

        self.engine = Engine(build_plan(trt, define, progress=False), trt, name=f"bench_layers {case.name}")
        self.out = self.engine.run(inputs)["out"]  # sets the shapes and binds every address
        self.graph, self.inputs = self.engine.context.engine._graph, inputs

    def __call__(self) -> torch.Tensor:
        """One execute_async_v3: the layers, then the copy of the output into the caller's buffer."""
        if not self.engine.context.execute_async_v3(0):
            raise RuntimeError(f"execute_async_v3 failed: {self.engine.logger.error_text()}")
        return self.out

    def layers(self) -> torch.Tensor:
        """The network's layers alone (the plan graph's run), without the output copy execute_async_v3 adds."""
        return self.graph.run(self.inputs, self.out.device)["out"]


def _timed(fn, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def measure(case: Case, runs: int, warmup: int, seed: int) -> tuple[float, float, float]:
    """(execute_async_v3 median, layers-only median, PyTorch median) in ms, after checking that the results
    agree."""
    inputs = case.inputs(torch.Generator().manual_seed(seed))
    reference = ReferenceLayer(case, inputs)
    with torch.inference_mode():
        expected = case.torch_op(**inputs)
        for got in (reference(), reference.layers()):
            if got.shape != expected.shape or not torch.allclose(got.float(), expected.float(), atol=1e-5, rtol=1e-5):
                raise SystemExit(f"{case.name}: the reference's result differs from PyTorch's; not timing it")
        t_ref: list[float] = []
        t_layers: list[float] = []
        t_torch: list[float] = []
        rounds = min(5, runs)
        for r in range(rounds):  # interleaved, so drift (other load, frequency) affects both alike
            n = runs // rounds + (1 if r < runs % rounds else 0)
            _timed(reference, warmup if r == 0 else 1)
            t_ref += _timed(reference, n)
            _timed(reference.layers, 1)
            t_layers += _timed(reference.layers, n)
            _timed(lambda: case.torch_op(**inputs), warmup if r == 0 else 1)
            t_torch += _timed(lambda: case.torch_op(**inputs), n)
    return tuple(statistics.median(t) * 1e3 for t in (t_ref, t_layers, t_torch))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(p, "bench_layers")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=float, default=1.5, help="the largest acceptable ratio reference/PyTorch")
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads (default 1: both sides single-threaded, which other load on the machine "
                        "distorts least; 0 = leave torch's default)")
    p.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    known = {c.name for c in CASES}
    wanted = [n for n in args.only.split(",") if n] or [c.name for c in CASES]
    unknown = sorted(set(wanted) - known)
    if unknown:
        p.error(f"--only: no case named {', '.join(unknown)} (cases: {', '.join(sorted(known))})")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, runs {args.runs} per case, "
          f"limit {args.limit}x")
    print("")
    print("| layer | PyTorch (ms) | reference layer (ms) | layer / PyTorch | execute_async_v3 (ms) | "
          "execute / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|")
    over = []
    for case in (c for c in CASES if c.name in wanted):
        ref_ms, layer_ms, torch_ms = measure(case, args.runs, args.warmup, args.seed)
        ratio = layer_ms / torch_ms
        print(f"| {case.name} | {torch_ms:.3f} | {layer_ms:.3f} | {ratio:.2f} | {ref_ms:.3f} | "
              f"{ref_ms / torch_ms:.2f} |")
        if ratio > args.limit:
            over.append(f"{case.name} ({ratio:.2f})")
    print("")
    print(f"over {args.limit}x: {', '.join(over) if over else 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_writing_fragment(main, "bench_layers"))

#!/usr/bin/env python3
"""RedNet-26 with the Involution plugin vs the same network with the involution composed of native layers.

Reference backend (PyTorch): three engines from one seeded RedNet-26 WeightMap, timed with
``IExecutionContext.execute_async_v3`` on the same input (interleaved rounds, medians), ratio
against the plugin engine measured in the same run:

- ``plugin``: involution_impl="plugin" (the reference twin of the C++ plugin: the unfold reference);
- ``composed``: involution_impl="composed", static batch, so the slice unfold (pad, strided slices,
  concatenations, one product, one reduce);
- ``composed-conv``: the same with a dynamic batch profile (1, B, B), so the conv unfold (two
  one-hot grouped convolutions) that a dynamic batch needs.

TensorRT-RTX (when ``import tensorrt_rtx`` works; it builds without a GPU): build time and
serialized engine size of the composed RedNet for ``--targets`` (default NVIDIA's portable set
sm86,sm89,sm120) in fp32 and fp16, plus the same for the dynamic-batch build.

Example::

    python scripts/bench_involution_composed.py                 # full size (224x224), batch 1
    python scripts/bench_involution_composed.py --small --runs 3 --warmup 1 --no-rtx
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtbuild.engine import Engine, build_plan
from trtbuild.models import registry
from trtbuild.weights import WeightMap
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment

FORMS = ("plugin", "composed", "composed-conv")


class Forward:
    """A reference engine of one RedNet form with its buffers bound once (a first Engine.run);
    calling it only re-executes the context."""

    def __init__(self, trt, spec, wm, x: torch.Tensor, small: bool, dynamic: bool):
        b = x.shape[0]
        plan = build_plan(trt, spec, weights=wm, small=small, progress=False, batch=(1, b, b) if dynamic else None)
        self.engine = Engine(plan, trt, name="bench_involution_composed")
        self.x = x.to(self.engine.device).contiguous()
        self.y = self.engine.run({"input": self.x})["logits"]

    def __call__(self) -> torch.Tensor:
        if not self.engine.context.execute_async_v3(0):
            raise RuntimeError(f"execute_async_v3 failed: {self.engine.logger.error_text()}")
        return self.y


def reference_forms(wm, x, small: bool) -> dict[str, Forward]:
    import trtbuild.reference as trt

    spec = registry.get("rednet")
    if x.shape[0] != 1:
        spec = _batched(spec, x.shape[0])
    return {
        "plugin": Forward(trt, spec.with_options(involution_impl="plugin"), wm, x, small, dynamic=False),
        "composed": Forward(trt, spec.with_options(involution_impl="composed"), wm, x, small, dynamic=False),
        "composed-conv": Forward(trt, spec.with_options(involution_impl="composed"), wm, x, small, dynamic=True),
    }


def _batched(spec, batch: int):
    import dataclasses

    return dataclasses.replace(spec, input_shape=lambda small, _f=spec.input_shape: (batch,) + tuple(_f(small))[1:])


def time_runs(fn, warmup: int, runs: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def rtx_builds(wm, small: bool, targets: str) -> list[str]:
    """Lines: build time, engine size and layer count of the composed RedNet on TensorRT-RTX."""
    try:
        import tensorrt_rtx as rtx
    except Exception as e:  # noqa: BLE001 - ImportError, or OSError from its libraries: any failure means unavailable
        return [f"TensorRT-RTX: not measured (`import tensorrt_rtx` failed: {e})"]
    from trtbuild.engine.build import PRECISIONS, new_network, serialize_network
    from trtbuild.engine.rtx import parse_targets, target_list

    spec = registry.get("rednet")  # involution_impl "auto": composed on TensorRT-RTX
    lines = [f"TensorRT-RTX {rtx.__version__}, targets {target_list(parse_targets(targets))}, composed RedNet-26 "
             f"({'small' if small else 'full'} size), engine built without a GPU:"]
    for precision in ("fp32", "fp16"):
        for dynamic in (False, True):
            builder, network, logger = new_network(rtx)
            t0 = time.perf_counter()
            shape = (-1 if dynamic else 1,) + tuple(spec.input_shape(small))[1:]
            x = network.add_input(spec.input_name, getattr(rtx.DataType, PRECISIONS[precision]), shape)
            outs = spec.build_network(network, wm, x)
            network.mark_output(outs["logits"])
            defined = time.perf_counter() - t0
            t0 = time.perf_counter()
            plan = serialize_network(rtx, builder, network, logger, progress=False, targets=targets,
                                     batch=(1, 4, 8) if dynamic else None)
            built = time.perf_counter() - t0
            kind = "dynamic batch 1..8 (conv unfold)" if dynamic else "batch 1 (slice unfold)"
            lines.append(f"  {precision} {kind:33s}: {network.num_layers} layers, defined in {defined:.2f} s, "
                         f"built in {built:.2f} s, engine {len(plan) / 2**20:.2f} MiB")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(p, "bench_involution_composed")
    p.add_argument("--small", action="store_true", help="the small RedNet (64x64) instead of RedNet-26 at 224x224")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = leave default)")
    p.add_argument("--targets", default="sm86,sm89,sm120", help="TensorRT-RTX target compute capabilities")
    p.add_argument("--no-rtx", action="store_true", help="skip the TensorRT-RTX builds")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.batch < 1:
        p.error("--runs and --batch must be >= 1 and --warmup >= 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    spec = registry.get("rednet")
    model = registry.get_torch_model("rednet", seed=args.seed, small=args.small)
    wm = WeightMap.from_module(model)
    shape = (args.batch,) + tuple(spec.input_shape(args.small))[1:]
    x = torch.rand(shape, generator=torch.Generator().manual_seed(args.seed)) * 2 - 1
    forms = reference_forms(wm, x, args.small)
    with torch.inference_mode():
        ref = model(x)
    diffs = {name: (f().cpu() - ref).abs().max().item() for name, f in forms.items()}

    times: dict[str, list[float]] = {name: [] for name in forms}
    rounds = min(5, args.runs)
    for r in range(rounds):  # interleaved, so drift affects every form alike
        n = args.runs // rounds + (1 if r < args.runs % rounds else 0)
        for name, f in forms.items():
            times[name] += time_runs(f, args.warmup if r == 0 else 1, n)
    med = {name: statistics.median(t) * 1e3 for name, t in times.items()}

    print(f"reference backend, torch {torch.__version__}, threads {torch.get_num_threads()}, RedNet-26 "
          f"{'small' if args.small else 'full'} input {'x'.join(map(str, shape))}, runs {len(times['plugin'])} each")
    for name in FORMS:
        print(f"{name:14s} median {med[name]:9.3f} ms   ratio vs plugin {med[name] / med['plugin']:.3f}   "
              f"max |y - torch| {diffs[name]:.3g}")
    if not args.no_rtx:
        for line in rtx_builds(wm, args.small, args.targets):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_writing_fragment(main, "bench_involution_composed"))

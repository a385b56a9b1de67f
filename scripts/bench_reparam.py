#!/usr/bin/env python3
"""Benchmark RepVGG-A0 training form (unfused) vs re-parameterized (fused) on one executor.

``--executor torch`` (default): the PyTorch modules (eval mode, ``torch.inference_mode``).
``--executor reference``: two TensorRT networks built with trtbuild on the reference backend
from the same training-form WeightMap -- unfused (every block as 3x3 conv, 1x1 conv, three
BatchNorm scale layers, two adds, ReLU: trtbuild.layers.repvgg.repvgg_block_unfused) and fused
(one 3x3 conv + ReLU per block: the zoo's repvgg_a0 builder) -- each built to a plan,
deserialized and timed with ``IExecutionContext.execute_async_v3``.

Both forms use the same seeded weights (BN statistics randomized so the fusion is non-trivial)
and the same input. Reports the median of ``--runs`` timed forward passes per form (taken in 5
interleaved rounds, the first preceded by ``--warmup`` untimed passes, later ones by 2), the
ratio unfused/fused, and the max abs difference between the two outputs.

Example::

    python scripts/bench_reparam.py --size 224 --batch 1 --warmup 10 --runs 50
    python scripts/bench_reparam.py --executor reference --size 224 --warmup 3 --runs 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtbuild.models.pytorch import randomize_bn_, repvgg_a0, repvgg_model_convert
from trtbuild.models.pytorch.repvgg import G4_MAP
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment


def time_forward(model: torch.nn.Module, x: torch.Tensor, warmup: int, runs: int) -> list[float]:
    """Seconds per forward pass for ``runs`` passes after ``warmup`` untimed ones."""
    times = []
    with torch.inference_mode():
        for _ in range(warmup):
            model(x)
        for _ in range(runs):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
    return times


class ReferenceForward:
    """A reference-backend engine for ``build(network, input) -> {name: ITensor}`` (one output,
    named "logits"), built with trtbuild.engine.build_plan and loaded as an Engine. Its buffers are
    bound once (by a first Engine.run); calling it only re-executes the context on the input given
    at construction, so the timings hold the network's execution and no per-call set-up."""

    def __init__(self, build, x: torch.Tensor):
        import trtbuild.reference as trt
        from trtbuild.engine import Engine, build_plan

        counted = {}

        def define(network, inp):
            (out,) = build(network, inp).values()
            counted["layers"] = network.num_layers
            return {"logits": out}

        plan = build_plan(trt, define, input_shape=tuple(x.shape), progress=False)
        self.num_layers = counted["layers"]
        self.engine = Engine(plan, trt, name="bench_reparam")
        self.x = x.to(self.engine.device).contiguous()
        self.y = self.engine.run({"input": self.x})["logits"]  # sets the input shape and both addresses

    def __call__(self, _x=None) -> torch.Tensor:
        if not self.engine.context.execute_async_v3(0):
            raise RuntimeError(f"execute_async_v3 failed: {self.engine.logger.error_text()}")
        return self.y


def reference_forms(model: torch.nn.Module, x: torch.Tensor):
    """(unfused, fused) ReferenceForward engines built from ``model``'s training-form state dict."""
    from trtbuild.models.repvgg import build_repvgg
    from trtbuild.weights import WeightMap

    wm = WeightMap.from_module(model)
    unfused = ReferenceForward(lambda n, t: build_repvgg(n, wm, t, fused=False), x)
    fused = ReferenceForward(lambda n, t: build_repvgg(n, wm, t, fused=True), x)
    return unfused, fused


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(p, "bench_reparam")
    p.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = leave default)")
    p.add_argument("--g4", action="store_true", help="use the groupwise (g4) layer map")
    p.add_argument("--executor", choices=("torch", "reference"), default="torch",
                   help="torch: the PyTorch modules; reference: TensorRT networks on trtbuild's reference backend")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    unfused = randomize_bn_(repvgg_a0(override_groups_map=G4_MAP if args.g4 else None, seed=args.seed), args.seed)
    unfused.eval()
    fused = repvgg_model_convert(unfused).eval()
    x = torch.randn(args.batch, 3, args.size, args.size, generator=torch.Generator().manual_seed(args.seed))
    layers = ""
    if args.executor == "reference":
        unfused, fused = reference_forms(unfused, x)
        layers = f"network layers: unfused {unfused.num_layers}  fused {fused.num_layers}"

    with torch.inference_mode():
        diff = (unfused(x) - fused(x)).abs().max().item()

    # Interleave the two so slow drift (thermal, other load) affects both alike.
    t_unfused: list[float] = []
    t_fused: list[float] = []
    rounds = min(5, args.runs)
    for r in range(rounds):
        n = args.runs // rounds + (1 if r < args.runs % rounds else 0)
        t_unfused += time_forward(unfused, x, args.warmup if r == 0 else 2, n)
        t_fused += time_forward(fused, x, args.warmup if r == 0 else 2, n)

    med_u = statistics.median(t_unfused) * 1e3
    med_f = statistics.median(t_fused) * 1e3
    print(f"executor {args.executor}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"input {args.batch}x3x{args.size}x{args.size}, g4={args.g4}, runs {len(t_unfused)} each")
    if layers:
        print(layers)
    else:
        print(f"params: unfused {sum(q.numel() for q in unfused.parameters()):,}  "
              f"fused {sum(q.numel() for q in fused.parameters()):,}")
    print(f"max |unfused - fused| = {diff:.3g}")
    print(f"unfused median: {med_u:.3f} ms")
    print(f"fused   median: {med_f:.3f} ms")
    print(f"ratio unfused/fused: {med_u / med_f:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_writing_fragment(main, "bench_reparam"))

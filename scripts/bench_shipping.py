#!/usr/bin/env python3
"""Benchmark shipping an engine on the reference backend: refit against a rebuild, stripped plan size, engine cache.

For each model (full size by default; --small for the small variants):

* build vs refit: an engine refittable with other weights (``BuildOptions(refit="any")``, ``--refit any``:
  the default "identical" refuses weights other than the build's) is built from the seeded model's
  weights (seed 0) and timed; then ``Engine.refit`` with another seed's state_dict (seed 1) is timed
  against it. The refit engine's output is compared with an engine built directly from seed 1's
  weights (max |difference|: refit must give the same network).
* full vs stripped: the plan of a ``--refit`` build (refit "identical") against the weight-stripped plan
  (``strip_weights=True``, ``--strip-weights``) of the same model and weights, in bytes.
* engine cache: ``trtbuild build MODEL --cache DIR`` run twice in this process into an empty cache
  directory: the first is a miss (a build, then the store), the second a hit (the cached engine copied out).

Every time is the median of ``--runs`` runs (the cache's first run is its one miss; the hits are timed
``--runs`` times). The ratios are against the baseline of the same row, measured in the same run.

Example::

    python scripts/bench_shipping.py --runs 3 --fragment
    python scripts/bench_shipping.py --small --models resnet18 --runs 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trtbuild.reference as trt
from trtbuild.engine import BuildOptions, Engine, build_model
from trtbuild.models import registry
from trtbuild.weights import WeightMap, export_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment

MODELS = ("resnet18", "repvgg_a0")
COLUMNS = ("model", "build (s)", "refit (s)", "refit/build", "refit vs rebuilt (max abs diff)", "full plan (MB)",
           "stripped plan (MB)", "stripped/full", "cache miss (s)", "cache hit (s)", "hit/miss")


def _median_time(fn, runs: int) -> tuple[float, object]:
    """(median seconds of `runs` calls of fn, the last call's result)."""
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _seeded(model: str, seed: int, small: bool) -> torch.nn.Module:
    return registry.get_torch_model(model, seed=seed, small=small).eval()


def measure(model: str, small: bool, runs: int, work: Path) -> dict:
    """One row of the table (COLUMNS) for `model`."""
    spec = registry.get(model)
    old, new = _seeded(model, 0, small), _seeded(model, 1, small)
    refittable = BuildOptions(small=small, refit="any", progress=False)
    build_s, plan = _median_time(lambda: build_model(spec, WeightMap.from_module(old), trt, options=refittable), runs)
    engine = Engine(plan, trt, name=f"{model} (refittable)")
    refit_s, _ = _median_time(lambda: engine.refit(new.state_dict()), runs)
    x = _input(engine)
    rebuilt = Engine(build_model(spec, WeightMap.from_module(new), trt, options=refittable), trt,
                     name=f"{model} (seed 1)")
    diff = max((a - b).abs().max().item() for a, b in zip(engine.run(input=x).values(), rebuilt.run(input=x).values()))
    full = build_model(spec, WeightMap.from_module(old), trt,
                       options=BuildOptions(small=small, refit="identical", progress=False))
    stripped = build_model(spec, WeightMap.from_module(old), trt,
                           options=BuildOptions(small=small, strip_weights=True, progress=False))

    weights = work / f"{model}.safetensors"
    export_weights(old, weights)
    cache = work / f"cache-{model}"
    miss_s, _ = _median_time(lambda: _cli_build(model, weights, small, cache, work / f"{model}-miss.engine"), 1)
    hit_s, _ = _median_time(lambda: _cli_build(model, weights, small, cache, work / f"{model}-hit.engine"), runs)
    return {"model": model + (" (small)" if small else ""), "build (s)": build_s, "refit (s)": refit_s,
            "refit/build": refit_s / build_s, "refit vs rebuilt (max abs diff)": diff,
            "full plan (MB)": len(full) / 1e6,
            "stripped plan (MB)": len(stripped) / 1e6, "stripped/full": len(stripped) / len(full),
            "cache miss (s)": miss_s, "cache hit (s)": hit_s, "hit/miss": hit_s / miss_s}


def _input(engine: Engine) -> torch.Tensor:
    """A seeded input of the engine's (static) input shape."""
    (info,) = [engine.tensors[n] for n in engine.input_names]
    return torch.randn(info.shape, generator=torch.Generator().manual_seed(0)).to(engine.device)


def _cli_build(model: str, weights: Path, small: bool, cache: Path, out: Path) -> None:
    """`trtbuild build MODEL --weights W --cache DIR -o OUT --backend reference` in this process, quietly."""
    from trtbuild.cli import main

    args = ["build", model, "--weights", str(weights), "--backend", "reference", "--cache", str(cache),
            "-o", str(out), "--no-progress", *(["--small"] if small else [])]
    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = main(args)
    if code != 0:
        raise SystemExit(f"trtbuild {' '.join(args)} failed (exit {code}): {said.getvalue().strip()}")


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table (COLUMNS)."""
    def show(column, v):
        return v if isinstance(v, str) else f"{v:.2g}" if "diff" in column or (abs(v) < 0.01 and v) else f"{v:.2f}"
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(show(c, r[c]) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(p, "bench_shipping")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default {','.join(MODELS)})")
    p.add_argument("--small", action="store_true", help="the small variants of the models")
    p.add_argument("--runs", type=int, default=3, help="timed runs per figure (median; default 3)")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = leave default)")
    args = p.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in registry.names()]
    if unknown or not models:
        p.error(f"--models: no model named {', '.join(unknown) or '(none given)'}; known: "
                f"{', '.join(registry.names())}")
    if args.runs < 1:
        p.error("--runs must be >= 1")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-shipping-") as work:
        rows = [measure(m, args.small, args.runs, Path(work)) for m in models]
    print(f"reference backend, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"median of {args.runs} run(s) per time (the cache miss: one run)\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_writing_fragment(main, "bench_shipping", markdown=True))

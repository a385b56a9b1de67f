#!/usr/bin/env python3
"""Parity of every zoo model on the reference backend vs PyTorch, as a Markdown table.

For each model: the PyTorch model from the registry (eval mode, weights seeded, BN statistics
randomized), its state dict as a WeightMap, the network built layer by layer with the model's
builder, run once in fp32 and once in fp16 (input declared HALF, so all layers and weights are
fp16) on one uniform random input in the spec's value_range. Errors are against the fp32
PyTorch output: max abs err, max abs err / max|ref| ("rel"), and 1 - cosine similarity (float64,
shown as 0 when rounding makes it negative). One row per network output.

The last column is NVIDIA's TensorRT-RTX building the same network (same builder code, same
weights) into a real engine for its portable targets sm86, sm89 and sm120, with no GPU: engine
size and build time in fp32 / fp16, measured in the same run ("not installed" without
tensorrt_rtx). Those engines are built, not run: nothing here can run them.

The "ref/eager" column is the reference backend's run time over PyTorch eager's, for the same model,
weights and input, fp32, both with ``torch.set_num_threads(1)`` (one thread, so the ratio does not
depend on how many cores the machine lends), measured in the same run: the median of ``--runs``
runs of each after ``--warmup`` runs, alternating the two so a busy machine slows both alike. The
reference engine is built once before timing (its build time is not in the ratio). It says what
executing a network layer by layer through TensorRT's API costs over running the PyTorch module.

Example::

    python scripts/zoo_parity_table.py                 # full size (224 / SSD 300 / RefineDet 320)
    python scripts/zoo_parity_table.py --small         # the small test configurations
    python scripts/zoo_parity_table.py --runs 3        # fewer timed runs for the ref/eager column (default 9)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtbuild.backend import BackendError, load_trt
from trtbuild.engine import Engine, build_plan
from trtbuild.models import registry
from trtbuild.engine.quick import run_spec
from trtbuild.weights import WeightMap
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment


def stats(y: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, float]:
    """(max abs err, max abs err / max|ref|, cosine) of ``y`` against ``ref`` in float64."""
    y, ref = y.double(), ref.double()
    err = (y - ref).abs().max().item()
    cos = F.cosine_similarity(y.flatten(), ref.flatten(), dim=0).item()
    return err, err / max(ref.abs().max().item(), 1e-30), cos


def median_seconds_1_thread(calls: dict, runs: int, warmup: int) -> dict[str, float]:
    """{name: median seconds of call()} for the zero-argument `calls`, each run `warmup` times and then
    `runs` times, taking turns (one of each per round), all with torch.set_num_threads(1) (restored after)."""
    if runs < 1 or warmup < 0:
        raise ValueError(f"--runs {runs} / --warmup {warmup}: need at least 1 timed run and no negative warm-up")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {name: [] for name in calls}
    try:
        with torch.no_grad():
            for round_ in range(warmup + runs):
                for name, call in calls.items():
                    t0 = time.perf_counter()
                    call()
                    if round_ >= warmup:
                        times[name].append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return {name: statistics.median(t) for name, t in times.items()}


def time_ratio(spec, model, wm, x, small: bool, runs: int, warmup: int) -> dict[str, float]:
    """{"ref_s", "eager_s", "ratio"}: fp32 reference engine run vs PyTorch eager on the same input
    (see the module docstring); the engine is built before timing starts."""
    engine = Engine(build_plan(load_trt("reference"), spec, weights=wm, precision="fp32", small=small,
                               progress=False), name=spec.name)
    feed = {spec.input_name: x.to(engine.device)}
    t = median_seconds_1_thread({"ref": lambda: engine.run(feed, synchronize=True), "eager": lambda: model(x)},
                                runs, warmup)
    return {"ref_s": t["ref"], "eager_s": t["eager"], "ratio": t["ref"] / t["eager"]}


def measure(name: str, small: bool, seed: int, runs: int = 9, warmup: int = 1) -> list[dict]:
    spec = registry.get(name)
    model = registry.get_torch_model(name, seed=seed, small=small)
    lo, hi = spec.value_range
    x = torch.rand(spec.input_shape(small), generator=torch.Generator().manual_seed(seed)) * (hi - lo) + lo
    with torch.no_grad():
        refs = model(x)
    refs = refs if isinstance(refs, tuple) else (refs,)
    wm = WeightMap.from_module(model)
    rows = {o: {"model": name, "output": o, "shape": tuple(r.shape), "max_ref": r.abs().max().item()}
            for o, r in zip(spec.output_names, refs)}
    info: dict = {}
    for precision in ("fp32", "fp16"):
        t0 = time.perf_counter()
        out = run_spec(spec, wm, x, precision, small=small, info=info if precision == "fp32" else None)
        seconds = time.perf_counter() - t0
        for o, ref in zip(spec.output_names, refs):
            rows[o][precision] = stats(out[o].float(), ref)
            rows[o][f"{precision}_s"] = seconds
            rows[o]["finite_" + precision] = bool(torch.isfinite(out[o]).all())
    rtx_cells = [rtx_build(spec, wm, small, precision) for precision in ("fp32", "fp16")]
    unused = [k for k in wm.unused() if not k.endswith("num_batches_tracked")]
    timing = time_ratio(spec, model, wm, x, small, runs, warmup)
    for r in rows.values():
        r.update(timing)
        r["layers"] = info["num_layers"]
        r["unused"] = len(unused)
        r["rtx"] = " / ".join(rtx_cells)
    return list(rows.values())


def rtx_build(spec, wm, small: bool, precision: str) -> str:
    """"<MiB> MiB, <s> s" of a TensorRT-RTX build for sm86/89/120, or why there is none."""
    try:
        rtx = load_trt("tensorrt-rtx")
    except BackendError:
        return "not installed"
    t0 = time.perf_counter()
    try:
        plan = build_plan(rtx, spec, weights=wm, precision=precision, small=small, progress=False)
    except Exception as e:  # noqa: BLE001 - report, don't hide: the table shows the failure
        return f"FAILED ({type(e).__name__})"
    return f"{len(plan) / 2**20:.1f} MiB, {time.perf_counter() - t0:.1f} s"


def table(rows: list[dict]) -> str:
    head = ("| model | output | shape | layers | max\\|ref\\| | fp32 max abs | fp32 rel | fp32 1-cosine "
            "| fp16 max abs | fp16 rel | fp16 1-cosine | TensorRT-RTX build (sm86/89/120) fp32 / fp16 "
            "| ref/eager time (fp32, 1 thread) |")
    lines = [head, "|" + "|".join(["---"] * 13) + "|"]
    for r in rows:
        f32, f16 = r["fp32"], r["fp16"]
        lines.append(f"| {r['model']} | {r['output']} | {'x'.join(map(str, r['shape']))} | {r['layers']} | "
                     f"{r['max_ref']:.3g} | {f32[0]:.2e} | {f32[1]:.2e} | {max(0.0, 1 - f32[2]):.1e} | "
                     f"{f16[0]:.2e} | {f16[1]:.2e} | {max(0.0, 1 - f16[2]):.1e} | {r['rtx']} | {r['ratio']:.1f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(p, "zoo_parity_table")
    p.add_argument("--small", action="store_true", help="use the small test configurations")
    p.add_argument("--models", nargs="*", default=None, help="model names (default: every registered model)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = leave default); the ref/eager "
                                                           "timing always uses 1 thread")
    p.add_argument("--runs", type=int, default=9, help="timed runs of each for the ref/eager column (median)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each before them")
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    names = args.models or registry.names()
    print(f"backend: reference (PyTorch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"device {'cuda' if torch.cuda.is_available() else 'cpu'}); size: {'small' if args.small else 'full'}; "
          f"seed {args.seed}")
    print("command: python scripts/zoo_parity_table.py" + (" --small" if args.small else "")
          + (f" --models {' '.join(args.models)}" if args.models else "")
          + (f" --seed {args.seed}" if args.seed else "")
          + (f" --runs {args.runs}" if args.runs != 9 else "")
          + (f" --warmup {args.warmup}" if args.warmup != 1 else ""))
    print(f"ref/eager: median of {args.runs} runs after {args.warmup} warm-up, torch.set_num_threads(1)")
    rows = []
    for name in names:
        spec = registry.get(name)
        t0 = time.perf_counter()
        got = measure(name, args.small, args.seed, args.runs, args.warmup)
        rows += got
        print(f"{name}: input {'x'.join(map(str, spec.input_shape(args.small)))}, {got[0]['layers']} layers, "
              f"build+run fp32 {got[0]['fp32_s']:.1f} s, fp16 {got[0]['fp16_s']:.1f} s, unused weights "
              f"{got[0]['unused']}, 1-thread run ref {got[0]['ref_s'] * 1e3:.1f} ms / eager "
              f"{got[0]['eager_s'] * 1e3:.1f} ms, total {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        if not all(r["finite_fp16"] and r["finite_fp32"] for r in got):
            print(f"{name}: NON-FINITE values in the output", file=sys.stderr)
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_writing_fragment(main, "zoo_parity_table", markdown=True, with_stderr=True))

#!/usr/bin/env python
"""Numerical robustness of the normalization builders in fp16 / bf16 / fp32.

For every builder x strategy (safe/naive) x dtype x input magnitude, build the layer on the
reference backend, feed x = M * U(-1, 1) rounded to the dtype (or all zeros), and compare with
float64 PyTorch on the same (rounded) input. Writes a Markdown table (default docs/robustness.md)
and prints it.

    python scripts/robustness_table.py [--out docs/robustness.md] [--arithmetic both]

--arithmetic picks the reference backend's arithmetic model (trtbuild/reference/arithmetic.py):
"fp32-then-round" (each layer in fp32, rounded once at its output), "pessimistic" (every step
and every accumulation rounded to the tensor's type) or "both" (default: one table per model).

Metric: rel_err = max_i |y_i - r_i| / max(|r_i|, 1e-2 * max|r|, smallest normal of the dtype);
non-finite outputs are counted separately (and make rel_err inf). Target: finite and <= 1e-2.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trtbuild.engine.quick import run_builder  # noqa: E402
from trtbuild.reference import arithmetic  # noqa: E402
from trtbuild.parity.compare import robust_rel_error  # noqa: E402

from trtbuild.layers.batchnorm import batchnorm, batchnorm_batch_stats  # noqa: E402
from trtbuild.layers.l2norm import l2norm  # noqa: E402
from trtbuild.layers.lrn import lrn  # noqa: E402
from trtbuild.layers.normalization import group_norm, instance_norm, layer_norm  # noqa: E402
from trtbuild.models.pytorch import L2Norm  # noqa: E402

MAGNITUDES = [1e-3, 1.0, 11.0, 64.0, 1e3, 6e4, 0.0]  # 0.0 = all-zero input
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
STRATEGIES = ("safe", "naive")
TARGET = 1e-2


@dataclass
class Case:
    label: str
    shape: tuple
    # make(magnitude) -> (build(network, x, strategy) -> ITensor, reference(x64) -> float64 tensor, input mask or None)
    make: Callable


def _rng(seed=0):
    return np.random.RandomState(seed)


def _l2norm(magnitude):
    w = _rng(1).uniform(10, 30, 512)
    mod = L2Norm(512, 20.0).double()
    mod.weight.data = torch.tensor(w)
    return (lambda net, x, s: l2norm(net, x, w, "l2", strategy=s)), mod, None


def _lrn(impl, size):
    def make(magnitude):
        return (lambda net, x, s: lrn(net, x, size, 1e-4, 0.75, 2.0, "lrn", impl=impl, strategy=s),
                lambda x: F.local_response_norm(x, size, 1e-4, 0.75, 2.0), None)
    return make


def _bn_params(magnitude, dead=False):
    r = _rng(2)
    c = 16
    gamma, beta = r.uniform(0.5, 1.5, c), r.uniform(-0.5, 0.5, c)
    gamma[:2], beta[:2] = 1e-3, 0.0  # nearly pruned channels (network slimming)
    scale = magnitude if magnitude > 0 else 1.0
    mean, var = 0.1 * scale * r.uniform(-1, 1, c), scale ** 2 * r.uniform(0.2, 0.5, c)
    eps = 1e-5
    if dead:  # channel 2 never fires: running var 0, input 0; tiny eps -> folded scale 1e6
        mean[2], var[2], eps = 0.0, 0.0, 1e-12
    return gamma, beta, mean, var, eps


def _batchnorm(dead):
    def make(magnitude):
        gamma, beta, mean, var, eps = _bn_params(magnitude, dead)
        mod = nn.BatchNorm2d(16, eps=eps).double().eval()
        for p, v in ((mod.weight, gamma), (mod.bias, beta), (mod.running_mean, mean), (mod.running_var, var)):
            p.data = torch.tensor(v)
        mask = None
        if dead:
            mask = torch.ones(1, 16, 1, 1, dtype=torch.float64)
            mask[0, 2] = 0
        return (lambda net, x, s: batchnorm(net, x, gamma, beta, mean, var, eps, "bn", strategy=s)), mod, mask
    return make


def _bn_stats(magnitude):
    r = _rng(3)
    gamma, beta = r.uniform(0.5, 1.5, 16), r.uniform(-0.5, 0.5, 16)
    mod = nn.BatchNorm2d(16).double().train()
    mod.weight.data, mod.bias.data = torch.tensor(gamma), torch.tensor(beta)
    return (lambda net, x, s: batchnorm_batch_stats(net, x, gamma, beta, 1e-5, "bnt", strategy=s)), mod, None


def _instance(impl):
    def make(magnitude):
        r = _rng(4)
        gamma, beta = r.uniform(0.5, 1.5, 16), r.uniform(-0.5, 0.5, 16)
        mod = nn.InstanceNorm2d(16, affine=True).double()
        mod.weight.data, mod.bias.data = torch.tensor(gamma), torch.tensor(beta)
        return (lambda net, x, s: instance_norm(net, x, gamma, beta, 1e-5, "in", impl=impl, strategy=s)), mod, None
    return make


def _group(impl):
    def make(magnitude):
        r = _rng(5)
        gamma, beta = r.uniform(0.5, 1.5, 16), r.uniform(-0.5, 0.5, 16)
        mod = nn.GroupNorm(4, 16).double()
        mod.weight.data, mod.bias.data = torch.tensor(gamma), torch.tensor(beta)
        return (lambda net, x, s: group_norm(net, x, 4, gamma, beta, 1e-5, "gn", impl=impl, strategy=s)), mod, None
    return make


def _layer(impl):
    def make(magnitude):
        r = _rng(6)
        gamma, beta = r.uniform(0.5, 1.5, 64), r.uniform(-0.5, 0.5, 64)
        mod = nn.LayerNorm(64).double()
        mod.weight.data, mod.bias.data = torch.tensor(gamma), torch.tensor(beta)
        return (lambda net, x, s: layer_norm(net, x, (64,), gamma, beta, 1e-5, "ln", impl=impl, strategy=s)), mod, None
    return make


CASES = [
    Case("l2norm (C=512)", (1, 512, 4, 4), _l2norm),
    Case("lrn native (size 5)", (2, 32, 4, 4), _lrn("native", 5)),
    Case("lrn composed (size 5)", (2, 32, 4, 4), _lrn("composed", 5)),
    Case("lrn composed (size 16)", (2, 32, 4, 4), _lrn("composed", 16)),
    Case("batchnorm eval", (2, 16, 4, 4), _batchnorm(False)),
    Case("batchnorm eval (dead ch, eps 1e-12)", (2, 16, 4, 4), _batchnorm(True)),
    Case("batchnorm batch stats", (4, 16, 4, 4), _bn_stats),
    Case("instance_norm native", (2, 16, 8, 8), _instance("native")),
    Case("instance_norm composed", (2, 16, 8, 8), _instance("composed")),
    Case("group_norm native (G=4)", (2, 16, 8, 8), _group("native")),
    Case("group_norm composed (G=4)", (2, 16, 8, 8), _group("composed")),
    Case("layer_norm native (64)", (2, 16, 64), _layer("native")),
    Case("layer_norm composed (64)", (2, 16, 64), _layer("composed")),
]


def _input(shape, magnitude, dtype, mask, seed=7):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * magnitude
    if mask is not None:
        x = x * mask
    return x.to(dtype)


def sweep(model: str = arithmetic.DEFAULT):
    """Yield one dict per builder x strategy x dtype x magnitude, under arithmetic model `model`."""
    with arithmetic.using(model):
        yield from _sweep(model)


def _sweep(model):
    for case in CASES:
        for M in MAGNITUDES:
            build, reference, mask = case.make(M)
            for dname, dtype in DTYPES.items():
                x = _input(case.shape, M, dtype, mask)
                with torch.no_grad():
                    ref = reference(x.double())
                in_range = ref.abs().max().item() <= torch.finfo(dtype).max
                for strategy in STRATEGIES:
                    y = run_builder(build, x, strategy)
                    nonfinite = int((~torch.isfinite(y.double())).sum())
                    err = robust_rel_error(y, ref)
                    yield {"model": model, "builder": case.label, "strategy": strategy, "dtype": dname,
                           "magnitude": "zeros" if M == 0 else f"{M:g}", "rel_err": err, "nonfinite": nonfinite,
                           "numel": y.numel(), "in_range": in_range,
                           "ok": (not in_range) or (nonfinite == 0 and err <= TARGET)}


def _fmt_err(e: float) -> str:
    return "inf" if e == float("inf") else f"{e:.3g}"


def _cell(r) -> str:
    if not r["in_range"]:
        return "n/a"
    mark = "ok" if r["ok"] else "**FAIL**"
    nf = f", {r['nonfinite']} non-finite" if r["nonfinite"] else ""
    return f"{mark} {_fmt_err(r['rel_err'])}{nf}"


MODEL_TEXT = {
    arithmetic.DEFAULT: "each layer computes in fp32 and rounds once, at its output, to the layer's type",
    arithmetic.PESSIMISTIC: "for fp16/bf16 layers every intermediate result (each step of a composite layer, "
                            "every pow/sqrt/div, every normalization statistic) is rounded to the layer's type and "
                            "every reduction (REDUCE, mean and variance, LRN's window sum, average pooling's window "
                            "sum) accumulates sequentially in that type, rounding after each add; fp32 layers are "
                            "unchanged",
}


def _summary(rows, model, mags):
    lines = [f"## Summary, arithmetic model `{model}` (cell: pass/FAIL and rel_err)", "",
             f"Model `{model}`: {MODEL_TEXT[model]}.", "",
             "| builder | strategy | dtype | " + " | ".join(mags) + " |",
             "|---|---|---|" + "---|" * len(mags)]
    index = {(r["builder"], r["strategy"], r["dtype"], r["magnitude"]): r for r in rows if r["model"] == model}
    for case in CASES:
        for strategy in STRATEGIES:
            for dname in DTYPES:
                cells = [_cell(index[(case.label, strategy, dname, m)]) for m in mags]
                lines.append(f"| {case.label} | {strategy} | {dname} | " + " | ".join(cells) + " |")
    return lines + [""]


def _counts(rows, model) -> str:
    rows = [r for r in rows if r["model"] == model]
    safe_fail = sum(r["strategy"] == "safe" and not r["ok"] for r in rows)
    naive_fail = sum(r["strategy"] == "naive" and not r["ok"] for r in rows)
    return (f"`{model}`: safe rows failing: {safe_fail} of {sum(r['strategy'] == 'safe' for r in rows)}; "
            f"naive rows failing: {naive_fail} of {sum(r['strategy'] == 'naive' for r in rows)}.")


def markdown(rows, seconds: float) -> str:
    mags = ["zeros" if m == 0 else f"{m:g}" for m in MAGNITUDES]
    models = list(dict.fromkeys(r["model"] for r in rows))
    lines = [
        "# Numerical robustness of the normalization builders",
        "",
        "Generated by `python scripts/robustness_table.py --arithmetic " + (models[0] if len(models) == 1 else "both")
        + "` on the reference backend "
        f"(torch {torch.__version__}, {'cuda' if torch.cuda.is_available() else 'cpu'}; {seconds:.0f} s). "
        "Not measured on TensorRT. Every figure is labelled with the reference's arithmetic model "
        "(trtbuild/reference/arithmetic.py; chosen per build with `arithmetic.set_model(config, ...)` or "
        "`arithmetic.using(...)`, stored in the plan):",
        "",
        *[f"- `{m}`: {MODEL_TEXT[m]}." for m in models],
        "",
        "Input: x = M * U(-1, 1) rounded to the dtype (or all zeros); reference: the float64 PyTorch module "
        "on the same rounded input. rel_err = max_i |y_i - r_i| / max(|r_i|, 1e-2 * max|r|, smallest normal "
        f"of the dtype): elements of at least 1 % of the largest output are judged relative to themselves, smaller "
        f"ones relative to 1 % of the largest. A row passes when every output is finite and rel_err <= {TARGET:g}. "
        "\"n/a\": the exact output does not fit the dtype.",
        "",
        "Notes: under `fp32-then-round` *native* layers (ILRNLayer, INormalizationLayer) never overflow "
        "internally, so their naive rows show only output rounding; under `pessimistic` INormalizationLayer "
        "accumulates its statistics in the input type, a stand-in for a GPU kernel that does (its internal "
        "precision is TensorRT's choice, which the safe strategy's fp32 island removes). ILRNLayer takes FLOAT "
        "only, so both lrn native strategies run in fp32 and agree under both models. Convolution and matrix multiply "
        "are not modelled by `pessimistic` (none is used here). For bf16 batchnorm both strategies run the scale "
        "layer in fp32 (bf16 has no weight type). LRN uses AlexNet's alpha=1e-4, beta=0.75, k=2; batchnorm has two "
        "nearly pruned channels (gamma=1e-3) and running statistics matched to M; the dead-channel variant adds a "
        "channel with var=0, zero input and eps=1e-12 (folded scale 1e6 > fp16 max).",
        "",
        "Safe strategies (see each module's docstring): l2norm pre-scales by the per-position max-abs over the "
        "channels and stays in fp16 (bf16: fp32 island); lrn, instance/group/layer norm and batchnorm batch stats "
        "run in an fp32 island (add_cast to FLOAT and back); batchnorm eval runs its one CHANNEL scale layer "
        "with fp32 weights between casts for fp16/bf16 inputs.",
        "",
        *[_counts(rows, m) for m in models],
        "",
    ]
    for m in models:
        lines += _summary(rows, m, mags)
    lines += ["## All rows", "",
              "| model | builder | strategy | dtype | magnitude | max rel err | non-finite | pass |",
              "|---|---|---|---|---|---|---|---|"]
    order = {c.label: i for i, c in enumerate(CASES)}
    mag_order = {m: i for i, m in enumerate(mags)}
    for r in sorted(rows, key=lambda r: (models.index(r["model"]), order[r["builder"]],
                                         STRATEGIES.index(r["strategy"]), list(DTYPES).index(r["dtype"]),
                                         mag_order[r["magnitude"]])):
        verdict = "n/a" if not r["in_range"] else ("yes" if r["ok"] else "**no**")
        lines.append(f"| {r['model']} | {r['builder']} | {r['strategy']} | {r['dtype']} | {r['magnitude']} "
                     f"| {_fmt_err(r['rel_err'])} | {r['nonfinite']}/{r['numel']} | {verdict} |")
    lines += [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "robustness.md"), help="Markdown file to write ('-': none)")
    p.add_argument("--arithmetic", default="both", choices=[*arithmetic.MODELS, "both"],
                   help="the reference backend's arithmetic model(s) (default: both)")
    args = p.parse_args(argv)
    models = list(arithmetic.MODELS) if args.arithmetic == "both" else [args.arithmetic]
    t0 = time.time()
    rows = [r for m in models for r in sweep(m)]
    text = markdown(rows, time.time() - t0)
    print(text)
    if args.out != "-":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0 if all(r["ok"] for r in rows if r["strategy"] == "safe") else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""INT8 / FP8 accuracy on scikit-learn's bundled digits (no download), as a Markdown table.

Trains the small CNN of tests/helpers/digits_model.py (seeded, a few seconds on CPU) on a fixed stratified
80/20 split, calibrates it on the training split with each method (max, percentile 99.99, mse,
entropy), builds the network on the reference backend in fp32 and as an INT8 and an FP8 Q/DQ
network, and reports per method x precision: top-1 on the 360 held-out images (sklearn's labels),
the mean per-image cosine of the logits against the fp32 PyTorch model, the layers kept precise
(none unless --keep), and whether NVIDIA's TensorRT-RTX builder builds the same network for sm89
and sm120 (built, not run: nothing here can run it).

    python scripts/quant_digits_table.py
    python scripts/quant_digits_table.py --keep fp32:conv1     # keep the first convolution in fp32

The reference emulates INT8/FP8 arithmetic in PyTorch (fake quantization, float accumulation):
these are accuracy numbers, not speed numbers (the reference's run times, printed on stderr with
the table, only show the cost of the emulation).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.digits_model import (calibrate_model, engine_logits, kept_layers, load_split,  # noqa: E402
                                  mean_cosine, top1, train)
from trtbuild.backend import BackendError  # noqa: E402
from trtbuild.quant import METHODS, parse_keep  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment  # noqa: E402

RUNS = 20  # engine runs timed per network (median): the reference emulates, this is no kernel speed


def rtx_build(model, x, calib, precision, keep) -> str:
    """'sm89, sm120: ok' when TensorRT-RTX builds the network (cross-checked with the reference)."""
    try:
        engine_logits(model, x, calib, precision, keep, cross_check=True, targets=("8.9", "12.0"))
    except BackendError as e:
        return f"not available ({e})"
    except Exception as e:  # noqa: BLE001 (reported in the table)
        return f"FAILED: {str(e).splitlines()[0][:80]}"
    return "sm89, sm120: ok"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(ap, "quant_digits_table")
    ap.add_argument("--keep", action="append", default=[], metavar="fp32:PATTERNS",
                    help="keep PyTorch modules (names or globs) out of quantization, in fp32 (repeatable)")
    ap.add_argument("--no-rtx", action="store_true", help="skip the TensorRT-RTX builds")
    args = ap.parse_args(argv)
    try:
        keep = parse_keep(args.keep)
    except ValueError as e:
        ap.error(str(e))
    if any(p != "fp32" for _, p in keep):
        ap.error("--keep: the digits network keeps layers in fp32 only (fp32:PATTERNS)")

    try:
        table(keep, rtx=not args.no_rtx)
    except ValueError as e:  # a --keep pattern that matches no module
        ap.error(str(e))
    return 0


def table(keep, rtx: bool) -> None:
    t0 = time.perf_counter()
    data = load_split()
    model = train(data)
    with torch.no_grad():
        fp32 = model(data.x_test)
    engine, info = engine_logits(model, data.x_test, runs=RUNS)
    run_ms = {"fp32": info["run_ms"]}
    print(f"digits: {len(data.y_train)} training / {len(data.y_test)} held-out images; trained in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print("| calibration | precision | top-1 (held-out) | cosine vs fp32 | kept precise | TensorRT-RTX build |")
    print("|---|---|---|---|---|---|")
    print(f"| - | fp32 PyTorch | {top1(fp32, data.y_test):.2f}% | 1 | - | - |")
    print(f"| - | fp32 engine | {top1(engine, data.y_test):.2f}% | {mean_cosine(engine, fp32):.6f} | - | - |")
    for method in METHODS:
        calib = calibrate_model(model, data, method)
        name = "percentile 99.99" if method == "percentile" else method
        for precision in ("int8", "fp8"):
            got, info = engine_logits(model, data.x_test, calib, precision, keep, runs=RUNS)
            run_ms.setdefault(precision, info["run_ms"])  # max calibration's network
            built = rtx_build(model, data.x_test, calib, precision, keep) if rtx else "-"
            print(f"| {name} | {precision} | {top1(got, data.y_test):.2f}% | {mean_cosine(got, fp32):.6f} | "
                  f"{', '.join(kept_layers(calib, precision, keep)) or 'none'} | {built} |")
    print(f"reference backend, one run on the {len(data.y_test)} held-out images (median of {RUNS}): "
          + ", ".join(f"{p} {ms:.1f} ms" for p, ms in run_ms.items()), file=sys.stderr)
    print(f"total {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run_writing_fragment(main, "quant_digits_table", markdown=True, with_stderr=True))

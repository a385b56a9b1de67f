#!/usr/bin/env python3
"""Benchmark the involution forward: CUDA kernel vs the unfold reference.

On a CUDA device it times both (CUDA events, median of --iters runs after --warmup) and reports
each one's effective bandwidth: the minimum bytes the op must move (read x and w once, write out
once) divided by the time, next to the device's peak memory bandwidth (from
torch.cuda.get_device_properties when it exposes the memory clock and bus width, else a table of
known GPUs). Without a GPU it times only the reference on the CPU and says so.

    python scripts/bench_involution.py                    # RedNet-50 stage shapes, batch 8 (1 on CPU)
    python scripts/bench_involution.py --dtype fp16 --batch 32 --json out/bench_involution.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtbuild.ops.involution import InvolutionFunction, involution_output_size, involution_reference
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment

#: name -> list of (C, H, W, K, stride, group_channels). "rednet": the involutions of RedNet-50's four
#: stages (7x7, 16 channels per group, stride 1; the stride-2 ones at the stage entries).
CONFIGS = {
    "rednet": [(64, 56, 56, 7, 1, 16), (128, 28, 28, 7, 1, 16), (256, 14, 14, 7, 1, 16), (512, 7, 7, 7, 1, 16),
               (128, 56, 56, 7, 2, 16)],
    "k3": [(64, 56, 56, 3, 1, 16), (256, 28, 28, 3, 1, 16)],
    "tiny": [(16, 12, 12, 7, 1, 16), (16, 12, 12, 3, 2, 4)],
}

#: Peak DRAM bandwidth (bytes/s) by device-name substring, checked in order, when
#: get_device_properties has no memory clock / bus width.
PEAK_BANDWIDTH_TABLE = [
    ("H200", 4.8e12),
    ("H100 NVL", 3.9e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),
    ("GH200", 4.0e12),
    ("B200", 8.0e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
    ("A100", 1.555e12),
    ("L40S", 0.864e12),
    ("L40", 0.864e12),
    ("L4", 0.3e12),
    ("A10G", 0.6e12),
    ("A10", 0.6e12),
    ("RTX 4090", 1.008e12),
    ("V100", 0.9e12),
    ("T4", 0.32e12),
]


def peak_bandwidth(device: torch.device) -> tuple[float | None, str]:
    """(bytes/s, where the number came from) for a CUDA device; (None, reason) if unknown."""
    props = torch.cuda.get_device_properties(device)
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if clock_khz and bus_bits:
        return 2.0 * clock_khz * 1e3 * bus_bits / 8.0, "device properties (2 x memory clock x bus width)"
    for key, value in PEAK_BANDWIDTH_TABLE:
        if key.lower() in props.name.lower():
            return value, f"table entry '{key}'"
    return None, f"unknown for '{props.name}' (add it to PEAK_BANDWIDTH_TABLE)"


def make_case(n: int, c: int, h: int, w: int, k: int, stride: int, group_channels: int, dtype, device):
    pad = (k - 1) // 2
    groups = c // group_channels
    ho, wo = involution_output_size(h, k, stride, pad), involution_output_size(w, k, stride, pad)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, c, h, w, generator=gen).to(device, dtype)
    wt = torch.randn(n, groups, k * k, ho, wo, generator=gen).to(device, dtype)
    params = (k, stride, pad, 1, groups)
    moved = (x.numel() + wt.numel() + n * c * ho * wo) * x.element_size()
    return x, wt, params, moved


def time_cuda(fn, iters: int, warmup: int) -> float:
    """Median milliseconds of fn() on the current stream."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_cpu(fn, iters: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fragment_option(parser, "bench_involution")
    parser.add_argument("--config", choices=sorted(CONFIGS), default="rednet")
    parser.add_argument("--batch", type=int, default=None, help="batch size (default 8 on GPU, 1 on CPU)")
    parser.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.float16 if args.dtype == "fp16" else torch.float32
    batch = args.batch or (8 if cuda else 1)
    if cuda:
        props = torch.cuda.get_device_properties(device)
        peak, peak_source = peak_bandwidth(device)
        peak_text = f"{peak / 1e12:.2f} TB/s" if peak else "unknown"
        print(f"device: {props.name}; peak memory bandwidth {peak_text} ({peak_source})")
    else:
        peak = None
        print("no GPU present: timing the unfold reference on the CPU only (the CUDA kernel needs a GPU)")
        if dtype == torch.float16:
            print("note: fp16 on the CPU is computed in fp32 by the reference")
    print(f"config={args.config} batch={batch} dtype={args.dtype} iters={args.iters} (median)\n")

    header = f"{'C':>4} {'HxW':>7} {'K':>2} {'s':>2} {'G':>3} {'MB':>8} | {'ref ms':>9} {'ref GB/s':>9}"
    if cuda:
        header += f" | {'kernel ms':>9} {'kern GB/s':>9} {'% peak':>7} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    rows = []
    for c, h, w, k, stride, gc in CONFIGS[args.config]:
        x, wt, params, moved = make_case(batch, c, h, w, k, stride, gc, dtype, device)
        row = {"C": c, "H": h, "W": w, "K": k, "stride": stride, "groups": params[-1], "batch": batch,
               "dtype": args.dtype, "bytes": moved}
        with torch.no_grad():
            if cuda:
                ref_ms = time_cuda(lambda x=x, wt=wt, params=params: involution_reference(x, wt, *params),
                                   args.iters, args.warmup)
                ker_ms = time_cuda(lambda x=x, wt=wt, params=params: InvolutionFunction.apply(x, wt, *params),
                                   args.iters, args.warmup)
                diff = (InvolutionFunction.apply(x, wt, *params).float() - involution_reference(x, wt, *params).float())
                row.update(kernel_ms=ker_ms, kernel_gbps=moved / ker_ms / 1e6, max_abs_diff=diff.abs().max().item())
            else:
                ref_ms = time_cpu(lambda x=x, wt=wt, params=params: involution_reference(x, wt, *params),
                                  args.iters, args.warmup)
        row.update(reference_ms=ref_ms, reference_gbps=moved / ref_ms / 1e6)
        line = (f"{c:>4} {f'{h}x{w}':>7} {k:>2} {stride:>2} {params[-1]:>3} {moved / 1e6:>8.2f} | "
                f"{ref_ms:>9.3f} {row['reference_gbps']:>9.2f}")
        if cuda:
            pct = 100.0 * row["kernel_gbps"] * 1e9 / peak if peak else float("nan")
            row.update(peak_fraction=pct / 100.0 if peak else None, speedup=ref_ms / row["kernel_ms"])
            line += f" | {row['kernel_ms']:>9.3f} {row['kernel_gbps']:>9.1f} {pct:>6.1f}% {row['speedup']:>7.1f}x"
        print(line)
        rows.append(row)

    print("\nGB/s = (bytes of x + w + out) / time: the least traffic the op needs, so a fraction of peak"
          " above ~0.7 means the kernel is bandwidth-bound.")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(device) if cuda else "cpu",
                                         "peak_bytes_per_s": peak, "rows": rows}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(run_writing_fragment(main, "bench_involution"))

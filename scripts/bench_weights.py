#!/usr/bin/env python3
"""Benchmark the vectorized .wts parser against a naive per-value parser.

Generates a ResNet-50-sized dump (the float tensors of torchvision's resnet50
state_dict: ~25.6M float32 values, ~230 MB of text) from a seeded generator in
a temp dir, then times

* ours:     trtbuild.weights.parse_wts on the whole file (best of --repeat runs),
            and WeightMap.load (file read + parse + NaN/Inf check);
* baseline: a naive parser written here, ``struct.unpack('>f', bytes.fromhex(word))``
            per value, timed on the first tensors up to --baseline-floats values
            (default 2M) because it is slow; ours is also timed on that same subset.

Throughput is MB/s of .wts text (1 MB = 1e6 bytes).  The process is pinned to
one CPU core.  Usage:  python scripts/bench_weights.py [--floats N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trtbuild.weights import WeightMap, parse_wts, write_weights  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment  # noqa: E402


def resnet50_float_shapes() -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every floating tensor in torchvision resnet50's state_dict, in order."""
    shapes: list[tuple[str, tuple[int, ...]]] = []

    def conv(name, cout, cin, k):
        shapes.append((f"{name}.weight", (cout, cin, k, k)))

    def bn(name, c):
        shapes.extend((f"{name}.{p}", (c,)) for p in ("weight", "bias", "running_mean", "running_var"))

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    inplanes = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512)), start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            conv(f"{p}.conv1", width, inplanes, 1)
            bn(f"{p}.bn1", width)
            conv(f"{p}.conv2", width, width, 3)
            bn(f"{p}.bn2", width)
            conv(f"{p}.conv3", width * 4, width, 1)
            bn(f"{p}.bn3", width * 4)
            if b == 0:
                conv(f"{p}.downsample.0", width * 4, inplanes, 1)
                bn(f"{p}.downsample.1", width * 4)
            inplanes = width * 4
    shapes.append(("fc.weight", (1000, 2048)))
    shapes.append(("fc.bias", (1000,)))
    return shapes


def make_tensors(total: int | None, seed: int) -> dict[str, np.ndarray]:
    """ResNet-50 tensors, or flat tensors with the same name list scaled to ``total`` floats."""
    shapes = resnet50_float_shapes()
    sizes = [int(np.prod(s)) for _, s in shapes]
    full = sum(sizes)
    if total is not None and total != full:
        scaled = [max(1, round(s * total / full)) for s in sizes]
        scaled[-1] = max(1, scaled[-1] + total - sum(scaled))
        shapes = [(name, (n,)) for (name, _), n in zip(shapes, scaled)]
    rng = np.random.default_rng(seed)
    return {name: (rng.standard_normal(shape, dtype=np.float32) * 0.05) for name, shape in shapes}


def naive_parse(text: str) -> dict[str, np.ndarray]:
    """Baseline: split lines and words, one struct.unpack per value (a literal port of loadWeights)."""
    lines = text.split("\n")
    count = int(lines[0])
    out = {}
    for line in lines[1 : 1 + count]:
        words = line.split()
        name, n = words[0], int(words[1])
        values = [struct.unpack(">f", bytes.fromhex(word))[0] for word in words[2 : 2 + n]]
        out[name] = np.array(values, dtype=np.float32)
    return out


def subset_text(data: bytes, max_floats: int) -> tuple[bytes, int]:
    """The first tensor lines of ``data`` holding up to ``max_floats`` values, with a fixed header."""
    lines = data.split(b"\n")
    chosen, floats = [], 0
    for line in lines[1:]:
        if not line:
            continue
        n = int(line.split(b" ", 2)[1])
        if chosen and floats + n > max_floats:
            break
        chosen.append(line)
        floats += n
    return f"{len(chosen)}\n".encode() + b"\n".join(chosen) + b"\n", floats


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def pin_one_core() -> None:
    """Pin this process to one CPU core (where the OS allows it) and say which."""
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        print(f"pinned to CPU core {cpu}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(parser, "bench_weights")
    parser.add_argument("--floats", type=int, default=None,
                        help="total float count (default: exact ResNet-50 float tensors, ~25.6M)")
    parser.add_argument("--baseline-floats", type=int, default=2_000_000,
                        help="values parsed by the slow baseline (a prefix of the file)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of our parser; the best is reported")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pin_one_core()
    tensors = make_tensors(args.floats, args.seed)
    n_floats = sum(a.size for a in tensors.values())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "resnet50.wts"
        start = time.perf_counter()
        write_weights(path, tensors)
        write_s = time.perf_counter() - start
        data = path.read_bytes()
        mb = len(data) / 1e6
        print(f"dump: {len(tensors)} tensors, {n_floats} floats, {mb:.1f} MB of .wts text "
              f"(written in {write_s:.2f} s, {mb / write_s:.0f} MB/s)")

        ours_s = best_time(lambda: parse_wts(data), args.repeat)
        load_s = best_time(lambda: WeightMap.load(path), args.repeat)
        parsed = parse_wts(data)
        assert all(np.array_equal(parsed[k].view(np.uint32), v.reshape(-1).view(np.uint32))
                   for k, v in tensors.items()), "our parser is not bit-exact"

        sub, sub_floats = subset_text(data, args.baseline_floats)
        sub_mb = len(sub) / 1e6
        ours_sub_s = best_time(lambda: parse_wts(sub), args.repeat)
        sub_text = sub.decode("ascii")
        start = time.perf_counter()
        naive = naive_parse(sub_text)
        naive_s = time.perf_counter() - start
        mine = parse_wts(sub)
        assert all(np.array_equal(naive[k].view(np.uint32), mine[k].view(np.uint32)) for k in naive)

    ours_mbs, load_mbs = mb / ours_s, mb / load_s
    ours_sub_mbs, naive_mbs = sub_mb / ours_sub_s, sub_mb / naive_s
    print(f"ours     parse_wts, whole file:      {ours_s:8.3f} s  {ours_mbs:8.1f} MB/s  "
          f"({n_floats / ours_s / 1e6:.1f} M floats/s, best of {args.repeat})")
    print(f"ours     WeightMap.load, whole file: {load_s:8.3f} s  {load_mbs:8.1f} MB/s  "
          f"(read + parse + finite check)")
    print(f"ours     parse_wts, subset:          {ours_sub_s:8.3f} s  {ours_sub_mbs:8.1f} MB/s  "
          f"({sub_floats} floats, {sub_mb:.1f} MB)")
    print(f"baseline naive struct.unpack, subset:{naive_s:8.3f} s  {naive_mbs:8.1f} MB/s  "
          f"(SUBSET only: first {sub_floats} floats, {sub_mb:.1f} MB, one run)")
    print(f"speedup (MB/s ours whole file / baseline subset): {ours_mbs / naive_mbs:.1f}x")
    print(f"speedup (same subset):                            {ours_sub_mbs / naive_mbs:.1f}x")
    ok = ours_mbs >= 150 and ours_mbs / naive_mbs >= 20
    print(f"target >= 150 MB/s and >= 20x: {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(run_writing_fragment(main, "bench_weights"))

#!/usr/bin/env python3
"""Benchmark the chunked .wts writer against a gen_wts.py-style writer and the previous writer.

Makes AlexNet-sized float32 tensors (torchvision AlexNet's 16 tensors, 61.1M values, 244 MB =
233 MiB; or the same names scaled to --mb megabytes) from a seeded generator, and writes them
in a temp dir with

* gen_wts:  tensorrtx's gen_wts.py loop, ``struct.pack(">f", value).hex()`` per value into a
            text file (one space after the count, as trtbuild writes; gen_wts.py puts two);
* previous: trtbuild's writer before the change (whole-tensor ``binascii.hexlify`` + a (count, 9)
            text array per tensor), copied below;
* ours:     ``trtbuild.weights.write_wts`` (chunks of WRITE_CHUNK values, table lookup per 16 bits).

Each writes to an open file (page cache; no fsync), is timed once (gen_wts) or best of --repeat,
and the three files are checked byte-identical. ``write_weights`` (temp file, fsync, rename) is
timed for ours too. Throughput is MB of float32 weights per second (1 MB = 1e6 bytes); the
process is pinned to one CPU core.  Usage:  python scripts/bench_wts_write.py [--mb 233] [--repeat 3]
"""

from __future__ import annotations

import argparse
import binascii
import filecmp
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
from trtbuild.weights import write_weights, write_wts  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_weights import pin_one_core  # noqa: E402
from docs_fragment import add_fragment_option, run_writing_fragment  # noqa: E402

ALEXNET = [("features.0.weight", (64, 3, 11, 11)), ("features.0.bias", (64,)),
           ("features.3.weight", (192, 64, 5, 5)), ("features.3.bias", (192,)),
           ("features.6.weight", (384, 192, 3, 3)), ("features.6.bias", (384,)),
           ("features.8.weight", (256, 384, 3, 3)), ("features.8.bias", (256,)),
           ("features.10.weight", (256, 256, 3, 3)), ("features.10.bias", (256,)),
           ("classifier.1.weight", (4096, 9216)), ("classifier.1.bias", (4096,)),
           ("classifier.4.weight", (4096, 4096)), ("classifier.4.bias", (4096,)),
           ("classifier.6.weight", (1000, 4096)), ("classifier.6.bias", (1000,))]


def make_tensors(mb: float | None, seed: int) -> dict[str, np.ndarray]:
    """AlexNet's tensors, or flat tensors with the same names scaled to ``mb`` MB of float32."""
    shapes = ALEXNET
    if mb is not None:
        full = sum(int(np.prod(s)) for _, s in shapes)
        total = int(mb * 1e6 / 4)
        shapes = [(name, (max(1, round(int(np.prod(s)) * total / full)),)) for name, s in shapes]
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape, dtype=np.float32) * 0.05 for name, shape in shapes}


def gen_wts_write(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """Baseline: tensorrtx gen_wts.py's loop, one struct.pack per value."""
    with open(path, "w") as f:
        f.write(f"{len(tensors)}\n")
        for name, value in tensors.items():
            vr = value.reshape(-1)
            f.write(f"{name} {len(vr)}")
            for vv in vr:
                f.write(" ")
                f.write(struct.pack(">f", float(vv)).hex())
            f.write("\n")


def previous_wts_line(name: str, values: np.ndarray) -> bytes:
    """trtbuild's wts_line before the chunked writer (name checks left out)."""
    flat = np.ascontiguousarray(np.asarray(values).astype(np.float32, copy=False)).reshape(-1)
    count = flat.size
    hex_digits = binascii.hexlify(flat.view(np.uint32).astype(">u4").tobytes())
    text = np.full((count, 9), 0x20, dtype=np.uint8)
    text[:, 1:] = np.frombuffer(hex_digits, dtype=np.uint8).reshape(count, 8)
    return f"{name} {count}".encode("utf-8") + text.tobytes() + b"\n"


def previous_write(path: Path, tensors: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as stream:
        stream.write(f"{len(tensors)}\n".encode("ascii"))
        for name, values in tensors.items():
            stream.write(previous_wts_line(name, values))


def ours_write(path: Path, tensors: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as stream:
        write_wts(stream, tensors)


def timed(fn, path: Path, tensors, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        path.unlink(missing_ok=True)
        start = time.perf_counter()
        fn(path, tensors)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(parser, "bench_wts_write")
    parser.add_argument("--mb", type=float, default=None,
                        help="MB of float32 weights (default: AlexNet's 61.1M values, 244 MB)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the previous and new writers; best reported")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pin_one_core()
    tensors = make_tensors(args.mb, args.seed)
    mb = sum(a.nbytes for a in tensors.values()) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        paths = {key: Path(tmp) / f"{key}.wts" for key in ("gen_wts", "previous", "ours", "atomic")}
        ours_s = timed(ours_write, paths["ours"], tensors, args.repeat)
        previous_s = timed(previous_write, paths["previous"], tensors, args.repeat)
        atomic_s = timed(lambda p, t: write_weights(p, t), paths["atomic"], tensors, args.repeat)
        gen_s = timed(gen_wts_write, paths["gen_wts"], tensors, 1)
        text_mb = paths["ours"].stat().st_size / 1e6
        for key in ("gen_wts", "previous", "atomic"):
            assert filecmp.cmp(paths["ours"], paths[key], shallow=False), f"{key} differs from ours"

    print(f"{len(tensors)} tensors, {mb:.1f} MB of float32 weights, {text_mb:.1f} MB of .wts text "
          f"(the three files are byte-identical)")
    rows = [("gen_wts.py-style struct.pack per value (one run)", gen_s),
            (f"previous trtbuild writer (best of {args.repeat})", previous_s),
            (f"ours: write_wts, chunked (best of {args.repeat})", ours_s),
            (f"ours: write_weights (temp file + fsync + rename, best of {args.repeat})", atomic_s)]
    for label, seconds in rows:
        print(f"{label:<72} {seconds:7.3f} s  {mb / seconds:7.0f} MB/s")
    print(f"ours / gen_wts.py-style: {gen_s / ours_s:.1f}x;  ours / previous: {previous_s / ours_s:.1f}x")
    print(f"target >= 500 MB/s on one core: {'met' if mb / ours_s >= 500 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(run_writing_fragment(main, "bench_wts_write"))

#!/usr/bin/env python3
"""Peak memory of `trtbuild demo` (AlexNet by default): this tree against a baseline tree, same run.

Runs ``trtbuild demo`` under ``/usr/bin/time -v`` in a fresh temp dir (so the weights are exported
first, as on a first run) for each tree, and prints the peak resident set size (``Maximum resident
set size``), the bytes of float32 weights the model has, and their ratio. The baseline is another
checkout of trtbuild (``--baseline /path/to/checkout``, e.g. a ``git worktree`` of main); without
it only this tree is measured. Each demo must end with ``parity PASS``.

    python scripts/bench_demo_memory.py --baseline /work/main
    python scripts/bench_demo_memory.py --baseline /work/main --steps    # and each step's memory
    python scripts/bench_demo_memory.py --demo-args "--model resnet18 --small"
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from trtbuild.weights.wts_stream import read_wts  # noqa: E402
RUN_DEMO = "import sys; from trtbuild.cli import main; sys.exit(main(['demo'] + sys.argv[1:]))"


def run_demo(tree: Path, demo_args: list[str]) -> tuple[int, int, float, str]:
    """(peak RSS in bytes, float32 weight bytes, wall seconds, last line) of one demo run in a temp dir."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = ["/usr/bin/time", "-v", sys.executable, "-c", RUN_DEMO, *demo_args]
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or "parity PASS" not in proc.stdout:
            raise SystemExit(f"the demo of {tree} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-2000:]}")
        peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
        wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", proc.stderr).group(1)
        seconds = sum(float(part) * 60 ** i for i, part in enumerate(reversed(wall.split(":"))))
        weights = sum(a.nbytes for a in read_wts(next(Path(tmp, "weights").glob("*.wts"))).values())
        last = proc.stdout.strip().splitlines()[-1]
    return peak_kib * 1024, weights, seconds, last


def step_memory(tree: Path, demo_args: list[str]) -> str:
    """The per-step lines of scripts/demo_memory_steps.py for `tree` (run in a temp dir)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_memory_steps.py"), *demo_args], cwd=tmp,
                              env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True)
    return "\n".join(line[5:] for line in proc.stderr.splitlines() if line.startswith("STEP "))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_fragment import add_fragment_option, run_writing_fragment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fragment_option(parser, "bench_demo_memory")
    parser.add_argument("--baseline", type=Path, default=None, help="another trtbuild checkout to compare with")
    parser.add_argument("--demo-args", default="", help="extra arguments of `trtbuild demo` (quoted)")
    parser.add_argument("--steps", action="store_true", help="also run each tree's demo once more, printing the "
                        "memory of every step (scripts/demo_memory_steps.py)")
    args = parser.parse_args()
    if not Path("/usr/bin/time").exists():
        raise SystemExit("/usr/bin/time (GNU time) is needed to measure the peak resident set size")
    demo_args = shlex.split(args.demo_args)
    trees = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [("this tree", ROOT)]
    results = {}
    for label, tree in trees:
        peak, weights, seconds, last = run_demo(tree, demo_args)
        results[label] = peak
        print(f"{label:<10} {tree}: peak RSS {peak / 2**20:7.0f} MiB, weights {weights / 2**20:6.1f} MiB "
              f"(float32), peak/weights {peak / weights:4.1f}x, {seconds:.1f} s wall", flush=True)
        print(f"           {last}", flush=True)
        if args.steps:
            print(f"steps of {label} (MiB):\n{step_memory(tree, demo_args)}", flush=True)
    if args.baseline:
        print(f"peak RSS this tree / baseline: {results['this tree'] / results['baseline']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_writing_fragment(main, "bench_demo_memory"))

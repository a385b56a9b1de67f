"""scripts/bench_shipping.py: a tiny run (--small, one model, one run) prints the table with every column and a
row whose refit matches a rebuild, and --fragment PATH writes the fragment there (timings are not checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["model", "build (s)", "refit (s)", "refit/build", "refit vs rebuilt (max abs diff)", "full plan (MB)",
           "stripped plan (MB)", "stripped/full", "cache miss (s)", "cache hit (s)", "hit/miss"]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_a_tiny_run_writes_the_table_to_the_fragment(tmp_path):
    fragment = tmp_path / "docs" / "shipping.md"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_shipping.py"), "--small", "--models",
                           "resnet18", "--runs", "1", "--fragment", str(fragment)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert _cells(lines[0]) == COLUMNS
    (row,) = [_cells(line) for line in lines[2:]]
    assert row[0] == "resnet18 (small)" and len(row) == len(COLUMNS)
    assert float(row[COLUMNS.index("refit vs rebuilt (max abs diff)")]) < 1e-4  # refit gives the rebuilt network
    assert float(row[COLUMNS.index("stripped/full")]) < 0.5  # the weights are most of a plan
    written = fragment.read_text()
    assert written.startswith("<!-- written by `python scripts/bench_shipping.py --small")
    assert "\n".join(lines) in written  # the table as printed, verbatim
    assert f"wrote {fragment}" in done.stdout


def test_an_unknown_model_is_refused_by_name(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_shipping.py"), "--models", "nonet"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "--models: no model named nonet; known: alexnet" in done.stderr

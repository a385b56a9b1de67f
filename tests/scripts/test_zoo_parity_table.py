"""scripts/zoo_parity_table.py: a tiny run prints its table with the reference-versus-eager time column (a
positive ratio per row), and the timing helper runs every call on one PyTorch thread, as often as asked."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("zoo_parity_table", ROOT / "scripts" / "zoo_parity_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cells(line: str) -> list[str]:
    """A Markdown table row's cells (a pipe escaped as \\| stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def test_a_tiny_run_has_a_positive_ref_over_eager_ratio_per_row(table, capsys):
    threads = torch.get_num_threads()
    assert table.main(["--small", "--models", "resnet18", "crnn", "--runs", "1", "--warmup", "0"]) == 0
    assert torch.get_num_threads() == threads  # the 1-thread timing leaves the caller's setting alone
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("|")]
    head = cells(lines[0])
    assert head[-1] == "ref/eager time (fp32, 1 thread)" and len(head) == 13
    rows = [cells(line) for line in lines[2:]]
    assert [(r[0], r[1]) for r in rows] == [("resnet18", "logits"), ("crnn", "log_probs"), ("crnn", "labels")]
    for row in rows:
        assert len(row) == len(head), row
        ratio = re.fullmatch(r"(\d+\.\d)x", row[-1])
        assert ratio and float(ratio.group(1)) > 0, row
    assert rows[1][-1] == rows[2][-1]  # one timing per model, shown on each of its outputs
    assert "ref/eager: median of 1 runs after 0 warm-up, torch.set_num_threads(1)" in out


def test_timing_runs_each_call_on_one_thread_as_often_as_asked(table):
    seen = {"a": [], "b": []}
    calls = {name: (lambda name=name: seen[name].append(torch.get_num_threads())) for name in seen}
    got = table.median_seconds_1_thread(calls, runs=3, warmup=2)
    assert seen == {"a": [1] * 5, "b": [1] * 5}
    assert set(got) == {"a", "b"} and all(s >= 0 for s in got.values())


def test_timing_refuses_zero_runs(table):
    with pytest.raises(ValueError, match=r"--runs 0 / --warmup 1: need at least 1 timed run"):
        table.median_seconds_1_thread({"a": lambda: None}, runs=0, warmup=1)

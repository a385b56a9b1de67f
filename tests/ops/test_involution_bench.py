"""scripts/bench_involution.py runs (tiny shapes) and reports what it measured."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_involution.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_involution", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_script_tiny_config(tmp_path, capsys):
    bench = load_bench()
    out = tmp_path / "bench.json"
    assert bench.main(["--config", "tiny", "--iters", "2", "--warmup", "0", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert len(result["rows"]) == len(bench.CONFIGS["tiny"])
    for row, (c, h, w, k, stride, gc) in zip(result["rows"], bench.CONFIGS["tiny"]):
        assert (row["C"], row["K"], row["stride"], row["groups"]) == (c, k, stride, c // gc)
        ho = (h + 2 * ((k - 1) // 2) - k) // stride + 1
        assert row["bytes"] == 4 * (c * h * w + (c // gc) * k * k * ho * ho + c * ho * ho)
        assert row["reference_ms"] > 0 and row["reference_gbps"] > 0
    if torch.cuda.is_available():
        assert all(r["kernel_ms"] > 0 and r["max_abs_diff"] < 1e-3 for r in result["rows"])
        assert "speedup" in text
    else:
        assert "no GPU present" in text and "kernel_ms" not in result["rows"][0]


def test_peak_bandwidth_table_knows_the_h200():
    bench = load_bench()
    table = dict(bench.PEAK_BANDWIDTH_TABLE)
    assert table["H200"] == 4.8e12
    # "H100" must not shadow the more specific PCIe/NVL entries: they come first.
    names = [k for k, _ in bench.PEAK_BANDWIDTH_TABLE]
    assert names.index("H100 PCIe") < names.index("H100") and names.index("H100 NVL") < names.index("H100")

"""scripts/bench_layers.py: every case's one-layer network computes what its PyTorch op computes (the script
refuses to time a case whose results differ), and a tiny run prints one row per case."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("bench_layers", ROOT / "scripts" / "bench_layers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_layers"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_each_case_equals_its_pytorch_op(bench):
    for case in bench.CASES:
        inputs = case.inputs(torch.Generator().manual_seed(1))
        layer = bench.ReferenceLayer(case, inputs)
        expected = case.torch_op(**inputs)
        assert layer().shape == expected.shape, case.name
        torch.testing.assert_close(layer().float(), expected.float(), atol=1e-5, rtol=1e-5, msg=case.name)
        torch.testing.assert_close(layer.layers().float(), expected.float(), atol=1e-5, rtol=1e-5, msg=case.name)


def test_a_tiny_run_prints_a_row_per_case(bench, capsys):
    assert bench.main(["--runs", "1", "--warmup", "0", "--only", "squeeze,select"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| squeeze") or line.startswith("| select")]
    assert len(rows) == 2 and all(len(r.split("|")) == 8 for r in rows)
    assert "over 1.5x:" in out


def test_an_unknown_case_is_refused_by_name(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--only", "no_such_layer"])
    assert "no case named no_such_layer" in capsys.readouterr().err


def test_a_case_whose_result_differs_is_not_timed(bench):
    wrong = bench.Case("wrong", bench.CASES[0].inputs, bench.CASES[0].layer, lambda x: x)
    with pytest.raises(SystemExit, match="wrong: the reference's result differs"):
        bench.measure(wrong, 1, 0, 0)

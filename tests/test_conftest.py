"""What tests/conftest.py promises every test."""

from __future__ import annotations

import sys

import pytest
import torch

import helpers.refnet as refnet_helpers
from helpers.markers import markers_for


def test_expected_values_are_computed_without_tf32():
    """PyTorch allows TF32 in cuDNN by default; no test may compute its expected values with it."""
    assert torch.backends.cudnn.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"


class _SkipReport:
    def __init__(self, reason: str):
        self.longrepr = ("tests/x.py", 1, f"Skipped: {reason}")


@pytest.fixture
def rtx_import_fails(monkeypatch):
    """`import tensorrt_rtx` raises ImportError, outside CI."""
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", None)
    monkeypatch.delenv("CI", raising=False)


def test_a_missing_tensorrt_rtx_skips_the_twinned_test(rtx_import_fails, monkeypatch):
    """Not installed at all: a skip whose reason the summary counts, never a plain reference network."""
    monkeypatch.setattr(refnet_helpers, "rtx_distributions", lambda: [])
    monkeypatch.setattr(refnet_helpers, "RTX_INSTALLED", False)
    with pytest.raises(pytest.skip.Exception, match=r"TensorRT-RTX \(tensorrt_rtx\) is not installed"):
        refnet_helpers.import_rtx()


def test_a_broken_tensorrt_rtx_install_fails_the_test(rtx_import_fails, monkeypatch):
    """Installed by the `test` extra but not importable: a failure, not a skip."""
    monkeypatch.setattr(refnet_helpers, "rtx_distributions", lambda: ["tensorrt-rtx-cu13 1.7.1.116"])
    with pytest.raises(pytest.fail.Exception, match=r"installed \(tensorrt-rtx-cu13 1.7.1.116\) but"):
        refnet_helpers.import_rtx()


def test_under_ci_a_missing_tensorrt_rtx_fails_the_test(rtx_import_fails, monkeypatch):
    monkeypatch.setattr(refnet_helpers, "rtx_distributions", lambda: [])
    monkeypatch.setattr(refnet_helpers, "RTX_INSTALLED", False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the TensorRT-RTX cross-check"):
        refnet_helpers.import_rtx()


def test_the_summary_counts_the_tests_skipped_for_tensorrt_rtx():
    reports = [_SkipReport(f"{refnet_helpers.RTX_MISSING} (...)")] * 3 + [_SkipReport("needs a CUDA GPU")]
    line = refnet_helpers.rtx_missing_summary(reports)
    assert line.startswith("3 tests skipped: TensorRT-RTX (tensorrt_rtx) is not installed"), line
    assert refnet_helpers.rtx_missing_summary([_SkipReport("needs a CUDA GPU")]) is None


def test_tests_are_marked_from_the_fixtures_they_use():
    assert markers_for({"rtx", "tmp_path"}) == ["rtx"] and markers_for({"rtxnet"}) == ["rtx"]
    assert markers_for({"wheel_api"}) == ["network"]  # downloads NVIDIA's bindings wheels
    assert markers_for({"refnet", "tmp_path"}) == []

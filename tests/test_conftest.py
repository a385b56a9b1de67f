"""What tests/conftest.py promises every test."""

from __future__ import annotations

import torch


def test_expected_values_are_computed_without_tf32():
    """PyTorch allows TF32 in cuDNN by default; no test may compute its expected values with it."""
    assert torch.backends.cudnn.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"

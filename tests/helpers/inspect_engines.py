"""Engines the inspect tests read: resnet18 --small built by `trtbuild build` on the reference (fp32 with a dynamic
batch 1,2,4; fp16 static) and on TensorRT-RTX for `rtx_targets` (built without a GPU, so never loaded here)."""

from __future__ import annotations

import os
from pathlib import Path

from trtbuild.cli import main


def build_inspect_engines(root: Path, rtx_targets: str) -> Path:
    """fp32.engine, fp16.engine and rtx.engine (with their sidecars) in `root`, which is returned."""
    here = os.getcwd()
    os.chdir(root)
    try:
        common = ["build", "resnet18", "--small", "--no-progress"]
        assert main([*common, "--backend", "reference", "--batch", "1,2,4", "-o", "fp32.engine"]) == 0
        assert main([*common, "--backend", "reference", "--precision", "fp16", "-o", "fp16.engine"]) == 0
        assert main([*common, "--backend", "tensorrt-rtx", "--target", rtx_targets, "-o", "rtx.engine"]) == 0
    finally:
        os.chdir(here)
    return root

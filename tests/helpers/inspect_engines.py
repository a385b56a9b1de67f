"""Engines the inspect tests read: resnet18 --small built by `trtbuild build` on the reference (fp32 with a dynamic
batch 1,2,4; fp16 static) and on TensorRT-RTX for `rtx_targets` (built without a GPU, so never loaded here)."""

from __future__ import annotations

from pathlib import Path

from helpers.cli_run import main_in


def build_inspect_engines(root: Path, rtx_targets: str) -> Path:
    """fp32.engine, fp16.engine and rtx.engine (with their sidecars) in `root`, which is returned."""
    common = ["build", "resnet18", "--small", "--no-progress"]
    main_in(root, [*common, "--backend", "reference", "--batch", "1,2,4", "-o", "fp32.engine"],
            [*common, "--backend", "reference", "--precision", "fp16", "-o", "fp16.engine"],
            [*common, "--backend", "tensorrt-rtx", "--target", rtx_targets, "-o", "rtx.engine"])
    return root

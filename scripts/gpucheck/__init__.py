"""The steps of scripts/gpu_check.sh that run in Python, by what they need: torch_steps (PyTorch and the GPU)
and rtx_steps (TensorRT-RTX). scripts/gpu_check_steps.py is their command line and pytest plugin.

Every step prints what it found; lines starting with ``key: `` are the figures that gpu_check.sh copies into
its report."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def key(text: str) -> None:
    print(f"key: {text}", flush=True)

"""TensorRT's SampleMode index mapping for the slice layer, shared by the reference executor (torch)
and the ONNX lowering (numpy)."""

from __future__ import annotations

import numpy as np
import torch

from .enums import SampleMode


def sample_indices(mode: SampleMode, idx, dim: int):
    """Map the positions `idx` (an integer numpy array or torch tensor) along a dim of size `dim`
    to the indices a slice in `mode` reads, and return ``(indices, valid)``.

    WRAP: modulo `dim`; CLAMP: clamped to [0, dim-1]; REFLECT: mirrored at both ends without
    repeating the edge (period 2*(dim-1)); FILL: clamped, with `valid` the mask of positions inside
    the dim (the others take the fill value). `valid` is None for every other mode, whose
    indices come back unchanged (STRICT_BOUNDS). The result has `idx`'s type (numpy or torch).
    """
    xp = torch if torch.is_tensor(idx) else np
    valid = None
    if mode == SampleMode.WRAP:
        idx = idx % dim
    elif mode == SampleMode.CLAMP:
        idx = xp.clip(idx, 0, dim - 1)
    elif mode == SampleMode.REFLECT:
        period = 2 * (dim - 1) if dim > 1 else 1
        idx = idx % period
        idx = xp.where(idx >= dim, period - idx, idx)
    elif mode == SampleMode.FILL:
        valid = (idx >= 0) & (idx < dim)
        idx = xp.clip(idx, 0, dim - 1)
    return idx, valid


__all__ = ["sample_indices"]

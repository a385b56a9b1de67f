"""SSD's L2Norm layer, exactly as in ssd.pytorch (``layers/modules/l2norm.py``)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["L2Norm"]


class L2Norm(nn.Module):
    """Channel-wise L2 normalization with a learned per-channel scale.

    ``out = x / (sqrt(sum_c x^2) + eps) * weight[None, :, None, None]``; note eps is added
    *after* the square root (ssd.pytorch semantics). ``weight`` is initialized to ``scale``.
    State dict: ``weight`` [n_channels].
    """

    def __init__(self, n_channels: int, scale: float, eps: float = 1e-10) -> None:
        super().__init__()
        if n_channels <= 0:
            raise ValueError(f"L2Norm: n_channels must be positive, got {n_channels}")
        self.n_channels = int(n_channels)
        self.gamma = float(scale)
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.full((self.n_channels,), self.gamma))

    def reset_parameters(self) -> None:
        """Reset ``weight`` to the constant ``scale`` given at construction."""
        with torch.no_grad():
            self.weight.fill_(self.gamma)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.n_channels:
            raise ValueError(
                f"L2Norm: expected input [N, {self.n_channels}, H, W], got shape {tuple(x.shape)}"
            )
        norm = x.pow(2).sum(dim=1, keepdim=True).sqrt() + self.eps
        return x / norm * self.weight[None, :, None, None]

    def extra_repr(self) -> str:
        return f"{self.n_channels}, scale={self.gamma}, eps={self.eps}"

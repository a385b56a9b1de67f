"""Shared helpers for the PyTorch model definitions: seeded construction and BN randomization."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

__all__ = ["seeded", "randomize_bn_"]


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Run the body with the CPU RNG seeded to ``seed``, restoring the global RNG afterwards.

    ``seed=None`` leaves the global RNG untouched (non-deterministic init).
    """
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


@torch.no_grad()
def randomize_bn_(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every BatchNorm in ``model`` non-trivial statistics and affine parameters, in place.

    Draws from a ``torch.Generator`` seeded with ``seed`` (global RNG untouched), visiting
    BatchNorm modules in ``model.modules()`` order:
    ``running_mean ~ N(0, 0.5^2)``, ``running_var ~ U(0.5, 2.0)``,
    ``weight (gamma) ~ U(0.5, 1.5)``, ``bias (beta) ~ N(0, 0.2^2)``.
    These keep activations in a sane range through deep nets while making
    Conv+BN folding (mean, var, gamma, beta all != identity) actually matter.
    Returns ``model`` for chaining.
    """
    gen = torch.Generator().manual_seed(int(seed))
    for module in model.modules():
        if not isinstance(module, nn.modules.batchnorm._BatchNorm):
            continue
        n = module.num_features
        if module.running_mean is not None:
            module.running_mean.copy_(torch.randn(n, generator=gen, dtype=torch.float64) * 0.5)
            module.running_var.copy_(torch.rand(n, generator=gen, dtype=torch.float64) * 1.5 + 0.5)
        if module.weight is not None:
            module.weight.copy_(torch.rand(n, generator=gen, dtype=torch.float64) + 0.5)
            module.bias.copy_(torch.randn(n, generator=gen, dtype=torch.float64) * 0.2)
    return model

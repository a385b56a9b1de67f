"""Activation builders matching ``torch.nn.functional``: gelu (exact and tanh), silu, hardsigmoid,
hardswish, relu6, mish and prelu.

Where TensorRT has the function as an ActivationType (TensorRT 10, 11 and TensorRT-RTX alike: GELU_ERF,
GELU_TANH, HARD_SIGMOID, CLIP) the builder is that one layer, named ``name``; otherwise it is composed
from activation layers and an elementwise product, the last layer named ``name`` and the others
``name/<part>``:

- silu ``x * sigmoid(x)``: SIGMOID (``name/sigmoid``) then PROD;
- hardswish ``x * hardsigmoid(x)``: HARD_SIGMOID (``name/hardsigmoid``) then PROD;
- mish ``x * tanh(softplus(x))``: SOFTPLUS (``name/softplus``), TANH (``name/tanh``), PROD;
- prelu: one parametric ReLU layer with the slopes as a constant (``name/slopes``) shaped to broadcast
  along dim 1, as ``nn.PReLU`` does.

hardsigmoid is ``clamp(x / 6 + 1/2, 0, 1)`` (alpha 1/6, beta 1/2), which PyTorch writes
``clamp(x + 3, 0, 6) / 6``: equal up to float rounding of the last bit.
"""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of

from .common import BuilderError, constant, out

__all__ = ["gelu", "silu", "hardsigmoid", "hardswish", "relu6", "mish", "prelu"]

_GELU = {"none": "GELU_ERF", "tanh": "GELU_TANH"}


def _activation(network, x, kind: str, name: str, alpha: float | None = None, beta: float | None = None):
    trt = trt_of(network)
    layer = network.add_activation(x, getattr(trt.ActivationType, kind))
    if layer is not None:
        if alpha is not None:
            layer.alpha = alpha
        if beta is not None:
            layer.beta = beta
    return out(layer, name)


def _times_x(network, x, y, name: str):
    return out(network.add_elementwise(x, y, trt_of(network).ElementWiseOperation.PROD), name)


def gelu(network, x, name: str, approximate: str = "none"):
    """``F.gelu(x, approximate=...)``: "none" (erf) is GELU_ERF, "tanh" GELU_TANH; one layer."""
    if approximate not in _GELU:
        raise BuilderError(f"layer '{name}': approximate={approximate!r} is not 'none' or 'tanh' (as in F.gelu)")
    return _activation(network, x, _GELU[approximate], name)


def silu(network, x, name: str):
    """``F.silu(x)`` = ``x * sigmoid(x)``."""
    return _times_x(network, x, _activation(network, x, "SIGMOID", f"{name}/sigmoid"), name)


def hardsigmoid(network, x, name: str):
    """``F.hardsigmoid(x)`` = ``clamp(x / 6 + 1/2, 0, 1)``: one HARD_SIGMOID layer."""
    return _activation(network, x, "HARD_SIGMOID", name, alpha=1.0 / 6.0, beta=0.5)


def hardswish(network, x, name: str):
    """``F.hardswish(x)`` = ``x * hardsigmoid(x)``."""
    return _times_x(network, x, hardsigmoid(network, x, f"{name}/hardsigmoid"), name)


def relu6(network, x, name: str):
    """``F.relu6(x)`` = ``clamp(x, 0, 6)``: one CLIP layer."""
    return _activation(network, x, "CLIP", name, alpha=0.0, beta=6.0)


def mish(network, x, name: str):
    """``F.mish(x)`` = ``x * tanh(softplus(x))``."""
    sp = _activation(network, x, "SOFTPLUS", f"{name}/softplus", alpha=1.0, beta=1.0)
    return _times_x(network, x, _activation(network, sp, "TANH", f"{name}/tanh"), name)


def prelu(network, x, weight, name: str):
    """``F.prelu(x, weight)`` (``nn.PReLU``): ``weight`` holds one slope, or one per channel (dim 1 of
    ``x``; a rank-1 input has one channel, as in PyTorch)."""
    w = np.asarray(weight, dtype=np.float64).reshape(-1)
    shape = tuple(int(d) for d in x.shape)
    channels = shape[1] if len(shape) >= 2 else 1
    if w.size != 1 and (w.size != channels or channels < 0):
        raise BuilderError(f"layer '{name}': {w.size} slopes for '{x.name}' {shape}: give 1, or one per channel "
                           f"(dim 1: {channels})")
    slopes = w.reshape([1] * len(shape)) if w.size == 1 else w.reshape([1, -1] + [1] * (len(shape) - 2))
    return out(network.add_parametric_relu(x, constant(network, slopes, x, f"{name}/slopes")), name)

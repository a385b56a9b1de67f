"""What the convolution and pooling builders share: per-spatial-dim arguments as PyTorch takes them (an int or
one value per dim), and a 1-D layer run as a 2-D one, since TensorRT's kernels and windows have 2 or 3 dims."""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of

from .common import BuilderError, out


def _ntuple(value, n: int, what: str, name: str) -> tuple[int, ...]:
    """An int or a length-n sequence of ints as an n-tuple; anything else (2.5, (1.9, 1.9), "2") is refused."""
    def whole(v) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if whole(value):
        return (int(value),) * n
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise BuilderError(f"layer '{name}': {what}={value!r} must be an integer or {n} integers (one per spatial dim)")
    value = tuple(value)
    if not all(whole(v) for v in value):
        raise BuilderError(f"layer '{name}': {what}={value!r} must be an integer or {n} integers (one per spatial dim)")
    vals = tuple(int(v) for v in value)
    if len(vals) != n:
        raise BuilderError(f"layer '{name}': {what}={tuple(value)} has {len(vals)} values; "
                           f"expected {n} (one per spatial dim)")
    return vals


def _shape(x) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _unsqueezed(network, x, name: str, fn):
    """Run a 2-D builder ``fn(network, x4)`` on a 1-D ``(N, C, L)`` input viewed as ``(N, C, L, 1)``:
    TensorRT's kernels and windows have 2 or 3 dims. Layers ``name/2d``, fn's, and ``name`` (the
    result back to ``(N, C', L')``)."""
    up = network.add_shuffle(x)
    up.reshape_dims = trt_of(network).Dims((0, 0, 0, 1))
    y = fn(network, out(up, f"{name}/2d"))
    down = network.add_shuffle(y)
    down.reshape_dims = trt_of(network).Dims((0, 0, 0))
    return out(down, name)

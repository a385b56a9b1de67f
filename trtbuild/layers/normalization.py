"""Instance, group and layer normalization, matching torch's InstanceNorm{1,2,3}d(affine=True),
GroupNorm and LayerNorm.

impl="native" uses TensorRT's INormalizationLayer through ``add_normalization_v2`` (per-channel
scale and bias [1, C, 1, ...], for group norm too, as PyTorch scales per channel). Where the
network has no add_normalization_v2 (TensorRT before 10.15), group norm uses the v1
``add_normalization`` with scale/bias of ones/zeros shaped [1, G, 1, ...] (v1 scales per
*group*) followed by the per-channel affine as elementwise layers; instance and layer norm use v1
directly (per-channel and per-element scales are the same in v1 and v2 there).
impl="composed" uses reduce/elementwise layers: mean = AVG, d = x - mean, var = AVG(d^2)
(biased, as torch), y = d * (var + eps)^-0.5, then y * gamma + beta; group norm reshapes to
(N, G, -1) first and back after. impl="auto" is native where TensorRT's layer can express it
(group norm on (N, C) without spatial dims needs composed).

Dynamic shapes. The batch and spatial dims may be dynamic; C must be known at build time (it sets
gamma/beta), and so must layer norm's normalized dims. The composed group norm's way back from
(N, G, -1) restores one dynamic spatial dim (-1); with two or more it moves C last, splits it into
(G, C/G) and transposes to (N, G, C/G, *S) in one shuffle, 0-copy reshapes keeping every dynamic dim
(refused on rank 8, where that view would need 9 dims).

Range safety. The variance of fp16 data above |x| ~ 256 does not fit fp16 (d^2 overflows to inf,
so the composed output collapses to 0), and squares of |d| < ~2e-3 are fp16 subnormals.
strategy="safe" (default) runs the whole normalization in FLOAT between two casts: normalization
is scale invariant only up to eps, so pre-scaling would have to rescale eps per position, while
an fp32 island is exact and costs two casts. It also pins the precision of the native layer
(TensorRT 10 computes it in FP32 by default through `compute_precision`, TensorRT 11 has no such
attribute and a strongly typed layer follows its input type). strategy="naive" computes in the
input type (constants for bf16 are made in FLOAT and cast, since bf16 has no numpy type).

Layers are named under `name`; the returned tensor is named `name`.
"""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of

from . import safe_range as S
from .common import BuilderError, named, out

__all__ = ["instance_norm", "group_norm", "layer_norm", "standardize"]


def _bits(axes) -> int:
    return sum(1 << a for a in axes)


def _begin(network, x, strategy: str, impl: str, name: str):
    S.check_choice(strategy, S.STRATEGIES, "strategy", name)
    S.check_choice(impl, S.IMPLS, "impl", name)
    S.kind(network, x, name)
    if strategy == "safe":
        return S.to_float(network, x, f"{name}/to_f32")
    return x, x.dtype


def _end(network, y, dtype, name: str):
    return S.finish(S.restore(network, y, dtype, f"{name}/from_f32"), name)


def standardize(network, x, axes_mask: int, eps: float, name: str):
    """(x - mean) * (var + eps)^-0.5 over `axes_mask` (biased var) in x's type, by reduce and
    elementwise layers: `name`/mean, /centered, /sq, /var, /inv_std, /normalized."""
    trt = trt_of(network)
    E = trt.ElementWiseOperation
    mean = out(network.add_reduce(x, trt.ReduceOperation.AVG, axes_mask, True), f"{name}/mean")
    d = S.elementwise(network, x, mean, E.SUB, f"{name}/centered")
    sq = S.square(network, d, f"{name}/sq")
    var = out(network.add_reduce(sq, trt.ReduceOperation.AVG, axes_mask, True), f"{name}/var")
    inv = S.uniform_affine(network, var, None, eps, -0.5, f"{name}/inv_std")
    return S.elementwise(network, d, inv, E.PROD, f"{name}/normalized")


def _affine(network, y, gamma, beta, name: str):
    """y * gamma + beta with constants already shaped to broadcast (None skips that step)."""
    E = trt_of(network).ElementWiseOperation
    if gamma is not None:
        y = S.elementwise(network, y, S.const(network, gamma, y, f"{name}/gamma"), E.PROD, f"{name}/mul_gamma")
    if beta is not None:
        y = S.elementwise(network, y, S.const(network, beta, y, f"{name}/beta"), E.SUM, f"{name}/add_beta")
    return y


def _native(network, x, scale, bias, axes_mask: int, eps: float, groups: int, name: str, use_v2=None):
    """INormalizationLayer `name`/norm with per-channel (or per-element) scale/bias arrays."""
    if use_v2 is None:
        use_v2 = hasattr(network, "add_normalization_v2")
    if not use_v2 and groups > 1:
        return _native_group_v1(network, x, scale, bias, axes_mask, eps, groups, name)
    sc = S.const(network, scale, x, f"{name}/gamma")
    bi = S.const(network, bias, x, f"{name}/beta")
    add = network.add_normalization_v2 if use_v2 else network.add_normalization
    layer = named(add(x, sc, bi, axes_mask), f"{name}/norm")
    layer.epsilon = float(eps)
    if groups > 1:
        layer.num_groups = int(groups)
    return layer.get_output(0)


def _native_group_v1(network, x, scale, bias, axes_mask: int, eps: float, groups: int, name: str):
    """Group norm with the v1 layer: it scales per group ([1, G, 1, ...]), so normalize with ones/
    zeros there and apply PyTorch's per-channel gamma/beta after."""
    shape = [1, groups] + [1] * (len(x.shape) - 2)
    ones = S.const(network, np.ones(shape), x, f"{name}/ones")
    zeros = S.const(network, np.zeros(shape), x, f"{name}/zeros")
    layer = named(network.add_normalization(x, ones, zeros, axes_mask), f"{name}/norm")
    layer.epsilon = float(eps)
    layer.num_groups = int(groups)
    y = layer.get_output(0)
    return _affine(network, y, scale, bias, name + "/affine")


def _channel_shape(x, values):
    return np.asarray(values).reshape([1, -1] + [1] * (len(x.shape) - 2))


def instance_norm(network, x, gamma, beta, eps, name: str, impl: str = "auto", strategy: str = "safe"):
    """InstanceNorm over the spatial dims of `x` (N, C, *S) with per-channel gamma/beta [C]
    (None: no scale / no shift)."""
    S.check_rank(x, 3, 8, name, "instance norm needs (N, C, spatial...)")
    c = S.channels(x, name, "the channel count sets gamma/beta")
    g = S.vector(gamma, c, "gamma", name, default=1.0)
    b = S.vector(beta, c, "beta", name, default=0.0)
    eps = S.positive_eps(eps, name)
    x, dtype = _begin(network, x, strategy, impl, name)
    axes = _bits(range(2, len(x.shape)))
    if impl in ("auto", "native"):
        y = _native(network, x, _channel_shape(x, g), _channel_shape(x, b), axes, eps, 1, name)
    else:
        y = standardize(network, x, axes, eps, name)
        y = _affine(network, y, None if gamma is None else _channel_shape(x, g),
                    None if beta is None else _channel_shape(x, b), name)
    return _end(network, y, dtype, name)


def group_norm(network, x, num_groups: int, gamma, beta, eps, name: str, impl: str = "auto",
               strategy: str = "safe"):
    """GroupNorm of `x` (N, C, *S): statistics per sample over each group of C / num_groups
    channels and all spatial dims; per-channel gamma/beta [C] (None: no scale / no shift)."""
    S.check_rank(x, 2, 8, name, "group norm needs (N, C, ...)")
    c = S.channels(x, name, "the channel count sets the groups and gamma/beta")
    if isinstance(num_groups, bool) or int(num_groups) != num_groups or num_groups < 1 or c % int(num_groups):
        raise BuilderError(f"layer '{name}': num_groups={num_groups!r} must be a positive integer dividing "
                           f"the {c} channels of '{x.name}'")
    groups = int(num_groups)
    g = S.vector(gamma, c, "gamma", name, default=1.0)
    b = S.vector(beta, c, "beta", name, default=0.0)
    eps = S.positive_eps(eps, name)
    rank = len(x.shape)
    native_ok = rank >= 3 or groups == 1
    if impl == "native" and not native_ok:
        raise BuilderError(f"layer '{name}': impl='native' group norm with {groups} groups needs spatial dims "
                           f"(TensorRT normalizes groups over dims 2..), got shape {tuple(x.shape)}; "
                           "use impl='composed'")
    S.check_choice(strategy, S.STRATEGIES, "strategy", name)
    S.check_choice(impl, S.IMPLS, "impl", name)
    composed = not (impl in ("auto", "native") and native_ok)
    dynamic = S.dynamic_dims(x)
    if composed and len(dynamic) > 1 and rank == 8:
        raise BuilderError(f"layer '{name}': input '{x.name}' has shape {tuple(x.shape)}; impl='composed' needs all "
                           f"but one of dims 2..7 known at build time on a rank-8 input (with {S.dims_text(dynamic)} "
                           f"dynamic it splits C into (G, C/G) in a rank-9 view, and TensorRT tensors have at most "
                           f"8 dims); use impl='native' or 'auto'")
    x, dtype = _begin(network, x, strategy, impl, name)
    if not composed:
        # one group: statistics over C and the spatial dims; several: TensorRT's num_groups over dims 2..
        axes = _bits(range(1, rank)) if groups == 1 else _bits(range(2, rank))
        y = _native(network, x, _channel_shape(x, g), _channel_shape(x, b), axes, eps, groups, name)
    else:
        if len(dynamic) <= 1:  # (N, G, -1) and back: (0, C, *spatial) restores at most one dynamic dim (-1)
            xg = S.reshape(network, x, (0, groups, -1), f"{name}/to_groups")
            yg = standardize(network, xg, 1 << 2, eps, name)
            y = S.reshape(network, yg, (0, c, *tuple(x.shape)[2:]), f"{name}/from_groups")
        else:
            y = _composed_groups_dynamic(network, x, groups, eps, name)
        y = _affine(network, y, None if gamma is None else _channel_shape(x, g),
                    None if beta is None else _channel_shape(x, b), name)
    return _end(network, y, dtype, name)


def _composed_groups_dynamic(network, x, groups: int, eps: float, name: str):
    """Group statistics of `x` (N, C, *S) with two or more dynamic spatial dims, where flattening to
    (N, G, -1) could not be undone: C moves last and splits into (G, C/G) by 0-copy reshapes, which keep
    every dynamic dim, viewed as (N, G, C/G, *S) (`name`/to_groups); standardize over dims 2..; then
    back to (N, C, *S) (`name`/from_groups)."""
    rank, c = len(x.shape), tuple(x.shape)[1]
    spatial = list(range(2, rank))
    xg = S.shuffle(network, x, f"{name}/to_groups", first=[0, *spatial, 1],
                   dims=[0] * (rank - 1) + [groups, c // groups], second=[0, rank - 1, rank, *range(1, rank - 1)])
    yg = standardize(network, xg, _bits(range(2, rank + 1)), eps, name)
    return S.shuffle(network, yg, f"{name}/from_groups", first=[0, *range(3, rank + 1), 1, 2],
                     dims=[0] * (rank - 1) + [c], second=[0, rank - 1, *range(1, rank - 1)])


def layer_norm(network, x, normalized_shape, gamma, beta, eps, name: str, impl: str = "auto",
               strategy: str = "safe"):
    """LayerNorm over the trailing `normalized_shape` dims of `x`, with elementwise gamma/beta of
    that shape (None: no scale / no shift)."""
    shape = (int(normalized_shape),) if np.ndim(normalized_shape) == 0 else tuple(int(d) for d in normalized_shape)
    k = len(shape)
    rank = S.check_rank(x, max(k, 1), 8, name, f"layer norm over {k} trailing dims {shape}")
    dynamic = S.dynamic_dims(x, rank - k) if k else []
    if dynamic:
        raise BuilderError(f"layer '{name}': input '{x.name}' has shape {tuple(x.shape)}; {S.dims_text(dynamic)} "
                           f"must be known at build time (normalized_shape {shape} is normalized over and sets the "
                           f"shape of gamma/beta; only the leading dims may be dynamic)")
    if k == 0 or tuple(x.shape)[rank - k:] != shape:
        raise BuilderError(f"layer '{name}': normalized_shape {shape} must equal the trailing dims of '{x.name}' "
                           f"{tuple(x.shape)}")
    n = int(np.prod(shape))
    g = S.vector(gamma, n, "gamma", name, default=1.0)
    b = S.vector(beta, n, "beta", name, default=0.0)
    eps = S.positive_eps(eps, name)
    x, dtype = _begin(network, x, strategy, impl, name)
    axes = _bits(range(rank - k, rank))
    full = [1] * (rank - k) + list(shape)
    if impl in ("auto", "native"):
        y = _native(network, x, g.reshape(full), b.reshape(full), axes, eps, 1, name)
    else:
        y = standardize(network, x, axes, eps, name)
        y = _affine(network, y, None if gamma is None else g.reshape(full), None if beta is None else b.reshape(full),
                    name)
    return _end(network, y, dtype, name)

"""L2Norm (SSD / RefineDet): ``out = x / (sqrt(sum_c x^2) + eps) * weight[c]``.

The plain composition (strategy="naive": tensorrtx's, plus the eps that tensorrtx leaves out) is
``sq = scale(x, power 2) -> sumsq = reduce SUM over C -> norm = sqrt -> + eps -> x / (norm + eps)
-> CHANNEL scale by weight``. In fp16 it breaks in three ways: the sum of squares over 512
channels overflows to inf once |x| ~ 11-20 (output 0, or NaN when x is inf too), squares of
|x| < ~2e-3 fall into fp16 subnormals and lose their precision, and eps = 1e-10 rounds to 0, so
an all-zero position gives 0/0 = NaN.

strategy="safe" (default) pre-scales by the per-position max-abs ``m = max(max_c |x|, tiny)``
and normalizes ``x' = x / m``, which lies in [-1, 1], so ``sum_c x'^2 <= C``: no overflow and
no subnormal squares that matter, at any input magnitude. L2Norm is scale invariant except for
eps, and eps is carried over exactly: ``x / (|x| + eps) = x' / (|x'| + eps / m)``; eps/m is
computed in FLOAT (1e-10 is not an fp16 number) and cast to the input type, where it is at most
eps / 2**-14 ~ 1.6e-6 for fp16, and > 0, so all-zero positions give exactly 0.
Why pre-scaling rather than an fp32 island for fp16: the whole computation stays in fp16
(half the memory traffic of fp32 intermediates) and the only real hazard, range, is removed;
each intermediate rounds once to 2**-11, ~0.1 % in total. For bf16 the hazard is precision, not
range (8-bit mantissa, ~0.2 % per rounding, six roundings), so bf16 inputs run the same
pre-scaled composition in FLOAT between two casts. FLOAT inputs are pre-scaled too (it costs
three per-position layers and removes overflow/underflow for |x| beyond ~1e19 / below ~1e-19).

The safe strategy squares with x' * x' (PROD), not a scale layer with power 2: some TensorRT
builds evaluate pow for negative bases as NaN (TensorRT-RTX, pytorch/TensorRT#4181).

Layers are named under `name`: /sq, /sumsq, /norm, /div, /scale (and /abs, /absmax,
/absmax_floor, /prescaled, /eps_scaled, /denom, /to_f32, /to_bf16 for the safe strategy);
the returned tensor is named `name`.
"""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of

from . import safe_range as S
from .common import out

__all__ = ["l2norm"]


def l2norm(network, x, weight, name: str, eps: float = 1e-10, strategy: str = "safe"):
    """L2-normalize `x` (N, C, ...) across channels and scale by `weight` [C]; returns the output.

    strategy: "safe" (pre-scaled by the per-position max-abs; fp32 island for bf16) or "naive"
    (the plain tensorrtx composition in the input type, kept to show where it fails).
    """
    S.check_choice(strategy, S.STRATEGIES, "strategy", name)
    S.check_rank(x, 3, 8, name, "L2Norm normalizes across channel axis 1 of (N, C, ...); IScaleLayer needs rank >= 3")
    kind = S.kind(network, x, name)
    c = S.channels(x, name, "the channel count sets the weight length")
    w = S.vector(weight, c, "weight", name)
    eps = S.positive_eps(eps, name, allow_zero=True)
    if strategy == "naive":
        return S.finish(_naive(network, x, w, eps, name), name)
    if kind == "bf16":
        x32, dtype = S.to_float(network, x, f"{name}/to_f32")
        y = _prescaled(network, x32, w, eps, name)
        return S.finish(S.restore(network, y, dtype, f"{name}/to_bf16"), name)
    return S.finish(_prescaled(network, x, w, eps, name), name)


def _naive(network, x, w: np.ndarray, eps: float, name: str):
    trt = trt_of(network)
    sq = S.square(network, x, f"{name}/sq", via_power=True)
    sumsq = out(network.add_reduce(sq, trt.ReduceOperation.SUM, 1 << 1, True), f"{name}/sumsq")
    norm = out(network.add_unary(sumsq, trt.UnaryOperation.SQRT), f"{name}/norm")
    denom = S.uniform_affine(network, norm, None, eps, None, f"{name}/add_eps")
    y = S.elementwise(network, x, denom, trt.ElementWiseOperation.DIV, f"{name}/div")
    return S.scale_channel(network, y, w, None, f"{name}/scale")


def _prescaled(network, x, w: np.ndarray, eps: float, name: str):
    trt = trt_of(network)
    E = trt.ElementWiseOperation
    m = S.max_abs(network, x, 1 << 1, name)
    xs = S.elementwise(network, x, m, E.DIV, f"{name}/prescaled")
    sq = S.square(network, xs, f"{name}/sq")
    sumsq = out(network.add_reduce(sq, trt.ReduceOperation.SUM, 1 << 1, True), f"{name}/sumsq")
    norm = out(network.add_unary(sumsq, trt.UnaryOperation.SQRT), f"{name}/norm")
    # eps / m, computed in FLOAT (1e-10 is no fp16 number) and cast to the input type; m >= tiny keeps it finite
    m32 = S.cast(network, m, trt.DataType.FLOAT, f"{name}/absmax_f32")
    eps_c = S.scalar(network, eps, m32, f"{name}/eps")
    eps_scaled = S.elementwise(network, eps_c, m32, E.DIV, f"{name}/eps_scaled_f32")
    eps_scaled = S.cast(network, eps_scaled, x.dtype, f"{name}/eps_scaled")
    denom = S.elementwise(network, norm, eps_scaled, E.SUM, f"{name}/denom")
    y = S.elementwise(network, xs, denom, E.DIV, f"{name}/div")
    return _weight(network, y, w, name)


def _weight(network, y, w: np.ndarray, name: str):
    """The CHANNEL scale by `weight`; for fp16, in FLOAT between casts when a weight is beyond
    fp16's range."""
    trt = trt_of(network)
    if y.dtype == trt.DataType.HALF and not S.fits_fp16(w, allow_subnormal=True):
        y32 = S.cast(network, y, trt.DataType.FLOAT, f"{name}/scale_to_f32")
        return S.cast(network, S.scale_channel(network, y32, w, None, f"{name}/scale"), y.dtype, f"{name}/scale_to_f16")
    return S.scale_channel(network, y, w, None, f"{name}/scale")

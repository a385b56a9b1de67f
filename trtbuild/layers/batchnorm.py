"""BatchNorm1d/2d/3d: eval mode (running statistics) and batch-statistics (train-mode) forms.

Eval mode folds into ONE CHANNEL scale layer: ``scale = gamma / sqrt(var + eps)``,
``shift = beta - mean * scale``, folded in float64 by ``trtbuild.reparam.bn_to_scale_shift``.
(N, C) inputs are reshaped to (N, C, 1) around it, since IScaleLayer needs rank >= 3.

Range safety (eval). The data path ``x * scale + shift`` is one layer, so the fp16 hazards are
the folded weights themselves: ``scale`` overflows fp16 when var + eps < (gamma / 65504)^2 (a dead
channel with var = 0 and a small eps: inf * 0 = NaN), it drops into fp16 subnormals when
|scale| < 2**-14 (a nearly pruned channel, gamma ~ 1e-3, seeing activations ~1e3..6e4: scale
~1e-6..1e-8 keeps a few bits or becomes 0), and even when both fit, rounding ``shift`` and
``scale`` to fp16 costs 2**-12 * (|scale * x| + |shift|) absolute, which outputs near zero
(where scale * x ~ -shift) see as a large relative error (measured: up to ~1.3 % of 1 % of the
largest output, docs/robustness.md). strategy="safe" (default) therefore runs the one scale
layer in FLOAT between two casts for fp16 and bf16 inputs (bf16 has no weight type anyway):
fp32 weights, one rounding of the result. The casts are pointwise neighbours of the scale that
TensorRT can fuse. strategy="naive" uses weights of the input type (fp16), as a plain build
would; for bf16 it is the same as safe.

Batch statistics (``batchnorm_batch_stats``): mean and biased variance over N and the spatial
dims by reduce layers, as torch's train-mode BatchNorm normalizes with; then the per-channel
affine. The variance of fp16 data above |x| ~ 256 overflows fp16, so strategy="safe" runs it in
FLOAT between casts; "naive" computes in the input type.

Layers are named under `name`; the returned tensor is named `name`.
"""

from __future__ import annotations

from trtbuild.backend import trt_of
from trtbuild.reparam import bn_to_scale_shift

from . import safe_range as S
from .common import BuilderError
from .normalization import _affine, standardize

__all__ = ["batchnorm", "batchnorm_batch_stats"]


def batchnorm(network, x, gamma, beta, mean, var, eps, name: str, strategy: str = "safe"):
    """Eval-mode BatchNorm of `x` (N, C, ...) as one CHANNEL scale layer `name`/scale.

    gamma/beta may be None (affine=False); mean/var are the running statistics, all [C].
    """
    trt = trt_of(network)
    S.check_choice(strategy, S.STRATEGIES, "strategy", name)
    rank = S.check_rank(x, 2, 8, name, "BatchNorm works on (N, C, ...)")
    kind = S.kind(network, x, name)
    c = S.channels(x, name, "the channel count sets the parameter length")
    params = [S.vector(gamma, c, "gamma", name, default=1.0), S.vector(beta, c, "beta", name, default=0.0),
              S.vector(mean, c, "mean", name), S.vector(var, c, "var", name)]
    try:
        scale, shift = bn_to_scale_shift(*params, eps, name=name)
    except (ValueError, TypeError) as e:
        raise BuilderError(f"layer '{name}': {e}") from None
    y = S.reshape(network, x, (0, 0, 1), f"{name}/to_nc1") if rank == 2 else x
    if kind == "fp16" and strategy == "safe":
        y32 = S.cast(network, y, trt.DataType.FLOAT, f"{name}/to_f32")
        y = S.cast(network, S.scale_channel(network, y32, scale, shift, f"{name}/scale"), trt.DataType.HALF,
                   f"{name}/from_f32")
    else:
        y = S.scale_channel(network, y, scale, shift, f"{name}/scale")
    if rank == 2:
        y = S.reshape(network, y, (0, 0), f"{name}/to_nc")
    return S.finish(y, name)


def batchnorm_batch_stats(network, x, gamma, beta, eps, name: str, strategy: str = "safe"):
    """BatchNorm of `x` (N, C, ...) normalized with its own batch statistics (train mode):
    mean and biased variance over N and the spatial dims, then gamma/beta [C] (None: skip)."""
    trt = trt_of(network)
    S.check_choice(strategy, S.STRATEGIES, "strategy", name)
    rank = S.check_rank(x, 2, 8, name, "BatchNorm works on (N, C, ...)")
    S.kind(network, x, name)
    c = S.channels(x, name, "the channel count sets the parameter length")
    g = S.vector(gamma, c, "gamma", name, default=1.0)
    b = S.vector(beta, c, "beta", name, default=0.0)
    eps = S.positive_eps(eps, name)
    dtype = x.dtype
    if strategy == "safe":
        x, _ = S.to_float(network, x, f"{name}/to_f32")
    axes = 1 | sum(1 << i for i in range(2, rank))
    y = standardize(network, x, axes, eps, name)
    shape = [1, c] + [1] * (rank - 2)
    if rank >= 3 and gamma is not None and beta is not None and y.dtype != trt.DataType.BF16:
        y = S.scale_channel(network, y, g, b, f"{name}/affine")
    else:
        y = _affine(network, y, None if gamma is None else g.reshape(shape), None if beta is None else b.reshape(shape),
                    name)
    return S.finish(S.restore(network, y, dtype, f"{name}/from_f32"), name)

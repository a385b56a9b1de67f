"""Re-parameterization math: Conv+BatchNorm folding and RepVGG block fusion.

Everything here is pure numpy arithmetic carried out in float64. Inputs may be
torch tensors or numpy arrays (any float dtype); outputs are float32 numpy
arrays, ready to hand to a TensorRT ``Weights`` object or a PyTorch conv.

Conventions (PyTorch eval-mode BatchNorm)::

    bn(x) = gamma * (x - mean) / sqrt(var + eps) + beta
          = scale * x + shift,   scale = gamma / sqrt(var + eps),
                                 shift = beta - mean * scale

Folding ``bn(conv(x, w, b))`` gives a conv with ``w' = w * scale`` (per output
channel) and ``b' = beta + (b - mean) * scale``.

A BatchNorm parameter set (``bn`` arguments below) may be given as
  * a tuple/list ``(gamma, beta, mean, var, eps)``,
  * a dict with keys ``gamma, beta, mean, var, eps`` (or the PyTorch names
    ``weight, bias, running_mean, running_var, eps``), or
  * a PyTorch ``BatchNorm`` module (duck-typed: ``weight``, ``bias``,
    ``running_mean``, ``running_var``, ``eps``; ``affine=False`` means
    gamma = 1, beta = 0).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

__all__ = [
    "bn_to_scale_shift",
    "fold_conv_bn",
    "fuse_repvgg_block",
    "fuse_repvgg_module",
    "bn_params",
]


def _to_f64(value: Any, name: str) -> np.ndarray:
    """Convert a torch tensor / numpy array / sequence to a float64 ndarray."""
    if value is None:
        raise ValueError(f"{name}: expected an array, got None")
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
        value = value.detach().cpu().double().numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: cannot convert {type(value).__name__} to a float array ({exc})") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return arr


def _vector(value: Any, name: str, length: int | None) -> np.ndarray:
    """A 1-D float64 vector, optionally of an exact length."""
    arr = _to_f64(value, name)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D per-channel vector, got shape {tuple(arr.shape)}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name}: expected {length} channels, got shape {tuple(arr.shape)}")
    return arr


def _eps(value: Any, name: str) -> float:
    if hasattr(value, "item"):
        value = value.item()
    try:
        eps = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: eps must be a number, got {type(value).__name__}") from exc
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{name}: eps must be finite and >= 0, got {eps}")
    return eps


def bn_params(bn: Any, name: str = "bn") -> tuple[Any, Any, Any, Any, float]:
    """Normalize a BatchNorm description to ``(gamma, beta, mean, var, eps)``.

    Accepts a 5-tuple/list, a dict (``gamma/beta/mean/var/eps`` or
    ``weight/bias/running_mean/running_var/eps``) or a BatchNorm module.
    Arrays are returned unconverted; ``fold``/``scale`` functions convert them.
    """
    if bn is None:
        raise ValueError(f"{name}: expected BatchNorm parameters, got None")
    if isinstance(bn, (tuple, list)):
        if len(bn) != 5:
            raise ValueError(f"{name}: expected (gamma, beta, mean, var, eps), got a sequence of {len(bn)}")
        return tuple(bn)  # type: ignore[return-value]
    if isinstance(bn, Mapping):
        aliases = {
            "gamma": ("gamma", "weight"),
            "beta": ("beta", "bias"),
            "mean": ("mean", "running_mean"),
            "var": ("var", "running_var"),
            "eps": ("eps",),
        }
        out = []
        for key, names in aliases.items():
            found = [bn[k] for k in names if k in bn]
            if not found:
                raise KeyError(f"{name}: missing BatchNorm entry {key!r} (accepted keys: {', '.join(names)})")
            out.append(found[0])
        return tuple(out)  # type: ignore[return-value]
    if hasattr(bn, "running_mean") and hasattr(bn, "running_var"):
        if bn.running_mean is None or bn.running_var is None:
            raise ValueError(f"{name}: BatchNorm module has no running statistics (track_running_stats=False)")
        n = bn.running_mean.shape[0]
        gamma = bn.weight if getattr(bn, "weight", None) is not None else np.ones(n)
        beta = bn.bias if getattr(bn, "bias", None) is not None else np.zeros(n)
        return gamma, beta, bn.running_mean, bn.running_var, float(bn.eps)
    raise TypeError(f"{name}: unsupported BatchNorm description of type {type(bn).__name__}")


def _scale_shift_f64(gamma, beta, mean, var, eps, name: str, channels: int | None):
    gamma = _vector(gamma, f"{name}.gamma", channels)
    n = gamma.shape[0]
    beta = _vector(beta, f"{name}.beta", n)
    mean = _vector(mean, f"{name}.mean", n)
    var = _vector(var, f"{name}.var", n)
    eps = _eps(eps, f"{name}.eps")
    denom = var + eps
    if np.any(denom <= 0):
        bad = int(np.argmax(denom <= 0))
        raise ValueError(f"{name}.var: var + eps must be > 0 (channel {bad}: var={var[bad]}, eps={eps})")
    scale = gamma / np.sqrt(denom)
    shift = beta - mean * scale
    return scale, shift


def bn_to_scale_shift(gamma, beta, mean, var, eps, name: str = "bn") -> tuple[np.ndarray, np.ndarray]:
    """Eval-mode BatchNorm as ``y = scale * x + shift`` (computed in float64, returned float32).

    ``scale = gamma / sqrt(var + eps)``, ``shift = beta - mean * scale``.
    ``name`` prefixes error messages (e.g. ``"layer1.0.bn1"``).
    """
    scale, shift = _scale_shift_f64(gamma, beta, mean, var, eps, name, None)
    return scale.astype(np.float32), shift.astype(np.float32)


def _fold_f64(weight, bias, gamma, beta, mean, var, eps, name: str):
    w = _to_f64(weight, f"{name}.weight")
    if w.ndim < 2:
        raise ValueError(
            f"{name}.weight: expected a conv weight [out, in/groups, *kernel] (rank >= 2), got shape {tuple(w.shape)}"
        )
    out_ch = w.shape[0]
    scale, _ = _scale_shift_f64(gamma, beta, mean, var, eps, f"{name}.bn", None)
    if scale.shape[0] != out_ch:
        raise ValueError(
            f"{name}.bn: BatchNorm has {scale.shape[0]} channels but {name}.weight has {out_ch} output channels "
            f"(shape {tuple(w.shape)})"
        )
    b = np.zeros(out_ch) if bias is None else _vector(bias, f"{name}.bias", out_ch)
    beta_v = _vector(beta, f"{name}.bn.beta", out_ch)
    mean_v = _vector(mean, f"{name}.bn.mean", out_ch)
    w_folded = w * scale.reshape((out_ch,) + (1,) * (w.ndim - 1))
    b_folded = beta_v + (b - mean_v) * scale
    return w_folded, b_folded


def fold_conv_bn(weight, bias, gamma, beta, mean, var, eps, name: str = "conv") -> tuple[np.ndarray, np.ndarray]:
    """Fold an eval-mode BatchNorm into the preceding convolution.

    ``weight`` has shape ``[out, in/groups, *kernel]`` (any rank >= 2, so 1-D,
    2-D and 3-D convs and Linear layers all work); ``bias`` is ``[out]`` or
    None. Returns ``(w', b')`` as float32 with ``w' = w * scale[:, None, ...]``
    and ``b' = beta + (b - mean) * scale``, ``scale = gamma / sqrt(var + eps)``,
    all computed in float64. Not valid for transposed convs (their output
    channels are on axis 1). Shape errors name ``<name>.weight``, ``<name>.bias``
    or ``<name>.bn.<param>``.
    """
    w, b = _fold_f64(weight, bias, gamma, beta, mean, var, eps, name)
    return w.astype(np.float32), b.astype(np.float32)


def _fold_bn_arg(weight, bn, name: str):
    gamma, beta, mean, var, eps = bn_params(bn, f"{name}.bn")
    return _fold_f64(weight, None, gamma, beta, mean, var, eps, name)


def fuse_repvgg_block(
    dense_w,
    dense_bn,
    one_w,
    one_bn,
    identity_bn,
    in_channels: int,
    groups: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Fuse a training-form RepVGG block into one KxK conv (weight, bias), float32.

    Branches (all bias-free convs followed by BatchNorm, summed before ReLU):
      * dense:    ``dense_w`` [out, in/groups, K, K] (K odd, normally 3) + ``dense_bn``
      * 1x1:      ``one_w`` [out, in/groups, 1, 1] + ``one_bn``, or both None
      * identity: BatchNorm ``identity_bn`` on the input (only when out == in and
        stride == 1), or None.

    The 1x1 kernel is zero-padded to KxK at the centre (valid because the 1x1
    conv uses padding ``K//2`` less than the dense conv). The identity branch
    becomes a KxK kernel with ``kernel[i, i % (in_channels // groups), K//2, K//2] = 1``
    before BN folding. Everything is folded and summed in float64.
    """
    if not isinstance(in_channels, (int, np.integer)) or in_channels <= 0:
        raise ValueError(f"in_channels: expected a positive int, got {in_channels!r}")
    if not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise ValueError(f"groups: expected a positive int, got {groups!r}")
    if in_channels % groups != 0:
        raise ValueError(f"groups: in_channels={in_channels} is not divisible by groups={groups}")
    input_dim = in_channels // groups

    dense = _to_f64(dense_w, "rbr_dense.weight")
    if dense.ndim != 4 or dense.shape[2] != dense.shape[3] or dense.shape[2] % 2 != 1:
        raise ValueError(
            f"rbr_dense.weight: expected [out, in/groups, K, K] with odd K, got shape {tuple(dense.shape)}"
        )
    out_ch, k = dense.shape[0], dense.shape[2]
    if dense.shape[1] != input_dim:
        raise ValueError(
            f"rbr_dense.weight: expected in/groups = {in_channels}/{groups} = {input_dim} input channels, "
            f"got shape {tuple(dense.shape)}"
        )
    if out_ch % groups != 0:
        raise ValueError(f"rbr_dense.weight: out_channels={out_ch} is not divisible by groups={groups}")
    centre = k // 2

    w_sum, b_sum = _fold_bn_arg(dense, dense_bn, "rbr_dense")

    if (one_w is None) != (one_bn is None):
        raise ValueError("rbr_1x1: one_w and one_bn must both be given or both be None")
    if one_w is not None:
        one = _to_f64(one_w, "rbr_1x1.weight")
        if one.shape != (out_ch, input_dim, 1, 1):
            raise ValueError(
                f"rbr_1x1.weight: expected shape {(out_ch, input_dim, 1, 1)}, got {tuple(one.shape)}"
            )
        w1, b1 = _fold_bn_arg(one, one_bn, "rbr_1x1")
        w_sum[:, :, centre, centre] += w1[:, :, 0, 0]
        b_sum += b1

    if identity_bn is not None:
        if out_ch != in_channels:
            raise ValueError(
                f"rbr_identity: identity branch needs out_channels == in_channels, got {out_ch} != {in_channels}"
            )
        ident = np.zeros((in_channels, input_dim, k, k), dtype=np.float64)
        rows = np.arange(in_channels)
        ident[rows, rows % input_dim, centre, centre] = 1.0
        wi, bi = _fold_bn_arg(ident, identity_bn, "rbr_identity")
        w_sum += wi
        b_sum += bi

    return w_sum.astype(np.float32), b_sum.astype(np.float32)


def fuse_repvgg_module(block: Any) -> tuple[np.ndarray, np.ndarray]:
    """Read a PyTorch training-form RepVGG block and return its fused ``(w, b)``.

    Expects the official RepVGG layout: ``block.rbr_dense.conv/.bn``,
    ``block.rbr_1x1.conv/.bn`` (may be absent/None) and ``block.rbr_identity``
    (a BatchNorm or None). A block already in deploy form (``rbr_reparam``)
    returns its conv weight and bias unchanged.
    """
    reparam = getattr(block, "rbr_reparam", None)
    if reparam is not None:
        w = reparam.weight.detach().cpu().float().numpy().copy()
        b = (
            reparam.bias.detach().cpu().float().numpy().copy()
            if reparam.bias is not None
            else np.zeros(w.shape[0], dtype=np.float32)
        )
        return w, b
    dense = getattr(block, "rbr_dense", None)
    if dense is None or not hasattr(dense, "conv") or not hasattr(dense, "bn"):
        raise AttributeError(
            f"{type(block).__name__}: not a RepVGG block (expected rbr_dense.conv and rbr_dense.bn)"
        )
    conv = dense.conv
    if conv.bias is not None:
        raise ValueError("rbr_dense.conv: expected a bias-free conv (RepVGG conv_bn uses bias=False)")
    one = getattr(block, "rbr_1x1", None)
    one_w = one_bn = None
    if one is not None:
        if one.conv.bias is not None:
            raise ValueError("rbr_1x1.conv: expected a bias-free conv (RepVGG conv_bn uses bias=False)")
        one_w, one_bn = one.conv.weight, one.bn
    return fuse_repvgg_block(
        conv.weight,
        dense.bn,
        one_w,
        one_bn,
        getattr(block, "rbr_identity", None),
        in_channels=conv.in_channels,
        groups=conv.groups,
    )

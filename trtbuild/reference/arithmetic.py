"""Arithmetic models of the reference backend: how fp16/bf16 layers round while they compute.

"fp32-then-round" (the default): every layer computes in float32 and rounds once, at its output,
to the output's type. "pessimistic": for layers whose output is HALF or BF16, every intermediate
result is rounded to that type as a kernel computing in that type would:

- elementwise/unary/activation results, and each step of a composite formula (SCALE's scale, shift
  and power; ELU/SELU/softplus/GELU/...; LRN's square, window sum, k + alpha/n * sum, pow, div;
  normalization's x - mean, square, var + eps, sqrt, div, scale, bias; softmax's exp, sum, div);
- every reduction (REDUCE SUM/AVG/PROD, normalization statistics mean and variance, LRN's window
  sum, average pooling's window sum, softmax's denominator) accumulates sequentially in the
  tensor's type, rounding after each add, in index order (no pairwise or fp32 accumulator).

Not modelled (they keep fp32 accumulation, rounded at the output): convolution, deconvolution and
matrix multiply. FLOAT (and integer) layers are identical under both models.

The model is chosen per build (`set_model(config, model)`; the default for new IBuilderConfig
objects, so for build_plan/run_network/run_builder, with `using(model)`), stored in the plan's
header ("arithmetic", absent for the default) and applied by every engine deserialized from it
(`model_of(engine)`). It is no TensorRT setting, so it is not an attribute of TensorRT's classes.
"""

from __future__ import annotations

import contextlib
import math

import torch

DEFAULT = "fp32-then-round"
PESSIMISTIC = "pessimistic"
MODELS = (DEFAULT, PESSIMISTIC)

_default = [DEFAULT]


def check(model) -> str:
    if model not in MODELS:
        raise ValueError(f"arithmetic must be one of {MODELS}, got {model!r}")
    return model


def default_model() -> str:
    """The arithmetic model new IBuilderConfig objects start with."""
    return _default[-1]


@contextlib.contextmanager
def using(model: str):
    """Within the block, new IBuilderConfig objects (so build_plan, run_network, run_builder)
    default to `model`."""
    _default.append(check(model))
    try:
        yield
    finally:
        _default.pop()


def set_model(config, model: str) -> None:
    """Select the arithmetic model of the engines `config` builds (reference IBuilderConfig)."""
    from .core import NetworkError

    try:
        config._arithmetic = check(model)
    except ValueError as e:
        raise NetworkError(f"arithmetic.set_model: {e}") from None


def model_of(obj) -> str:
    """The arithmetic model of a reference IBuilderConfig or ICudaEngine."""
    if hasattr(obj, "_graph"):
        return obj._graph.arithmetic
    return obj._arithmetic


def rounder(dtype: torch.dtype):
    """r(t): round a float32 tensor to `dtype` and back (identity for float32)."""
    if dtype not in (torch.float16, torch.bfloat16):
        return lambda t: t
    return lambda t: t.to(dtype).float()


def seq_sum(x: torch.Tensor, dims, keepdim: bool, r) -> torch.Tensor:
    """Sum over `dims`, accumulating in index order with r() after each add (row-major order
    over the reduced dims). Vectorized over the other dims; loops over the reduced length."""
    dims = sorted(d % x.dim() for d in dims) if x.dim() else []
    if not dims:
        return r(x.clone())
    keep = [d for d in range(x.dim()) if d not in dims]
    flat = x.permute(*keep, *dims).reshape(*[x.shape[d] for d in keep], -1)
    n = flat.shape[-1]
    acc = torch.zeros(flat.shape[:-1], dtype=flat.dtype, device=flat.device)
    for i in range(n):
        acc = r(acc + flat[..., i])
    if keepdim:
        shape = [1 if d in dims else x.shape[d] for d in range(x.dim())]
        acc = acc.reshape(shape)
    return acc


def seq_prod(x: torch.Tensor, dims, keepdim: bool, r) -> torch.Tensor:
    dims = sorted(d % x.dim() for d in dims)
    keep = [d for d in range(x.dim()) if d not in dims]
    flat = x.permute(*keep, *dims).reshape(*[x.shape[d] for d in keep], -1)
    acc = torch.ones(flat.shape[:-1], dtype=flat.dtype, device=flat.device)
    for i in range(flat.shape[-1]):
        acc = r(acc * flat[..., i])
    if keepdim:
        acc = acc.reshape([1 if d in dims else x.shape[d] for d in range(x.dim())])
    return acc


def seq_mean(x, dims, keepdim, r):
    count = math.prod(x.shape[d] for d in dims)
    return r(seq_sum(x, dims, keepdim, r) / count)


def window_sum(r):
    """Average pooling's window sum, accumulated sequentially (row-major over the window)."""
    def total(xp: torch.Tensor, ws, stride) -> torch.Tensor:
        nsp = len(ws)
        w = xp
        for i in range(nsp):
            w = w.unfold(2 + i, ws[i], stride[i])  # window dims appended at the end
        return seq_sum(w, list(range(w.dim() - nsp, w.dim())), False, r)
    return total


# --- pessimistic layer bodies (inputs already float32; r rounds to the output type) ---


def reduce(p, x, r, bits):
    from .enums import ReduceOperation

    axes, op, keep = bits(p["axes"], x.dim()), ReduceOperation(p["op"]), p["keep_dims"]
    if op == ReduceOperation.SUM:
        return seq_sum(x, axes, keep, r)
    if op == ReduceOperation.AVG:
        return seq_mean(x, axes, keep, r)
    if op == ReduceOperation.PROD:
        return seq_prod(x, axes, keep, r)
    return None  # MAX/MIN are exact


def scale(p, w, x, r, weights_like):
    from .enums import ScaleMode

    axis, mode = p["channel_axis"] % x.dim(), ScaleMode(p["mode"])
    shape = {ScaleMode.UNIFORM: [1] * x.dim(),
             ScaleMode.CHANNEL: [x.shape[axis] if i == axis else 1 for i in range(x.dim())],
             ScaleMode.ELEMENTWISE: [1] * axis + list(x.shape[axis:])}[mode]
    sc, sh, pw = (weights_like(w[k], x) for k in ("scale", "shift", "power"))
    y = x
    if sc is not None:
        y = r(y * sc.reshape(shape))
    if sh is not None:
        y = r(y + sh.reshape(shape))
    if pw is not None:
        y = r(torch.pow(y, pw.reshape(shape)))
    return y


def normalization(p, x, scale_t, bias, r, bits):
    axes, g, eps = bits(p["axes"], x.dim()), p["num_groups"], p["epsilon"]
    shape = x.shape
    if g > 1:
        n, c = x.shape[:2]
        x = x.reshape(n, g, c // g, *x.shape[2:])
        axes = list(range(2, x.dim()))
    mean = seq_mean(x, axes, True, r)
    d = r(x - mean)
    var = seq_mean(r(d * d), axes, True, r)
    std = r(torch.sqrt(r(var + eps)))
    y = r(d / std)
    if g > 1 and not p["is_v2"]:
        ps = [1, g] + [1] * (x.dim() - 2)
        return r(r(y * scale_t.reshape(ps)) + bias.reshape(ps)).reshape(shape)
    y = y.reshape(shape)
    return r(r(y * scale_t) + bias)


def lrn(p, x, r):
    n, axis = p["window_size"], x.dim() - 3
    sq = torch.nn.functional.pad(r(x * x).movedim(axis, -1), (n // 2, n // 2))
    ws = seq_sum(sq.unfold(-1, n, 1), [-1], False, r).movedim(-1, axis)
    base = r(p["k"] + r(ws * (p["alpha"] / n)))
    return r(x / r(torch.pow(base, p["beta"])))


def softmax(x, dim, r):
    e = r(torch.exp(r(x - x.amax(dim=dim, keepdim=True))))
    return r(e / seq_sum(e, [dim], True, r))


def activation(p, x, r):
    """Multi-step activations with each step rounded; None for single-step ones (output rounding
    is exact rounding of the one operation)."""
    from .enums import ActivationType as A

    t, a, b = A(p["type"]), p["alpha"], p["beta"]
    if t in (A.ELU, A.SELU):
        y = torch.where(x >= 0, x, r(a * r(r(torch.exp(x)) - 1)))
        return r(b * y) if t == A.SELU else y
    if t == A.SOFTSIGN:
        return r(x / r(1 + x.abs()))
    if t == A.SOFTPLUS:
        bx = r(b * x)
        return r(a * r(torch.clamp_min(bx, 0) + r(torch.log1p(r(torch.exp(-bx.abs()))))))
    if t == A.HARD_SIGMOID:
        return torch.clamp(r(r(a * x) + b), 0, 1)
    if t == A.SCALED_TANH:
        return r(a * r(torch.tanh(r(b * x))))
    if t == A.GELU_ERF:
        return r(r(0.5 * x) * r(1 + r(torch.erf(r(x / math.sqrt(2))))))
    if t == A.GELU_TANH:
        inner = r(math.sqrt(2 / math.pi) * r(x + r(0.044715 * r(r(x * x) * x))))
        return r(r(0.5 * x) * r(1 + r(torch.tanh(inner))))
    return None

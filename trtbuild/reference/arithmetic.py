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

Each layer type's pessimistic model is the `pessimistic` function of its module under
trtbuild/reference/ops; this module holds the rounding and the sequential accumulations they share.

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


def __getattr__(name):
    """`lrn(p, x, r)`: LRN's pessimistic body (x in float32), importable from here as the model's tests
    use it; each layer type's pessimistic model is the `pessimistic` function of its module under
    trtbuild/reference/ops."""
    if name == "lrn":
        from .ops.lrn import pessimistic_lrn

        return pessimistic_lrn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

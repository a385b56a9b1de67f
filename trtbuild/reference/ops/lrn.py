"""ILRNLayer: local response normalization across channels."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import arithmetic
from ..enums import LayerType
from .base import ILayer, param
from .common import f32, fail, need_float
from .registry import register


class ILRNLayer(ILayer):
    _TYPE = LayerType.LRN
    window_size = param("window_size", "int")
    alpha = param("alpha", "float")
    beta = param("beta", "float")
    k = param("k", "float")


def infer(p, w, shapes, dtypes, name, plugin):
    x, dtype = shapes[0], dtypes[0]
    need_float(name, dtype)
    if len(x) < 4:
        fail(name, f"input has rank {len(x)} {tuple(x)}; TensorRT's LRN needs rank >= 4 (it windows over "
                   "dimension rank-3, the C of NCHW)")
    ws = p["window_size"]
    if ws < 1 or ws > 15 or ws % 2 == 0:
        fail(name, f"window_size {ws} is invalid: TensorRT's LRN needs an odd window in [1, 15] "
                   "(use trtbuild.layers.lrn with a composed strategy for other sizes)")
    if not -1e20 <= p["alpha"] <= 1e20 or not 0.01 <= p["beta"] <= 1e5 or not 1e-5 <= p["k"] <= 1e10:
        fail(name, f"alpha={p['alpha']} beta={p['beta']} k={p['k']} out of range "
                   "(alpha in [-1e20, 1e20], beta in [0.01, 1e5], k in [1e-5, 1e10])")
    return [tuple(x)], [dtype]


def run(p, w, inputs, plugin):
    """y = x / (k + alpha / window * sum_{window} x^2) ^ beta, zero-padded at the edges.

    TensorRT's LRN operator windows over dimension rank-3 (the C of NCHW; the D of NCDHW)."""
    x = f32(inputs[0])
    n, axis = p["window_size"], x.dim() - 3
    sq = F.pad((x * x).movedim(axis, -1), (n // 2, n // 2))
    window_sum = sq.unfold(-1, n, 1).sum(-1).movedim(-1, axis)
    return [x / torch.pow(p["k"] + p["alpha"] / n * window_sum, p["beta"])]


def pessimistic_lrn(p, x, r):
    """The square, the window sum (accumulated in the output type), k + alpha/n * sum, pow and the
    division, each rounded; `x` in float32."""
    n, axis = p["window_size"], x.dim() - 3
    sq = F.pad(r(x * x).movedim(axis, -1), (n // 2, n // 2))
    ws = arithmetic.seq_sum(sq.unfold(-1, n, 1), [-1], False, r).movedim(-1, axis)
    base = r(p["k"] + r(ws * (p["alpha"] / n)))
    return r(x / r(torch.pow(base, p["beta"])))


def pessimistic(p, w, inputs, r):
    return pessimistic_lrn(p, f32(inputs[0]), r)


register(ILRNLayer, infer, run, pessimistic)

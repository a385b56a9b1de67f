"""ISoftMaxLayer: softmax along the one dim of an axes bitmask."""

from __future__ import annotations

import torch

from .. import arithmetic
from ..enums import LayerType
from .base import ILayer, param
from .common import axes_of, bits, f32, fail, need_float
from .registry import register


class ISoftMaxLayer(ILayer):
    _TYPE = LayerType.SOFTMAX
    axes = param("axes", "int")


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = shapes[0], dtypes[0]
    need_float(name, dt)
    if len(x) < 2:
        fail(name, f"input has rank {len(x)} {tuple(x)}; softmax needs rank >= 2")
    axes = bits(p["axes"], len(x), name)
    if len(axes) != 1:
        fail(name, f"softmax axes {p['axes']:#b} selects {len(axes)} axes; exactly one is allowed")
    return [tuple(x)], [dt]


def run(p, w, inputs, plugin):
    x = f32(inputs[0])
    return [torch.softmax(x, dim=axes_of(p["axes"], x.dim())[0])]


def pessimistic(p, w, inputs, r):
    """exp, the sum (accumulated in the output type) and the division, each rounded."""
    x = f32(inputs[0])
    dim = axes_of(p["axes"], x.dim())[0]
    e = r(torch.exp(r(x - x.amax(dim=dim, keepdim=True))))
    return r(e / arithmetic.seq_sum(e, [dim], True, r))


register(ISoftMaxLayer, infer, run, pessimistic)

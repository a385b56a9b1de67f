"""INormalizationLayer: layer, instance and group normalization (add_normalization and its v2)."""

from __future__ import annotations

import math

import torch

from .. import arithmetic
from ..enums import LayerType
from .base import ILayer, param
from .common import axes_of, bits, f32, fail, need_float, same_types
from .registry import register

#: the message for scale/bias shapes that differ (tests/helpers/twin.py's REFERENCE_STRICTER matches it)
NORM_SAME_SHAPES = "TensorRT: \"The shape of scale and bias must be the same\""


class INormalizationLayer(ILayer):
    _TYPE = LayerType.NORMALIZATION
    epsilon = param("epsilon", "float")
    axes = param("axes", "int")
    num_groups = param("num_groups", "int")

    @property
    def is_v2(self) -> bool:
        return bool(self._params["is_v2"])


def _single_element_instance_norm(name, p, axes, x, sc):
    """TensorRT-RTX 1.7 fails to build a normalization its builder treats as instance/group norm
    whose groups hold one element each: group norm (axes every dim from 2 on, scale per group for
    v1 / per channel for v2) over single elements, or axes the trailing dims from some a >= 2 on, of
    one element in all, with a scale that varies along dim a - 1 only (instance norm's per-channel
    scale)."""
    rank, g = len(x), p["num_groups"]
    if g > 1:  # rank >= 3 here (checked before)
        c = x[1]
        per = c if p["is_v2"] else g
        single = axes == list(range(2, rank)) and tuple(sc) == (1, per) + (1,) * (rank - 2) \
            and all(d >= 0 for d in x[1:]) and c // g * math.prod(x[2:]) == 1
    else:
        a = axes[0]
        single = a >= 2 and axes == list(range(a, rank)) and all(d >= 0 for d in x[a - 1:]) \
            and math.prod(x[a:]) == 1 and [i for i, s in enumerate(sc) if s != 1] == [a - 1]
    if single:
        fail(name, f"each of the {g} group(s) of shape {tuple(x)} holds a single element; TensorRT-RTX 1.7 cannot "
                   "build an instance/group normalization over one element (its result would be the bias)")


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = shapes[0], dtypes[0]
    need_float(name, dt)
    same_types(name, dtypes)
    axes = bits(p["axes"], len(x), name)
    sc, bi = shapes[1], shapes[2]
    if tuple(sc) != tuple(bi):
        fail(name, f"scale shape {tuple(sc)} and bias shape {tuple(bi)} differ; {NORM_SAME_SHAPES}")
    if len(sc) != len(x):
        fail(name, f"scale has rank {len(sc)} but the input has rank {len(x)}")
    g = p["num_groups"]
    if g > 1:
        c = x[1]
        if c < 0 or c % g:
            fail(name, f"num_groups={g} must divide the channel dimension {c}")
        if 1 in axes or axes != list(range(2, len(x))):
            fail(name, f"group normalization needs axes over all dims from 2 on, got {axes}")
        per = c if p["is_v2"] else g
        want = tuple([1, per] + [1] * (len(x) - 2))
        if tuple(sc) != want:
            which = ('add_normalization_v2 scales per channel' if p['is_v2']
                     else 'add_normalization (v1) scales per group')
            fail(name, f"scale/bias shape {tuple(sc)} should be {want} ({which})")
    else:
        for i, (s, d) in enumerate(zip(sc, x)):
            if s != 1 and d >= 0 and s != d:
                fail(name, f"scale shape {tuple(sc)} does not broadcast to the input {tuple(x)} at dim {i}")
    _single_element_instance_norm(name, p, axes, x, sc)
    return [tuple(x)], [dt]


def run(p, w, inputs, plugin):
    x, scale, bias = (f32(t) for t in inputs)
    axes, g, eps = axes_of(p["axes"], x.dim()), p["num_groups"], p["epsilon"]
    if g > 1:
        n, c = x.shape[:2]
        xg = x.reshape(n, g, c // g, *x.shape[2:])
        dims = list(range(2, xg.dim()))
        mean = xg.mean(dim=dims, keepdim=True)
        var = ((xg - mean) ** 2).mean(dim=dims, keepdim=True)
        yg = (xg - mean) / torch.sqrt(var + eps)
        if not p["is_v2"]:  # v1: scale and bias are [1, G, 1, ...], applied per group
            shape = [1, g] + [1] * (xg.dim() - 2)
            return [(yg * scale.reshape(shape) + bias.reshape(shape)).reshape(x.shape)]
        return [yg.reshape(x.shape) * scale + bias]
    mean = x.mean(dim=axes, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
    return [(x - mean) / torch.sqrt(var + eps) * scale + bias]


def pessimistic(p, w, inputs, r):
    """Mean and variance accumulated in the output type; x - mean, the square, var + eps, sqrt, the
    division, scale and bias each rounded."""
    x, scale_t, bias = (f32(t) for t in inputs)
    axes, g, eps = axes_of(p["axes"], x.dim()), p["num_groups"], p["epsilon"]
    shape = x.shape
    if g > 1:
        n, c = x.shape[:2]
        x = x.reshape(n, g, c // g, *x.shape[2:])
        axes = list(range(2, x.dim()))
    mean = arithmetic.seq_mean(x, axes, True, r)
    d = r(x - mean)
    var = arithmetic.seq_mean(r(d * d), axes, True, r)
    std = r(torch.sqrt(r(var + eps)))
    y = r(d / std)
    if g > 1 and not p["is_v2"]:
        ps = [1, g] + [1] * (x.dim() - 2)
        return r(r(y * scale_t.reshape(ps)) + bias.reshape(ps)).reshape(shape)
    y = y.reshape(shape)
    return r(r(y * scale_t) + bias)


register(INormalizationLayer, infer, run, pessimistic)

"""IScaleLayer: y = (x * scale + shift) ** power, per tensor, channel or element."""

from __future__ import annotations

import math

import torch

from ..enums import LayerType, ScaleMode
from .base import ILayer, param, weights
from .common import check_weights_type, f32, fail, need_float, weights_like
from .registry import register

#: the message for a rank < 3 scale (tests/helpers/twin.py's REFERENCE_STRICTER matches it: TensorRT-RTX takes
#: rank 1 and 2)
SCALE_RANK = ("IScaleLayer needs rank >= 3 (TensorRT: \"The input tensor for this layer is required to have a "
              "minimum of 3 dimensions\")")


class IScaleLayer(ILayer):
    _TYPE = LayerType.SCALE
    mode = param("mode", ScaleMode)
    channel_axis = param("channel_axis", "int")
    shift = weights("shift")
    scale = weights("scale")
    power = weights("power")


def infer(p, w, shapes, dtypes, name, plugin):
    """channel_axis counts from the end when negative. A CHANNEL dim unknown at build time takes the
    weights' count (as TensorRT infers it); ELEMENTWISE weights over dims unknown at build time must
    be a multiple of the known ones (checked exactly at run time)."""
    x, dt = shapes[0], dtypes[0]
    need_float(name, dt)
    rank = len(x)
    if rank < 3:
        fail(name, f"input has rank {rank} {tuple(x)}; {SCALE_RANK}")
    mode, axis = ScaleMode(p["mode"]), p["channel_axis"]
    if not -rank <= axis < rank:
        fail(name, f"channel_axis {axis} is out of range [-{rank}, {rank}) for rank {rank}")
    axis %= rank
    counts = {k: w[k].size for k in ("shift", "scale", "power") if w[k].size}
    if len(set(counts.values())) > 1:
        fail(name, f"weights counts {counts} differ; the non-empty shift/scale/power weights must have one count")
    count = next(iter(counts.values()), 0)
    dims = {ScaleMode.UNIFORM: (), ScaleMode.CHANNEL: (x[axis],), ScaleMode.ELEMENTWISE: tuple(x[axis:])}[mode]
    out = list(x)
    if count and all(d >= 0 for d in dims) and count != math.prod(dims):
        fail(name, f"{count} weights per coefficient; {mode.name} mode on shape {tuple(x)} (channel_axis {axis}) "
                   f"needs {math.prod(dims)}")
    if count and mode == ScaleMode.CHANNEL and x[axis] < 0:
        out[axis] = count
    elif count and any(d < 0 for d in dims) and count % math.prod(d for d in dims if d >= 0):
        fail(name, f"{count} weights per coefficient cannot cover the dims {dims} of shape {tuple(x)} "
                   f"(ELEMENTWISE from channel_axis {axis})")
    check_weights_type(name, w, dt, ["shift", "scale", "power"])
    return [tuple(out)], [dt]


def pessimistic(p, w, inputs, r):
    """scale, shift and power applied in turn, each rounded by r (the identity: the default model)."""
    x = f32(inputs[0])
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


def run(p, w, inputs, plugin):
    return [pessimistic(p, w, inputs, lambda t: t)]  # the same steps, rounded only at the output


register(IScaleLayer, infer, run, pessimistic)

"""IConcatenationLayer: inputs of one type joined along one axis."""

from __future__ import annotations

import torch

from ..enums import LayerType
from .base import ILayer, param
from .common import fail, no_uint8, same_types
from .registry import register


class IConcatenationLayer(ILayer):
    _TYPE = LayerType.CONCATENATION
    axis = param("axis", "int")


def infer(p, w, shapes, dtypes, name, plugin):
    x = shapes[0]
    no_uint8(name, dtypes)
    same_types(name, dtypes)
    axis = p["axis"]
    if not 0 <= axis < len(x):
        fail(name, f"axis {axis} out of range for rank {len(x)}")
    out = list(x)
    for s in shapes[1:]:
        if len(s) != len(x) or any(a != b for i, (a, b) in enumerate(zip(s, x)) if i != axis):
            fail(name, f"input shapes {[tuple(t) for t in shapes]} differ outside the concat axis {axis}")
        out[axis] = -1 if out[axis] < 0 or s[axis] < 0 else out[axis] + s[axis]
    return [tuple(out)], [dtypes[0]]


def run(p, w, inputs, plugin):
    return [torch.cat(inputs, dim=p["axis"])]


register(IConcatenationLayer, infer, run)

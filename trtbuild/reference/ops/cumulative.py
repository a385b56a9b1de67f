"""ICumulativeLayer: CumulativeOperation.SUM along the axis given by a build-time constant 0-D INT32/INT64
tensor (input 1; negative counts from the end), inclusive or exclusive, forward or reverse. The output has
the input's shape and type; FLOAT/HALF/BF16 sum in float32, INT32/INT64 in int64 (as TensorRT-RTX, INT8 and BOOL
are refused)."""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import CumulativeOperation, DataType, LayerType
from .base import ILayer, param
from .common import f32, fail
from .registry import register
from .squeeze import copy_constant_input


class ICumulativeLayer(ILayer):
    _TYPE = LayerType.CUMULATIVE
    _MAX_INPUTS = 2
    op = param("op", CumulativeOperation)
    exclusive = param("exclusive", "bool")
    reverse = param("reverse", "bool")

    def _infer(self):
        copy_constant_input(self, 1, "axis", rank=0, what="axis")
        return super()._infer()


TYPES = (DataType.FLOAT, DataType.HALF, DataType.BF16, DataType.INT32, DataType.INT64)


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = tuple(shapes[0]), dtypes[0]
    if dt not in TYPES:
        fail(name, f"input has type {dt.name}; a cumulative takes FLOAT, HALF, BF16, INT32 or INT64")
    if not x:
        fail(name, "the input is a scalar; a cumulative needs rank >= 1")
    axis = p.get("axis")
    if axis is None:
        fail(name, "the axis input (input 1) is not set")
    if not -len(x) <= axis < len(x):
        fail(name, f"axis {axis} is out of range [{-len(x)}, {len(x) - 1}] for a rank-{len(x)} input")
    return [x], [dt]


def run(p, w, inputs, plugin):
    x = f32(inputs[0])
    if not x.is_floating_point():
        x = x.long()
    axis = p["axis"] % x.dim()
    if p["reverse"]:
        x = x.flip(axis)
    if p["exclusive"]:  # the sum of the elements before each one: a zero, then the shifted prefix sums
        n = x.shape[axis]
        y = torch.cat([torch.zeros_like(x.narrow(axis, 0, 1)), torch.cumsum(x.narrow(axis, 0, n - 1), axis)], axis)
        y = y.narrow(axis, 0, n)
    else:
        y = torch.cumsum(x, axis)
    return [y.flip(axis) if p["reverse"] else y]


def add_cumulative(self, input: ITensor, axis: ITensor, op: CumulativeOperation, exclusive: bool,
                   reverse: bool) -> ICumulativeLayer:
    return self._add(ICumulativeLayer, [input, axis], {"axis": None, "op": int(CumulativeOperation(op)),
                                                     "exclusive": bool(exclusive), "reverse": bool(reverse)})


register(ICumulativeLayer, infer, run, adds=(add_cumulative,))

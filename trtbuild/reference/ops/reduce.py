"""IReduceLayer: SUM, PROD, MAX, MIN or AVG over the dims of an axes bitmask."""

from __future__ import annotations

import math

from .. import arithmetic
from ..enums import DataType, LayerType, ReduceOperation
from .base import ILayer, param
from .common import ARITHMETIC_TYPES, NO_BOOL_UINT8, axes_of, bits, f32, fail
from .registry import register


class IReduceLayer(ILayer):
    _TYPE = LayerType.REDUCE
    op = param("op", ReduceOperation)
    axes = param("axes", "int")
    keep_dims = param("keep_dims", "bool")


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = shapes[0], dtypes[0]
    if dt in NO_BOOL_UINT8:
        fail(name, f"input has type {dt.name}; reduce takes {ARITHMETIC_TYPES}")
    if dt == DataType.INT8 and p["op"] == ReduceOperation.AVG:
        fail(name, "TensorRT-RTX 1.7 cannot build an AVG reduce of INT8 (no output type for the mean); "
                   "cast to FLOAT first")
    axes = bits(p["axes"], len(x), name)
    out = [1 if i in axes else d for i, d in enumerate(x)] if p["keep_dims"] else \
        [d for i, d in enumerate(x) if i not in axes]
    return [tuple(out)], [dt]


def run(p, w, inputs, plugin):
    x = f32(inputs[0])
    axes, op, keep = axes_of(p["axes"], x.dim()), ReduceOperation(p["op"]), p["keep_dims"]
    if op == ReduceOperation.SUM:
        return [x.sum(dim=axes, keepdim=keep)]
    if op == ReduceOperation.AVG:
        return [x.mean(dim=axes, keepdim=keep) if x.is_floating_point()
                else x.sum(dim=axes, keepdim=keep) // math.prod(x.shape[a] for a in axes)]
    if op == ReduceOperation.MAX:
        return [x.amax(dim=axes, keepdim=keep)]
    if op == ReduceOperation.MIN:
        return [x.amin(dim=axes, keepdim=keep)]
    for a in sorted(axes, reverse=True):  # PROD
        x = x.prod(dim=a, keepdim=keep)
    return [x]


def pessimistic(p, w, inputs, r):
    """SUM, AVG and PROD accumulate in the output type, in index order; MAX and MIN are exact (None)."""
    x = f32(inputs[0])
    axes, op, keep = axes_of(p["axes"], x.dim()), ReduceOperation(p["op"]), p["keep_dims"]
    if op == ReduceOperation.SUM:
        return arithmetic.seq_sum(x, axes, keep, r)
    if op == ReduceOperation.AVG:
        return arithmetic.seq_mean(x, axes, keep, r)
    if op == ReduceOperation.PROD:
        return arithmetic.seq_prod(x, axes, keep, r)
    return None


register(IReduceLayer, infer, run, pessimistic)

"""IElementWiseLayer: a binary operation of two tensors of one type, broadcast."""

from __future__ import annotations

import torch

from ..enums import DataType, ElementWiseOperation, LayerType
from .base import ILayer, param
from .common import ARITHMETIC_TYPES, NO_BOOL_UINT8, broadcast, f32, fail, same_types
from .registry import register

_COMPARE = (ElementWiseOperation.EQUAL, ElementWiseOperation.GREATER, ElementWiseOperation.LESS)
_LOGICAL = (ElementWiseOperation.AND, ElementWiseOperation.OR, ElementWiseOperation.XOR)


class IElementWiseLayer(ILayer):
    _TYPE = LayerType.ELEMENTWISE
    op = param("op", ElementWiseOperation)


def infer(p, w, shapes, dtypes, name, plugin):
    op, dt = ElementWiseOperation(p["op"]), dtypes[0]
    same_types(name, dtypes)
    if op in _LOGICAL and dt != DataType.BOOL:
        fail(name, f"{op.name} needs BOOL inputs, got {dt.name}")
    if op not in _LOGICAL and op != ElementWiseOperation.EQUAL and dt in NO_BOOL_UINT8:
        fail(name, f"{op.name} needs {ARITHMETIC_TYPES} inputs, got {dt.name}")
    if op == ElementWiseOperation.POW and dt == DataType.INT8:
        fail(name, "TensorRT-RTX 1.7 cannot build POW on INT8 inputs (no output type for it); cast to FLOAT first")
    out_dt = DataType.BOOL if op in _COMPARE else dt
    return [broadcast(name, shapes[0], shapes[1])], [out_dt]


_EW = {
    ElementWiseOperation.SUM: torch.add, ElementWiseOperation.PROD: torch.mul,
    ElementWiseOperation.MAX: torch.maximum, ElementWiseOperation.MIN: torch.minimum,
    ElementWiseOperation.SUB: torch.sub, ElementWiseOperation.POW: torch.pow,
    ElementWiseOperation.AND: torch.logical_and, ElementWiseOperation.OR: torch.logical_or,
    ElementWiseOperation.XOR: torch.logical_xor, ElementWiseOperation.EQUAL: torch.eq,
    ElementWiseOperation.GREATER: torch.gt, ElementWiseOperation.LESS: torch.lt,
}


def _apply(op, a, b):
    if op in (ElementWiseOperation.DIV, ElementWiseOperation.FLOOR_DIV) and not a.is_floating_point():
        # integer division by zero is undefined in TensorRT; the reference gives 0 instead of failing
        zero = b == 0
        q = torch.div(a, torch.where(zero, torch.ones_like(b), b),
                      rounding_mode="trunc" if op == ElementWiseOperation.DIV else "floor")
        return torch.where(zero, torch.zeros_like(q), q)
    if op == ElementWiseOperation.DIV:
        return a / b
    if op == ElementWiseOperation.FLOOR_DIV:
        return torch.floor(a / b)
    return _EW[op](a, b)


def run(p, w, inputs, plugin):
    return [_apply(ElementWiseOperation(p["op"]), f32(inputs[0]), f32(inputs[1]))]


register(IElementWiseLayer, infer, run)

"""IUnaryLayer: a function of one tensor."""

from __future__ import annotations

import torch

from ..enums import DataType, LayerType, UnaryOperation
from .base import ILayer, param
from .common import ARITHMETIC_TYPES, NO_BOOL_UINT8, f32, fail, need_float
from .registry import register


class IUnaryLayer(ILayer):
    _TYPE = LayerType.UNARY
    op = param("op", UnaryOperation)


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt, op = shapes[0], dtypes[0], UnaryOperation(p["op"])
    if op == UnaryOperation.NOT:
        if dt != DataType.BOOL:
            fail(name, f"NOT needs a BOOL input, got {dt.name}")
        return [tuple(x)], [dt]
    if op not in (UnaryOperation.ABS, UnaryOperation.NEG, UnaryOperation.SIGN):
        need_float(name, dt)
    elif dt in NO_BOOL_UINT8:
        fail(name, f"{op.name} needs a {ARITHMETIC_TYPES} input, got {dt.name}")
    return [tuple(x)], [DataType.BOOL if op in (UnaryOperation.ISINF, UnaryOperation.ISNAN) else dt]


_UNARY = {
    UnaryOperation.EXP: torch.exp, UnaryOperation.LOG: torch.log, UnaryOperation.SQRT: torch.sqrt,
    UnaryOperation.RECIP: torch.reciprocal, UnaryOperation.ABS: torch.abs, UnaryOperation.NEG: torch.neg,
    UnaryOperation.SIN: torch.sin, UnaryOperation.COS: torch.cos, UnaryOperation.TAN: torch.tan,
    UnaryOperation.SINH: torch.sinh, UnaryOperation.COSH: torch.cosh, UnaryOperation.ASIN: torch.asin,
    UnaryOperation.ACOS: torch.acos, UnaryOperation.ATAN: torch.atan, UnaryOperation.ASINH: torch.asinh,
    UnaryOperation.ACOSH: torch.acosh, UnaryOperation.ATANH: torch.atanh, UnaryOperation.CEIL: torch.ceil,
    UnaryOperation.FLOOR: torch.floor, UnaryOperation.ERF: torch.erf, UnaryOperation.NOT: torch.logical_not,
    UnaryOperation.SIGN: torch.sign, UnaryOperation.ROUND: torch.round, UnaryOperation.ISINF: torch.isinf,
    UnaryOperation.ISNAN: torch.isnan,
}


def run(p, w, inputs, plugin):
    return [_UNARY[UnaryOperation(p["op"])](f32(inputs[0]))]


register(IUnaryLayer, infer, run)

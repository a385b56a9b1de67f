"""IMatrixMultiplyLayer: batched matrix (or vector) products, with per-operand transposition."""

from __future__ import annotations

import torch

from ..enums import LayerType, MatrixOperation
from .base import ILayer, param
from .common import broadcast, f32, fail, need_float, same_types
from .registry import register


class IMatrixMultiplyLayer(ILayer):
    _TYPE = LayerType.MATRIX_MULTIPLY
    op0 = param("op0", MatrixOperation)
    op1 = param("op1", MatrixOperation)


def _shape(name, p, a, b):
    op0, op1 = MatrixOperation(p["op0"]), MatrixOperation(p["op1"])

    def split(shape, op):
        if len(shape) < (1 if op == MatrixOperation.VECTOR else 2):
            fail(name, f"input of shape {tuple(shape)} with MatrixOperation.{op.name} needs rank >= "
                       f"{1 if op == MatrixOperation.VECTOR else 2} (a rank-1 input takes VECTOR)")
        if op == MatrixOperation.VECTOR:
            return tuple(shape[:-1]), (shape[-1],)
        rows, cols = shape[-2], shape[-1]
        return tuple(shape[:-2]), ((rows, cols) if op == MatrixOperation.NONE else (cols, rows))

    (ba, ma), (bb, mb) = split(a, op0), split(b, op1)
    if len(ba) != len(bb):
        fail(name, f"inputs {tuple(a)} ({op0.name}) and {tuple(b)} ({op1.name}) have different batch ranks")
    ka, kb = ma[-1], mb[0]
    if ka >= 0 and kb >= 0 and ka != kb:
        fail(name, f"inner dimensions differ: {ka} vs {kb} (shapes {tuple(a)} and {tuple(b)})")
    return broadcast(name, ba, bb) + tuple(ma[:-1]) + tuple(mb[1:])


def infer(p, w, shapes, dtypes, name, plugin):
    need_float(name, dtypes[0])
    same_types(name, dtypes)
    return [_shape(name, p, shapes[0], shapes[1])], [dtypes[0]]


def run(p, w, inputs, plugin):
    a, b = f32(inputs[0]), f32(inputs[1])
    op0, op1 = MatrixOperation(p["op0"]), MatrixOperation(p["op1"])
    if op0 == MatrixOperation.TRANSPOSE:
        a = a.transpose(-1, -2)
    if op1 == MatrixOperation.TRANSPOSE:
        b = b.transpose(-1, -2)
    if op0 == MatrixOperation.VECTOR:
        a = a.unsqueeze(-2)
    if op1 == MatrixOperation.VECTOR:
        b = b.unsqueeze(-1)
    y = torch.matmul(a, b)
    if op0 == MatrixOperation.VECTOR:  # a was (..., 1, K): drop the row dim first
        y = y.squeeze(-2)
    if op1 == MatrixOperation.VECTOR:  # b was (..., K, 1): its column dim is now last
        y = y.squeeze(-1)
    return [y]


register(IMatrixMultiplyLayer, infer, run)

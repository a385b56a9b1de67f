"""IConstantLayer: a tensor given by weights."""

from __future__ import annotations

import math

import torch

from ..enums import DataType, LayerType
from .base import ILayer, param, weights
from .common import fail
from .registry import register

#: the message for BOOL constants (tests/helpers/twin.py's REFERENCE_STRICTER matches it: TensorRT-RTX builds them)
CONSTANT_BOOL = ("TensorRT's IConstantLayer: \"This layer does not support boolean and uint8 types\" (make an INT32 "
                 "constant and compare it, or cast it)")


class IConstantLayer(ILayer):
    _TYPE = LayerType.CONSTANT
    shape = param("shape", "dims")
    weights = weights("weights")


def infer(p, w, shapes, dtypes, name, plugin):
    vol = math.prod(p["shape"])
    if w["weights"].size != vol:
        fail(name, f"weights hold {w['weights'].size} values but shape {tuple(p['shape'])} needs {vol}")
    wt = w["weights"].dtype
    if wt == DataType.UINT8:
        fail(name, "UINT8 weights: a constant layer takes FLOAT, HALF, BF16, INT32 or INT64 weights")
    if wt == DataType.BOOL:
        fail(name, f"BOOL weights: {CONSTANT_BOOL}")
    return [tuple(p["shape"])], [wt]


def run(p, w, inputs, plugin):
    if w["weights"] is None:  # an empty constant (a plan stores no array for it); the caller gives it its type
        return [torch.zeros(tuple(p["shape"]))]
    return [w["weights"].reshape(tuple(p["shape"]))]  # INT4/FP4/FP8: their holders (lowbit.py), made at load


register(IConstantLayer, infer, run)

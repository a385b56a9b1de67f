"""ISelectLayer: then_input where the BOOL condition is true, else else_input; the three inputs have one rank
and broadcast to each other (each dimension equal or 1); then/else have one type, which the output keeps."""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import DataType, LayerType
from .base import ILayer
from .common import broadcast, fail, no_uint8, same_types
from .registry import register


class ISelectLayer(ILayer):
    _TYPE = LayerType.SELECT
    _MAX_INPUTS = 3


def infer(p, w, shapes, dtypes, name, plugin):
    if dtypes[0] != DataType.BOOL:
        fail(name, f"the condition (input 0) has type {dtypes[0].name}; a select needs a BOOL condition "
                   "(compare with add_elementwise, or add_cast to BOOL)")
    no_uint8(name, dtypes[1:3])
    same_types(name, dtypes[1:3])
    out = broadcast(name, broadcast(name, shapes[0], shapes[1]), shapes[2])
    return [out], [dtypes[1]]


def run(p, w, inputs, plugin):
    c, a, b = inputs[:3]
    return [torch.where(c.bool(), a, b)]


def add_select(self, condition: ITensor, then_input: ITensor, else_input: ITensor) -> ISelectLayer:
    return self._add(ISelectLayer, [condition, then_input, else_input], {})


register(ISelectLayer, infer, run, adds=(add_select,))

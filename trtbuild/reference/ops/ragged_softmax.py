"""IRaggedSoftMaxLayer: a softmax over the first bounds[i] elements of each sequence (the last dim of the input),
zeros after them. NVIDIA's RaggedSoftMax operator: "Values outside of the specified lengths are set to zero."

The docstring speaks of a Z x S input and Z x 1 bounds; TensorRT-RTX 1.7 takes exactly rank 3 (its shape check: "the
input tensor must have exactly 3 dimensions"), bounds of the same rank whose every dim equals the input's or is 1
(broadcast), FLOAT/HALF/BF16 input and INT32 bounds (the operator's data types; INT64 bounds fail its build). A
bound of S or more covers the whole sequence; a bound of 0 or less covers nothing, so that row is all zeros. Bounds
whose last dim is S (accepted too) bound each element by its own value: it is kept where its index is below it.
"""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import DataType, LayerType
from .base import ILayer
from .common import f32, fail, need_float
from .registry import register


class IRaggedSoftMaxLayer(ILayer):
    _TYPE = LayerType.RAGGED_SOFTMAX
    _MAX_INPUTS = 2

    @classmethod
    def _type_label(cls) -> str:
        return "Ragged SoftMax"


def infer(p, w, shapes, dtypes, name, plugin):
    x, b = tuple(shapes[0]), tuple(shapes[1])
    need_float(name, dtypes[0])
    if dtypes[1] != DataType.INT32:
        fail(name, f"the bounds have type {dtypes[1].name}; a ragged softmax takes INT32 bounds")
    if len(x) != 3:
        fail(name, f"the input has rank {len(x)}; a ragged softmax takes rank 3 (sequences along the last dim)")
    if len(b) != len(x):
        fail(name, f"the bounds have rank {len(b)} but the input has rank {len(x)}; they must be equal")
    if any(bd != xd and bd != 1 for bd, xd in zip(b, x)):
        fail(name, f"the bounds' shape {b} does not match the input's {x}: each dim must equal the input's or be 1")
    return [x], [dtypes[0]]


def run(p, w, inputs, plugin):
    x, bounds = f32(inputs[0]), inputs[1].long()
    keep = torch.arange(x.shape[-1], device=x.device) < bounds  # broadcast to x's shape
    keep = keep.expand(x.shape)
    # the max over the kept elements only (a row that keeps nothing uses 0): exp never overflows
    top = torch.where(keep, x, torch.full_like(x, -torch.inf)).amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.where(keep, torch.exp(x - top), torch.zeros_like(x))
    total = e.sum(-1, keepdim=True)
    return [torch.where(total > 0, e / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(e))]


def add_ragged_softmax(self, input: ITensor, bounds: ITensor) -> IRaggedSoftMaxLayer:
    return self._add(IRaggedSoftMaxLayer, [input, bounds], {})


register(IRaggedSoftMaxLayer, infer, run, adds=(add_ragged_softmax,))

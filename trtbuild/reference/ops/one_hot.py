"""IOneHotLayer: indices (INT32/INT64) one-hot encoded along a new dimension `axis` of the output (rank(indices)
+ 1; negative counts from the end of the output), holding values[1] (on) at each index and values[0] (off)
elsewhere. Depth is a build-time constant 0-D INT32/INT64 tensor (input 2), positive. As in ONNX OneHot, a
negative index counts from the end of the depth and an index outside [-depth, depth - 1] encodes all off."""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import DataType, LayerType
from .base import ILayer, param
from .common import fail, no_uint8
from .registry import register
from .squeeze import copy_constant_input


class IOneHotLayer(ILayer):
    _TYPE = LayerType.ONE_HOT
    _MAX_INPUTS = 3
    axis = param("axis", "int")

    @classmethod
    def _type_label(cls) -> str:
        return "OneHot"

    def _infer(self):
        copy_constant_input(self, 2, "depth", rank=0, what="depth")
        return super()._infer()


def _axis(name, axis, rank):
    if not -rank <= axis < rank:
        fail(name, f"axis {axis} is out of range [{-rank}, {rank - 1}] for a one-hot output of rank {rank}")
    return axis % rank


def infer(p, w, shapes, dtypes, name, plugin):
    i, v = tuple(shapes[0]), tuple(shapes[1])
    if dtypes[0] not in (DataType.INT32, DataType.INT64):
        fail(name, f"indices have type {dtypes[0].name}; a one-hot needs INT32 or INT64 indices")
    no_uint8(name, dtypes[1:2])
    if v != (2,):
        fail(name, f"values of shape {v}: a one-hot needs a 1-D tensor of two values, [off_value, on_value]")
    depth = p.get("depth")
    if depth is None:
        fail(name, "the depth input (input 2) is not set")
    if depth <= 0:
        fail(name, f"depth {depth}: TensorRT's one-hot depth \"should be positive\"")
    axis = _axis(name, p["axis"], len(i) + 1)
    return [i[:axis] + (depth,) + i[axis:]], [dtypes[1]]


def run(p, w, inputs, plugin):
    idx, values = inputs[0].long(), inputs[1]
    depth = p["depth"]
    idx = torch.where(idx < 0, idx + depth, idx)
    hot = torch.arange(depth, device=idx.device) == idx.unsqueeze(-1)  # out-of-range indices match nothing
    y = torch.where(hot, values[1], values[0])
    return [y.movedim(-1, _axis("", p["axis"], idx.dim() + 1))]


def add_one_hot(self, indices: ITensor, values: ITensor, depth: ITensor, axis: int) -> IOneHotLayer:
    return self._add(IOneHotLayer, [indices, values, depth], {"axis": int(axis), "depth": None})


register(IOneHotLayer, infer, run, adds=(add_one_hot,))

"""IParametricReLULayer: x where x >= 0, else x * slope, with slopes (input 1) unidirectionally broadcast to
the input (TensorRT: "the rank of the two tensors must be the same, and all dimensions of the slopes tensor
must either equal the input tensor or be 1")."""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import LayerType
from .base import ILayer
from .common import f32, fail, need_float, same_types
from .registry import register


class IParametricReLULayer(ILayer):
    _TYPE = LayerType.PARAMETRIC_RELU
    _MAX_INPUTS = 2

    @classmethod
    def _type_label(cls) -> str:
        return "Parametric ReLU"


def infer(p, w, shapes, dtypes, name, plugin):
    x, s = tuple(shapes[0]), tuple(shapes[1])
    need_float(name, dtypes[0])
    same_types(name, dtypes[:2])
    if len(s) != len(x):
        fail(name, f"slopes of shape {s} have rank {len(s)} but the input {x} has rank {len(x)}; TensorRT needs "
                   "equal ranks (reshape the slopes with add_shuffle)")
    for i, (a, b) in enumerate(zip(x, s)):  # a dynamic input dim is checked when the run gives its size
        if b not in (1, a) and a != -1:
            fail(name, f"slopes of shape {s} do not broadcast to the input {x} at dimension {i}: each slopes "
                       "dimension must equal the input's or be 1")
    return [x], [dtypes[0]]


def run(p, w, inputs, plugin):
    x, s = f32(inputs[0]), f32(inputs[1])
    return [torch.where(x >= 0, x, x * s)]


def add_parametric_relu(self, input: ITensor, slopes: ITensor) -> IParametricReLULayer:
    return self._add(IParametricReLULayer, [input, slopes], {})


register(IParametricReLULayer, infer, run, adds=(add_parametric_relu,))

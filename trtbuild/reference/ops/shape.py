"""IShapeLayer: the dims of its input as a 1-D INT64 tensor (TensorRT 10/11: "a one-dimensional int64 tensor
of length 4 containing the sequence 2, 3, 5, 7" for a [2,3,5,7] input). It reads only its input's shape, so
its value is known at build time wherever the input's dims are (trtbuild.reference.shape_values)."""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import DataType, LayerType
from ..shape_values import Sym
from .base import ILayer
from .registry import register


class IShapeLayer(ILayer):
    _TYPE = LayerType.SHAPE
    _READS_ONLY_SHAPES = True

    @staticmethod
    def _output_values(p, shapes, keys):
        """The input's dims; a dynamic dim is a Sym naming the input, so that a reshape of that same input
        can tell its own dim from it."""
        return [tuple(d if d >= 0 else Sym(keys[0], i) for i, d in enumerate(shapes[0]))]


def infer(p, w, shapes, dtypes, name, plugin):
    return [(len(shapes[0]),)], [DataType.INT64]


def run(p, w, inputs, plugin):
    return [torch.tensor(tuple(inputs[0].shape), dtype=torch.int64, device=inputs[0].device)]


def add_shape(self, input: ITensor) -> IShapeLayer:
    return self._add(IShapeLayer, [input], {})


register(IShapeLayer, infer, run, adds=(add_shape,))

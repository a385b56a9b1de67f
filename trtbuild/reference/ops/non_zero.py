"""INonZeroLayer: the indices of the non-zero elements of its input, as a (rank, count) tensor whose column j
holds the coordinates of the j-th non-zero element in row-major order (ONNX NonZero, torch.nonzero(x).T).

The count is known only when the layer runs: the output's shape is (rank, -1) at build time, as TensorRT
reports it, and the runtime hands it to the output's IOutputAllocator (runtime.py). Inputs are FLOAT, HALF,
BF16, INT32, INT64 or BOOL (TensorRT-RTX 1.7's list; INT8 and UINT8 are refused); the indices are INT32 or
INT64 (`indices_type`, INT32 by default). A 0-D input gives a (0, -1) output: no coordinates, one column per
non-zero element."""

from __future__ import annotations

import torch

from ..core import ITensor
from ..enums import DataType, LayerType
from .base import ILayer, param
from .common import fail
from .registry import register

INPUT_TYPES = (DataType.FLOAT, DataType.HALF, DataType.BF16, DataType.INT32, DataType.INT64, DataType.BOOL)
INDEX_TYPES = (DataType.INT32, DataType.INT64)


def index_type_check(value) -> str | None:
    """The setter check of `indices_type` (the NonZero and NMS layers): INT32 or INT64 only."""
    return None if value in INDEX_TYPES else "the indices type must be INT32 or INT64"


def check_index_type(name, value) -> None:
    if DataType(value) not in INDEX_TYPES:
        fail(name, f"indices type {DataType(value).name}: the indices must be INT32 or INT64")


class INonZeroLayer(ILayer):
    _TYPE = LayerType.NON_ZERO
    indices_type = param("indices_type", DataType, check=index_type_check)

    @classmethod
    def _type_label(cls) -> str:
        return "NonZero"


def infer(p, w, shapes, dtypes, name, plugin):
    if dtypes[0] not in INPUT_TYPES:
        fail(name, f"input has type {dtypes[0].name}; a non-zero layer takes FLOAT, HALF, BF16, INT32, INT64 or BOOL")
    check_index_type(name, p["indices_type"])
    return [(len(shapes[0]), -1)], [DataType(p["indices_type"])]


def run(p, w, inputs, plugin):
    x = inputs[0]
    if x.dim() == 0:  # torch.nonzero gives (count, 0) for a scalar; the layer's layout is (0, count)
        return [torch.zeros((0, int(x.ne(0))), dtype=torch.int64, device=x.device)]
    return [torch.nonzero(x.ne(0)).T]


def add_non_zero(self, input: ITensor, indices_type: DataType = DataType.INT32) -> INonZeroLayer:
    return self._add(INonZeroLayer, [input], {"indices_type": int(indices_type)})


register(INonZeroLayer, infer, run, adds=(add_non_zero,))

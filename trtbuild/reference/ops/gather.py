"""IGatherLayer: DEFAULT (ONNX Gather), ELEMENT (ONNX GatherElements) and ND (ONNX GatherND) modes, with
`axis` and `num_elementwise_dims` as TensorRT defines them (shapes and refusals checked against TensorRT-RTX):

- DEFAULT: output = data[:axis] + indices + data[axis+1:]; with num_elementwise_dims = 1 the first dimension of
  data and indices is handled elementwise (indices' may be 1, broadcast) and axis must be >= 1;
- ELEMENT: indices have data's rank and are no larger than data outside `axis`; the output has their shape;
  num_elementwise_dims must be 0;
- ND: the last indices dimension q indexes data dims b..b+q-1 (b = num_elementwise_dims, whose leading dims of
  data and indices are equal); output = indices[:-1] + data[b+q:]; `axis` is not used.

Indices are INT32 or INT64; a negative index counts from the end of its dimension (as in ONNX); an index out of
range fails the run.
"""

from __future__ import annotations

import math

import torch

from ..core import ITensor
from ..enums import DataType, GatherMode, LayerType
from .base import ILayer, param
from .common import fail, no_uint8, wrap_indices
from .registry import register


class IGatherLayer(ILayer):
    _TYPE = LayerType.GATHER
    _MAX_INPUTS = 2
    axis = param("axis", "int")
    mode = param("mode", GatherMode)
    num_elementwise_dims = param("num_elementwise_dims", "int")


def infer(p, w, shapes, dtypes, name, plugin):
    x, i = tuple(shapes[0]), tuple(shapes[1])
    no_uint8(name, dtypes[:1])
    if dtypes[1] not in (DataType.INT32, DataType.INT64):
        fail(name, f"indices have type {dtypes[1].name}; a gather needs INT32 or INT64 indices")
    if not x:
        fail(name, "the data input is a scalar; a gather needs data of rank >= 1")
    mode, axis, ned, r = GatherMode(p["mode"]), p["axis"], p["num_elementwise_dims"], len(x)
    if mode != GatherMode.ND and not 0 <= axis < r:
        fail(name, f"axis {axis} is out of range [0, {r - 1}] for data of rank {r}")
    if mode == GatherMode.DEFAULT:
        if ned not in (0, 1):
            fail(name, f"num_elementwise_dims = {ned}: GatherMode.DEFAULT takes 0 or 1")
        if ned == 0:
            return [x[:axis] + i + x[axis + 1:]], [dtypes[0]]
        if axis < 1:
            fail(name, "num_elementwise_dims = 1 handles dimension 0 elementwise, so axis must be >= 1")
        if not i or i[0] not in (1, x[0]):
            fail(name, f"with num_elementwise_dims = 1 the first dimension of indices {i} must be 1 or equal that of "
                       f"data {x}")
        return [x[:axis] + i[1:] + x[axis + 1:]], [dtypes[0]]
    if mode == GatherMode.ELEMENT:
        if ned != 0:
            fail(name, f"num_elementwise_dims = {ned}: GatherMode.ELEMENT takes 0")
        if len(i) != r:
            fail(name, f"indices of shape {i} have rank {len(i)} but data {x} has rank {r}; GatherMode.ELEMENT needs "
                       "equal ranks")
        for d, (a, b) in enumerate(zip(i, x)):
            if d != axis and a > b:
                fail(name, f"dimension {d} of indices {i} exceeds that of data {x}; GatherMode.ELEMENT needs each "
                           "indices dimension other than the axis to be at most data's")
        return [i], [dtypes[0]]
    # ND
    if not 0 <= ned < r:
        fail(name, f"num_elementwise_dims = {ned}: GatherMode.ND takes 0 to {r - 1} for data of rank {r}")
    if len(i) < ned + 1:
        fail(name, f"indices of shape {i} need rank > num_elementwise_dims = {ned} in GatherMode.ND")
    q = i[-1]
    if q < 1 or ned + q > r:
        fail(name, f"the last dimension of indices {i} ({q}) plus num_elementwise_dims ({ned}) must be in "
                   f"[{ned + 1}, {r}], the rank of data {x}")
    if i[:ned] != x[:ned]:
        fail(name, f"the first {ned} dimensions of indices {i} and data {x} must be equal "
                   "(num_elementwise_dims)")
    return [i[:-1] + x[ned + q:]], [dtypes[0]]


def run(p, w, inputs, plugin):
    x, idx = inputs[0], inputs[1]
    mode, axis, ned = GatherMode(p["mode"]), p["axis"], p["num_elementwise_dims"]
    if mode == GatherMode.ELEMENT:
        return [torch.gather(x, axis, wrap_indices(idx, x.shape[axis], "gather"))]
    if mode == GatherMode.DEFAULT:
        idx = wrap_indices(idx, x.shape[axis], "gather")
        if ned == 0:
            y = x.index_select(axis, idx.reshape(-1))
            return [y.reshape(tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]))]
        b = x.shape[0]
        idx = idx.expand((b,) + tuple(idx.shape[1:])).reshape(b, -1)
        d = x.movedim(axis, 1)  # (B, A, data[1:axis], data[axis+1:])
        g = d[torch.arange(b, device=x.device)[:, None], idx]  # (B, K, data[1:axis], data[axis+1:])
        m = len(inputs[1].shape) - 1
        g = g.reshape((b,) + tuple(inputs[1].shape[1:]) + tuple(d.shape[2:]))
        order = [0] + list(range(m + 1, m + axis)) + list(range(1, m + 1)) + list(range(m + axis, g.dim()))
        return [g.permute(order)]
    q = idx.shape[-1]
    bt = math.prod(x.shape[:ned])
    data = x.reshape((bt,) + tuple(x.shape[ned:]))
    ii = wrap_indices(idx.reshape(bt, -1, q), list(x.shape[ned:ned + q]), "gather")
    g = data[(torch.arange(bt, device=x.device)[:, None],) + tuple(ii[..., j] for j in range(q))]
    return [g.reshape(tuple(idx.shape[:-1]) + tuple(x.shape[ned + q:]))]


def add_gather(self, input: ITensor, indices: ITensor, axis: int) -> IGatherLayer:
    return self._add(IGatherLayer, [input, indices], {"axis": int(axis), "mode": int(GatherMode.DEFAULT),
                                                    "num_elementwise_dims": 0})


def add_gather_v2(self, input: ITensor, indices: ITensor, mode: GatherMode) -> IGatherLayer:
    """axis 0 and num_elementwise_dims 0 (TensorRT-RTX 1.7's defaults); set them afterwards."""
    return self._add(IGatherLayer, [input, indices], {"axis": 0, "mode": int(GatherMode(mode)),
                                                    "num_elementwise_dims": 0}, eager=False)


register(IGatherLayer, infer, run, adds=(add_gather, add_gather_v2))

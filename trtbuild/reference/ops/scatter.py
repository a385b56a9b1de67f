"""IScatterLayer: the data input copied, then the updates written at the positions the indices give
(TensorRT: "Creates an output tensor by copying values from an input tensor and then updating values by the given
indices and updates tensors"). The output has data's shape and type.

- ScatterMode.ELEMENT (ONNX ScatterElements, torch.scatter): data, indices and updates have one rank; updates
  have the indices' shape, which is nowhere larger than data's; output[..., indices[p], ...] = updates[p] with
  the index replacing position p's coordinate on `axis` (negative counts from the end).
- ScatterMode.ND (ONNX ScatterND): the last indices dimension q (0..rank(data)) addresses data's first q
  dimensions; updates have shape indices[:-1] + data[q:] and each replaces one slice. `axis` is not used.

Indices are INT32 or INT64; as in ONNX, a negative index counts from the end of its dimension, and an index out
of range fails the run. Where two indices address one element, the result is undefined (ONNX: "the order of the
updates is not specified" for reduction none; TensorRT documents no order either), so the reference's choice is
not to be relied on.

Shapes and refusals checked against TensorRT-RTX 1.7: data and updates have one type (FLOAT, HALF, BF16, INT8,
INT32, INT64 or BOOL; UINT8 is refused as by the other data-movement layers); an ELEMENT axis out of range and
updates that do not have exactly the shape required are refused.
"""

from __future__ import annotations


from ..core import ITensor
from ..enums import DataType, LayerType, ScatterMode
from .base import ILayer, param
from .common import fail, no_uint8, wrap_indices
from .registry import register

INDEX_TYPES = (DataType.INT32, DataType.INT64)


class IScatterLayer(ILayer):
    _TYPE = LayerType.SCATTER
    _MAX_INPUTS = 3
    axis = param("axis", "int")
    mode = param("mode", ScatterMode)


def _fits(a, b) -> bool:
    """Dimension a is at most dimension b (either may be dynamic, -1)."""
    return a < 0 or b < 0 or a <= b


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x == y or x < 0 or y < 0 for x, y in zip(a, b))


def infer(p, w, shapes, dtypes, name, plugin):
    x, i, u = (tuple(s) for s in shapes[:3])
    no_uint8(name, dtypes[:1])
    if dtypes[1] not in INDEX_TYPES:
        fail(name, f"indices have type {dtypes[1].name}; a scatter needs INT32 or INT64 indices")
    if dtypes[2] != dtypes[0]:
        fail(name, f"updates have type {dtypes[2].name} but data {dtypes[0].name}; a scatter needs one type")
    r = len(x)
    if ScatterMode(p["mode"]) == ScatterMode.ELEMENT:
        if not r:
            fail(name, "the data input is a scalar; ScatterMode.ELEMENT needs data of rank >= 1")
        if len(i) != r or len(u) != r:
            fail(name, f"data {x}, indices {i} and updates {u} must have one rank in ScatterMode.ELEMENT")
        if not -r <= p["axis"] < r:
            fail(name, f"axis {p['axis']} is out of range [{-r}, {r - 1}] for data of rank {r}")
        if not _same(u, i):
            fail(name, f"updates {u} must have the shape of indices {i} in ScatterMode.ELEMENT")
        if not all(_fits(a, b) for a, b in zip(i, x)):
            fail(name, f"indices {i} are larger than data {x} in some dimension; ScatterMode.ELEMENT needs each "
                       "indices dimension to be at most data's")
        return [x], [dtypes[0]]
    if not i:
        fail(name, "the indices are a scalar; ScatterMode.ND needs indices of rank >= 1")
    q = i[-1]
    if q < 0:
        fail(name, f"the last dimension of indices {i} is dynamic; ScatterMode.ND needs it known at build time")
    if q > r:
        fail(name, f"the last dimension of indices {i} ({q}) exceeds the rank {r} of data {x}")
    want = i[:-1] + x[q:]
    if not _same(u, want):
        fail(name, f"updates {u} must have shape {want} (indices {i}[:-1] + data {x}[{q}:]) in ScatterMode.ND")
    return [x], [dtypes[0]]


def run(p, w, inputs, plugin):
    x, idx, u = inputs[:3]
    out = x.clone()
    if ScatterMode(p["mode"]) == ScatterMode.ELEMENT:
        axis = p["axis"] % x.dim()
        return [out.scatter_(axis, wrap_indices(idx, x.shape[axis], "scatter"), u)]
    q = idx.shape[-1]
    if q == 0:  # every update replaces the whole data: the last one in order (duplicates are undefined)
        return [u.reshape((-1,) + tuple(x.shape))[-1].clone() if u.numel() else out]
    ii = wrap_indices(idx.reshape(-1, q), list(x.shape[:q]), "scatter")
    out[tuple(ii[:, j] for j in range(q))] = u.reshape((-1,) + tuple(x.shape[q:]))
    return [out]


def add_scatter(self, data: ITensor, indices: ITensor, updates: ITensor, mode: ScatterMode) -> IScatterLayer:
    """axis 0 (TensorRT's default); set it afterwards for ScatterMode.ELEMENT. As in TensorRT, the shapes are
    checked when the layer is used, not when it is added (the mode may change meanwhile)."""
    return self._add(IScatterLayer, [data, indices, updates], {"axis": 0, "mode": int(ScatterMode(mode))},
                     eager=False)


register(IScatterLayer, infer, run, adds=(add_scatter,))

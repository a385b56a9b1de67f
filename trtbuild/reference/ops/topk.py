"""ITopKLayer: the k largest (TopKOperation.MAX) or smallest (MIN) elements along one axis, as two outputs of
the same shape: the values, sorted largest first for MAX and smallest first for MIN, and their index positions
along the axis (INT32 or INT64, `indices_type`).

TensorRT 11.4 documents: "Currently only values of K up to 3840 are supported" and "axes must specify exactly
one dimension, and it must be one of the last four dimensions"; its operator page: "For axis with dimension size
d, k must obey k <= d, k <= 3840". k is the `k` attribute, or a 0-D INT32/INT64 tensor given with
set_input(1, k); the reference resolves it from the IConstantLayer that produces it (as it resolves a squeeze's
axes), and then reads `k` as -1, as TensorRT-RTX does ("getK works only for static k").

Ties are not ordered by TensorRT's documentation; the reference keeps the lower index first (a stable sort, the
order ONNX TopK documents), so its indices are a valid TopK on every input.

Checked against TensorRT-RTX 1.7: the input has rank >= 2 and type FLOAT, HALF, BF16, INT32, INT64 or INT8
(BOOL and UINT8 are refused); k = 0 gives an empty axis. TensorRT-RTX also takes an axis before the last four;
the reference refuses it, as documented (tests/helpers/twin.py REFERENCE_STRICTER).
"""

from __future__ import annotations

import torch

from ..core import ITensor, NetworkError
from ..enums import DataType, LayerType, TopKOperation
from .base import ILayer, param, setter_value
from .common import fail
from .registry import register
from .squeeze import copy_constant_input

#: TensorRT: "Currently only values of K up to 3840 are supported."
MAX_K = 3840
TYPES = (DataType.FLOAT, DataType.HALF, DataType.BF16, DataType.INT32, DataType.INT64, DataType.INT8)
INDEX_TYPES = (DataType.INT32, DataType.INT64)


def _k_range(k):
    return None if 0 <= k <= MAX_K else f"TensorRT supports K in [0, {MAX_K}]"


def _index_type(dt):
    return None if dt in INDEX_TYPES else "the indices type must be INT32 or INT64"


def _one_bit(axes):
    return "the axes bitmask must have a bit set" if axes == 0 else None


class ITopKLayer(ILayer):
    _TYPE = LayerType.TOPK
    _MAX_INPUTS = 2
    _OPTIONAL_INPUTS = True  # input 1, the k tensor, is optional
    op = param("op", TopKOperation)
    axes = param("axes", "int", _one_bit)
    indices_type = param("indices_type", DataType, _index_type)

    @property
    def k(self) -> int:
        """The static k; -1 once a k tensor is set as input 1 (TensorRT-RTX: "getK works only for static k")."""
        return -1 if self.get_input(1) is not None else self._params["k"]

    @k.setter
    def k(self, value) -> None:
        value = setter_value("int", value, lambda: f"layer '{self.name}': k = {value!r}")
        why = _k_range(value)
        if why:
            raise NetworkError(f"layer '{self.name}': k = {value} is refused: {why}")
        self._params["k"] = value
        if len(self._inputs) > 1:  # a static k replaces the k tensor (TensorRT-RTX: input 1 then reads None)
            self._inputs[1] = None
        self._network._touch()

    @classmethod
    def _type_label(cls) -> str:
        return "TopK"

    def _infer(self):
        copy_constant_input(self, 1, "k_tensor", rank=0, what="k")
        return super()._infer()


def k_value(p) -> int:
    """The k in use: the constant k tensor's value where one is set, else the attribute."""
    return p["k"] if p.get("k_tensor") is None else p["k_tensor"]


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = tuple(shapes[0]), dtypes[0]
    if dt not in TYPES:
        fail(name, f"input has type {dt.name}; a TopK takes FLOAT, HALF, BF16, INT32, INT64 or INT8")
    if len(x) < 2:
        fail(name, f"the input has rank {len(x)}; a TopK needs rank >= 2 (TensorRT-RTX: \"at least 2 dimensions "
                   "are required for input\")")
    axes, r = p["axes"], len(x)
    if axes <= 0 or axes >= 1 << r or axes & (axes - 1):
        fail(name, f"axes bitmask {axes:#b} must select exactly one dimension of the rank-{r} input")
    axis = axes.bit_length() - 1
    if axis < r - 4:
        fail(name, f"axes selects dimension {axis} of a rank-{r} input; TensorRT: the axis \"must be one of the "
                   "last four dimensions\"")
    if DataType(p["indices_type"]) not in INDEX_TYPES:
        fail(name, f"indices_type {DataType(p['indices_type']).name}: a TopK gives INT32 or INT64 indices")
    k = k_value(p)
    if _k_range(k):
        fail(name, f"k = {k}: TensorRT supports K in [0, {MAX_K}]")
    if 0 <= x[axis] < k:
        fail(name, f"k = {k} exceeds the size {x[axis]} of the reduced dimension {axis} of input {x}")
    out = x[:axis] + (k,) + x[axis + 1:]
    return [out, out], [dt, DataType(p["indices_type"])]


def run(p, w, inputs, plugin):
    x = inputs[0]
    axis, k = p["axes"].bit_length() - 1, k_value(p)
    descending = TopKOperation(p["op"]) == TopKOperation.MAX
    if 0 < k < x.shape[axis] and x.dtype != torch.bool:
        # one more than asked: where the k + 1 values hold no equal neighbours and no NaN, no tie can reorder the
        # indices (every element outside the selection is strictly beyond the k-th), so torch.topk's are the ones
        # the documented order gives (equal values: lower index first); otherwise the stable sort decides
        values, indices = torch.topk(x, k + 1, dim=axis, largest=descending, sorted=True)
        if not _ties_or_nan(values, axis):
            return [values.narrow(axis, 0, k), indices.narrow(axis, 0, k)]
    values, indices = torch.sort(x, dim=axis, descending=descending, stable=True)  # ties: lower index first
    return [values.narrow(axis, 0, k), indices.narrow(axis, 0, k)]


def _ties_or_nan(values: torch.Tensor, axis: int) -> bool:
    """Whether sorted `values` hold two equal neighbours or a NaN along `axis`."""
    n = values.shape[axis]
    if values.is_floating_point() and bool(torch.isnan(values).any()):
        return True
    return bool((values.narrow(axis, 1, n - 1) == values.narrow(axis, 0, n - 1)).any())


def add_topk(self, input: ITensor, op: TopKOperation, k: int, axes: int,
             indices_type: DataType = DataType.INT32) -> ITopKLayer:
    """TensorRT refuses k outside [0, 3840], an empty axes bitmask and indices types other than INT32/INT64
    when the layer is added; the rest is checked when the layer is used (a k tensor set meanwhile replaces k)."""
    op = setter_value(TopKOperation, op, lambda: "add_topk: op")
    k, axes = setter_value("int", k, lambda: "add_topk: k"), setter_value("int", axes, lambda: "add_topk: axes")
    indices_type = setter_value(DataType, indices_type, lambda: "add_topk: indices_type")
    for why in (_k_range(k), _one_bit(axes), _index_type(indices_type)):
        if why:
            raise NetworkError(f"add_topk: {why} (k = {k}, axes = {axes:#b}, indices_type = {indices_type.name})")
    return self._add(ITopKLayer, [input], {"op": int(op), "k": k, "axes": axes, "indices_type": int(indices_type),
                                           "k_tensor": None}, eager=False, num_outputs=2)


register(ITopKLayer, infer, run, adds=(add_topk,))

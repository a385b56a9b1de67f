"""IUnsqueezeLayer: unit dimensions inserted at the axes of the output given by a constant INT32/INT64
1-D tensor (input 1); negative axes count from the end of the output, of rank rank(input) + len(axes)."""

from __future__ import annotations

from ..core import Dims, ITensor
from ..enums import LayerType
from .common import fail, no_uint8
from .registry import register
from .squeeze import AxesInput, normalized_axes


class IUnsqueezeLayer(AxesInput):
    _TYPE = LayerType.UNSQUEEZE


def _out_shape(name, x, axes):
    rank = len(x) + len(axes)
    if rank > Dims.MAX_DIMS:
        fail(name, f"unsqueeze to rank {rank}: TensorRT's tensors have at most {Dims.MAX_DIMS} dimensions")
    axes = normalized_axes(name, axes, rank, "unsqueeze")
    it = iter(x)
    return tuple(1 if i in axes else next(it) for i in range(rank))


def infer(p, w, shapes, dtypes, name, plugin):
    no_uint8(name, dtypes[:1])
    if p.get("axes") is None:
        fail(name, "the axes input (input 1) is not set")
    return [_out_shape(name, tuple(shapes[0]), p["axes"])], [dtypes[0]]


def run(p, w, inputs, plugin):
    x = inputs[0]
    return [x.reshape(_out_shape("", tuple(x.shape), p["axes"]))]


def add_unsqueeze(self, input: ITensor, axes: ITensor) -> IUnsqueezeLayer:
    return self._add(IUnsqueezeLayer, [input, axes], {"axes": None})


register(IUnsqueezeLayer, infer, run, adds=(add_unsqueeze,))

"""ICastLayer: the one way a strongly typed network changes a tensor's type."""

from __future__ import annotations

from ..enums import DataType, LayerType
from .base import ILayer, param
from .common import fail
from .registry import register


class ICastLayer(ILayer):
    _TYPE = LayerType.CAST
    to_type = param("to_type", DataType)


def infer(p, w, shapes, dtypes, name, plugin):
    to = DataType(p["to_type"])
    if to in (DataType.FP8, DataType.INT4, DataType.FP4):
        fail(name, f"a cast to {to.name}: only a quantize layer may produce {to.name} (TensorRT-RTX); "
                   "use add_quantize")
    return [tuple(shapes[0])], [to]


def run(p, w, inputs, plugin):
    return [inputs[0]]  # the caller converts to the output type


register(ICastLayer, infer, run)

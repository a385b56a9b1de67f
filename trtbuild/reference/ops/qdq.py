"""IQuantizeLayer and IDequantizeLayer: one module, as the two are one pair of checks and formulas.

Their semantics live in trtbuild/reference/quantize.py (with the network-wide Q/DQ checks); this
module declares the classes and registers them."""

from __future__ import annotations

from functools import partial

from .. import quantize
from ..enums import DataType, LayerType
from .base import ILayer, param
from .registry import register


class _QuantizeLike(ILayer):
    """Inputs: 0 the tensor, 1 the scale (2, TensorRT's zero point, is refused when set)."""

    _MAX_INPUTS = 3
    axis = param("axis", "int")
    to_type = param("to_type", DataType)


class IQuantizeLayer(_QuantizeLike):
    _TYPE = LayerType.QUANTIZE


class IDequantizeLayer(_QuantizeLike):
    _TYPE = LayerType.DEQUANTIZE


def infer(ltype, p, w, shapes, dtypes, name, plugin):
    return quantize.infer(ltype, p, shapes, dtypes, name)


def run(fn, p, w, inputs, plugin):
    return [fn(p, inputs[0], inputs[1])]


register(IQuantizeLayer, partial(infer, LayerType.QUANTIZE), partial(run, quantize.quantize))
register(IDequantizeLayer, partial(infer, LayerType.DEQUANTIZE), partial(run, quantize.dequantize))

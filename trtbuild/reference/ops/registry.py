"""The registry of layer types: LayerType -> LayerOp.

Inference, execution and ONNX lowering look a layer's type up here instead of branching on it.
The modules that register are imported on the first lookup, not when this package is imported,
so that a module they need (quantize.py, ...) may itself import helpers from this package.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from ..enums import LayerType

#: the modules of this package that register layer types
MODULES = ("constant", "scale", "reduce", "elementwise", "unary", "activation", "softmax", "convolution",
           "pooling", "lrn", "normalization", "shuffle", "concatenation", "slice", "padding", "matrix_multiply",
           "cast", "identity", "qdq", "plugin_v3", "squeeze", "unsqueeze",
           "parametric_relu", "select", "gather", "cumulative", "one_hot", "resize")


@dataclass
class LayerOp:
    """What the backend does with one layer type.

    infer(p, w, shapes, dtypes, name, plugin) -> ([output shapes], [output dtypes]); raises NetworkError.
    run(p, w, inputs, plugin) -> [outputs], in float32 (or the integer type), rounded by the caller.
    pessimistic(p, w, inputs, r) -> the output with each step rounded by r, or None where the
    pessimistic model equals the default one (set only where a type has steps to round).
    lower(g, layer, ins, outs): its ONNX lowering, added by trtbuild.onnx_export.
    """

    type: LayerType
    cls: type
    infer: Callable
    run: Callable
    pessimistic: Callable | None = None
    lower: Callable | None = None


_OPS: dict[LayerType, LayerOp] = {}
_loaded = [False]


def register(cls, infer, run, pessimistic=None) -> LayerOp:
    """Register the layer type of `cls` (its `_TYPE`); once per type."""
    ltype = cls._TYPE
    if ltype in _OPS:
        raise RuntimeError(f"layer type {ltype.name} is registered twice")
    op = _OPS[ltype] = LayerOp(ltype, cls, infer, run, pessimistic)
    return op


def _load() -> None:
    # the flag is set before the imports because an op module may look the registry up while it loads; a
    # failed import clears it again, so the next lookup raises the real ImportError instead of finding nothing
    if not _loaded[0]:
        _loaded[0] = True
        try:
            for name in MODULES:
                importlib.import_module(f"{__package__}.{name}")
        except BaseException:
            _loaded[0] = False
            raise


def op_for(ltype) -> LayerOp | None:
    """The registered LayerOp of `ltype`, or None for a type the reference does not implement."""
    _load()
    return _OPS.get(ltype)


def registered() -> dict[LayerType, LayerOp]:
    """Every registered type, in registration order."""
    _load()
    return dict(_OPS)


def lowers(ltype: LayerType):
    """Decorator: `fn` is the ONNX lowering of `ltype` (used by trtbuild.onnx_export, which the
    reference does not import)."""
    def attach(fn):
        op = op_for(ltype)
        if op is None:
            raise RuntimeError(f"an ONNX lowering for {ltype.name}, a layer type the reference does not register")
        op.lower = fn
        return fn
    return attach

"""The registry of layer types: LayerType -> LayerOp.

Inference, execution and ONNX lowering look a layer's type up here instead of branching on it.
The modules that register are imported on the first lookup, not when this package is imported,
so that a module they need (quantize.py, ...) may itself import helpers from this package.

A layer type is one module of this package, found by listing the package: adding a type is adding
its module. The module registers its layer class with its inference and execution, and the
INetworkDefinition methods that add it (`adds`, attached to the reference's INetworkDefinition); a
module-level `API` tuple names any other public classes it defines (ILoop, ...), which
trtbuild.reference exports with the layer classes.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..enums import LayerType

#: the modules of this package that are not layer types
_SUPPORT = frozenset({"base", "common", "registry"})
#: the modules of this package that register layer types (and the modules they share, which register nothing)
MODULES = tuple(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                if m.name not in _SUPPORT and not m.name.startswith("_"))


@dataclass
class LayerOp:
    """What the backend does with one layer type.

    infer(p, w, shapes, dtypes, name, plugin) -> ([output shapes], [output dtypes]); raises NetworkError.
    run(p, w, inputs, plugin) -> [outputs], in float32 (or the integer type), rounded by the caller.
    pessimistic(p, w, inputs, r) -> the output with each step rounded by r, or None where the
    pessimistic model equals the default one (set only where a type has steps to round).
    lower(g, layer, ins, outs): its ONNX lowering, added by trtbuild.onnx_export.
    adds: the INetworkDefinition methods that add a layer of this type (plain functions taking the
    network as `self`, with TensorRT's parameter names and annotations).
    """

    type: LayerType
    cls: type
    infer: Callable
    run: Callable
    pessimistic: Callable | None = None
    lower: Callable | None = None
    adds: tuple[Callable, ...] = ()


_OPS: dict[LayerType, LayerOp] = {}
_loaded = [False]


def register(cls, infer, run, pessimistic=None, adds: tuple[Callable, ...] = ()) -> LayerOp:
    """Register the layer type of `cls` (its `_TYPE`); once per type."""
    ltype = cls._TYPE
    if ltype in _OPS:
        raise RuntimeError(f"layer type {ltype.name} is registered twice")
    op = _OPS[ltype] = LayerOp(ltype, cls, infer, run, pessimistic, adds=tuple(adds))
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


def network_methods() -> dict[str, Callable]:
    """{name: function} of every INetworkDefinition method that an op module defines."""
    methods: dict[str, Callable] = {}
    for op in registered().values():
        for fn in op.adds:
            if fn.__name__ in methods:
                raise RuntimeError(f"INetworkDefinition.{fn.__name__} is defined by two layer types")
            methods[fn.__name__] = fn
    return methods


def public_api() -> dict[str, object]:
    """{name: class} of every registered layer class and every name in an op module's `API` tuple."""
    _load()
    names = {op.cls.__name__: op.cls for op in _OPS.values()}
    for module in MODULES:
        mod = importlib.import_module(f"{__package__}.{module}")
        names.update((name, getattr(mod, name)) for name in getattr(mod, "API", ()))
    return names


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

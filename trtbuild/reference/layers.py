"""Layer classes of the reference backend, importable from one place.

Each class lives in the module of its layer type under trtbuild/reference/ops, with that type's
inference and execution; this module re-exports them (trtbuild.reference.layers.IConvolutionLayer, ...).
"""

from __future__ import annotations

from .ops.base import ILayer, _is_int, check_params  # noqa: F401 - _is_int: safetensors_blob's check
from .ops.registry import public_api, registered

#: every registered layer class and the other public classes of the op modules (ILoop, ...), by name
PUBLIC = public_api()
globals().update(PUBLIC)

__all__ = ["ILayer", "check_params", *PUBLIC]


def __getattr__(name):
    if name == "LAYER_CLASSES":  # every registered layer class, by type
        return {ltype: op.cls for ltype, op in registered().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

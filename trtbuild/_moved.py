"""Old import paths of modules and names that moved, kept working with a DeprecationWarning.

    # trtbuild/weights/outputs.py, after outputs.py moved to trtbuild/files/
    from trtbuild._moved import forward_module
    forward_module(__name__, "trtbuild.files.outputs")

    # trtbuild/cli/build.py, after MODEL_HELP moved to trtbuild/cli/options.py
    __getattr__ = moved_attributes(__name__, "trtbuild.cli.options", ["MODEL_HELP"])

A moved module: importing the old path warns (pointing at the importing line); attribute reads the
old module does not define itself come from the new module, and attribute writes go to it, so code
and tests that patch ``old_module.helper`` still change what the new module's functions call.
A moved name warns at each use of the old path.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings

__all__ = ["forward_module", "moved_attributes"]


class _ForwardingModule(types.ModuleType):
    """A module whose missing attributes are the new module's, and whose writes to them go there."""

    def __getattr__(self, name: str):
        return getattr(self.__dict__["_moved_to"], name)

    def __setattr__(self, name: str, value) -> None:
        target = self.__dict__["_moved_to"]
        if name in self.__dict__ or not hasattr(target, name):
            super().__setattr__(name, value)
        else:
            setattr(target, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self.__dict__:
            super().__delattr__(name)
        else:
            delattr(self.__dict__["_moved_to"], name)

    def __dir__(self):
        return sorted(set(self.__dict__) | set(dir(self.__dict__["_moved_to"])))


def forward_module(old_name: str, new_name: str) -> types.ModuleType:
    """Make module `old_name` (being imported) forward to `new_name` and warn that it moved."""
    target = importlib.import_module(new_name)
    module = sys.modules[old_name]
    module.__dict__["_moved_to"] = target
    module.__class__ = _ForwardingModule
    warnings.warn(f"{old_name} has moved to {new_name}; import it from there", DeprecationWarning, stacklevel=3)
    return target


def moved_attributes(old_module: str, new_module: str, names):
    """A module ``__getattr__`` for `old_module` serving `names`, which moved to `new_module`, with a
    DeprecationWarning at each use of the old path."""
    names = frozenset(names)

    def __getattr__(name: str):  # noqa: N807 - a module's __getattr__ (PEP 562), named as one
        if name not in names:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        warnings.warn(f"{old_module}.{name} has moved to {new_module}.{name}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), name)

    return __getattr__

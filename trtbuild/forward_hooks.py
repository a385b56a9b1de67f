"""Forward hooks on the named submodules of a torch module, installed and removed in one place.

    with ForwardCapture(model, CaptureOptions(names=["conv1", "relu"], keep="first", copy=True)) as cap:
        model(x)
    cap.first["conv1"], cap.counts["conv1"]      # its first output (a copy) and how often it ran

    result, cap = capture_forward(model, x)      # the same, run once under torch.no_grad()

The users need different records, chosen by CaptureOptions: layerwise parity keeps each mapped
module's first output, copied so that a later in-place op (``ReLU(inplace=True)``) cannot change
it, and counts the calls; the automatic layer map keeps every call in call order with the tensors
themselves (their identity tells which convolution feeds which BatchNorm); int8 calibration keeps
nothing and observes through the ``before``/``after`` callbacks. Hooks are removed on exit, also
when the forward raises. This module depends on torch alone, so that parity and quant can share it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

__all__ = ["CaptureOptions", "ForwardCapture", "ModuleCall", "capture_forward"]


@dataclass(frozen=True)
class ModuleCall:
    """One call of a hooked submodule: its name, the module, its first positional input (None
    without one) and its output (as kept: see CaptureOptions)."""

    name: str
    module: nn.Module
    input: Any
    output: Any


@dataclass(frozen=True)
class CaptureOptions:
    """What ForwardCapture hooks and keeps.

    names: the submodules to hook (duplicates ignored); None hooks every submodule except the root,
        in definition order. A name the module does not have is a ValueError.
    keep: "calls" keeps every call (ModuleCall) in call order; "first" keeps each module's first
        output; "none" keeps nothing (the callbacks observe). Calls are counted in every case.
    first_of_tuple: keep the first element of a tuple/list output instead of the whole output.
    copy: keep ``output.detach().clone()`` (safe from later in-place ops) instead of the tensor itself.
    """

    names: Sequence[str] | None = None
    keep: Literal["calls", "first", "none"] = "calls"
    first_of_tuple: bool = False
    copy: bool = False

    def __post_init__(self):
        if self.keep not in ("calls", "first", "none"):
            raise ValueError(f"keep must be 'calls', 'first' or 'none', not {self.keep!r}")


Before = Callable[[str, nn.Module, tuple], None]
After = Callable[[ModuleCall], None]


class ForwardCapture:
    """Context manager hooking the submodules of `module` chosen by `options` (see the module
    docstring). before(name, module, args) runs as each hooked module starts; after(call) as it
    returns, with the output as kept (the raw output where this call's output is not kept)."""

    def __init__(self, module: nn.Module, options: CaptureOptions = CaptureOptions(),
                 before: Before | None = None, after: After | None = None):
        self.module, self.options, self.before, self.after = module, options, before, after
        self.calls: list[ModuleCall] = []
        self.first: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self._handles: list = []

    def _targets(self) -> list[tuple[str, nn.Module]]:
        if self.options.names is None:
            return [(name, sub) for name, sub in self.module.named_modules() if name]
        if isinstance(self.options.names, str):
            raise TypeError(f"CaptureOptions.names must be a sequence of submodule names, not the string "
                            f"{self.options.names!r}")
        # remove_duplicate=False: a submodule reachable under two names (self.b = self.a) answers to both
        modules = dict(self.module.named_modules(remove_duplicate=False))
        unknown = [n for n in self.options.names if n not in modules]
        if unknown:
            raise ValueError(f"{type(self.module).__name__} has no submodule named {', '.join(map(repr, unknown))}")
        return [(name, modules[name]) for name in dict.fromkeys(self.options.names)]

    def _kept(self, output):
        if self.options.first_of_tuple and isinstance(output, (tuple, list)):
            output = output[0]
        if self.options.copy and isinstance(output, torch.Tensor):
            output = output.detach().clone()
        return output

    def _pre_hook(self, name: str):
        def hook(module, args):
            self.before(name, module, args)
        return hook

    def _post_hook(self, name: str):
        def hook(module, args, output):
            self.counts[name] = self.counts.get(name, 0) + 1
            keep, first_call = self.options.keep, self.counts[name] == 1
            kept = self._kept(output) if keep == "calls" or (keep == "first" and first_call) else output
            call = ModuleCall(name, module, args[0] if args else None, kept)
            if keep == "calls":
                self.calls.append(call)
            elif keep == "first" and first_call:
                self.first[name] = kept
            if self.after is not None:
                self.after(call)
        return hook

    def __enter__(self) -> ForwardCapture:
        try:
            for name, sub in self._targets():
                if self.before is not None:
                    self._handles.append(sub.register_forward_pre_hook(self._pre_hook(name)))
                self._handles.append(sub.register_forward_hook(self._post_hook(name)))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def capture_forward(module: nn.Module, *inputs, options: CaptureOptions = CaptureOptions()):
    """(module(*inputs) run under torch.no_grad(), the ForwardCapture that watched it)."""
    with torch.no_grad(), ForwardCapture(module, options) as capture:
        result = module(*inputs)
    return result, capture

"""Forward hooks that find and observe every tensor a quantized network quantizes.

    with TensorRecorder(model, observe) as rec:   # observe(key, tensor) gets each tensor, each batch
        model(x)
    rec.shapes      # {key: per-sample shape}, in the order first seen
    rec.adds        # {add name: [key of input 0, key of input 1]}
    rec.add_sources # {add name: [Conv/Linear whose output input 0 is, or None; the same for input 1]}
    rec.module_adds # {module name: its add (``features.3.add``) whose result, unchanged, it returned}

Keys (what a calibration file names):

* ``<module>.input``: the input of every ``nn.Conv1d/2d/3d``, ``nn.ConvTranspose1d/2d/3d`` and ``nn.Linear``
  (a forward pre-hook);
* ``<module>.sdpa.query|key|value``: the three operands of each ``F.scaled_dot_product_attention`` call
  (the two matrix multiplies of attention take them as inputs; ``sdpa_1``... for further calls in the same
  module's forward), watched like the adds below. The softmax output, the other matmul input, is in [0, 1]
  and needs no calibration;
* ``<module>.output``: a tensor that feeds a residual add, named after the outermost module that
  returned it (``layer1.0`` for the block output that is the next block's identity,
  ``layer2.0.downsample``, ``layer1.0.bn2``). Adds are not modules, so a ``TorchFunctionMode``
  watches ``torch.add`` / ``Tensor.add`` / ``+`` / ``+=`` during the forward: an add of two tensors
  of the same shape that both depend on the model's input is a residual add (a parameter such as a
  position embedding, or a tensor computed from parameters alone, is no activation: were it counted,
  ``cat(cls, x) + pos_embed`` would be a same-shape add at batch 1 only, and the recorded set would
  depend on the batch size), and each input is looked up among the module outputs seen so
  far (every module has a forward hook recording which tensor it returned). The value observed is
  the one the add receives (after any in-place ReLU). An input no module returned is keyed
  ``<add name>.input<k>``;
* adds are named ``<module running the add>.add`` (``add_1``, ``add_2``... for further adds in the
  same module's forward; ``add`` at the top level), as trtbuild's builders name their add layers.
* ``add_sources``: for each input of an add, the Conv/Linear module whose output it is, directly or
  through a BatchNorm (folded into the conv by the builders), else None (an in-place op on the
  tensor, a ReLU say, makes it None). The input that is no such output is the residual (identity)
  input NVIDIA's placement quantizes, whatever the order of the operands (trtbuild.layers.planned).

A module that runs several times per forward contributes all its calls to one key.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from trtbuild.forward_hooks import CaptureOptions, ForwardCapture, ModuleCall

__all__ = ["QUANTIZED_MODULES", "SDPA_OPERANDS", "TensorRecorder", "module_adds", "quantized_modules", "weight_keys"]

#: modules whose input activation (per tensor) and weight (per output channel) are quantized.
QUANTIZED_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d,
                     nn.Linear)
#: the attention operands recorded per F.scaled_dot_product_attention call, in its argument order
SDPA_OPERANDS = ("query", "key", "value")
_ADDS = {torch.add, torch.Tensor.add, torch.Tensor.add_, torch.Tensor.__add__, torch.Tensor.__radd__,
         torch.Tensor.__iadd__}

Observe = Callable[[str, torch.Tensor], None]


def quantized_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of every Conv/Linear of `model`, in definition order."""
    return [(name, m) for name, m in model.named_modules() if name and isinstance(m, QUANTIZED_MODULES)]


def weight_keys(model: nn.Module) -> list[str]:
    """State-dict names of the quantized weights (``<module>.weight``)."""
    return [f"{name}.weight" for name, _ in quantized_modules(model)]


def module_adds(model: nn.Module, *inputs) -> dict[str, str]:
    """{module name: the residual add, named as calibration names it (``features.3.add``), whose
    result the module returned unchanged} from one forward of `model` on `inputs` (no grad): the
    layer a builder names after that add computes exactly the module's output."""
    with torch.no_grad(), TensorRecorder(model, lambda key, x: None) as rec:
        rec.start_batch()
        model(*inputs)
    return dict(rec.module_adds)


class _AddWatcher(TorchFunctionMode):
    def __init__(self, recorder: TensorRecorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.recorder
        if (func in _ADDS and len(args) >= 2 and "alpha" not in kwargs and isinstance(args[0], torch.Tensor)
                and isinstance(args[1], torch.Tensor) and args[0].shape == args[1].shape
                and args[0].is_floating_point() and rec._is_activation(args[0]) and rec._is_activation(args[1])):
            add = rec._on_add(args[0], args[1])
        else:
            add = None
        if (func is F.scaled_dot_product_attention and len(args) >= 3
                and all(isinstance(t, torch.Tensor) and rec._is_activation(t) for t in args[:3])):
            rec._on_sdpa(args[:3])
        result = func(*args, **kwargs)
        if any(rec._is_activation(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)):
            rec._mark_activations(result)
        for t in tree_flatten(result)[0]:  # a tensor returned again was changed in place: no longer what it was
            if isinstance(t, torch.Tensor):
                rec._sources.pop(id(t), None)
                rec._sums.pop(id(t), None)
        if add is not None and isinstance(result, torch.Tensor):
            rec._sums[id(result)] = (weakref.ref(result), add)
        return result


class TensorRecorder:
    """Context manager installing the hooks on `model`; `observe(key, tensor)` is called for each
    quantized tensor (see the module docstring), once per call. Hooks are removed on exit."""

    def __init__(self, model: nn.Module, observe: Observe):
        self.model = model
        self.observe = observe
        self.shapes: dict[str, list[int]] = {}
        self.adds: dict[str, list[str]] = {}
        self.add_sources: dict[str, list[str | None]] = {}
        self._sources: dict[int, tuple[weakref.ref, str]] = {}  # tensor -> the Conv/Linear whose output it is
        self.module_adds: dict[str, str] = {}
        self._sums: dict[int, tuple[weakref.ref, str]] = {}  # tensor -> the residual add whose result it is
        self._hooks: ForwardCapture | None = None
        self._producers: dict[int, tuple[weakref.ref, str]] = {}
        self._activations: dict[int, weakref.ref] = {}  # tensors computed from the model's input
        self._input_hook = None
        self._scope: list[str] = []
        self._add_count: dict[tuple[str, str], int] = {}
        self._mode: _AddWatcher | None = None

    def _is_activation(self, x: torch.Tensor) -> bool:
        ref = self._activations.get(id(x))
        return ref is not None and ref() is x

    def _mark_activations(self, value) -> None:
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor):
                self._activations[id(t)] = weakref.ref(t)

    def _source(self, x) -> str | None:
        found = self._sources.get(id(x)) if isinstance(x, torch.Tensor) else None
        return found[1] if found is not None and found[0]() is x else None

    def _see(self, key: str, x: torch.Tensor) -> None:
        self.shapes.setdefault(key, list(x.shape[1:]))
        self.observe(key, x)

    def _next_name(self, kind: str) -> str:
        """``<scope>.<kind>``, ``<scope>.<kind>_1``...: the n-th `kind` op in the running module's forward."""
        scope = self._scope[-1] if self._scope else ""
        n = self._add_count.get((scope, kind), 0)
        self._add_count[(scope, kind)] = n + 1
        return (f"{scope}." if scope else "") + (kind if n == 0 else f"{kind}_{n}")

    def _on_sdpa(self, operands) -> None:
        name = self._next_name("sdpa")
        for which, x in zip(SDPA_OPERANDS, operands):
            self._see(f"{name}.{which}", x)

    def _on_add(self, a: torch.Tensor, b: torch.Tensor) -> str:
        name = self._next_name("add")
        keys = []
        for k, x in enumerate((a, b)):
            found = self._producers.get(id(x))
            producer = found[1] if found is not None and found[0]() is x else None
            keys.append(f"{producer}.output" if producer else f"{name}.input{k}")
            self._see(keys[-1], x)
        self.adds.setdefault(name, keys)
        self.add_sources.setdefault(name, [self._source(a), self._source(b)])
        return name

    def _enter_module(self, name: str, module: nn.Module, args: tuple) -> None:
        self._scope.append(name)
        if isinstance(module, QUANTIZED_MODULES) and args and isinstance(args[0], torch.Tensor):
            self._see(f"{name}.input", args[0])

    def _leave_module(self, call: ModuleCall) -> None:
        if self._scope and self._scope[-1] == call.name:
            self._scope.pop()
        if isinstance(call.output, torch.Tensor):  # outer modules fire later and overwrite: the outermost wins
            self._producers[id(call.output)] = (weakref.ref(call.output), call.name)
            found = self._sums.get(id(call.output))
            add = found[1] if found is not None and found[0]() is call.output else None
            if add is not None and add.rpartition(".")[0] == call.name:  # one of its own adds, unchanged since
                self.module_adds.setdefault(call.name, add)
            source = (call.name if isinstance(call.module, QUANTIZED_MODULES)
                      else self._source(call.input) if isinstance(call.module, _BatchNorm) else None)
            if source is not None:
                self._sources[id(call.output)] = (weakref.ref(call.output), source)

    def start_batch(self) -> None:
        """Forget the previous forward's tensors and add counters (call before each forward)."""
        self._producers.clear()
        self._activations.clear()
        self._sources.clear()
        self._sums.clear()
        self._scope.clear()
        self._add_count.clear()

    def __enter__(self) -> TensorRecorder:
        self._hooks = ForwardCapture(self.model, CaptureOptions(keep="none"), before=self._enter_module,
                                     after=self._leave_module).__enter__()
        self._input_hook = self.model.register_forward_pre_hook(lambda module, args: self._mark_activations(args))
        self._mode = _AddWatcher(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None
        if self._input_hook is not None:
            self._input_hook.remove()
            self._input_hook = None
        if self._hooks is not None:
            self._hooks.__exit__(*exc)
            self._hooks = None

"""Layerwise parity through debug tensors: the engine checked is the engine deployed.

Marking layer tensors as extra outputs blocks fusions on real TensorRT (NVIDIA/TensorRT#2571,
#2232), so the engine checked is not the one deployed. Instead the layer tensors are marked with
`INetworkDefinition.mark_debug` (build_plan's `debug_tensors`): the engine keeps only the model's
outputs, and an IDebugListener set on the execution context copies each debug tensor when the
engine computes it (TensorRT 10.x/11.x, TensorRT-RTX and the reference backend alike).

A mapped tensor that was marked but never reported (on real TensorRT: fused away or optimised
away) gets a row "fused away (not compared)" and is listed in report.meta["fused_away"].
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from trtbuild.reference.debug import tensor_at

from .layerwise import FUSED_AWAY  # noqa: F401 - the row note, re-exported

VIA_DEBUG, VIA_UNFUSED, VIA_OUTPUTS = "debug tensors", "unfused debug tensors", "outputs"
#: debug tensors: mark_debug on each mapped tensor (exact names; on TensorRT it keeps them from being
#: fused); unfused debug tensors: mark_unfused_tensors_as_debug_tensors (fusions untouched: those fused
#: away are not reported); outputs: extra engine outputs (the old way)
LAYERWISE_VIA = (VIA_DEBUG, VIA_UNFUSED, VIA_OUTPUTS)


def check_layerwise_via(via: str) -> str:
    if via not in LAYERWISE_VIA:
        raise ValueError(f"layerwise_via {via!r} is not one of {', '.join(map(repr, LAYERWISE_VIA))}")
    return via


def debug_listener(trt):
    """An IDebugListener of backend `trt` collecting a copy of each debug tensor it is given:
    `.tensors` {name: tensor (the last execution's)}, `.calls` {name: count}, `.order` (names in
    call order), `.errors` (exceptions raised while copying, which TensorRT would swallow)."""

    class TensorCollector(trt.IDebugListener):
        def __init__(self):
            trt.IDebugListener.__init__(self)
            self.tensors: dict[str, torch.Tensor] = {}
            self.calls: dict[str, int] = {}
            self.order: list[str] = []
            self.errors: list[str] = []

        def process_debug_tensor(self, addr, location, type, shape, name, stream):  # noqa: A002 - TensorRT's names
            self.calls[name] = self.calls.get(name, 0) + 1
            self.order.append(name)
            try:
                view = tensor_at(addr, location, type, shape)
                if view.is_cuda and stream:  # copy on the engine's stream, after the kernel that wrote it
                    with torch.cuda.stream(torch.cuda.ExternalStream(int(stream), device=view.device)):
                        self.tensors[name] = view.clone()
                else:
                    self.tensors[name] = view.clone()
            except Exception as e:  # noqa: BLE001 - an exception must not cross into TensorRT
                self.errors.append(f"debug tensor '{name}' ({getattr(type, 'name', type)} {tuple(shape)}): "
                                   f"{type_name(e)}: {e}")
                return False
            return True

    return TensorCollector()


def type_name(e: BaseException) -> str:
    return type(e).__name__


def run_with_debug_tensors(engine, feeds: Mapping[str, torch.Tensor], names: Sequence[str], unfused: bool = False):
    """Run trtbuild Engine `engine` on `feeds` with the debug state of each debug tensor in `names`
    on (`unfused`: the unfused tensors' debug state instead) and a collecting listener set; return
    (outputs, {name: tensor} reported, the listener). ValueError naming the tensor if `names` holds
    one the engine has not marked with mark_debug, or if a reported tensor could not be copied."""
    ctx = engine.context
    listener = debug_listener(engine.trt)
    missing = [] if unfused else [n for n in names if not engine._engine.is_debug_tensor(n)]
    if missing:
        raise ValueError(f"engine {engine.name} has no debug tensors named {missing}; build it with "
                         "debug_tensors including them")
    ctx.set_debug_listener(listener)
    for n in [] if unfused else names:
        ctx.set_tensor_debug_state(n, True)
    if unfused:  # touched only when asked for, so a TensorRT release without it still runs the mark_debug path
        ctx.unfused_tensors_debug_state = True
    try:
        outputs = engine.run(feeds, synchronize=True)
    finally:
        ctx.set_all_tensors_debug_state(False)
        if unfused:
            ctx.unfused_tensors_debug_state = False
    if listener.errors:
        raise ValueError(f"engine {engine.name}: {'; '.join(listener.errors)}")
    return outputs, dict(listener.tensors), listener

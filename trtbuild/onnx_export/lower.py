"""Dispatch: each TensorRT layer type's lowering is registered on its entry of the reference's layer
registry (`trtbuild.reference.ops.lowers`) by the lower_* modules of this package, every one of which is
imported here (a new lowering is a new lower_* module); see docs/onnx.md for the table."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from trtbuild.reference.ops import op_for

from .graph import GraphBuilder, OnnxExportError

#: {Region class (trtbuild/reference/ops/_control.py): fn(g, region, ctx)}: how a control-flow construct is
#: lowered as a whole (ONNX If, Loop), filled by lower_control.py
REGION_LOWERINGS: dict = {}

#: the modules that register lowerings
LOWERING_MODULES = tuple(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                         if m.name.startswith("lower_"))
for _module in LOWERING_MODULES:
    importlib.import_module(f"{__package__}.{_module}")


def lower_layer(g: GraphBuilder, layer, constant_is_output: bool = False) -> None:
    """Append the ONNX nodes of one layer. Its input tensors must already be bound in `g`.
    `constant_is_output`: one of the layer's outputs is a graph output (a constant is then lowered
    to a node, since a graph output cannot be an initializer)."""
    ltype = layer._TYPE  # not .type: IActivationLayer.type / IPoolingLayer.type shadow it, as in TensorRT
    op = op_for(ltype)
    fn = op.lower if op is not None else None
    if fn is None:
        raise OnnxExportError(f"layer '{layer.name}': layer type {getattr(ltype, 'name', ltype)} has no ONNX lowering")
    ins = [g.name_of(t) if t is not None else None for t in layer._inputs]  # unset optional inputs: None
    outs = [g.name_of(t) for t in layer._outputs]
    g.begin_layer(layer, outs, writes_graph_output=constant_is_output)
    try:
        fn(g, layer, ins, outs)
    finally:
        g.begin_layer(None, [])


class StepContext:
    """What a construct's lowering needs besides its Region: the network's layers (as the Region indexes
    them), the tensors by id, the graph outputs' ids, and lower_steps for the layers inside it."""

    def __init__(self, layers: list, output_ids: set):
        self.layers, self.output_ids = layers, output_ids
        self.tensors = {id(t): t for layer in layers for t in list(layer._inputs) + list(layer._outputs)
                        if t is not None}

    def lower_steps(self, g: GraphBuilder, steps: list) -> None:
        for step in steps:
            if isinstance(step, int):
                layer = self.layers[step]
                lower_layer(g, layer, constant_is_output=any(id(t) in self.output_ids for t in layer._outputs))
            else:
                REGION_LOWERINGS[type(step)](g, step, self)

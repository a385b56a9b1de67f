"""Lowering of control flow: an IIfConditional becomes an ONNX If whose then/else subgraphs hold the layers of
each branch (they read outer values by name, as ONNX subgraphs may). The boundary layers have no node of
their own: a conditional input is an Identity in the outer graph, the condition is the If's input, and the
output layers are the If's outputs."""

from __future__ import annotations

from onnx import helper

from trtbuild.reference.enums import LayerType
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.conditional import ConditionalRegion

from .graph import GraphBuilder, OnnxExportError, onnx_type
from .lower import REGION_LOWERINGS


def value_info(name: str, tensor, shape=None):
    shape = tuple(tensor.shape) if shape is None else shape
    return helper.make_tensor_value_info(name, onnx_type(tensor.dtype, f"tensor '{tensor.name}'"),
                                         [d if d >= 0 else None for d in shape])


def subgraph(sub: GraphBuilder, ctx, units: list, name: str, inputs: list, outputs: list):
    """The GraphProto of `units` (direct steps of a construct) lowered into `sub`; their tensors' value_info
    goes with it and out of the outer graph's."""
    region_nodes = [i for u in units for i in u[1]]
    infos = []
    for i in region_nodes:
        for t in ctx.layers[i]._outputs:
            sub.nested_values.add(id(t))
            if id(t) in sub._tensor_names:
                infos.append(value_info(sub.name_of(t), t))
    return helper.make_graph(sub.nodes, name, inputs, outputs, value_info=infos)


def lower_conditional(g: GraphBuilder, region: ConditionalRegion, ctx) -> None:
    boundary = [step for unit, step in region.units if unit in region.nodes and unit not in region.exits]
    ctx.lower_steps(g, boundary)
    exits = sorted(region.exits)
    graphs = {}
    for taken, kind in ((0, "then"), (1, "else")):
        sub = g.nested()
        units = [(u, region.nodes_of[u], step) for u, step in region.units
                 if u not in region.nodes and region.branch.get(u) == taken]
        ctx.lower_steps(sub, [step for _, _, step in units])
        outs = []
        for k in exits:
            t, out = ctx.tensors[region.exits[k].inputs[taken]], ctx.layers[k].get_output(0)
            name = sub._unique(f"{g.name_of(out)}/{kind}", sub._values)
            sub.add("Identity", [sub.name_of(t)], [name])
            outs.append(value_info(name, out, tuple(t.shape)))
        graphs[f"{kind}_branch"] = subgraph(sub, ctx, [(u, n) for u, n, _ in units],
                                            f"{region.what} {kind}", [], outs)
    layer = ctx.layers[exits[0]]
    names = [g.name_of(ctx.layers[k].get_output(0)) for k in exits]
    g.begin_layer(layer, names)
    try:
        g.add("If", [g.name_of(ctx.tensors[region.condition])], names, **graphs)
    finally:
        g.begin_layer(None, [])


REGION_LOWERINGS[ConditionalRegion] = lower_conditional


@lowers(LayerType.CONDITIONAL_INPUT)
def lower_conditional_input(g: GraphBuilder, layer, ins, outs):
    g.add("Identity", ins[:1], outs)


@lowers(LayerType.CONDITION)
def lower_condition(g: GraphBuilder, layer, ins, outs):
    """Nothing: the condition tensor is the If node's input."""


@lowers(LayerType.CONDITIONAL_OUTPUT)
def lower_conditional_output(g: GraphBuilder, layer, ins, outs):
    raise OnnxExportError(f"layer '{layer.name}': a conditional's output layer is lowered with its conditional "
                          "(an ONNX If), not on its own")

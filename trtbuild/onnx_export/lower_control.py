"""Lowering of control flow: an IIfConditional becomes an ONNX If whose then/else subgraphs hold the layers of
each branch (they read outer values by name, as ONNX subgraphs may). The boundary layers have no node of
their own: a conditional input is an Identity in the outer graph, the condition is the If's input, and the
output layers are the If's outputs. An ILoop becomes an ONNX Loop (see lower_loop)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from trtbuild.reference.enums import DataType, LayerType, LoopOutput
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.conditional import ConditionalRegion
from trtbuild.reference.ops.loop import LoopRegion

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


# -- loops -------------------------------------------------------------------------------------------------------
def lower_loop(g: GraphBuilder, region: LoopRegion, ctx) -> None:
    """An ONNX Loop: M is the COUNT trip limit (as INT64), the condition the WHILE trip limit (computed from
    the initial values before the Loop and from the next values in the body), the carried values are the
    recurrences, each iterator is a Gather of iteration i (M-1-i with reverse), and each CONCATENATE/REVERSE
    output a scan output (stacked on axis 0 by ONNX, then reversed with a negative-step Slice and moved to its
    axis)."""
    nodes, layers = region.nodes, ctx.layers
    first = layers[min(nodes)]
    condition = ""
    if region.while_ is not None:  # the condition of iteration 0, from the initial values
        condition = _condition_at(g, region, ctx, [ctx.tensors[nodes[k].inputs[0]] for k in region.recurrences],
                                  "initial")
    g.begin_layer(first, [])
    try:
        m = ""
        if region.count is not None:
            m = g.name_of(ctx.tensors[region.count])
            if ctx.tensors[region.count].dtype != DataType.INT64:
                m = g.add("Cast", [m], None, to=TensorProto.INT64)
        body = g.nested()
        body.begin_layer(first, [])
        i, cond_in = body.tmp("iteration"), body.tmp("condition")
        inputs = [helper.make_tensor_value_info(i, TensorProto.INT64, []),
                  helper.make_tensor_value_info(cond_in, TensorProto.BOOL, [])]
        carried = [layers[k].get_output(0) for k in region.recurrences]
        inputs += [value_info(g.name_of(t), t) for t in carried]
        for k in region.iterators:
            layer = layers[k]
            index = i
            if layer.reverse:
                last = body.add("Sub", [m, body.const(np.array(1, np.int64), TensorProto.INT64, "one")])
                index = body.add("Sub", [last, i])
            body.add("Gather", [g.name_of(layer.get_input(0)), index], [g.name_of(layer.get_output(0))],
                     axis=layer.axis)
    finally:
        g.begin_layer(None, [])
    units = [(u, region.nodes_of[u], step) for u, step in region.units if u not in nodes]
    ctx.lower_steps(body, [step for _, _, step in units])
    if region.while_ is not None:  # the condition of the next iteration, from the next values
        going_on = _condition_at(body, region, ctx, [ctx.tensors[nodes[k].inputs[1]] for k in region.recurrences],
                                 "next")
    body.begin_layer(first, [])
    if region.while_ is None:
        # TensorRT's parser does not register the body's condition input where the Loop's is empty: the
        # condition goes on from an outer constant instead
        going_on = body.const(np.array(True), TensorProto.BOOL, "true")
    cond_out = body.add("Identity", [going_on], [body.tmp("condition_out")])
    outputs = [helper.make_tensor_value_info(cond_out, TensorProto.BOOL, [])]
    for k in region.recurrences:
        t, nxt = layers[k].get_output(0), ctx.tensors[nodes[k].inputs[1]]
        name = body.add("Identity", [body.name_of(nxt)], [body.tmp("next")])
        outputs.append(value_info(name, t))
    scans = [k for k in region.outputs if region.last_of[k] is None]
    for k in scans:
        t = layers[k].get_input(0)
        name = body.add("Identity", [body.name_of(t)], [body.tmp("scan")])
        outputs.append(value_info(name, t))
    graph = subgraph(body, ctx, [(u, n) for u, n, _ in units] + [(k, [k]) for k in region.iterators],
                     f"{region.what} body", inputs, outputs)
    g.begin_layer(first, [])
    try:
        finals = [g.tmp("final") for _ in region.recurrences]
        stacked = [g.tmp("stacked") for _ in scans]
        g.add("Loop", [m, condition, *[g.name_of(ctx.tensors[nodes[k].inputs[0]]) for k in region.recurrences]],
              finals + stacked, body=graph)
        for k in region.outputs:
            layer, out = layers[k], g.name_of(layers[k].get_output(0))
            if k not in scans:
                g.add("Identity", [finals[region.recurrences.index(region.last_of[k])]], [out])
                continue
            value = stacked[scans.index(k)]
            if layer.kind == LoopOutput.REVERSE:
                big = np.iinfo(np.int64).max
                value = g.add("Slice", [value, g.ints([-1]), g.ints([-big]), g.ints([0]), g.ints([-1])])
            rank = len(layer.get_output(0).shape)
            perm = list(range(1, layer.axis + 1)) + [0] + list(range(layer.axis + 1, rank))
            g.add("Transpose", [value], [out], perm=perm) if layer.axis else g.add("Identity", [value], [out])
    finally:
        g.begin_layer(None, [])


def _condition_at(g: GraphBuilder, region: LoopRegion, ctx, values: list, what: str) -> str:
    """The WHILE condition computed once more in `g`, with each recurrence reading `values` (its initial or next
    value): TensorRT checks it before each iteration, an ONNX Loop takes it as an input for the first iteration
    and as a body output for the next. The layers it reads are lowered again under fresh names."""
    rebound = {id(ctx.layers[k].get_output(0)): g.name_of(v) for k, v in zip(region.recurrences, values)}
    for i in region.condition_nodes:
        for t in ctx.layers[i]._outputs:
            rebound[id(t)] = g._unique(f"{g.name_of(t)}/{what}", g._values)
    saved = {key: g._tensor_names.get(key) for key in rebound}
    g._tensor_names.update(rebound)
    try:
        ctx.lower_steps(g, region.condition_steps)
        return g.name_of(ctx.tensors[region.while_])
    finally:
        for key, name in saved.items():
            g._tensor_names[key] = name


REGION_LOWERINGS[LoopRegion] = lower_loop


def _inside_only(what: str):
    def lower(g: GraphBuilder, layer, ins, outs):
        raise OnnxExportError(f"layer '{layer.name}': a loop's {what} is lowered with its loop (an ONNX Loop), not "
                              "on its own")
    return lower


for _type, _what in ((LayerType.TRIP_LIMIT, "trip limit"), (LayerType.RECURRENCE, "recurrence"),
                     (LayerType.ITERATOR, "iterator"), (LayerType.LOOP_OUTPUT, "output layer")):
    lowers(_type)(_inside_only(_what))

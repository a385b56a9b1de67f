"""export_onnx: lower a network recorded on the reference backend to an ONNX model."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import onnx
from onnx import helper

from trtbuild import __version__
from trtbuild.reference.core import NetworkError
from trtbuild.reference.enums import LayerType
from trtbuild.reference.ops._control import network_steps, tensors_inside

from .graph import GraphBuilder, OnnxExportError, onnx_type
from .lower import StepContext
from .lower_quant import needs_opset

#: Default opset: the lowest that has LayerNormalization, well inside the range TensorRT 10.x's
#: ONNX parser reads (9..20 for 10.0, 9..24 for 10.15).
DEFAULT_OPSET = 17
MIN_OPSET, MAX_OPSET = 13, 21

#: Callables `observer(network, model)` that export_onnx calls with every model it returns (after
#: the checks, before writing). The tests register one that has TensorRT-RTX's ONNX parser read
#: every export (tests/helpers/onnx_rtx.py); see `observe_exports`.
_OBSERVERS: list = []


@contextlib.contextmanager
def observe_exports(observer):
    """Within the block, export_onnx calls `observer(network, model)` with each model it returns;
    an exception the observer raises propagates out of export_onnx."""
    _OBSERVERS.append(observer)
    try:
        yield observer
    finally:
        _OBSERVERS.remove(observer)


def _value_info(name: str, tensor, dims_named: bool = False) -> onnx.ValueInfoProto:
    shape = []
    for i, d in enumerate(tensor.shape):
        if d >= 0:
            shape.append(int(d))
        elif dims_named:
            shape.append(tensor.get_dimension_name(i) or f"{name}_dim{i}")
        else:
            shape.append(None)
    return helper.make_tensor_value_info(name, onnx_type(tensor.dtype, f"tensor '{tensor.name}'"), shape)


def _layers_in_order(network, roots) -> list:
    """Layers producing `roots`, with everything they depend on, in dependency order. A construct's
    boundary layers come together (`_companions`: an if-conditional's condition has no outputs); a
    loop's next-iteration inputs (`_BACK_EDGES`) are visited after the layer reading them."""
    produced_by = {id(t): layer for layer in network._layers for t in layer._outputs}
    order, state = [], {}
    pending = [produced_by[id(r)] for r in roots if id(r) in produced_by]
    while pending:
        stack = [(pending.pop(0), False)]
        while stack:
            layer, done = stack.pop()
            if done:
                if state.get(id(layer)) != 2:
                    state[id(layer)] = 2
                    order.append(layer)
                    back = [layer._inputs[i] for i in getattr(layer, "_BACK_EDGES", ()) if i < len(layer._inputs)]
                    pending += [produced_by[id(t)] for t in back if id(t) in produced_by]
                    pending += getattr(layer, "_companions", list)()
                continue
            if state.get(id(layer)):
                continue
            state[id(layer)] = 1
            stack.append((layer, True))
            back = getattr(layer, "_BACK_EDGES", ())
            for i, t in reversed(list(enumerate(layer._inputs))):
                if i in back:
                    continue
                dep = produced_by.get(id(t))
                if dep is not None and not state.get(id(dep)):
                    stack.append((dep, False))
    return order


def _check_network(network):
    from trtbuild import reference

    if not isinstance(network, reference.INetworkDefinition):
        raise OnnxExportError(f"export_onnx reads networks built on trtbuild.reference, got {type(network).__name__}; "
                              "build the network with `import trtbuild.reference as trt` (the same builder "
                              "code runs there)")


def _used(initializers, nodes, graph_outputs) -> list:
    """The initializers a node reads or that are graph outputs. A lowering may replace a constant by
    a reshaped copy (normalization scale/bias: TensorRT's parser wants them as initializers of the
    parameter's shape), leaving the original unread; onnxruntime warns about each one it removes."""
    def inputs(nodes):  # the subgraphs of If and Loop nodes read outer values too
        for node in nodes:
            yield from node.input
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from inputs(attr.g.node)
                    yield from (o.name for o in attr.g.output)

    read = set(inputs(nodes)) | {o.name for o in graph_outputs}
    return [t for t in initializers if t.name in read]


def export_onnx(network, path: str | os.PathLike | None = None, opset: int | None = None, *,
                all_outputs: bool = False, check: bool = True, graph_name: str | None = None) -> onnx.ModelProto:
    """Lower `network` (a trtbuild.reference INetworkDefinition) to an ONNX ModelProto.

    Graph inputs/outputs are the network's inputs and marked outputs, with the same names; every
    other layer output becomes a value of the same name (uniquified where the network repeats a
    name), with its shape and type recorded as value_info. With `all_outputs=True` every layer
    output is also a graph output (for layerwise comparison). Layers that feed no output are left
    out, as TensorRT prunes them. With `check` the model must pass onnx.checker (full_check) and
    strict shape inference, whose inferred shapes must agree with the network's. If `path` is
    given the model is written there atomically. Raises OnnxExportError naming the layer.
    `opset` None: DEFAULT_OPSET, or what its Q/DQ layers need (lower_quant.needs_opset: 19 for FP8, 21 for INT4
    and block scales).
    """
    _check_network(network)
    if opset is None:
        opset = needs_opset(network) or DEFAULT_OPSET
    if not MIN_OPSET <= int(opset) <= MAX_OPSET:
        raise OnnxExportError(f"opset {opset} is not supported: choose {MIN_OPSET}..{MAX_OPSET} "
                              f"(default {DEFAULT_OPSET}; TensorRT 10.0's ONNX parser reads opsets up to 20)")
    outputs = list(network._outputs)
    if all_outputs:  # not the tensors inside an if-conditional or a loop: those live in a subgraph
        inside = tensors_inside(network._layers) if network._constructs else set()
        outputs += [t for layer in network._layers for t in layer._outputs if t not in outputs and id(t) not in inside]
    if not outputs:
        raise OnnxExportError(f"network '{network.name}' has no outputs: mark at least one (or pass all_outputs=True)")
    g = GraphBuilder(int(opset))
    inputs = [g.bind(t) for t in network._inputs]
    # a layer without outputs (an assertion) is kept, as TensorRT keeps it; its lowering decides what it becomes
    checks = [layer for layer in network._layers if not layer._outputs]
    layers = _layers_in_order(network, outputs + [t for layer in checks for t in layer._inputs if t is not None])
    seen = {id(layer) for layer in layers}  # a loop's trip limit (no outputs) already came with its loop
    layers += [layer for layer in checks if id(layer) not in seen]
    for layer in layers:
        try:
            layer._infer()
        except NetworkError as e:
            raise OnnxExportError(f"the network is not valid: {e}") from None
        for t in layer._outputs:
            g.bind(t)
    output_ids = {id(t) for t in outputs}
    try:  # if-conditionals and loops: their layers are lowered into the subgraphs of an ONNX If or Loop
        steps = network_steps(network, layers) if network._constructs else list(range(len(layers)))
    except NetworkError as e:
        raise OnnxExportError(f"the network is not valid: {e}") from None
    StepContext(layers, output_ids).lower_steps(g, steps)
    graph_inputs = [_value_info(n, t, dims_named=True) for n, t in zip(inputs, network._inputs)]
    graph_outputs = [_value_info(g.name_of(t), t) for t in outputs]
    value_info = [_value_info(g.name_of(t), t) for layer in layers for t in layer._outputs
                  if id(t) not in output_ids and layer._TYPE != LayerType.CONSTANT and id(t) not in g.nested_values]
    graph = helper.make_graph(g.nodes, graph_name or network.name, graph_inputs, graph_outputs,
                              _used(g.initializers, g.nodes, graph_outputs), value_info=value_info)
    opsets = [helper.make_opsetid("", int(opset))] + [helper.make_opsetid(d, v) for d, v in sorted(g.domains.items())]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="trtbuild", producer_version=__version__,
                              doc_string=f"trtbuild ONNX export of network '{network.name}' (reference backend)")
    # the lowest IR version that holds the opset, so older readers (TensorRT's parser) accept it
    model.ir_version = helper.find_min_ir_version_for([o for o in opsets if o.domain == ""])
    helper.set_model_props(model, {"trtbuild.backend": "reference", "trtbuild.network": network.name})
    if check:
        check_model(model)
    for observer in list(_OBSERVERS):
        observer(network, model)
    if path is not None:
        save_model(model, path)
    return model


def check_model(model: onnx.ModelProto) -> None:
    """onnx.checker (full_check) and strict shape inference; raise OnnxExportError with the reason."""
    try:
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise OnnxExportError(f"the exported model fails ONNX validation: {e}") from None


def save_model(model: onnx.ModelProto, path: str | os.PathLike) -> Path:
    """Write `model` to `path` atomically (temporary file in the same folder, then rename)."""
    from trtbuild.files.atomic import atomic_write
    from trtbuild.weights.errors import WeightsWriteError

    data = model.SerializeToString()
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data), WeightsWriteError)

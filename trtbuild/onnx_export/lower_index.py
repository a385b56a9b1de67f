"""Lowering of the layers added for TensorRT 11's indexing and selection: Squeeze, Unsqueeze (ONNX
Squeeze/Unsqueeze, axes from the layer's constant axes), ParametricReLU (PRelu),
Select (Where), Gather (Gather, GatherElements, GatherND), Cumulative (CumSum),
OneHot."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from trtbuild.reference.enums import DataType, GatherMode, LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder, OnnxExportError, onnx_type


def _axes_node(g: GraphBuilder, op: str, x: str, axes: list[int], outs):
    """Squeeze/Unsqueeze with `axes`: an INT64 input from opset 13, an attribute before."""
    if g.opset >= 13:
        g.add(op, [x, g.ints(axes, "axes")], outs)
    else:
        g.add(op, [x], outs, axes=list(axes))


@lowers(LayerType.SQUEEZE)
def lower_squeeze(g: GraphBuilder, layer, ins, outs):
    """Without axes, TensorRT removes the statically unit dimensions: named explicitly, so a dynamic
    dimension is kept as there."""
    layer._infer()  # resolves the constant axes into params
    shape = tuple(layer.get_input(0).shape)
    axes = layer._params["axes"]
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    _axes_node(g, "Squeeze", ins[0], [a % len(shape) for a in axes], outs)


@lowers(LayerType.UNSQUEEZE)
def lower_unsqueeze(g: GraphBuilder, layer, ins, outs):
    layer._infer()
    rank = len(layer.get_input(0).shape) + len(layer._params["axes"])
    _axes_node(g, "Unsqueeze", ins[0], [a % rank for a in layer._params["axes"]], outs)


@lowers(LayerType.PARAMETRIC_RELU)
def lower_parametric_relu(g: GraphBuilder, layer, ins, outs):
    """ONNX PRelu broadcasts the slope unidirectionally to the input, as TensorRT does."""
    g.add("PRelu", ins[:2], outs)


@lowers(LayerType.SELECT)
def lower_select(g: GraphBuilder, layer, ins, outs):
    """ONNX Where broadcasts its three inputs multidirectionally, as TensorRT's select does."""
    g.add("Where", ins[:3], outs)


@lowers(LayerType.GATHER)
def lower_gather(g: GraphBuilder, layer, ins, outs):
    """DEFAULT -> Gather, ELEMENT -> GatherElements, ND -> GatherND with batch_dims = num_elementwise_dims.
    DEFAULT with num_elementwise_dims = 1 has no single ONNX operator: refused in one sentence."""
    p = layer._params
    mode, axis, ned = GatherMode(p["mode"]), p["axis"], p["num_elementwise_dims"]
    if mode == GatherMode.ELEMENT:
        g.add("GatherElements", ins[:2], outs, axis=axis)
    elif mode == GatherMode.ND:
        idx = ins[1]
        if layer.get_input(1).dtype != DataType.INT64:  # ONNX GatherND takes INT64 indices only
            idx = g.add("Cast", [idx], None, to=TensorProto.INT64)
        g.add("GatherND", [ins[0], idx], outs, batch_dims=ned)
    elif ned == 0:
        g.add("Gather", ins[:2], outs, axis=axis)
    else:
        raise OnnxExportError(f"layer '{layer.name}': a GatherMode.DEFAULT gather with num_elementwise_dims = 1 has "
                              "no ONNX equivalent (ONNX Gather has no batch dimensions)")


@lowers(LayerType.CUMULATIVE)
def lower_cumulative(g: GraphBuilder, layer, ins, outs):
    """ONNX CumSum with the constant axis; HALF/BF16 summed in FLOAT (as the reference does) and cast back."""
    layer._infer()  # resolves the constant axis into params
    dt = layer.get_input(0).dtype
    axis = g.const(np.asarray(layer._params["axis"], np.int64), TensorProto.INT64, "axis")
    attrs = {"exclusive": int(layer._params["exclusive"]), "reverse": int(layer._params["reverse"])}
    if dt in (DataType.HALF, DataType.BF16):
        y = g.add("CumSum", [g.to_float(ins[0], dt), axis], None, **attrs)
        g.add("Cast", [y], outs, to=onnx_type(dt, layer.name))
    else:
        g.add("CumSum", [ins[0], axis], outs, **attrs)


@lowers(LayerType.ONE_HOT)
def lower_one_hot(g: GraphBuilder, layer, ins, outs):
    """ONNX OneHot (same index rules: negative from the end, out of range all off), INT64 indices and depth;
    HALF/BF16 values through FLOAT."""
    layer._infer()  # resolves the constant depth into params
    idx = ins[0]
    if layer.get_input(0).dtype != DataType.INT64:
        idx = g.add("Cast", [idx], None, to=TensorProto.INT64)
    depth = g.const(np.asarray(layer._params["depth"], np.int64), TensorProto.INT64, "depth")
    dt = layer.get_input(1).dtype
    if dt in (DataType.HALF, DataType.BF16):
        y = g.add("OneHot", [idx, depth, g.to_float(ins[1], dt)], None, axis=layer._params["axis"])
        g.add("Cast", [y], outs, to=onnx_type(dt, layer.name))
    else:
        g.add("OneHot", [idx, depth, ins[1]], outs, axis=layer._params["axis"])

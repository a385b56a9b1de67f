"""Lowering of the pointwise and reduction layers: Scale, Reduce, ElementWise, Unary, Activation,
SoftMax, Cast, Identity, Constant.

Each function is `lower_<type>(g, layer, ins, outs)`: `ins`/`outs` are the ONNX value names of the
layer's inputs/outputs; the function appends nodes to `g` that write exactly `outs`.
A layer lowered to several arithmetic nodes computes in FLOAT and casts its result back for
HALF/BF16 inputs, as the reference (and TensorRT's own kernels) round once per layer.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from trtbuild.reference.enums import (ActivationType, DataType, ElementWiseOperation, LayerType, ReduceOperation,
                                      ScaleMode, UnaryOperation)
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.common import axes_of

from .graph import GraphBuilder, onnx_type


@lowers(LayerType.SCALE)
def lower_scale(g: GraphBuilder, layer, ins, outs):
    """y = (x * scale + shift) ** power, each term only if its weights are non-empty."""
    x = layer.get_input(0)
    dt, shape, rank = x.dtype, tuple(x.shape), len(x.shape)
    mode, axis = ScaleMode(layer._params["mode"]), layer._params["channel_axis"] % rank  # negative: from the end
    if mode == ScaleMode.UNIFORM:
        wshape = [1] * rank
    elif mode == ScaleMode.CHANNEL:
        wshape = [1] * axis + [shape[axis]] + [1] * (rank - axis - 1)
    else:
        wshape = [1] * axis + list(shape[axis:])
    terms = [(k, layer._weights[k].numpy()) for k in ("scale", "shift", "power") if layer._weights[k].size]
    if not terms:
        g.add("Identity", ins, outs)
        return
    ops = {"scale": "Mul", "shift": "Add", "power": "Pow"}
    native = dt == DataType.FLOAT or len(terms) == 1
    cur = ins[0] if native else g.to_float(ins[0], dt)
    last = outs[0] if native else g.float_target(outs[0], dt)
    wtype = onnx_type(dt, layer.name) if native else TensorProto.FLOAT
    for i, (key, arr) in enumerate(terms):
        c = g.const(arr.reshape(wshape), wtype, key)
        cur = g.add(ops[key], [cur, c], [last] if i == len(terms) - 1 else None)
    if not native:
        g.from_float(cur, outs[0], dt)


_REDUCE = {ReduceOperation.SUM: "ReduceSum", ReduceOperation.PROD: "ReduceProd", ReduceOperation.MAX: "ReduceMax",
           ReduceOperation.MIN: "ReduceMin", ReduceOperation.AVG: "ReduceMean"}


def reduce_node(g: GraphBuilder, op: str, x: str, axes: list[int], keepdims: bool, out=None) -> str:
    """A Reduce* node: axes as an input from opset 18 (13 for ReduceSum), else as an attribute."""
    if g.opset >= 18 or (op == "ReduceSum" and g.opset >= 13):
        return g.add(op, [x, g.ints(axes, "axes")], out, keepdims=int(keepdims))
    return g.add(op, [x], out, axes=list(axes), keepdims=int(keepdims))


@lowers(LayerType.REDUCE)
def lower_reduce(g: GraphBuilder, layer, ins, outs):
    x = layer.get_input(0)
    op, keep = ReduceOperation(layer._params["op"]), bool(layer._params["keep_dims"])
    axes = axes_of(layer._params["axes"], len(x.shape))
    dt = x.dtype
    if op == ReduceOperation.AVG and dt in (DataType.INT32, DataType.INT64):
        # integer mean rounds down (floor), as TensorRT's integer division does for the reference
        count = math.prod(x.shape[a] for a in axes)
        if count <= 0:
            g.fail("integer AVG reduction needs the reduced dimensions known at build time")
        total = reduce_node(g, "ReduceSum", ins[0], axes, keep)
        floor_div_int(g, total, g.const(np.array(count), onnx_type(dt, layer.name), "count"), outs[0])
        return
    if dt in (DataType.HALF, DataType.BF16) and op in (ReduceOperation.SUM, ReduceOperation.PROD, ReduceOperation.AVG):
        y = reduce_node(g, _REDUCE[op], g.to_float(ins[0], dt), axes, keep, g.float_target(outs[0], dt))
        g.from_float(y, outs[0], dt)
        return
    reduce_node(g, _REDUCE[op], ins[0], axes, keep, outs)


def floor_div_int(g: GraphBuilder, a: str, b: str, out: str) -> str:
    """Integer floor division: (a - mod(a, b)) / b with Python-style mod (sign of b) is exact."""
    rem = g.add("Mod", [a, b], None, fmod=0)
    return g.add("Div", [g.add("Sub", [a, rem]), b], [out])


_ELEMENTWISE = {
    ElementWiseOperation.SUM: "Add", ElementWiseOperation.PROD: "Mul", ElementWiseOperation.MAX: "Max",
    ElementWiseOperation.MIN: "Min", ElementWiseOperation.SUB: "Sub", ElementWiseOperation.DIV: "Div",
    ElementWiseOperation.POW: "Pow", ElementWiseOperation.AND: "And", ElementWiseOperation.OR: "Or",
    ElementWiseOperation.XOR: "Xor", ElementWiseOperation.EQUAL: "Equal", ElementWiseOperation.GREATER: "Greater",
    ElementWiseOperation.LESS: "Less",
}


@lowers(LayerType.ELEMENTWISE)
def lower_elementwise(g: GraphBuilder, layer, ins, outs):
    op = ElementWiseOperation(layer._params["op"])
    dt = layer.get_input(0).dtype
    if op != ElementWiseOperation.FLOOR_DIV:
        g.add(_ELEMENTWISE[op], ins, outs)
    elif dt in (DataType.INT32, DataType.INT64, DataType.INT8):
        floor_div_int(g, ins[0], ins[1], outs[0])
    else:
        q = g.add("Div", [g.to_float(ins[0], dt), g.to_float(ins[1], dt)])
        g.from_float(g.add("Floor", [q], g.float_target(outs[0], dt)), outs[0], dt)


_UNARY = {
    UnaryOperation.EXP: "Exp", UnaryOperation.LOG: "Log", UnaryOperation.SQRT: "Sqrt",
    UnaryOperation.RECIP: "Reciprocal",
    UnaryOperation.ABS: "Abs", UnaryOperation.NEG: "Neg", UnaryOperation.SIN: "Sin", UnaryOperation.COS: "Cos",
    UnaryOperation.TAN: "Tan", UnaryOperation.SINH: "Sinh", UnaryOperation.COSH: "Cosh", UnaryOperation.ASIN: "Asin",
    UnaryOperation.ACOS: "Acos", UnaryOperation.ATAN: "Atan", UnaryOperation.ASINH: "Asinh",
    UnaryOperation.ACOSH: "Acosh", UnaryOperation.ATANH: "Atanh", UnaryOperation.CEIL: "Ceil",
    UnaryOperation.FLOOR: "Floor", UnaryOperation.ERF: "Erf", UnaryOperation.NOT: "Not", UnaryOperation.SIGN: "Sign",
    UnaryOperation.ROUND: "Round", UnaryOperation.ISINF: "IsInf", UnaryOperation.ISNAN: "IsNaN",
}


@lowers(LayerType.UNARY)
def lower_unary(g: GraphBuilder, layer, ins, outs):
    g.add(_UNARY[UnaryOperation(layer._params["op"])], ins, outs)


def _const(g, value, rank):
    return g.const(np.full([1] * rank, value, dtype=np.float32), TensorProto.FLOAT, "const")


@lowers(LayerType.ACTIVATION)
def lower_activation(g: GraphBuilder, layer, ins, outs):
    """One ONNX op where ONNX defines the same function, else a FLOAT decomposition."""
    x = layer.get_input(0)
    t, a, b = ActivationType(layer._params["type"]), layer._params["alpha"], layer._params["beta"]
    dt, rank = x.dtype, len(x.shape)
    single = {ActivationType.RELU: ("Relu", {}), ActivationType.SIGMOID: ("Sigmoid", {}),
              ActivationType.TANH: ("Tanh", {}), ActivationType.LEAKY_RELU: ("LeakyRelu", {"alpha": a}),
              ActivationType.ELU: ("Elu", {"alpha": a}), ActivationType.SELU: ("Selu", {"alpha": a, "gamma": b}),
              ActivationType.SOFTSIGN: ("Softsign", {}),
              ActivationType.HARD_SIGMOID: ("HardSigmoid", {"alpha": a, "beta": b}),
              ActivationType.THRESHOLDED_RELU: ("ThresholdedRelu", {"alpha": a})}
    if t in single:
        op, attrs = single[t]
        g.add(op, ins, outs, **attrs)
        return
    if t == ActivationType.CLIP:
        lo, hi = g.scalar_like(a, dt, "min"), g.scalar_like(b, dt, "max")
        g.add("Clip", [ins[0], lo, hi], outs)
        return
    if t == ActivationType.SOFTPLUS and a == 1.0 and b == 1.0:
        g.add("Softplus", ins, outs)
        return
    if t in (ActivationType.GELU_ERF, ActivationType.GELU_TANH) and g.opset >= 20:
        g.add("Gelu", ins, outs, approximate="none" if t == ActivationType.GELU_ERF else "tanh")
        return
    xf, target = g.to_float(ins[0], dt), g.float_target(outs[0], dt)
    if t == ActivationType.SOFTPLUS:  # alpha * softplus(beta * x)
        inner = g.add("Softplus", [g.add("Mul", [xf, _const(g, b, rank)])])
        y = g.add("Mul", [inner, _const(g, a, rank)], [target])
    elif t == ActivationType.SCALED_TANH:  # alpha * tanh(beta * x)
        inner = g.add("Tanh", [g.add("Mul", [xf, _const(g, b, rank)])])
        y = g.add("Mul", [inner, _const(g, a, rank)], [target])
    elif t == ActivationType.GELU_ERF:  # 0.5 x (1 + erf(x / sqrt 2))
        e = g.add("Erf", [g.add("Div", [xf, _const(g, math.sqrt(2.0), rank)])])
        half_x = g.add("Mul", [xf, _const(g, 0.5, rank)])
        y = g.add("Mul", [half_x, g.add("Add", [e, _const(g, 1.0, rank)])], [target])
    elif t == ActivationType.GELU_TANH:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = g.add("Pow", [xf, _const(g, 3.0, rank)])
        inner = g.add("Add", [xf, g.add("Mul", [cube, _const(g, 0.044715, rank)])])
        th = g.add("Tanh", [g.add("Mul", [inner, _const(g, math.sqrt(2.0 / math.pi), rank)])])
        half_x = g.add("Mul", [xf, _const(g, 0.5, rank)])
        y = g.add("Mul", [half_x, g.add("Add", [th, _const(g, 1.0, rank)])], [target])
    else:  # pragma: no cover - every ActivationType is handled above
        g.fail(f"activation {t.name} has no ONNX lowering")
    g.from_float(y, outs[0], dt)


@lowers(LayerType.SOFTMAX)
def lower_softmax(g: GraphBuilder, layer, ins, outs):
    axes = axes_of(layer._params["axes"], len(layer.get_input(0).shape))
    g.add("Softmax", ins, outs, axis=axes[0])


@lowers(LayerType.CAST)
def lower_cast(g: GraphBuilder, layer, ins, outs):
    g.add("Cast", ins, outs, to=onnx_type(DataType(layer._params["to_type"]), layer.name))


@lowers(LayerType.IDENTITY)
def lower_identity(g: GraphBuilder, layer, ins, outs):
    g.add("Identity", ins, outs)


@lowers(LayerType.CONSTANT)
def lower_constant(g: GraphBuilder, layer, ins, outs):
    """An initializer named as the constant's output tensor (through an Identity node when the
    tensor is also a graph output, since a graph output cannot be an initializer)."""
    w = layer._weights["weights"]
    arr = w.numpy().reshape(tuple(layer._params["shape"]))
    etype = onnx_type(w.dtype, layer.name)
    if not g.writes_graph_output:
        g.const(arr, etype, name=outs[0])
    else:
        g.add("Identity", [g.const(arr, etype, "value")], outs)

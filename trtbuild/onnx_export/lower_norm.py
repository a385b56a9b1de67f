"""Lowering of INormalizationLayer.

- num_groups == 1, axes = all dims from 2, scale/bias [1, C, 1...]  -> InstanceNormalization
- num_groups == 1, axes = trailing dims from k, scale/bias [1.., *x.shape[k:]]  -> LayerNormalization
  (opset >= 17)
- anything else with num_groups == 1 -> ReduceMean/Sub/Mul/Sqrt/Div in FLOAT
- num_groups > 1 (group normalization) -> always the decomposition over a [N, G, -1] view.
  ONNX's GroupNormalization changed meaning between opset 18 (scale/bias per group, like
  add_normalization) and opset 21 (per channel, like add_normalization_v2), and TensorRT 10's
  parser predates opset 21 in some releases, so the decomposition is the form that means the same
  thing to every reader.
"""

from __future__ import annotations

from onnx import TensorProto

from trtbuild.reference.enums import LayerType
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.common import axes_of

from .graph import GraphBuilder, onnx_type


def _param_as(g: GraphBuilder, tensor, name: str, shape, elem_type=None) -> str:
    """Scale/bias `tensor` reshaped to `shape`: a fresh initializer when it comes from a Constant
    layer (TensorRT's parser wants InstanceNormalization parameters as initializers), else a Reshape."""
    producer = tensor._producer
    if producer is not None and producer._TYPE == LayerType.CONSTANT:
        w = producer._weights["weights"]
        return g.const(w.numpy().reshape(shape), elem_type or onnx_type(w.dtype, g.layer.name), "param")
    value = g.add("Reshape", [name, g.ints(shape)])
    return g.to_float(value, tensor.dtype) if elem_type == TensorProto.FLOAT else value


@lowers(LayerType.NORMALIZATION)
def lower_normalization(g: GraphBuilder, layer, ins, outs):
    x, scale, bias = (layer.get_input(i) for i in range(3))
    p = layer._params
    shape, rank = tuple(x.shape), len(x.shape)
    axes, groups, eps = axes_of(p["axes"], rank), p["num_groups"], float(p["epsilon"])
    sshape = tuple(scale.shape)
    if groups > 1:
        _group_norm(g, layer, ins, outs, groups, eps, bool(p["is_v2"]))
        return
    c = shape[1] if rank > 1 else -1
    if rank >= 3 and c > 0 and axes == list(range(2, rank)) and sshape == (1, c) + (1,) * (rank - 2):
        s, b = _param_as(g, scale, ins[1], [c]), _param_as(g, bias, ins[2], [c])
        g.add("InstanceNormalization", [ins[0], s, b], outs, epsilon=eps)
        return
    k = axes[0]
    norm_shape = list(shape[k:])
    if (g.opset >= 17 and axes == list(range(k, rank)) and all(d > 0 for d in norm_shape)
            and sshape == (1,) * k + tuple(norm_shape)):
        s, b = _param_as(g, scale, ins[1], norm_shape), _param_as(g, bias, ins[2], norm_shape)
        g.add("LayerNormalization", [ins[0], s, b], outs, axis=k, epsilon=eps)
        return
    dt = x.dtype
    nrm = _standardize(g, g.to_float(ins[0], dt), axes, eps)
    scaled = g.add("Mul", [nrm, g.to_float(ins[1], dt)])
    g.from_float(g.add("Add", [scaled, g.to_float(ins[2], dt)], g.float_target(outs[0], dt)), outs[0], dt)


def _standardize(g: GraphBuilder, xf: str, axes: list[int], eps: float) -> str:
    """(x - mean) / sqrt(var + eps) over `axes` (biased variance, two passes), in FLOAT."""
    from .lower_math import reduce_node

    mean = reduce_node(g, "ReduceMean", xf, axes, True)
    d = g.add("Sub", [xf, mean])
    var = reduce_node(g, "ReduceMean", g.add("Mul", [d, d]), axes, True)
    eps_c = g.const(eps, TensorProto.FLOAT, "epsilon")
    return g.add("Div", [d, g.add("Sqrt", [g.add("Add", [var, eps_c])])])


def _group_norm(g: GraphBuilder, layer, ins, outs, groups: int, eps: float, per_channel: bool):
    x, scale, bias = (layer.get_input(i) for i in range(3))
    dt = x.dtype
    xf = g.to_float(ins[0], dt)
    grouped = g.add("Reshape", [xf, g.ints([0, groups, -1])])
    nrm = _standardize(g, grouped, [2], eps)
    target = g.float_target(outs[0], dt)
    if per_channel:  # add_normalization_v2: scale/bias [1, C, 1...] per channel
        back = g.add("Reshape", [nrm, g.add("Shape", [xf])])
        y = g.add("Add", [g.add("Mul", [back, g.to_float(ins[1], dt)]), g.to_float(ins[2], dt)], [target])
    else:  # add_normalization: scale/bias [1, G, 1...] per group
        s = _param_as(g, scale, ins[1], [1, groups, 1], TensorProto.FLOAT)
        b = _param_as(g, bias, ins[2], [1, groups, 1], TensorProto.FLOAT)
        affine = g.add("Add", [g.add("Mul", [nrm, s]), b])
        y = g.add("Reshape", [affine, g.add("Shape", [xf])], [target])
    g.from_float(y, outs[0], dt)

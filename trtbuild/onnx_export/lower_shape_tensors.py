"""Lowering of the shape tensor layers: Shape (ONNX Shape) and Fill (ONNX Range for a 1-D LINSPACE,
RandomUniform / RandomNormal for the random fills, their *Like forms where a shape tensor gives the dims),
and the helper the layers that take shape inputs (shuffle, slice, resize) use for them.

ONNX has no N-D LINSPACE and takes a random fill's bounds only as attributes: an N-D LINSPACE and a random
fill whose alpha/beta are tensors are refused in one sentence."""

from __future__ import annotations

from onnx import TensorProto

from trtbuild.reference.enums import DataType, FillOperation, LayerType
from trtbuild.reference.ops import lowers

from .graph import GraphBuilder, onnx_type


def int64_input(g: GraphBuilder, layer, index: int, name: str) -> str:
    """Shape input `index` of `layer` as an INT64 ONNX value (ONNX Reshape/Slice/Resize take INT64)."""
    if layer.get_input(index).dtype == DataType.INT64:
        return name
    return g.add("Cast", [name], to=TensorProto.INT64)


def shape_input(layer, index: int) -> bool:
    return layer.get_input(index) is not None


@lowers(LayerType.SHAPE)
def lower_shape(g: GraphBuilder, layer, ins, outs):
    g.add("Shape", ins[:1], outs)


@lowers(LayerType.FILL)
def lower_fill(g: GraphBuilder, layer, ins, outs):
    p = layer._params
    op, to = FillOperation(p["operation"]), DataType(p["to_type"])
    tensors = shape_input(layer, 1)
    dims_in = int64_input(g, layer, 0, ins[0]) if shape_input(layer, 0) else None
    if op == FillOperation.LINSPACE:
        return _linspace(g, layer, ins, outs, to, tensors, dims_in)
    if tensors:
        g.fail(f"FillOperation.{op.name} with alpha/beta tensors: ONNX RandomUniform/RandomNormal take their bounds "
               "only as attributes")
    lo, hi = float(p["alpha"]), float(p["beta"])
    attrs = dict(low=lo, high=hi) if op == FillOperation.RANDOM_UNIFORM else dict(mean=lo, scale=hi)
    kind = "RandomUniform" if op == FillOperation.RANDOM_UNIFORM else "RandomNormal"
    dtype = onnx_type(to, layer.name)
    if dims_in is None:
        g.add(kind, [], outs, dtype=dtype, shape=[int(d) for d in p["dimensions"]], **attrs)
    else:
        zeros = g.add("ConstantOfShape", [dims_in])
        g.add(kind + "Like", [zeros], outs, dtype=dtype, **attrs)


def _linspace(g, layer, ins, outs, to, tensors, dims_in):
    """A 1-D LINSPACE is alpha + beta * Range(0, n, 1): the Range in INT64 (TensorRT-RTX 1.7's ONNX parser
    asserts on a FLOAT Range of scalars), then a Cast, Mul and Add in the output type, or in FLOAT where a
    float alpha/beta fills an integer output (Cast truncates toward zero, as the reference does)."""
    import numpy as np

    p = layer._params
    rank = len(layer.get_output(0).shape)
    if rank != 1:
        g.fail(f"a rank-{rank} LINSPACE: ONNX Range makes only 1-D sequences")
    floats = not tensors and not p["alpha_beta_int64"] and to != DataType.FLOAT and (
        float(p["alpha"]) != int(p["alpha"]) or float(p["beta"]) != int(p["beta"]))
    compute = DataType.FLOAT if floats else to
    ctype = onnx_type(compute, layer.name)
    np_type = {DataType.FLOAT: "float32", DataType.INT32: "int32", DataType.INT64: "int64"}[compute]
    if tensors:
        start = ins[1]
        delta = g.add("Reshape", [ins[2], g.ints([], "scalar")])
    else:
        start = g.const(np.array([p["alpha"]]).astype(np_type), ctype, "start")
        delta = g.const(np.array([p["beta"]]).astype(np_type), ctype, "delta")
    n = g.ints(p["dimensions"], "count") if dims_in is None else dims_in
    # Range takes 0-D inputs (initializers here are at least 1-D: Reshape to [])
    zero, one = (g.add("Reshape", [g.ints([v], what), g.ints([], "scalar")]) for v, what in ((0, "zero"), (1, "one")))
    n = g.add("Reshape", [n, g.ints([], "scalar")])
    idx = g.add("Cast", [g.add("Range", [zero, n, one])], to=ctype)
    y = g.add("Add", [g.add("Mul", [idx, delta]), start], outs if compute == to else None)
    if compute != to:
        g.add("Cast", [y], outs, to=onnx_type(to, layer.name))


def lower_dynamic_slice(g: GraphBuilder, layer, ins, outs):
    """A slice whose start, size or axes is a shape tensor: ONNX Slice (its axes input is TensorRT's input 5) with
    ends = start + size * stride. Only STRICT_BOUNDS with strides >= 0 given as attributes: ONNX counts a
    negative end from the back, which a stride of unknown sign could not avoid. A stride of 0 repeats the
    element at `start` `size` times (a broadcast, as ``expand`` builds it): that dim is sliced to its one
    element, then an ONNX Expand to the sizes repeats it (:func:`_broadcast_sizes`)."""
    from trtbuild.reference.enums import SampleMode

    p = layer._params
    if SampleMode(p["mode"]) != SampleMode.STRICT_BOUNDS:
        g.fail(f"slice mode {SampleMode(p['mode']).name} with start/size shape tensors: the export writes ONNX Slice, "
               "which has STRICT_BOUNDS' semantics only")
    if shape_input(layer, 3) or any(s < 0 for s in p["stride"]):
        g.fail("a slice with a stride tensor or a stride < 0 and start/size shape tensors: ONNX Slice would count "
               "a negative end from the back")
    rank = len(layer.get_input(0).shape)
    strides = [int(s) for s in p["stride"]]
    starts = int64_input(g, layer, 1, ins[1]) if shape_input(layer, 1) else g.ints(p["start"], "starts")
    sizes = int64_input(g, layer, 2, ins[2]) if shape_input(layer, 2) else g.ints(p["shape"], "sizes")
    axes = int64_input(g, layer, 5, ins[5]) if shape_input(layer, 5) else g.ints(range(rank), "axes")
    if all(s > 0 for s in strides):
        steps = g.ints(strides, "steps")
        g.add("Slice", [ins[0], starts, g.add("Add", [starts, g.add("Mul", [sizes, steps])]), axes, steps], outs)
        return
    if shape_input(layer, 5):
        g.fail("a slice with stride 0 and an axes shape tensor: the export cannot tell which dims to repeat")
    _broadcast_sizes(g, ins[0], starts, sizes, axes, strides, outs)


def _broadcast_sizes(g: GraphBuilder, x: str, starts: str, sizes: str, axes: str, strides: list, outs):
    """Slice with stride-0 dims: ONNX Slice with those dims' size taken as 1 and step 1 (one element, at
    `start`), then Expand to `sizes`, which repeats it (the other dims already have their sizes)."""
    import numpy as np

    moving = np.array([1 if s > 0 else 0 for s in strides], dtype=np.int64)
    one_elem = g.add("Add", [g.add("Mul", [sizes, g.ints(moving, "moving")]), g.ints(1 - moving, "repeated")])
    steps = g.ints([s if s > 0 else 1 for s in strides], "steps")
    ends = g.add("Add", [starts, g.add("Mul", [one_elem, steps])])
    g.add("Expand", [g.add("Slice", [x, starts, ends, axes, steps]), sizes], outs)


def lower_dynamic_resize(g: GraphBuilder, layer, ins, outs, attrs: dict, x: str, target: str):
    """A resize whose output shape is a shape tensor: one ONNX Resize with that `sizes` input (NEAREST only:
    onnxruntime interpolates LINEAR and CUBIC only on some layouts, which unknown sizes cannot be told from)."""
    from trtbuild.reference.enums import InterpolationMode

    if InterpolationMode(layer._params["resize_mode"]) != InterpolationMode.NEAREST:
        g.fail("a LINEAR or CUBIC resize to a shape tensor's sizes: the export writes one ONNX Resize only for "
               "NEAREST, which onnxruntime runs on any layout")
    g.add("Resize", [x, "", "", int64_input(g, layer, 1, ins[1])], [target], **attrs)

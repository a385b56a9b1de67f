"""Lowering of IResizeLayer to ONNX Resize (opset >= 13: inputs X, roi, scales, sizes), output sizes given
explicitly, so that ONNX's scale and TensorRT's length ratio cannot differ.

The modes map one to one: NEAREST/LINEAR/CUBIC -> nearest/linear/cubic; ALIGN_CORNERS -> align_corners,
ASYMMETRIC -> asymmetric, HALF_PIXEL -> half_pixel, or pytorch_half_pixel with ResizeSelector.UPPER (the
input coordinate is 0 where the output length is 1; with the other transformations both selectors agree);
ResizeRoundMode HALF_UP/HALF_DOWN/FLOOR/CEIL -> round_prefer_ceil/round_prefer_floor/floor/ceil.

onnxruntime interpolates (LINEAR, CUBIC) only some layouts: 2-D and 3-D inputs, 4-D and 5-D inputs whose two
outer dims keep their size (CUBIC: 2-D, or 4-D so). TensorRT resizes any dims; the interpolation is separable,
so other layouts are written as one Resize per resized dim, on a (1, before, dim, after) reshape of the tensor.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from trtbuild.reference.enums import (InterpolationMode, LayerType, ResizeCoordinateTransformation,
                                      ResizeRoundMode, ResizeSelector)
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.resize import output_shape

from .graph import GraphBuilder

_MODE = {InterpolationMode.NEAREST: "nearest", InterpolationMode.LINEAR: "linear", InterpolationMode.CUBIC: "cubic"}
_TRANSFORM = {ResizeCoordinateTransformation.ALIGN_CORNERS: "align_corners",
              ResizeCoordinateTransformation.ASYMMETRIC: "asymmetric",
              ResizeCoordinateTransformation.HALF_PIXEL: "half_pixel"}
_ROUND = {ResizeRoundMode.HALF_UP: "round_prefer_ceil", ResizeRoundMode.HALF_DOWN: "round_prefer_floor",
          ResizeRoundMode.FLOOR: "floor", ResizeRoundMode.CEIL: "ceil"}


@lowers(LayerType.RESIZE)
def lower_resize(g: GraphBuilder, layer, ins, outs):
    g.require_opset(13, "Resize with an explicit sizes input")
    p = layer._params
    shape = tuple(layer.get_input(0).shape)
    dynamic = layer.get_input(1) is not None  # the output shape as a shape tensor
    dynamic_scales = any(d < 0 for d in shape) and p["scales"] is not None and not dynamic
    if dynamic_scales and not all(float(s).is_integer() and s >= 1 for s in p["scales"]):
        g.fail(f"scales {tuple(p['scales'])} on an input of unknown shape {shape}: the export writes explicit output "
               "sizes, or ONNX scales where every scale is a whole number (then ONNX's 1 / scale and TensorRT's "
               "length ratio agree for any size)")
    sizes = None if dynamic or dynamic_scales else output_shape(p, shape)
    transform = _TRANSFORM[ResizeCoordinateTransformation(p["coordinate_transformation"])]
    if transform == "half_pixel" and p["selector_for_single_pixel"] == ResizeSelector.UPPER:
        transform = "pytorch_half_pixel"
    dtype = layer.get_input(0).dtype
    x = g.to_float(ins[0], dtype)
    target = g.float_target(outs[0], dtype)
    mode = InterpolationMode(p["resize_mode"])
    attrs = dict(mode=_MODE[mode], coordinate_transformation_mode=transform,
                 nearest_mode=_ROUND[ResizeRoundMode(p["nearest_rounding"])] if mode == InterpolationMode.NEAREST
                 else None,
                 cubic_coeff_a=float(p["cubic_coeff"]) if mode == InterpolationMode.CUBIC else None,
                 exclude_outside=int(bool(p["exclude_outside"])) if mode == InterpolationMode.CUBIC else None)
    if dynamic:
        from .lower_shape_tensors import lower_dynamic_resize

        lower_dynamic_resize(g, layer, ins, outs, attrs, x, target)
        g.from_float(target, outs[0], dtype)
        return
    if dynamic_scales:
        resized = [i for i, s in enumerate(p["scales"]) if s != 1]
        if not _one_node(mode, len(shape), resized):
            g.fail(f"{mode.name} resize of dims {tuple(resized)} of an input of unknown shape {shape}: onnxruntime "
                   "interpolates only some layouts, and the per-dim export needs the shape known")
        scales = g.const(np.asarray(p["scales"], dtype=np.float32), onnx.TensorProto.FLOAT, "scales")
        g.add("Resize", [x, "", scales], [target], **attrs)
        g.from_float(target, outs[0], dtype)
        return
    resized = [i for i, (a, b) in enumerate(zip(shape, sizes)) if a != b]
    if _one_node(mode, len(shape), resized):
        g.add("Resize", [x, "", "", g.ints(sizes, "sizes")], [target], **attrs)
    else:
        if any(d < 0 for d in shape):
            g.fail(f"{mode.name} resize of dims {tuple(resized)} of an input of unknown shape {shape}: onnxruntime "
                   "interpolates only some layouts, and the per-dim export needs the shape known")
        cur = list(shape)
        for n, axis in enumerate(resized):
            before, after = math.prod(cur[:axis]), math.prod(cur[axis + 1:])
            view = g.add("Reshape", [x, g.ints([1, before, cur[axis], after])])
            y = g.add("Resize", [view, "", "", g.ints([1, before, sizes[axis], after], "sizes")], **attrs)
            cur[axis] = sizes[axis]
            x = g.add("Reshape", [y, g.ints(cur)], target if n == len(resized) - 1 else None)
    g.from_float(target, outs[0], dtype)


def _one_node(mode, rank: int, resized: list[int]) -> bool:
    """Whether onnxruntime runs this resize as one ONNX Resize node."""
    if mode == InterpolationMode.NEAREST or not resized:
        return True
    if mode == InterpolationMode.LINEAR:
        return rank in (2, 3) or (rank in (4, 5) and min(resized) >= 2)
    return rank == 2 or (rank == 4 and min(resized) >= 2)

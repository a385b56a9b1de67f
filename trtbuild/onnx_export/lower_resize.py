"""Lowering of IResizeLayer to ONNX Resize (opset >= 13: inputs X, roi, scales, sizes), output sizes given
explicitly, so that ONNX's scale and TensorRT's length ratio cannot differ.

The modes map one to one: NEAREST/LINEAR/CUBIC -> nearest/linear/cubic; ALIGN_CORNERS -> align_corners,
ASYMMETRIC -> asymmetric, HALF_PIXEL -> half_pixel, or pytorch_half_pixel with ResizeSelector.UPPER (the
input coordinate is 0 where the output length is 1; with the other transformations both selectors agree);
ResizeRoundMode HALF_UP/HALF_DOWN/FLOOR/CEIL -> round_prefer_ceil/round_prefer_floor/floor/ceil.
"""

from __future__ import annotations

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
    if any(d < 0 for d in shape) and p["scales"] is not None:
        g.fail(f"scales on an input of unknown shape {shape}: the export writes explicit output sizes")
    sizes = output_shape(p, shape)
    transform = _TRANSFORM[ResizeCoordinateTransformation(p["coordinate_transformation"])]
    if transform == "half_pixel" and p["selector_for_single_pixel"] == ResizeSelector.UPPER:
        transform = "pytorch_half_pixel"
    dtype = layer.get_input(0).dtype
    x = g.to_float(ins[0], dtype)
    target = g.float_target(outs[0], dtype)
    mode = InterpolationMode(p["resize_mode"])
    g.add("Resize", [x, "", "", g.ints(sizes, "sizes")], [target], mode=_MODE[mode],
          coordinate_transformation_mode=transform,
          nearest_mode=_ROUND[ResizeRoundMode(p["nearest_rounding"])] if mode == InterpolationMode.NEAREST else None,
          cubic_coeff_a=float(p["cubic_coeff"]) if mode == InterpolationMode.CUBIC else None,
          exclude_outside=int(bool(p["exclude_outside"])) if mode == InterpolationMode.CUBIC else None)
    g.from_float(target, outs[0], dtype)

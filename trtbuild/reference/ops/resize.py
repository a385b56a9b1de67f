"""IResizeLayer: nearest, linear and cubic resizing of any dims, with ONNX Resize's formulas (which
TensorRT follows): each resized dim is interpolated on its own (separably), its output index mapped back
to an input coordinate by the coordinate transformation."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..core import Dims, ITensor
from ..enums import (InterpolationMode, LayerType, ResizeCoordinateTransformation, ResizeRoundMode,
                     ResizeSelector)
from ..shape_values import InputDim
from .base import ILayer, param, setter_value
from .common import f32, fail, need_float
from .registry import register

CT, RM = ResizeCoordinateTransformation, ResizeRoundMode

#: LINEAR resizes only dims among the innermost 3 (TensorRT-RTX 1.7: "Linear resize mode only supports resize up
#: to last 3 dimensions"); NEAREST and, on TensorRT-RTX 1.7, CUBIC resize any dims
_LINEAR_DIMS = 3


class IResizeLayer(ILayer):
    _TYPE = LayerType.RESIZE
    _MAX_INPUTS = 2
    #: input 1: the output shape as a 1-D shape tensor (it replaces `shape` and `scales`)
    _SHAPE_INPUTS = {1: "shape"}
    resize_mode = param("resize_mode", InterpolationMode)
    coordinate_transformation = param("coordinate_transformation", ResizeCoordinateTransformation)
    selector_for_single_pixel = param("selector_for_single_pixel", ResizeSelector)
    nearest_rounding = param("nearest_rounding", ResizeRoundMode)
    cubic_coeff = param("cubic_coeff", "float")
    exclude_outside = param("exclude_outside", "bool")

    @property
    def shape(self):
        """The static output shape, or None where scales or a shape tensor (input 1) give it (as in TensorRT)."""
        v = self._params["shape"] if self.get_input(1) is None else None
        return None if v is None else Dims(v)

    @shape.setter
    def shape(self, value) -> None:
        dims = setter_value("dims", value, lambda: f"layer '{self.name}': shape = {value!r}")
        self._params["shape"], self._params["scales"] = tuple(dims), None
        self._network._touch()

    @property
    def scales(self) -> list[float]:
        """The scale of each dim; [] where a static shape or a shape tensor (input 1) gives the output."""
        v = self._params["scales"] if self.get_input(1) is None else None
        return [] if v is None else list(v)

    @scales.setter
    def scales(self, value) -> None:
        try:
            vals = [setter_value("float", v, lambda: "") for v in value]
        except TypeError:
            raise TypeError(f"layer '{self.name}': scales = {value!r}: incompatible function arguments: a list "
                            "of floats is needed") from None
        self._params["scales"], self._params["shape"] = vals, None
        self._network._touch()



def infer(p, w, shapes, dtypes, name, plugin):
    x, dtype = tuple(shapes[0]), dtypes[0]
    need_float(name, dtype)
    if _shape_input(shapes):
        p = {**p, "scales": None, "shape": tuple(-1 if d is None else (x[d.axis] if isinstance(d, InputDim) else d)
                                                for d in p["shape"])}
    if p["scales"] is not None:
        scales = p["scales"]
        if len(scales) != len(x):
            fail(name, f"{len(scales)} scales for a rank-{len(x)} input; give one scale per dim")
        if any(s < 0 for s in scales):
            fail(name, f"scales {tuple(scales)}: a scale must be >= 0")
        out = tuple(-1 if d < 0 else math.floor(d * s) for d, s in zip(x, scales))
    else:
        out = tuple(p["shape"])
        if len(out) != len(x):
            fail(name, f"output shape {out} has rank {len(out)}, the input {x} rank {len(x)}; they must be equal")
        if any(d < -1 or (d == -1 and not _shape_input(shapes)) for d in out):
            fail(name, f"output shape {out}: every dim must be >= 0")
    if p["scales"] is not None:
        resized = [i for i, sc in enumerate(p["scales"]) if sc != 1]
    else:
        # a dynamic dim counts as resized only once known (TensorRT-RTX 1.7 builds a LINEAR resize of a
        # dynamic batch dim to a static size)
        resized = [i for i, (a, b) in enumerate(zip(x, out)) if a >= 0 and b >= 0 and a != b]
    for i in resized:
        if x[i] == 0 and out[i] != 0:
            fail(name, f"dim {i} of the input {x} is empty and cannot be resized to {out[i]}")
    mode = InterpolationMode(p["resize_mode"])
    if mode == InterpolationMode.LINEAR and any(i < len(x) - _LINEAR_DIMS for i in resized):
        fail(name, f"LINEAR resizes dims {tuple(resized)} of {x} -> {out}; TensorRT's linear resize reaches only "
                   f"the innermost {_LINEAR_DIMS} dims")
    return [out], [dtype]


def _source(p, n_in: int, n_out: int) -> np.ndarray:
    """The input coordinate (float64) each output index maps back to."""
    i = np.arange(n_out, dtype=np.float64)
    if n_out == 0 or n_in == 0:
        return i
    ct = CT(p["coordinate_transformation"])
    if p["selector_for_single_pixel"] == ResizeSelector.UPPER and n_out < 2:
        return np.zeros(n_out)
    if ct == CT.ALIGN_CORNERS:
        return i * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    if ct == CT.ASYMMETRIC:
        return i * (n_in / n_out)
    return (i + 0.5) * (n_in / n_out) - 0.5


def _round(x: np.ndarray, mode: RM) -> np.ndarray:
    if mode == RM.FLOOR:
        return np.floor(x)
    if mode == RM.CEIL:
        return np.ceil(x)
    if mode == RM.HALF_UP:
        return np.floor(x + 0.5)
    return np.ceil(x - 0.5)  # HALF_DOWN


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution weights of taps floor(x) - 1 .. floor(x) + 2, t = x - floor(x)."""
    d = np.abs(np.stack([t + 1, t, 1 - t, 2 - t], axis=-1))
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def nearest_index(p, n_in: int, n_out: int) -> np.ndarray:
    """The input index each output index copies (NEAREST), rounded by `nearest_rounding`, clamped."""
    x = _source(p, n_in, n_out)
    return np.clip(_round(x, RM(p["nearest_rounding"])), 0, max(n_in - 1, 0)).astype(np.int64)


def weights_matrix(p, n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) float64: output index j is sum_i W[j, i] * input[i] along one resized dim."""
    mode = InterpolationMode(p["resize_mode"])
    x = _source(p, n_in, n_out)
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if n_in == 0 or n_out == 0:
        return m
    if mode == InterpolationMode.NEAREST:
        m[rows, nearest_index(p, n_in, n_out)] = 1.0
    elif mode == InterpolationMode.LINEAR:
        x = np.clip(x, 0, n_in - 1)
        i0 = np.floor(x).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        t = x - i0
        np.add.at(m, (rows, i0), 1 - t)
        np.add.at(m, (rows, i1), t)
    else:
        i0 = np.floor(x)
        wts = _cubic_weights(x - i0, float(p["cubic_coeff"]))
        taps = i0.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
        if p["exclude_outside"]:
            wts = np.where((taps >= 0) & (taps < n_in), wts, 0.0)
            wts = wts / wts.sum(axis=1, keepdims=True)
        np.add.at(m, (np.repeat(rows, 4), np.clip(taps, 0, n_in - 1).reshape(-1)), wts.reshape(-1))
    return m


def resize(p, x: torch.Tensor, out_shape) -> torch.Tensor:
    """`x` resized to `out_shape`, one dim at a time (innermost first), in x's dtype."""
    for axis in reversed(range(x.dim())):
        n_in, n_out = x.shape[axis], out_shape[axis]
        if n_in == n_out:
            continue
        if InterpolationMode(p["resize_mode"]) == InterpolationMode.NEAREST:  # a gather: inf/nan stay put
            idx = torch.from_numpy(nearest_index(p, n_in, n_out)).to(x.device)
            x = torch.index_select(x, axis, idx)
            continue
        m = torch.from_numpy(weights_matrix(p, n_in, n_out)).to(x.dtype)
        x = torch.movedim(torch.matmul(torch.movedim(x, axis, -1), m.T), -1, axis)
    return x


def output_shape(p, shape):
    if p["scales"] is not None:
        return tuple(math.floor(d * s) for d, s in zip(shape, p["scales"]))
    return tuple(p["shape"])


def _shape_input(shapes) -> bool:
    return len(shapes) > 1 and shapes[1] is not None


def run(p, w, inputs, plugin):
    x = f32(inputs[0])
    if _shape_input(inputs):
        p = {**p, "scales": None}
    return [resize(p, x, output_shape(p, tuple(x.shape))).contiguous()]


def add_resize(self, input: ITensor) -> IResizeLayer:
    return self._add(IResizeLayer, [input], {
        "shape": tuple(input.shape), "scales": None, "resize_mode": int(InterpolationMode.NEAREST),
        "coordinate_transformation": int(ResizeCoordinateTransformation.ASYMMETRIC),
        "selector_for_single_pixel": int(ResizeSelector.FORMULA), "nearest_rounding": int(ResizeRoundMode.FLOOR),
        "cubic_coeff": -0.75, "exclude_outside": False}, eager=False)


register(IResizeLayer, infer, run, adds=(add_resize,))

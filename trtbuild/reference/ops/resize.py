"""IResizeLayer: nearest, linear and cubic resizing of any dims, with ONNX Resize's formulas (which
TensorRT follows): each resized dim is interpolated on its own (separably), its output index mapped back
to an input coordinate by the coordinate transformation."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

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

    def _infer(self):
        """Records which input dims are dynamic in the network (params["build_dynamic_dims"]), so that the plan
        applies the LINEAR rule when it runs to the dims the build checked."""
        x = self._inputs[0] if self._inputs else None
        dynamic = [i for i, d in enumerate(x.shape) if d < 0] if x is not None else []
        if self._params.get("build_dynamic_dims", []) != dynamic:
            self._params["build_dynamic_dims"] = dynamic
            self._cache = None
        return super()._infer()
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
        # a zero scale makes even a dynamic dim statically 0, as TensorRT-RTX 1.7 infers it
        out = tuple((0 if s == 0 else -1) if d < 0 else math.floor(d * s) for d, s in zip(x, scales))
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
    # the rule reaches the dims the build could see: with an output shape, a dim dynamic there (so not seen to change
    # until the engine runs) is resized by the documented formula, as TensorRT-RTX 1.7 builds it; a scale other
    # than 1 is seen to resize its dim at build time, dynamic or not
    seen_dynamic = set(p.get("build_dynamic_dims", ())) if p["scales"] is None else set()
    checked = [i for i in resized if i not in seen_dynamic]
    if mode == InterpolationMode.LINEAR and any(i < len(x) - _LINEAR_DIMS for i in checked):
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


def taps(p, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (n_out, k) (k = 1, 2 or 4 for NEAREST, LINEAR, CUBIC): output index j is
    sum_t weights[j, t] * input[indices[j, t]] along one resized dim; weights in float64."""
    mode = InterpolationMode(p["resize_mode"])
    x = _source(p, n_in, n_out)
    if mode == InterpolationMode.NEAREST:
        return nearest_index(p, n_in, n_out)[:, None], np.ones((n_out, 1))
    if mode == InterpolationMode.LINEAR:
        x = np.clip(x, 0, n_in - 1)
        i0 = np.floor(x).astype(np.int64)
        t = x - i0
        return np.stack([i0, np.minimum(i0 + 1, n_in - 1)], axis=1), np.stack([1 - t, t], axis=1)
    i0 = np.floor(x)
    wts = _cubic_weights(x - i0, float(p["cubic_coeff"]))
    index = i0.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
    if p["exclude_outside"]:
        wts = np.where((index >= 0) & (index < n_in), wts, 0.0)
        wts = wts / wts.sum(axis=1, keepdims=True)
    return np.clip(index, 0, n_in - 1), wts


def weights_matrix(p, n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) float64: output index j is sum_i W[j, i] * input[i] along one resized dim."""
    m = np.zeros((n_out, n_in))
    if n_in == 0 or n_out == 0:
        return m
    index, wts = taps(p, n_in, n_out)
    np.add.at(m, (np.repeat(np.arange(n_out), index.shape[1]), index.reshape(-1)), wts.reshape(-1))
    return m


def _nearest(p, x: torch.Tensor, axes: list[int], out_shape) -> torch.Tensor:
    """NEAREST over `axes` as one gather (a copy: inf and nan stay put): advanced indexing with one index
    vector per resized axis, broadcast against each other, keeps adjacent axes where they are."""
    index: list = [slice(None)] * x.dim()
    for k, axis in enumerate(axes):
        idx = torch.from_numpy(nearest_index(p, x.shape[axis], out_shape[axis])).to(x.device)
        index[axis] = idx.reshape((-1,) + (1,) * (len(axes) - 1 - k))
    return x[tuple(index)]


def _torch_nearest_index(n_in: int, n_out: int, exact: bool) -> np.ndarray:
    """The input index PyTorch's "nearest" / "nearest-exact" interpolation reads for each output index (its
    float32 arithmetic: scale = n_in / n_out, floor(j * scale) or floor((j + 0.5) * scale), clamped)."""
    j = np.arange(n_out, dtype=np.float32)
    scale = np.float32(n_in / n_out)
    src = np.floor(((j + np.float32(0.5)) if exact else j) * scale)
    return np.minimum(src.astype(np.int64), n_in - 1)


#: F.interpolate's mode for LINEAR over 1, 2 or 3 trailing dims
_TORCH_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


def torch_equivalent(p, in_shape, out_shape) -> tuple[str, bool | None, int] | None:
    """(mode, align_corners, k) of the F.interpolate call that computes this resize over x's k trailing dims,
    or None.

    NEAREST qualifies where every resized dim's index map equals PyTorch's exactly (a copy: the outputs are then
    identical). LINEAR and CUBIC qualify where PyTorch implements the same formula: HALF_PIXEL or ALIGN_CORNERS
    coordinates (align_corners False / True), the FORMULA selector, and for CUBIC Keys' a = -0.75 without
    exclude_outside. PyTorch derives the weights in float32 where `taps` does in float64, so the two differ by a
    rounding of the weights (tests/reference/test_layers_resize.py bounds it)."""
    axes = [a for a in range(len(in_shape)) if in_shape[a] != out_shape[a]]
    k = len(in_shape) - axes[0]
    if k > 3:
        return None
    mode = InterpolationMode(p["resize_mode"])
    if mode == InterpolationMode.NEAREST:
        for exact in (False, True):
            if all(np.array_equal(nearest_index(p, in_shape[a], out_shape[a]),
                                  _torch_nearest_index(in_shape[a], out_shape[a], exact)) for a in axes):
                return ("nearest-exact" if exact else "nearest"), None, k
        return None
    ct = CT(p["coordinate_transformation"])
    if ct not in (CT.HALF_PIXEL, CT.ALIGN_CORNERS) or ResizeSelector(p["selector_for_single_pixel"]) != \
            ResizeSelector.FORMULA:
        return None
    if mode == InterpolationMode.LINEAR:
        return _TORCH_LINEAR[k], ct == CT.ALIGN_CORNERS, k
    if k == 2 and p["cubic_coeff"] == -0.75 and not p["exclude_outside"]:
        return "bicubic", ct == CT.ALIGN_CORNERS, k
    return None


def resize(p, x: torch.Tensor, out_shape) -> torch.Tensor:
    """`x` resized to `out_shape`, in x's dtype: by F.interpolate where it computes the same resize
    (torch_equivalent), else by the documented formulas (resize_by_taps)."""
    if tuple(x.shape) == tuple(out_shape) or 0 in x.shape or 0 in out_shape:
        return resize_by_taps(p, x, out_shape)
    same = torch_equivalent(p, tuple(x.shape), tuple(out_shape))
    if same is None:
        return resize_by_taps(p, x, out_shape)
    mode, align, k = same
    lead = tuple(x.shape[:-k])
    y = F.interpolate(x.reshape((1, math.prod(lead)) + tuple(x.shape[-k:])), size=tuple(out_shape[-k:]), mode=mode,
                      **({} if align is None else {"align_corners": align}))
    return y.reshape(lead + tuple(out_shape[-k:]))


def resize_by_taps(p, x: torch.Tensor, out_shape) -> torch.Tensor:
    """`x` resized to `out_shape` by the documented formulas, one dim at a time (innermost first), in x's
    dtype. Each output element is the sum of its (at most four) taps, weighted in x's dtype: the cost of a
    resize, not of a dense matrix."""
    axes = [a for a in range(x.dim()) if x.shape[a] != out_shape[a]]
    if not axes or 0 in x.shape:
        return x.new_zeros(out_shape) if 0 in x.shape or 0 in out_shape else x
    if InterpolationMode(p["resize_mode"]) == InterpolationMode.NEAREST:
        if axes == list(range(axes[0], axes[-1] + 1)):
            return _nearest(p, x, axes, out_shape)
        for axis in axes:
            x = _nearest(p, x, [axis], out_shape)
        return x
    for axis in reversed(axes):
        index, wts = taps(p, x.shape[axis], out_shape[axis])
        view = [1] * x.dim()
        view[axis] = -1
        y = None
        for t in range(index.shape[1]):
            picked = torch.index_select(x, axis, torch.from_numpy(index[:, t]).to(x.device))
            term = picked * torch.from_numpy(wts[:, t]).to(x.dtype).reshape(view)
            y = term if y is None else y.add_(term)
        x = y
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

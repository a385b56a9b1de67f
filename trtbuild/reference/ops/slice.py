"""ISliceLayer: start, shape and stride per dim (attributes, or 1-D shape tensors on inputs 1-3), with TensorRT's
sample modes at the bounds."""

from __future__ import annotations

import torch

from ..enums import LayerType, SampleMode
from ..sampling import sample_indices
from ..shape_values import InputDim
from .base import ILayer, param
from .common import fail, no_uint8
from .registry import register


class ISliceLayer(ILayer):
    _TYPE = LayerType.SLICE
    _MAX_INPUTS = 6
    _OPTIONAL_INPUTS = True  # inputs 1-5 may stay unset
    #: start, size and stride as 1-D shape tensors (replacing the attributes; trtbuild.reference.shape_values)
    _SHAPE_INPUTS = {1: "start", 2: "shape", 3: "stride"}
    start = param("start", "dims")
    shape = param("shape", "dims")
    stride = param("stride", "dims")
    mode = param("mode", SampleMode)


def _dims(values, x):
    """Attribute dims, or a shape input's build-time value: an InputDim is the input's dim, None unknown."""
    return [(x[d.axis] if d.axis < len(x) and x[d.axis] >= 0 else None) if isinstance(d, InputDim) else d
            for d in values]


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = shapes[0], dtypes[0]
    no_uint8(name, dtypes)
    st, sz, sd = (_dims(p[k], x) for k in ("start", "shape", "stride"))
    if len(shapes) > 5 and shapes[5] is not None:
        fail(name, "an axes input (input 5) is not supported by the reference backend; give start, size and "
                   "stride for every dim")
    if len(shapes) > 4 and shapes[4] is not None:
        if p["mode"] != 3:
            fail(name, "a fill value (input 4) is only allowed with SampleMode.FILL")
        if len(shapes[4]) != 0 and tuple(shapes[4]) != (1,) * len(shapes[4]):
            fail(name, f"the fill value (input 4) must be a scalar, got shape {tuple(shapes[4])}")
        if dtypes[4] != dt:
            fail(name, f"the fill value has type {dtypes[4].name}, the input {dt.name}")
    if not len(st) == len(sz) == len(sd) == len(x):
        fail(name, f"start/shape/stride {tuple(st)}/{tuple(sz)}/{tuple(sd)} must each have rank {len(x)}")
    for i, (a, n, s, d) in enumerate(zip(st, sz, sd, x)):
        if a is None or n is None or s is None:  # from a shape input, known only at run time
            continue
        if p["mode"] == 0 and d >= 0 and n > 0 and not (0 <= a < d and 0 <= a + (n - 1) * s < d):
            fail(name, f"dim {i}: start {a}, size {n}, stride {s} reads outside [0, {d})")
        if p["mode"] == 0 and n == 0 and (a < 0 or (s < 0 and d >= 0 and a >= d)):
            fail(name, f"dim {i}: an empty slice with start {a} and stride {s}: TensorRT-RTX 1.7 cannot build a "
                       "STRICT_BOUNDS slice starting before the input (or, with a negative stride, after it)")
    return [tuple(-1 if n is None else n for n in sz)], [dt]


def run(p, w, inputs, plugin):
    x, fill = inputs[0], inputs[4] if len(inputs) > 4 else None
    mode = SampleMode(p["mode"])
    if mode == SampleMode.STRICT_BOUNDS and all(a >= 0 and s > 0 for a, s in zip(p["start"], p["stride"])):
        # in bounds with positive strides: a strided view (no copy; CAST/IDENTITY alias too), not an
        # index_select copy per dim
        view = x[tuple(slice(a, a + (n - 1) * s + 1, s) if n > 0 else slice(0, 0)
                       for a, n, s in zip(p["start"], p["shape"], p["stride"]))]
        if tuple(view.shape) == tuple(p["shape"]):  # else: out of bounds, index_select below raises
            return [view]
    out = x
    for d, (a, n, s) in enumerate(zip(p["start"], p["shape"], p["stride"])):
        size = out.shape[d]
        idx, valid = sample_indices(mode, a + torch.arange(n, device=x.device) * s, size)
        out = out.index_select(d, idx)
        if valid is not None:
            shape = [1] * out.dim()
            shape[d] = n
            value = 0 if fill is None else fill.reshape(())
            out = torch.where(valid.reshape(shape), out, torch.as_tensor(value, dtype=out.dtype, device=out.device))
    return [out]


register(ISliceLayer, infer, run)

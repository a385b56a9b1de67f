"""ISliceLayer: start, shape and stride per dim (attributes, or 1-D shape tensors on inputs 1-3; with an axes
input 5, for the listed dims only), with TensorRT's sample modes at the bounds."""

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
    #: start, size and stride as 1-D shape tensors (replacing the attributes; trtbuild.reference.shape_values),
    #: and the axes they apply to
    _SHAPE_INPUTS = {1: "start", 2: "shape", 3: "stride", 5: "axes"}
    start = param("start", "dims", shape_input=1)
    shape = param("shape", "dims", shape_input=2)
    stride = param("stride", "dims", shape_input=3)
    mode = param("mode", SampleMode)


def _dims(values, x):
    """Attribute dims, or a shape input's build-time value: an InputDim is the input's dim, None unknown."""
    return [(x[d.axis] if d.axis < len(x) and x[d.axis] >= 0 else None) if isinstance(d, InputDim) else d
            for d in values]


def _per_dim(name, p, x):
    """(start, size, stride) for every dim of an input of shape `x`. With an axes input (input 5), the start,
    size and stride given are those of the listed axes (negative ones count from the end), and every other dim
    is kept whole; None where the axes are not known at build time."""
    st, sz, sd = (list(p[k]) for k in ("start", "shape", "stride"))
    axes = p.get("axes")
    if axes is None:
        return st, sz, sd
    if any(a is None or isinstance(a, InputDim) for a in axes):
        return None
    rank = len(x)
    for a in axes:
        if not -rank <= a < rank:
            fail(name, f"axis {a} of the axes input is out of range [{-rank}, {rank - 1}] for a rank-{rank} input")
    axes = [a % rank for a in axes]
    if len(set(axes)) != len(axes):
        fail(name, f"the axes input {tuple(p['axes'])} repeats an axis")
    for what, values in (("start", st), ("size", sz), ("stride", sd)):
        if len(values) != len(axes):
            fail(name, f"{what} has {len(values)} values but the axes input {len(axes)}; they must be as many")
    full = ([0] * rank, [d if d >= 0 else None for d in x], [1] * rank)
    for i, a in enumerate(axes):
        full[0][a], full[1][a], full[2][a] = st[i], sz[i], sd[i]
    return full


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = shapes[0], dtypes[0]
    no_uint8(name, dtypes)
    if len(shapes) > 5 and shapes[5] is not None and len(shapes[5]) != 1:
        fail(name, f"the axes input (input 5) has shape {tuple(shapes[5])}; it must be a 1-D tensor")
    given = _per_dim(name, p, x)
    if given is None:  # axes known only at run time: any dim may be sliced
        return [tuple(-1 for _ in x)], [dt]
    st, sz, sd = (_dims(v, x) for v in given)
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
        if p["mode"] == 0 and n == 0 and (a < 0 or (s <= 0 and d >= 0 and a >= d)):
            fail(name, f"dim {i}: an empty slice with start {a} and stride {s}: TensorRT-RTX 1.7 cannot build a "
                       "STRICT_BOUNDS slice starting before the input (or, with a stride <= 0, at or after its end)")
    return [tuple(-1 if n is None else n for n in sz)], [dt]


def run(p, w, inputs, plugin):
    x, fill = inputs[0], inputs[4] if len(inputs) > 4 else None
    mode = SampleMode(p["mode"])
    starts, sizes, strides = _per_dim("slice", p, tuple(x.shape))
    if mode == SampleMode.STRICT_BOUNDS and all(a >= 0 and s > 0 for a, s in zip(starts, strides)):
        # in bounds with positive strides: a strided view (no copy; CAST/IDENTITY alias too), not an
        # index_select copy per dim
        view = x[tuple(slice(a, a + (n - 1) * s + 1, s) if n > 0 else slice(0, 0)
                       for a, n, s in zip(starts, sizes, strides))]
        if tuple(view.shape) == tuple(sizes):  # else: out of bounds, index_select below raises
            return [view]
    out = x
    for d, (a, n, s) in enumerate(zip(starts, sizes, strides)):
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

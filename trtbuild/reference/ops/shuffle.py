"""IShuffleLayer: transpose, reshape, transpose; the reshape dimensions from `reshape_dims` or from a shape
tensor on input 1."""

from __future__ import annotations

import math

from ..enums import LayerType
from ..shape_values import InputDim
from .base import ILayer, param
from .common import fail, no_uint8
from .registry import register


class IShuffleLayer(ILayer):
    _TYPE = LayerType.SHUFFLE
    _MAX_INPUTS = 2
    #: input 1: the reshape dimensions as a shape tensor (replacing reshape_dims, zero_is_placeholder still applies)
    _SHAPE_INPUTS = {1: "reshape_dims"}
    first_transpose = param("first_transpose", "perm")
    second_transpose = param("second_transpose", "perm")
    reshape_dims = param("reshape_dims", "dims", shape_input=1)
    zero_is_placeholder = param("zero_is_placeholder", "bool")


def _reshape(name, p, shape, perm=None):
    """The reshaped dims. From a shape input (trtbuild.reference.shape_values) an element may be None (not
    known at build time: the dim is -1) or InputDim(a), equal to dim a of the layer's input (before
    first_transpose, which `perm` gives), which a -1 elsewhere can then be solved around, as a copied 0 is."""
    dims = p["reshape_dims"]
    if dims is None:
        return tuple(shape)
    dims = list(dims)
    if dims.count(-1) > 1:
        fail(name, f"reshape_dims {_shown(dims)} has more than one -1")
    order = list(perm[:len(shape)]) if perm else list(range(len(shape)))
    out, copied = [], set()
    for i, d in enumerate(dims):
        if isinstance(d, InputDim):
            j = order.index(d.axis) if d.axis in order else None
            if j is None:
                fail(name, f"reshape dimension {i} copies input dimension {d.axis}, which a rank-{len(shape)} input "
                           "lacks")
            out.append(shape[j])
            copied.add(j)
        elif d == 0 and p["zero_is_placeholder"]:
            if i >= len(shape):
                fail(name, f"reshape_dims {_shown(dims)}: 0 at position {i} has no input dimension to copy")
            out.append(shape[i])
            copied.add(i)
        elif d is None:
            out.append(-1)
        else:
            out.append(d)
    unknown_out = any(d is None for d in dims)
    if -1 in dims:
        at = dims.index(-1)
        known_in = math.prod(d for d in shape if d >= 0)
        rest = math.prod(d for j, d in enumerate(out) if j != at and d >= 0)
        unknown_in = {j for j, d in enumerate(shape) if d < 0}
        if unknown_out or not unknown_in <= copied:
            out[at] = -1
        else:
            if rest == 0 or known_in % rest:
                fail(name, f"cannot reshape {tuple(shape)} to {_shown(dims)}: volume {known_in} is not "
                           f"divisible by {rest}")
            out[at] = known_in // rest
    elif not unknown_out and all(d >= 0 for d in shape) and math.prod(shape) != math.prod(out):
        fail(name, f"cannot reshape {tuple(shape)} (volume {math.prod(shape)}) to {tuple(out)} (volume "
                   f"{math.prod(out)})")
    return tuple(out)


def _shown(dims) -> tuple:
    return tuple("?" if d is None else (f"dim{d.axis}" if isinstance(d, InputDim) else d) for d in dims)


def _permute_shape(name, perm, shape, what):
    if not perm:
        return tuple(shape)
    perm = tuple(perm)[:len(shape)] if len(perm) >= len(shape) else perm
    if sorted(perm) != list(range(len(shape))):
        fail(name, f"{what} {perm} is not a permutation of {len(shape)} dims")
    return tuple(shape[i] for i in perm)


def infer(p, w, shapes, dtypes, name, plugin):
    no_uint8(name, dtypes)
    s = _permute_shape(name, p["first_transpose"], shapes[0], "first_transpose")
    s = _reshape(name, p, s, p["first_transpose"])
    return [_permute_shape(name, p["second_transpose"], s, "second_transpose")], [dtypes[0]]


def _permute(x, perm):
    return x.permute(*perm[:x.dim()]) if perm and list(perm[:x.dim()]) != list(range(x.dim())) else x


def run(p, w, inputs, plugin):
    x = _permute(inputs[0], p["first_transpose"])
    dims = p["reshape_dims"]
    if dims is not None:
        shape = [x.shape[i] if d == 0 and p["zero_is_placeholder"] else d for i, d in enumerate(dims)]
        x = x.reshape(shape)
    return [_permute(x, p["second_transpose"])]


register(IShuffleLayer, infer, run)

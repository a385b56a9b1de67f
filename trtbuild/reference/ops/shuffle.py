"""IShuffleLayer: transpose, reshape, transpose."""

from __future__ import annotations

import math

from ..enums import LayerType
from .base import ILayer, param
from .common import fail, no_uint8
from .registry import register


class IShuffleLayer(ILayer):
    _TYPE = LayerType.SHUFFLE
    first_transpose = param("first_transpose", "perm")
    second_transpose = param("second_transpose", "perm")
    reshape_dims = param("reshape_dims", "dims")
    zero_is_placeholder = param("zero_is_placeholder", "bool")


def _reshape(name, p, shape):
    dims = p["reshape_dims"]
    if dims is None:
        return tuple(shape)
    dims = list(dims)
    if dims.count(-1) > 1:
        fail(name, f"reshape_dims {tuple(dims)} has more than one -1")
    out, copied_unknown = [], False
    for i, d in enumerate(dims):
        if d == 0 and p["zero_is_placeholder"]:
            if i >= len(shape):
                fail(name, f"reshape_dims {tuple(dims)}: 0 at position {i} has no input dimension to copy")
            out.append(shape[i])
            copied_unknown |= shape[i] < 0
        else:
            out.append(d)
    if -1 in dims:
        known_in = math.prod(d for d in shape if d >= 0)
        rest = math.prod(d for j, d in enumerate(out) if j != dims.index(-1) and d >= 0)
        unknown_in = sum(d < 0 for d in shape)
        if unknown_in and not (copied_unknown
                               and unknown_in == sum(d < 0 for j, d in enumerate(out) if j != dims.index(-1))):
            out[dims.index(-1)] = -1
        else:
            if rest == 0 or known_in % rest:
                fail(name, f"cannot reshape {tuple(shape)} to {tuple(dims)}: volume {known_in} is not "
                           f"divisible by {rest}")
            out[dims.index(-1)] = known_in // rest
    elif all(d >= 0 for d in shape) and math.prod(shape) != math.prod(out):
        fail(name, f"cannot reshape {tuple(shape)} (volume {math.prod(shape)}) to {tuple(out)} (volume "
                   f"{math.prod(out)})")
    return tuple(out)


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
    s = _reshape(name, p, s)
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

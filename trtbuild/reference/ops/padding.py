"""IPaddingLayer: zero padding (or, negative, trimming) of the last two dims."""

from __future__ import annotations

import torch

from ..enums import DataType, LayerType
from .base import ILayer, param
from .common import f32, fail
from .registry import register

#: types IPaddingLayer takes on TensorRT-RTX 1.7 (of those the reference has)
_PADDING_TYPES = (DataType.FLOAT, DataType.HALF, DataType.BF16, DataType.INT8)


class IPaddingLayer(ILayer):
    _TYPE = LayerType.PADDING
    pre_padding_nd = param("pre_padding_nd", "dims")
    post_padding_nd = param("post_padding_nd", "dims")


def infer(p, w, shapes, dtypes, name, plugin):
    x, dtype = shapes[0], dtypes[0]
    pre, post = tuple(p["pre_padding_nd"]), tuple(p["post_padding_nd"])
    if len(pre) != 2 or len(post) != 2:
        fail(name, f"pre/post padding {pre}/{post}: TensorRT's padding layer supports exactly 2 "
                   "dimensions (the last two)")
    if len(x) < 4:
        fail(name, f"input has rank {len(x)} {tuple(x)}; the padding layer needs rank >= 4 (it pads the last two dims)")
    if dtype not in _PADDING_TYPES:
        fail(name, f"input has type {dtype.name}; the padding layer takes FLOAT, HALF, BF16 or INT8 only")
    lead = len(x) - 2
    out = list(x[:lead])
    for i, (d, a, b) in enumerate(zip(x[lead:], pre, post)):
        if d >= 0 and d + a + b < 0:
            fail(name, f"dim {lead + i}: size {d} padded {a}/{b} would be {d + a + b} (negative padding trims "
                       "more than the input has)")
        out.append(d + a + b if d >= 0 else -1)
    return [tuple(out)], [dtype]


def run(p, w, inputs, plugin):
    """Output index i reads input i - pre; a negative amount trims."""
    x = f32(inputs[0])
    pre, post = p["pre_padding_nd"], p["post_padding_nd"]
    lead = x.dim() - len(pre)
    sizes = [n + a + b for n, a, b in zip(x.shape[lead:], pre, post)]
    out = torch.zeros(*x.shape[:lead], *sizes, dtype=x.dtype, device=x.device)
    src, dst = [slice(None)] * lead, [slice(None)] * lead
    for n, a, size in zip(x.shape[lead:], pre, sizes):
        lo, hi = max(a, 0), min(size, n + a)  # the output range that reads the input
        if hi <= lo:
            return [out]
        src.append(slice(lo - a, hi - a))
        dst.append(slice(lo, hi))
    out[tuple(dst)] = x[tuple(src)]
    return [out]


register(IPaddingLayer, infer, run)

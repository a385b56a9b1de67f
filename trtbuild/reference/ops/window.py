"""What the windowed layers (convolution, deconvolution, pooling) share: output sizes by TensorRT's
formulas, the spatial attributes' checks, and the padding that padding_mode amounts to.

Output sizes use floor (EXPLICIT_ROUND_DOWN) or ceil (EXPLICIT_ROUND_UP) of a possibly negative
span. Kernels and windows have 2 or 3 spatial dims; the input may have any number of leading (batch)
dims before the channel dim.
"""

from __future__ import annotations

import math

import torch.nn.functional as F

from ..enums import PaddingMode
from .common import fail


def window_out(size, k, s, d, pre, post, mode) -> int:
    """Output size of a convolution or pooling window along one dim (-1: dynamic); may be <= 0."""
    if size < 0:
        return -1
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        return -(-size // s)
    span = size + pre + post - (d * (k - 1) + 1)
    return (-(-span // s) if mode == PaddingMode.EXPLICIT_ROUND_UP else span // s) + 1


def spatial(name, p, nsp, keys):
    """The params `keys`, each checked to have `nsp` dims."""
    vals = []
    for k in keys:
        v = tuple(p[k])
        if len(v) != nsp:
            fail(name, f"{k}={v} has {len(v)} dims but the kernel/window has {nsp}")
        vals.append(v)
    return vals


def spatial_rank(name, dims, what, shape):
    """The number of spatial dims of a kernel or window, checked against TensorRT's 2-D/3-D limit."""
    nsp = len(dims)
    if nsp not in (2, 3):
        fail(name, f"{what} {tuple(dims)} has {nsp} dims; TensorRT takes 2-D or 3-D ones only "
                   "(for 1-D data add a unit dim with add_shuffle)")
    if len(shape) < nsp + 2:
        fail(name, f"a {nsp}-D {what} needs an input of rank >= {nsp + 2} (batch..., C, spatial...), "
                   f"got shape {tuple(shape)}")
    return nsp


def no_negative_padding(name, pre, post):
    if any(v < 0 for v in tuple(pre) + tuple(post)):
        fail(name, f"pre/post padding {tuple(pre)}/{tuple(post)} must be >= 0")


def pads(p, sizes, window, stride, dilation):
    """Per spatial dim (pre, post) padding after applying padding_mode."""
    mode = PaddingMode(p["padding_mode"])
    out = []
    for i, n in enumerate(sizes):
        eff = dilation[i] * (window[i] - 1) + 1
        if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
            total = max((math.ceil(n / stride[i]) - 1) * stride[i] + eff - n, 0)
            small, big = total // 2, total - total // 2
            out.append((small, big) if mode == PaddingMode.SAME_UPPER else (big, small))
            continue
        pre, post = p["pre_padding"][i], p["post_padding"][i]
        if mode == PaddingMode.EXPLICIT_ROUND_UP:
            span = n + pre + post - eff
            o = math.ceil(span / stride[i]) + 1
            post += max((o - 1) * stride[i] + eff - (n + pre + post), 0)
        out.append((pre, post))
    return out


def pad_spatial(x, pads, value=0.0):
    flat = []
    for pre, post in reversed(pads):
        flat += [pre, post]
    return F.pad(x, flat, value=value) if any(flat) else x

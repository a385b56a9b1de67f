"""IPoolingLayer: MAX, AVERAGE and MAX_AVERAGE_BLEND over 2-D or 3-D windows."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import arithmetic
from ..enums import LayerType, PaddingMode, PoolingType
from .base import ILayer, PaddedWindow, non_negative, param
from .common import f32, fail, need_float
from .registry import register
from .window import no_negative_padding, pad_spatial, pads, spatial, spatial_rank, window_out


def _unit_interval(value):
    return "blend_factor must be in [0, 1]" if not 0.0 <= value <= 1.0 else None


class IPoolingLayer(PaddedWindow, ILayer):
    _TYPE = LayerType.POOLING
    type = param("type", PoolingType)
    window_size_nd = param("window_size_nd", "dims")
    stride_nd = param("stride_nd", "dims")
    pre_padding = param("pre_padding", "dims", non_negative)
    post_padding = param("post_padding", "dims", non_negative)
    padding_mode = param("padding_mode", PaddingMode)
    blend_factor = param("blend_factor", "float", _unit_interval)
    average_count_excludes_padding = param("average_count_excludes_padding", "bool")


def infer(p, w, shapes, dtypes, name, plugin):
    """Pooling may produce empty dims (no window fits) but not negative ones."""
    shape, dtype = shapes[0], dtypes[0]
    need_float(name, dtype)
    ws = tuple(p["window_size_nd"])
    nsp = spatial_rank(name, ws, "window", shape)
    stride, pre, post = spatial(name, p, nsp, ["stride_nd", "pre_padding", "post_padding"])
    no_negative_padding(name, pre, post)
    if any(s < 1 for s in stride) or any(k < 1 for k in ws):
        fail(name, f"window {ws} and stride {stride} must be >= 1")
    if not 0.0 <= p["blend_factor"] <= 1.0:
        fail(name, f"blend_factor {p['blend_factor']} is outside [0, 1]")
    if p["type"] != PoolingType.MAX and p["average_count_excludes_padding"]:
        _exclusive_padding(name, p, shape[len(shape) - nsp:], ws, stride, pre, post)
    lead = len(shape) - nsp
    out = list(shape[:lead])
    for i in range(nsp):
        o = window_out(shape[lead + i], ws[i], stride[i], 1, pre[i], post[i], p["padding_mode"])
        if shape[lead + i] >= 0 and o < 0:
            fail(name, f"spatial dim {i}: the window {ws[i]} is larger than the padded input "
                       f"({shape[lead + i]}, padded {pre[i]}/{post[i]}): output size {o}")
        out.append(o)
    return [tuple(out)], [dtype]


def _exclusive_padding(name, p, sizes, ws, stride, pre, post):
    """Average pooling that excludes the padding from the count needs each side's padding (explicit,
    plus what EXPLICIT_ROUND_UP adds at the end) smaller than the window, as TensorRT-RTX checks."""
    mode = p["padding_mode"]
    if mode not in (PaddingMode.EXPLICIT_ROUND_DOWN, PaddingMode.EXPLICIT_ROUND_UP):
        return
    for i, (n, k, s, a, b) in enumerate(zip(sizes, ws, stride, pre, post)):
        if mode == PaddingMode.EXPLICIT_ROUND_UP and n >= 0:
            o = window_out(n, k, s, 1, a, b, mode)
            b += max((o - 1) * s + k - (n + a + b), 0)
        if a >= k or b >= k:
            fail(name, f"spatial dim {i}: padding {a}/{b} (EXPLICIT_ROUND_UP's included) is not smaller than the "
                       f"window {k}: average pooling that excludes the padding from the count needs padding < "
                       "window (or average_count_excludes_padding=False)")


def pool(p, x, window_sum=None, rnd=None):
    """window_sum(padded, window, stride) and rnd(t) replace the window total and round each step
    (the pessimistic arithmetic model); by default: float32 throughout."""
    x = f32(x)
    ws, stride = tuple(p["window_size_nd"]), tuple(p["stride_nd"])
    nsp = len(ws)
    lead = x.shape[:-nsp]
    xs = x.reshape(-1, 1, *x.shape[-nsp:])
    padding = pads(p, xs.shape[2:], ws, stride, [1] * nsp)
    padded = [n + a + b for n, (a, b) in zip(xs.shape[2:], padding)]
    if any(n < k for n, k in zip(padded, ws)):  # no window fits: TensorRT gives an empty dim
        out = [max(window_out(n, k, s, 1, a, b, p["padding_mode"]), 0)
               for n, k, s, a, b in zip(xs.shape[2:], ws, stride, p["pre_padding"], p["post_padding"])]
        return torch.empty(*lead, *out, dtype=x.dtype, device=x.device)
    t = PoolingType(p["type"])
    maxp = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
    avgp = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nsp]
    results = []
    if t in (PoolingType.MAX, PoolingType.MAX_AVERAGE_BLEND):
        results.append(maxp(pad_spatial(xs, padding, value=-math.inf), ws, stride))
    if t in (PoolingType.AVERAGE, PoolingType.MAX_AVERAGE_BLEND):
        if window_sum is None:
            total = avgp(pad_spatial(xs, padding), ws, stride) * math.prod(ws)
        else:
            total = window_sum(pad_spatial(xs, padding), ws, stride)
        if p["average_count_excludes_padding"]:
            count = avgp(pad_spatial(torch.ones_like(xs), padding), ws, stride) * math.prod(ws)
        else:
            # the padding counts (explicit, or SAME's implicit padding); rows added by ROUND_UP do not
            same = PaddingMode(p["padding_mode"]) in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER)
            base = padding if same else [(pr, po) for pr, po in zip(p["pre_padding"], p["post_padding"])]
            ones = pad_spatial(torch.ones_like(xs), base, value=1.0)
            extra = [(a - b0, c - d0) for (a, c), (b0, d0) in zip(padding, base)]
            count = avgp(pad_spatial(ones, extra), ws, stride) * math.prod(ws)
        results.append(total / count if rnd is None else rnd(total / count))
    r = rnd or (lambda t: t)
    y = (results[0] if len(results) == 1
         else r(r((1 - p["blend_factor"]) * results[0]) + r(p["blend_factor"] * results[1])))
    return y.reshape(*lead, *y.shape[2:])


def run(p, w, inputs, plugin):
    return [pool(p, inputs[0])]


def pessimistic(p, w, inputs, r):
    """The window sum accumulated in the output type; the average and the blend rounded."""
    return pool(p, inputs[0], window_sum=arithmetic.window_sum(r), rnd=r)


register(IPoolingLayer, infer, run, pessimistic)

"""Execution of the windowed layers (convolution, deconvolution, pooling, LRN) and of padding with
PyTorch, following TensorRT's documented semantics (see execute.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .enums import PaddingMode, PoolingType


def _f(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.is_floating_point() else t


def _weights_like(w, x: torch.Tensor) -> torch.Tensor | None:
    return None if w is None or w.numel() == 0 else w.to(device=x.device, dtype=torch.float32)


def _pads(p, sizes, window, stride, dilation):
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


def _pad_spatial(x, pads, value=0.0):
    flat = []
    for pre, post in reversed(pads):
        flat += [pre, post]
    return F.pad(x, flat, value=value) if any(flat) else x


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_DECONV = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _batched(fn):
    """Run `fn(p, w, x)` on (N, C, spatial...) with every dim before C folded into N, as TensorRT
    treats the leading dims of a convolution's input."""
    def run(p, w, x):
        nsp = len(p["kernel_size_nd"])
        lead = x.shape[:-nsp - 1]
        if len(lead) == 1:
            return fn(p, w, x)
        y = fn(p, w, x.reshape(-1, *x.shape[-nsp - 1:]))
        return y.reshape(*lead, *y.shape[1:])
    return run


@_batched
def _conv(p, w, x):
    x = _f(x)
    ks, g, k = tuple(p["kernel_size_nd"]), p["num_groups"], p["num_output_maps"]
    nsp, c = len(ks), x.shape[1]
    weight = w["kernel"].to(x.device, torch.float32).reshape(k, c // g, *ks)
    bias = _weights_like(w["bias"], x)
    pads = _pads(p, x.shape[2:], ks, p["stride_nd"], p["dilation_nd"])
    return _CONV[nsp](_pad_spatial(x, pads), weight, bias, stride=tuple(p["stride_nd"]),
                      dilation=tuple(p["dilation_nd"]), groups=g)


def deconv_crop(p, i: int, size: int) -> tuple[int, int]:
    """(pre, post) trimmed from a deconvolution's full output along spatial dim i.

    SAME_* modes follow NvInfer.h: O = min(I*S, (I-1)*S + DK), trimming P = max(DK - S, 0)
    split like convolution SAME padding (the extra element goes last for SAME_UPPER)."""
    mode = PaddingMode(p["padding_mode"])
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        dk = p["dilation_nd"][i] * (p["kernel_size_nd"][i] - 1) + 1
        total = max(dk - p["stride_nd"][i], 0)
        small, big = total // 2, total - total // 2
        return (small, big) if mode == PaddingMode.SAME_UPPER else (big, small)
    return p["pre_padding"][i], p["post_padding"][i]


@_batched
def _deconv(p, w, x):
    x = _f(x)
    ks, g, k = tuple(p["kernel_size_nd"]), p["num_groups"], p["num_output_maps"]
    nsp, c = len(ks), x.shape[1]
    weight = w["kernel"].to(x.device, torch.float32).reshape(c, k // g, *ks)
    y = _DECONV[nsp](x, weight, _weights_like(w["bias"], x), stride=tuple(p["stride_nd"]),
                     dilation=tuple(p["dilation_nd"]), groups=g)
    crop = []
    for i in range(nsp):
        pre, post = deconv_crop(p, i, x.shape[2 + i])
        crop.append(slice(pre, y.shape[2 + i] - post))
    return y[(slice(None), slice(None), *crop)]


def _pool(p, x, window_sum=None, rnd=None):
    """window_sum(padded, window, stride) and rnd(t) replace the window total and round each step
    (the pessimistic arithmetic model); by default: float32 throughout."""
    x = _f(x)
    ws, stride = tuple(p["window_size_nd"]), tuple(p["stride_nd"])
    nsp = len(ws)
    lead = x.shape[:-nsp]
    xs = x.reshape(-1, 1, *x.shape[-nsp:])
    pads = _pads(p, xs.shape[2:], ws, stride, [1] * nsp)
    padded = [n + a + b for n, (a, b) in zip(xs.shape[2:], pads)]
    if any(n < k for n, k in zip(padded, ws)):  # no window fits: TensorRT gives an empty dim
        from .infer_window import window_out

        out = [max(window_out(n, k, s, 1, a, b, p["padding_mode"]), 0)
               for n, k, s, a, b in zip(xs.shape[2:], ws, stride, p["pre_padding"], p["post_padding"])]
        return torch.empty(*lead, *out, dtype=x.dtype, device=x.device)
    t = PoolingType(p["type"])
    maxp = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
    avgp = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nsp]
    results = []
    if t in (PoolingType.MAX, PoolingType.MAX_AVERAGE_BLEND):
        results.append(maxp(_pad_spatial(xs, pads, value=-math.inf), ws, stride))
    if t in (PoolingType.AVERAGE, PoolingType.MAX_AVERAGE_BLEND):
        if window_sum is None:
            total = avgp(_pad_spatial(xs, pads), ws, stride) * math.prod(ws)
        else:
            total = window_sum(_pad_spatial(xs, pads), ws, stride)
        if p["average_count_excludes_padding"]:
            count = avgp(_pad_spatial(torch.ones_like(xs), pads), ws, stride) * math.prod(ws)
        else:
            # the padding counts (explicit, or SAME's implicit padding); rows added by ROUND_UP do not
            same = PaddingMode(p["padding_mode"]) in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER)
            base = pads if same else [(pr, po) for pr, po in zip(p["pre_padding"], p["post_padding"])]
            ones = _pad_spatial(torch.ones_like(xs), base, value=1.0)
            extra = [(a - b0, c - d0) for (a, c), (b0, d0) in zip(pads, base)]
            count = avgp(_pad_spatial(ones, extra), ws, stride) * math.prod(ws)
        results.append(total / count if rnd is None else rnd(total / count))
    r = rnd or (lambda t: t)
    y = (results[0] if len(results) == 1
         else r(r((1 - p["blend_factor"]) * results[0]) + r(p["blend_factor"] * results[1])))
    return y.reshape(*lead, *y.shape[2:])


def _lrn(p, x):
    """y = x / (k + alpha / window * sum_{window} x^2) ^ beta, zero-padded at the edges.

    TensorRT's LRN operator windows over dimension rank-3 (the C of NCHW; the D of NCDHW)."""
    x = _f(x)
    n, axis = p["window_size"], x.dim() - 3
    sq = F.pad((x * x).movedim(axis, -1), (n // 2, n // 2))
    window_sum = sq.unfold(-1, n, 1).sum(-1).movedim(-1, axis)
    return x / torch.pow(p["k"] + p["alpha"] / n * window_sum, p["beta"])


def _padding(p, x):
    """Zero padding of the last two dims; a negative amount trims (output index i reads input i - pre)."""
    x = _f(x)
    pre, post = p["pre_padding_nd"], p["post_padding_nd"]
    lead = x.dim() - len(pre)
    sizes = [n + a + b for n, a, b in zip(x.shape[lead:], pre, post)]
    out = torch.zeros(*x.shape[:lead], *sizes, dtype=x.dtype, device=x.device)
    src, dst = [slice(None)] * lead, [slice(None)] * lead
    for n, a, size in zip(x.shape[lead:], pre, sizes):
        lo, hi = max(a, 0), min(size, n + a)  # the output range that reads the input
        if hi <= lo:
            return out
        src.append(slice(lo - a, hi - a))
        dst.append(slice(lo, hi))
    out[tuple(dst)] = x[tuple(src)]
    return out

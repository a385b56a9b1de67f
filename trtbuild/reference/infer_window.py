"""Shape inference and checks of the windowed layers (convolution, deconvolution, pooling), of
padding and of LRN, as TensorRT(-RTX) applies them.

Output sizes follow TensorRT's formulas exactly, with floor (EXPLICIT_ROUND_DOWN) or ceil
(EXPLICIT_ROUND_UP) of a possibly negative span: a convolution must produce at least one element per
spatial dim ("image size is smaller than filter size" otherwise), pooling, deconvolution and padding
may produce empty dims but not negative ones. Kernels and windows have 2 or 3 spatial dims; the
input may have any number of leading (batch) dims before the channel dim.
"""

from __future__ import annotations

import math

from .core import NetworkError
from .enums import DataType, LayerType, PaddingMode, PoolingType

FLOATS = (DataType.FLOAT, DataType.HALF, DataType.BF16)
#: the message given for INT8 where the reference needs a float type (tests/helpers/twin.py's REFERENCE_STRICTER
#: matches it: TensorRT-RTX takes INT8 in some of these layers)
INT8_QUANTIZED = ("has type INT8, a quantized type (TensorRT: \"Signed 8-bit integer representing a quantized "
                  "floating-point value\", whose scale only a Q/DQ pair gives); the reference computes this layer "
                  "in FLOAT, HALF or BF16 only (add_cast first)")


def fail(name: str, msg: str):
    raise NetworkError(f"layer '{name}': {msg}")


def need_float(name, dtype, what="input"):
    if dtype == DataType.INT8:
        fail(name, f"{what} {INT8_QUANTIZED}")
    if dtype not in FLOATS:
        fail(name, f"{what} has type {dtype.name}; this layer needs FLOAT, HALF or BF16")


def window_out(size, k, s, d, pre, post, mode) -> int:
    """Output size of a convolution or pooling window along one dim (-1: dynamic); may be <= 0."""
    if size < 0:
        return -1
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        return -(-size // s)
    span = size + pre + post - (d * (k - 1) + 1)
    return (-(-span // s) if mode == PaddingMode.EXPLICIT_ROUND_UP else span // s) + 1


def _spatial(name, p, nsp, keys):
    vals = []
    for k in keys:
        v = tuple(p[k])
        if len(v) != nsp:
            fail(name, f"{k}={v} has {len(v)} dims but the kernel/window has {nsp}")
        vals.append(v)
    return vals


def _nsp(name, dims, what, shape):
    nsp = len(dims)
    if nsp not in (2, 3):
        fail(name, f"{what} {tuple(dims)} has {nsp} dims; TensorRT takes 2-D or 3-D ones only "
                   "(for 1-D data add a unit dim with add_shuffle)")
    if len(shape) < nsp + 2:
        fail(name, f"a {nsp}-D {what} needs an input of rank >= {nsp + 2} (batch..., C, spatial...), "
                   f"got shape {tuple(shape)}")
    return nsp


def _no_negative_padding(name, pre, post):
    if any(v < 0 for v in tuple(pre) + tuple(post)):
        fail(name, f"pre/post padding {tuple(pre)}/{tuple(post)} must be >= 0")


def conv(ltype, name, p, w, shape, dtype):
    from .execute_window import deconv_crop
    from .infer import check_weights_type

    need_float(name, dtype)
    ks = tuple(p["kernel_size_nd"])
    nsp = _nsp(name, ks, "kernel", shape)
    stride, dil, pre, post = _spatial(name, p, nsp, ["stride_nd", "dilation_nd", "pre_padding", "post_padding"])
    _no_negative_padding(name, pre, post)
    g, k, c = p["num_groups"], p["num_output_maps"], shape[-nsp - 1]
    if c < 0:
        fail(name, "the channel dimension must be known at build time")
    if g < 1 or c % g or k % g:
        fail(name, f"num_groups={g} must divide input channels {c} and output maps {k}")
    kvol = math.prod(ks)
    expect = k * (c // g) * kvol if ltype == LayerType.CONVOLUTION else c * (k // g) * kvol
    if w["kernel"].size != expect:
        order = "KCRS" if ltype == LayerType.CONVOLUTION else "CKRS"
        fail(name, f"kernel has {w['kernel'].size} weights; expected {expect} ({order} with groups={g})")
    if w["bias"].size not in (0, k):
        fail(name, f"bias has {w['bias'].size} weights; expected 0 or {k}")
    check_weights_type(name, w, dtype, ["kernel", "bias"])
    if any(s < 1 for s in stride) or any(d < 1 for d in dil):
        fail(name, f"stride {stride} and dilation {dil} must be >= 1")
    out = list(shape[:-nsp - 1]) + [k]
    for i in range(nsp):
        size = shape[len(shape) - nsp + i]
        if ltype == LayerType.CONVOLUTION:
            o = window_out(size, ks[i], stride[i], dil[i], pre[i], post[i], p["padding_mode"])
            if size >= 0 and o <= 0:
                fail(name, f"spatial dim {i}: the input ({size}, padded {pre[i]}/{post[i]}) is smaller than the "
                           f"dilated kernel {dil[i] * (ks[i] - 1) + 1}")
        elif size < 0:
            o = -1
        else:
            a, b = deconv_crop(p, i, size)
            o = (size - 1) * stride[i] + dil[i] * (ks[i] - 1) + 1 - a - b
            if o < 0:
                fail(name, f"spatial dim {i}: output size {o} is negative (input {size}, padding {a}/{b} "
                           "trims more than the deconvolution makes)")
        out.append(o)
    if ltype == LayerType.DECONVOLUTION and dtype == DataType.BF16:
        fail(name, "TensorRT-RTX 1.7 cannot build a BF16 deconvolution (its builder has no BF16 kernel for it); "
                   "cast to HALF or FLOAT around it")
    if ltype == LayerType.DECONVOLUTION and 0 not in out:  # (an empty output needs no kernel)
        if max(stride) > 1 and max(dil) > 1:
            fail(name, f"stride {stride} with dilation {dil}: TensorRT-RTX 1.7 cannot build a deconvolution that "
                       "is both strided and dilated")
    return tuple(out)


def pool(name, p, shape, dtype):
    need_float(name, dtype)
    ws = tuple(p["window_size_nd"])
    nsp = _nsp(name, ws, "window", shape)
    stride, pre, post = _spatial(name, p, nsp, ["stride_nd", "pre_padding", "post_padding"])
    _no_negative_padding(name, pre, post)
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
    return tuple(out)


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


#: types IPaddingLayer takes on TensorRT-RTX 1.7 (of those the reference has)
_PADDING_TYPES = (DataType.FLOAT, DataType.HALF, DataType.BF16, DataType.INT8)


def padding(name, p, x, dtype):
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
    return tuple(out)


def lrn(name, p, x, dtype):
    need_float(name, dtype)
    if len(x) < 4:
        fail(name, f"input has rank {len(x)} {tuple(x)}; TensorRT's LRN needs rank >= 4 (it windows over "
                   "dimension rank-3, the C of NCHW)")
    ws = p["window_size"]
    if ws < 1 or ws > 15 or ws % 2 == 0:
        fail(name, f"window_size {ws} is invalid: TensorRT's LRN needs an odd window in [1, 15] "
                   "(use trtbuild.layers.lrn with a composed strategy for other sizes)")
    if not -1e20 <= p["alpha"] <= 1e20 or not 0.01 <= p["beta"] <= 1e5 or not 1e-5 <= p["k"] <= 1e10:
        fail(name, f"alpha={p['alpha']} beta={p['beta']} k={p['k']} out of range "
                   "(alpha in [-1e20, 1e20], beta in [0.01, 1e5], k in [1e-5, 1e10])")
    return tuple(x)

"""IConvolutionLayer and IDeconvolutionLayer: one module, as the two share their attributes, their
checks and the kernel-as-input-1 rule, and differ only in the kernel's layout (KCRS / CKRS) and
in how the output size follows from the input."""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

from ..enums import DataType, LayerType, PaddingMode
from .base import ILayer, PaddedWindow, non_negative, param, weights
from .common import check_weights_type, f32, fail, need_float, weights_like
from .registry import register
from .window import no_negative_padding, pad_spatial, pads, spatial, spatial_rank, window_out


class _ConvLike(PaddedWindow, ILayer):
    _MAX_INPUTS = 2  # input 1: the kernel as a tensor (a dequantized weight), with empty kernel weights
    num_output_maps = param("num_output_maps", "int")
    kernel_size_nd = param("kernel_size_nd", "dims")
    stride_nd = param("stride_nd", "dims")
    dilation_nd = param("dilation_nd", "dims")
    pre_padding = param("pre_padding", "dims", non_negative)
    post_padding = param("post_padding", "dims", non_negative)
    padding_mode = param("padding_mode", PaddingMode)
    num_groups = param("num_groups", "int")
    kernel = weights("kernel")
    bias = weights("bias")


class IConvolutionLayer(_ConvLike):
    _TYPE = LayerType.CONVOLUTION


class IDeconvolutionLayer(_ConvLike):
    _TYPE = LayerType.DECONVOLUTION


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


class _KernelTensor:
    """A kernel given as input 1 of a convolution, seen as weights (.size, .dtype) by the checks."""

    def __init__(self, shape, dtype):
        self.size, self.dtype = math.prod(shape), dtype


def _kernel_input(ltype, name, p, w, shapes, dtypes):
    """`w`, with the kernel taken from input 1 where it is set (TensorRT-RTX: the kernel tensor has the
    input's rank and type; its shape is KCRS for a convolution, CKRS for a deconvolution)."""
    if len(shapes) < 2 or shapes[1] is None:
        return w
    x, k = tuple(shapes[0]), tuple(shapes[1])
    if w["kernel"].size:
        fail(name, "the kernel is set both as weights and as input 1; give empty kernel weights with a kernel tensor")
    if len(k) != len(x):
        fail(name, f"the kernel tensor has shape {k}: expected rank {len(x)}, the input's")
    if dtypes[1] != dtypes[0]:
        fail(name, f"the kernel tensor has type {dtypes[1].name} but the input {dtypes[0].name}; they must match "
                   "(dequantize the weights to the input's type)")
    ks, g, maps = tuple(p["kernel_size_nd"]), p["num_groups"], p["num_output_maps"]
    c = x[len(x) - len(ks) - 1]
    want = (maps, c // g) + ks if ltype == LayerType.CONVOLUTION else (c, maps // g) + ks
    if c >= 0 and g >= 1 and k[-len(ks) - 2:] != want[-len(ks) - 2:]:
        fail(name, f"the kernel tensor has shape {k}; expected {want}")
    return dict(w, kernel=_KernelTensor(k, dtypes[1]))


def infer(ltype, p, w, shapes, dtypes, name, plugin):
    """A convolution must produce at least one element per spatial dim ("image size is smaller than
    filter size" otherwise); a deconvolution may produce empty dims but not negative ones."""
    shape, dtype = shapes[0], dtypes[0]
    w = _kernel_input(ltype, name, p, w, shapes, dtypes)
    need_float(name, dtype)
    ks = tuple(p["kernel_size_nd"])
    nsp = spatial_rank(name, ks, "kernel", shape)
    stride, dil, pre, post = spatial(name, p, nsp, ["stride_nd", "dilation_nd", "pre_padding", "post_padding"])
    no_negative_padding(name, pre, post)
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
    return [tuple(out)], [dtype]


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
def conv(p, w, x):
    x = f32(x)
    ks, g, k = tuple(p["kernel_size_nd"]), p["num_groups"], p["num_output_maps"]
    nsp, c = len(ks), x.shape[1]
    weight = w["kernel"].to(x.device, torch.float32).reshape(k, c // g, *ks)
    bias = weights_like(w["bias"], x)
    padding = pads(p, x.shape[2:], ks, p["stride_nd"], p["dilation_nd"])
    return _CONV[nsp](pad_spatial(x, padding), weight, bias, stride=tuple(p["stride_nd"]),
                      dilation=tuple(p["dilation_nd"]), groups=g)


@_batched
def deconv(p, w, x):
    x = f32(x)
    ks, g, k = tuple(p["kernel_size_nd"]), p["num_groups"], p["num_output_maps"]
    nsp, c = len(ks), x.shape[1]
    weight = w["kernel"].to(x.device, torch.float32).reshape(c, k // g, *ks)
    y = _DECONV[nsp](x, weight, weights_like(w["bias"], x), stride=tuple(p["stride_nd"]),
                     dilation=tuple(p["dilation_nd"]), groups=g)
    crop = []
    for i in range(nsp):
        pre, post = deconv_crop(p, i, x.shape[2 + i])
        crop.append(slice(pre, y.shape[2 + i] - post))
    return y[(slice(None), slice(None), *crop)]


def _run(fn, p, w, inputs, plugin):
    if len(inputs) > 1 and inputs[1] is not None:  # the kernel as a tensor (a dequantized weight)
        w = dict(w, kernel=inputs[1])
    return [fn(p, w, inputs[0])]


register(IConvolutionLayer, partial(infer, LayerType.CONVOLUTION), partial(_run, conv))
register(IDeconvolutionLayer, partial(infer, LayerType.DECONVOLUTION), partial(_run, deconv))

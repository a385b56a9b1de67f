"""Lowering of the windowed layers: Convolution, Deconvolution, Pooling, LRN.

Padding follows TensorRT's documented PaddingMode semantics, worked out here from the layer's
parameters (not taken from the reference backend's code), and is always written as explicit
ONNX `pads` when the spatial sizes are known, so no ONNX `auto_pad`/`ceil_mode` corner case
(which ONNX and TensorRT define differently for the last window) can creep in.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from trtbuild.reference.enums import LayerType, PaddingMode, PoolingType
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.convolution import deconv_crop

from .graph import GraphBuilder, onnx_type


def window_pads(g: GraphBuilder, mode, sizes, window, stride, dilation, pre, post):
    """Per spatial dim (begin, end, counted_begin, counted_end): the padding to apply, and the part of
    it that belongs to TensorRT's "padded input". SAME_* computes the padding (the explicit values are
    then ignored) and it is padding like any other; EXPLICIT_ROUND_UP only lets the last window run
    past the padded input, which the ONNX graph expresses as extra end padding that is not counted."""
    mode = PaddingMode(mode)
    result = []
    for i, n in enumerate(sizes):
        eff = dilation[i] * (window[i] - 1) + 1
        if mode == PaddingMode.EXPLICIT_ROUND_DOWN:
            result.append((pre[i], post[i], pre[i], post[i]))
            continue
        if n < 0:
            g.fail(f"padding mode {mode.name} needs the spatial sizes known at export time, got {tuple(sizes)} "
                   "(ONNX's auto_pad/ceil_mode rules for the last window differ from TensorRT's)")
        if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
            total = max((math.ceil(n / stride[i]) - 1) * stride[i] + eff - n, 0)
            small, big = total // 2, total - total // 2
            a, b = (small, big) if mode == PaddingMode.SAME_UPPER else (big, small)
            result.append((a, b, a, b))
            continue
        span = n + pre[i] + post[i] - eff
        out = math.ceil(span / stride[i]) + 1
        extra = max((out - 1) * stride[i] + eff - (n + pre[i] + post[i]), 0)
        result.append((pre[i], post[i] + extra, pre[i], post[i]))
    return result


def _onnx_pads(pads):
    """ONNX `pads`: all begins, then all ends."""
    return [p[0] for p in pads] + [p[1] for p in pads]


def _conv_common(g, layer):
    p = layer._params
    x = layer.get_input(0)
    ks = tuple(p["kernel_size_nd"])
    return p, x, ks, tuple(p["stride_nd"]), tuple(p["dilation_nd"])


def _batch_folded(g: GraphBuilder, layer, ins, outs, nsp):
    """TensorRT folds the dims before a convolution's channel dim into the batch; ONNX wants exactly
    [N, C, spatial...]. Returns (input name, output name) for the Conv node: with extra leading dims
    the input is viewed as [-1, C, spatial...] and the result viewed back (Reshapes, no data moves)."""
    xs, ys = tuple(layer.get_input(0).shape), tuple(layer.get_output(0).shape)
    if len(xs) == nsp + 2:
        return ins[0], outs[0]
    if any(d < 0 for d in xs[-nsp - 1:]) or sum(d < 0 for d in ys) > 1:
        g.fail(f"a convolution of a rank-{len(xs)} input needs its channel and spatial dims, and all but one "
               f"leading dim, known at export time, got {xs}")
    flat = g.add("Reshape", [ins[0], g.ints([-1] + list(xs[-nsp - 1:]))])
    y = g.tmp("conv")
    return flat, y


def _unfold(g: GraphBuilder, layer, y, outs):
    if y != outs[0]:
        g.add("Reshape", [y, g.ints([d if d >= 0 else -1 for d in layer.get_output(0).shape])], outs)


@lowers(LayerType.CONVOLUTION)
def lower_convolution(g: GraphBuilder, layer, ins, outs):
    """Conv with the kernel reshaped from flat KCRS to [K, C/groups, *kernel]."""
    p, x, ks, stride, dil = _conv_common(g, layer)
    k, groups, c = p["num_output_maps"], p["num_groups"], x.shape[-len(ks) - 1]
    etype = onnx_type(x.dtype, layer.name)
    if len(ins) > 1 and ins[1] is not None:  # the kernel as a tensor (a dequantized weight), [K, C/groups, *kernel]
        if len(x.shape) != len(ks) + 2:
            g.fail(f"a kernel tensor with a rank-{len(x.shape)} input (batch dims folded) is not exported")
        w = ins[1]
    else:
        w = g.const(layer._weights["kernel"].numpy().reshape(k, c // groups, *ks), etype, "kernel")
    src, y = _batch_folded(g, layer, ins, outs, len(ks))
    inputs = [src, w]
    if layer._weights["bias"].size:
        inputs.append(g.const(layer._weights["bias"].numpy().reshape(k), etype, "bias"))
    pads = window_pads(g, p["padding_mode"], x.shape[-len(ks):], ks, stride, dil, p["pre_padding"], p["post_padding"])
    g.add("Conv", inputs, [y], kernel_shape=list(ks), strides=list(stride), dilations=list(dil), group=groups,
          pads=_onnx_pads(pads))
    _unfold(g, layer, y, outs)


@lowers(LayerType.DECONVOLUTION)
def lower_deconvolution(g: GraphBuilder, layer, ins, outs):
    """ConvTranspose with the kernel reshaped from flat CKRS to [C, K/groups, *kernel]; TensorRT's
    pre/post padding (or the SAME_* crop) trims the full transposed-convolution output, exactly as
    ONNX `pads` do."""
    p, x, ks, stride, dil = _conv_common(g, layer)
    # SAME_* crops max(DK - S, 0) (NvInfer.h), independent of the input size: explicit pads here
    nsp = len(ks)
    crops = [deconv_crop(p, i, x.shape[len(x.shape) - nsp + i]) for i in range(nsp)]
    k, groups, c = p["num_output_maps"], p["num_groups"], x.shape[-nsp - 1]
    etype = onnx_type(x.dtype, layer.name)
    w = g.const(layer._weights["kernel"].numpy().reshape(c, k // groups, *ks), etype, "kernel")
    src, y = _batch_folded(g, layer, ins, outs, nsp)
    inputs = [src, w]
    if layer._weights["bias"].size:
        inputs.append(g.const(layer._weights["bias"].numpy().reshape(k), etype, "bias"))
    g.add("ConvTranspose", inputs, [y], kernel_shape=list(ks), strides=list(stride), dilations=list(dil),
          group=groups, pads=[a for a, _ in crops] + [b for _, b in crops])
    _unfold(g, layer, y, outs)


@lowers(LayerType.POOLING)
def lower_pooling(g: GraphBuilder, layer, ins, outs):
    """MaxPool / AveragePool with explicit pads; MAX_AVERAGE_BLEND = (1-b)*max + b*avg in FLOAT.

    AVERAGE counting follows TensorRT's documentation: with average_count_excludes_padding the
    divisor is the overlap of the window with the unpadded input (ONNX count_include_pad=0), else
    its overlap with the padded input (explicit or SAME padding). Under EXPLICIT_ROUND_UP the last
    window may run past the padded input; that part is not counted, which one ONNX op cannot say:
    the average is then taken with count_include_pad=1 over the extended padding and rescaled by a
    constant window_volume / count per output position."""
    p = layer._params
    x, y = layer.get_input(0), layer.get_output(0)
    ws, stride = list(p["window_size_nd"]), list(p["stride_nd"])
    nsp, dt = len(ws), x.dtype
    in_sp, out_sp = list(x.shape[len(x.shape) - nsp:]), list(y.shape[len(y.shape) - nsp:])
    pads = window_pads(g, p["padding_mode"], in_sp, ws, stride, [1] * nsp, p["pre_padding"], p["post_padding"])
    src = _pool_view(g, ins[0], tuple(x.shape), nsp)
    t = PoolingType(p["type"])
    if any(q[0] >= k or q[1] >= k for q, k in zip(pads, ws)):
        # ONNX pools need pads < kernel: pad explicitly (-inf for MAX; zeros for AVERAGE, where the
        # EXPLICIT_ROUND_UP end part stays uncounted: a negative counted end in the padded frame)
        if t == PoolingType.MAX_AVERAGE_BLEND:
            g.fail(f"MAX_AVERAGE_BLEND pooling with padding {[q[:2] for q in pads]} not smaller than the window "
                   f"{ws} is not exported")
        fill = -np.inf if t == PoolingType.MAX else 0.0
        lead = 2
        value = g.const(np.array(fill, np.float32), onnx_type(dt, layer.name), "pad_value")
        src = g.add("Pad", [src, g.ints([0] * lead + [q[0] for q in pads] + [0] * lead + [q[1] for q in pads],
                                        "pads"), value], None, mode="constant")
        in_sp = [n + q[0] + q[1] for n, q in zip(in_sp, pads)]
        pads = [(0, 0, 0, ce - b) for _, b, _, ce in pads]
    onnx_pads = [q[0] for q in pads] + [q[1] for q in pads]
    attrs = dict(kernel_shape=ws, strides=stride, pads=onnx_pads)
    final = outs[0] if src == ins[0] else g.tmp("pooled")
    excl = bool(p["average_count_excludes_padding"])
    implicit = any(q[0] != q[2] or q[1] != q[3] for q in pads)
    rescale = None if excl or not implicit else _avg_rescale(pads, in_sp, ws, stride, out_sp)
    if t == PoolingType.MAX:
        g.add("MaxPool", [src], [final], **attrs)
    elif t == PoolingType.AVERAGE and rescale is None:
        g.add("AveragePool", [src], [final], count_include_pad=int(not excl), **attrs)
    else:
        srcf, target = g.to_float(src, dt), g.float_target(final, dt)
        bf = 1.0 if t == PoolingType.AVERAGE else p["blend_factor"]
        avg = g.add("AveragePool", [srcf], None, count_include_pad=int(rescale is not None or not excl), **attrs)
        weight = np.float32(bf) if rescale is None else (bf * rescale).reshape([1, 1] + out_sp)
        if t == PoolingType.AVERAGE:
            y_f = g.add("Mul", [avg, g.const(weight, TensorProto.FLOAT, "avg_weight")], [target])
        else:
            mx = g.add("MaxPool", [srcf], None, **attrs)
            y_f = g.add("Add", [g.add("Mul", [mx, g.const(np.float32(1.0 - bf), TensorProto.FLOAT, "max_weight")]),
                                g.add("Mul", [avg, g.const(weight, TensorProto.FLOAT, "avg_weight")])], [target])
        g.from_float(y_f, final, dt)
    if final != outs[0]:
        g.add("Reshape", [final, g.ints([d if d >= 0 else -1 for d in y.shape])], outs)


def _pool_view(g: GraphBuilder, x_name, shape, nsp):
    """Bring the input to ONNX's [N, C, spatial] (the reference pools 2-D/3-D windows only, as
    TensorRT does). Returns the name of the input or of its reshaped view."""
    rank = len(shape)
    lead, spatial = list(shape[:rank - nsp]), list(shape[rank - nsp:])
    if rank == nsp + 2:
        return x_name
    if any(d < 0 for d in spatial) or sum(d < 0 for d in lead) > 1:
        g.fail(f"pooling a rank-{rank} input with a {nsp}-D window needs static spatial sizes and at most one "
               f"dynamic leading dimension, got {tuple(shape)}")
    if len(lead) >= 2 and all(d >= 0 for d in lead[1:]):
        view = [lead[0] if lead[0] >= 0 else -1, math.prod(lead[1:])]
    else:
        view = [-1 if any(d < 0 for d in lead) else math.prod(lead), 1]
    return g.add("Reshape", [x_name, g.ints(view + spatial)])


def _avg_rescale(pads, sizes, ws, stride, out_sizes):
    """window volume / (input + explicit padding elements under the window), per output position."""
    counts = []
    for (begin, _, cb, ce), n, k, s, o in zip(pads, sizes, ws, stride, out_sizes):
        starts = -begin + s * np.arange(o)
        counts.append(np.clip(np.minimum(starts + k, n + ce) - np.maximum(starts, -cb), 0, None))
    count = counts[0]
    for c in counts[1:]:
        count = np.multiply.outer(count, c)
    return (math.prod(ws) / np.maximum(count, 1)).astype(np.float32)


@lowers(LayerType.LRN)
def lower_lrn(g: GraphBuilder, layer, ins, outs):
    """ONNX LRN: y = x / (bias + alpha/size * sum of squares over `size` channels) ** beta — the same
    alpha/size convention as TensorRT's ILRNLayer, so alpha passes through unchanged. TensorRT
    windows over dimension rank-3 (C of NCHW, D of NCDHW); ONNX LRN over dimension 1 of
    [N, C, D1...], and onnxruntime runs 4-D only. Other ranks therefore go through the 4-D view
    [prod(dims before), size of dim rank-3, prod(dims after), 1] (a Reshape: no data moves)."""
    p = layer._params
    shape = tuple(layer.get_input(0).shape)
    rank, axis = len(shape), len(shape) - 3
    attrs = dict(size=p["window_size"], alpha=p["alpha"], beta=p["beta"], bias=p["k"])
    if rank == 4:
        g.add("LRN", ins, outs, **attrs)
        return
    lead, c, trail = shape[:axis], shape[axis], shape[axis + 1:]
    if c < 0 or sum(d < 0 for d in lead + trail) > 1:
        g.fail(f"LRN on a rank-{rank} input needs the window dimension and all but one other dimension known "
               f"at export time, got {shape}")
    if all(d >= 0 for d in lead):
        view = [math.prod(lead), c, -1, 1]
    else:
        view = [-1, c, math.prod(trail), 1]
    y = g.add("LRN", [g.add("Reshape", [ins[0], g.ints(view)])], None, **attrs)
    g.add("Reshape", [y, g.add("Shape", [ins[0]])], outs)

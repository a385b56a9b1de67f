"""Shape and type inference, and the checks TensorRT applies to each layer.

Shapes may hold -1 for dimensions known only at run time. Every error names the layer.
Strongly typed rules: a layer's output type follows from its input types (and add_cast);
float layers accept FLOAT, HALF and BF16; weights must have the input's type.
"""

from __future__ import annotations

import math

from .core import NetworkError
from .enums import (ActivationType, DataType, ElementWiseOperation, LayerType, MatrixOperation, PaddingMode,
                    ScaleMode, UnaryOperation)

FLOATS = (DataType.FLOAT, DataType.HALF, DataType.BF16)
_COMPARE = (ElementWiseOperation.EQUAL, ElementWiseOperation.GREATER, ElementWiseOperation.LESS)
_LOGICAL = (ElementWiseOperation.AND, ElementWiseOperation.OR, ElementWiseOperation.XOR)


def fail(name: str, msg: str):
    raise NetworkError(f"layer '{name}': {msg}")


def bits(mask: int, rank: int, name: str, what: str = "axes") -> list[int]:
    if mask <= 0 or mask >= (1 << rank):
        fail(name, f"{what} bitmask {mask:#b} is invalid for a rank-{rank} input "
                   f"(bit i selects explicit dimension i, bit 0 is the batch; valid masks are 1..{(1 << rank) - 1})")
    return [i for i in range(rank) if mask >> i & 1]


def _need_float(name, dtype, what="input"):
    if dtype not in FLOATS:
        fail(name, f"{what} has type {dtype.name}; this layer needs FLOAT, HALF or BF16")


def _same_types(name, dtypes):
    if len(set(dtypes)) > 1:
        fail(name, "inputs have different types (" + ", ".join(d.name for d in dtypes) +
             "); a strongly typed network does not convert implicitly, use add_cast")


def _check_weights_type(name, weights, dtype, keys):
    for k in keys:
        w = weights.get(k)
        if w is not None and w.size and w.dtype != dtype:
            fail(name, f"{k} weights have type {w.dtype.name} but the input is {dtype.name}; "
                       f"in a strongly typed network weights must match the input type")


def broadcast(name, a, b):
    if len(a) != len(b):
        fail(name, f"inputs have ranks {len(a)} {tuple(a)} and {len(b)} {tuple(b)}; elementwise broadcasting needs equal ranks (reshape with add_shuffle first)")
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif x == -1 or y == -1:
            out.append(max(x, y))
        else:
            fail(name, f"dimension {i} does not broadcast: {x} vs {y} (shapes {tuple(a)} and {tuple(b)})")
    return tuple(out)


def _window_out(size, k, s, d, pre, post, mode, ceil_default=False):
    if size < 0:
        return -1
    eff = d * (k - 1) + 1
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        return math.ceil(size / s)
    span = size + pre + post - eff
    if span < 0:
        return 0
    return (math.ceil(span / s) if mode == PaddingMode.EXPLICIT_ROUND_UP else span // s) + 1


def _spatial(name, p, nsp, keys):
    vals = []
    for k in keys:
        v = tuple(p[k])
        if len(v) != nsp:
            fail(name, f"{k}={v} has {len(v)} dims but the input has {nsp} spatial dims")
        vals.append(v)
    return vals


def _conv(ltype, name, p, w, shape, dtype):
    _need_float(name, dtype)
    ks = tuple(p["kernel_size_nd"])
    nsp = len(ks)
    if nsp not in (1, 2, 3) or len(shape) != nsp + 2:
        fail(name, f"a {nsp}-D kernel needs a rank-{nsp + 2} input (N, C, spatial...), got shape {tuple(shape)}")
    stride, dil, pre, post = _spatial(name, p, nsp, ["stride_nd", "dilation_nd", "pre_padding", "post_padding"])
    g, k, c = p["num_groups"], p["num_output_maps"], shape[1]
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
    _check_weights_type(name, w, dtype, ["kernel", "bias"])
    if any(s < 1 for s in stride) or any(d < 1 for d in dil):
        fail(name, f"stride {stride} and dilation {dil} must be >= 1")
    out = [shape[0], k]
    for i in range(nsp):
        size = shape[2 + i]
        if ltype == LayerType.CONVOLUTION:
            o = _window_out(size, ks[i], stride[i], dil[i], pre[i], post[i], p["padding_mode"])
            if o == 0:
                fail(name, f"spatial dim {i}: input {size} is smaller than the dilated kernel {dil[i] * (ks[i] - 1) + 1} after padding")
        elif size < 0:
            o = -1
        else:
            from .execute import deconv_crop

            a, b = deconv_crop(p, i, size)
            o = (size - 1) * stride[i] + dil[i] * (ks[i] - 1) + 1 - a - b
        out.append(o)
    return tuple(out)


def _pool(name, p, shape, dtype):
    _need_float(name, dtype)
    ws = tuple(p["window_size_nd"])
    nsp = len(ws)
    if nsp not in (1, 2, 3) or len(shape) < nsp + 1:
        fail(name, f"a {nsp}-D window needs at least rank {nsp + 1}, got shape {tuple(shape)}")
    stride, pre, post = _spatial(name, p, nsp, ["stride_nd", "pre_padding", "post_padding"])
    if any(pr >= k or po >= k for pr, po, k in zip(pre, post, ws)):
        fail(name, f"padding {pre}/{post} must be smaller than the window {ws}")
    lead = len(shape) - nsp
    out = list(shape[:lead])
    for i in range(nsp):
        out.append(_window_out(shape[lead + i], ws[i], stride[i], 1, pre[i], post[i], p["padding_mode"]))
    return tuple(out)


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
        if unknown_in and not (copied_unknown and unknown_in == sum(d < 0 for j, d in enumerate(out) if j != dims.index(-1))):
            out[dims.index(-1)] = -1
        else:
            if rest == 0 or known_in % rest:
                fail(name, f"cannot reshape {tuple(shape)} to {tuple(dims)}: volume {known_in} is not divisible by {rest}")
            out[dims.index(-1)] = known_in // rest
    elif all(d >= 0 for d in shape) and math.prod(shape) != math.prod(out):
        fail(name, f"cannot reshape {tuple(shape)} (volume {math.prod(shape)}) to {tuple(out)} (volume {math.prod(out)})")
    return tuple(out)


def _permute(name, perm, shape, what):
    if not perm:
        return tuple(shape)
    perm = tuple(perm)[:len(shape)] if len(perm) >= len(shape) else perm
    if sorted(perm) != list(range(len(shape))):
        fail(name, f"{what} {perm} is not a permutation of {len(shape)} dims")
    return tuple(shape[i] for i in perm)


def _matmul_shape(name, p, a, b):
    op0, op1 = MatrixOperation(p["op0"]), MatrixOperation(p["op1"])

    def split(shape, op):
        if op == MatrixOperation.VECTOR:
            return tuple(shape[:-1]), (shape[-1],)
        rows, cols = shape[-2], shape[-1]
        return tuple(shape[:-2]), ((rows, cols) if op == MatrixOperation.NONE else (cols, rows))

    (ba, ma), (bb, mb) = split(a, op0), split(b, op1)
    if len(ba) != len(bb):
        fail(name, f"inputs {tuple(a)} ({op0.name}) and {tuple(b)} ({op1.name}) have different batch ranks")
    ka, kb = ma[-1], mb[0]
    if ka >= 0 and kb >= 0 and ka != kb:
        fail(name, f"inner dimensions differ: {ka} vs {kb} (shapes {tuple(a)} and {tuple(b)})")
    out = broadcast(name, ba, bb) + tuple(ma[:-1]) + tuple(mb[1:])
    return out


def infer_layer(ltype, p, w, shapes, dtypes, name, plugin=None):
    """Return ([output shapes], [output dtypes]) for a layer, or raise NetworkError."""
    x = shapes[0] if shapes else None
    dt = dtypes[0] if dtypes else None
    if ltype == LayerType.CONSTANT:
        vol = math.prod(p["shape"])
        if w["weights"].size != vol:
            fail(name, f"weights hold {w['weights'].size} values but shape {tuple(p['shape'])} needs {vol}")
        return [tuple(p["shape"])], [w["weights"].dtype]
    if ltype == LayerType.SCALE:
        _need_float(name, dt)
        if len(x) < 3:
            fail(name, f"input has rank {len(x)} {tuple(x)}; IScaleLayer needs rank >= 3")
        mode, axis = ScaleMode(p["mode"]), p["channel_axis"]
        if not 0 <= axis < len(x):
            fail(name, f"channel_axis {axis} is out of range for rank {len(x)}")
        expect = {ScaleMode.UNIFORM: 1, ScaleMode.CHANNEL: x[axis],
                  ScaleMode.ELEMENTWISE: math.prod(x[axis:]) if all(d >= 0 for d in x[axis:]) else -1}[mode]
        if expect < 0:
            fail(name, f"{mode.name} mode needs the dims from channel_axis on to be known at build time, got {tuple(x)}")
        for k in ("shift", "scale", "power"):
            if w[k].size not in (0, expect):
                fail(name, f"{k} has {w[k].size} weights; {mode.name} mode on shape {tuple(x)} (channel_axis {axis}) needs {expect}")
        _check_weights_type(name, w, dt, ["shift", "scale", "power"])
        return [tuple(x)], [dt]
    if ltype == LayerType.REDUCE:
        axes = bits(p["axes"], len(x), name)
        out = [1 if i in axes else d for i, d in enumerate(x)] if p["keep_dims"] else \
            [d for i, d in enumerate(x) if i not in axes]
        return [tuple(out)], [dt]
    if ltype == LayerType.ELEMENTWISE:
        op = ElementWiseOperation(p["op"])
        _same_types(name, dtypes)
        if op in _LOGICAL and dt != DataType.BOOL:
            fail(name, f"{op.name} needs BOOL inputs, got {dt.name}")
        out_dt = DataType.BOOL if op in _COMPARE else dt
        return [broadcast(name, shapes[0], shapes[1])], [out_dt]
    if ltype == LayerType.UNARY:
        op = UnaryOperation(p["op"])
        if op == UnaryOperation.NOT:
            if dt != DataType.BOOL:
                fail(name, f"NOT needs a BOOL input, got {dt.name}")
            return [tuple(x)], [dt]
        if op not in (UnaryOperation.ABS, UnaryOperation.NEG, UnaryOperation.SIGN):
            _need_float(name, dt)
        return [tuple(x)], [DataType.BOOL if op in (UnaryOperation.ISINF, UnaryOperation.ISNAN) else dt]
    if ltype in (LayerType.ACTIVATION, LayerType.SOFTMAX):
        # TensorRT's Activation operator: "int32 and int64 are also supported only for RELU"
        if not (ltype == LayerType.ACTIVATION and p["type"] == ActivationType.RELU
                and dt in (DataType.INT32, DataType.INT64)):
            _need_float(name, dt)
        if ltype == LayerType.SOFTMAX:
            axes = bits(p["axes"], len(x), name)
            if len(axes) != 1:
                fail(name, f"softmax axes {p['axes']:#b} selects {len(axes)} axes; exactly one is allowed")
        return [tuple(x)], [dt]
    if ltype in (LayerType.CONVOLUTION, LayerType.DECONVOLUTION):
        return [_conv(ltype, name, p, w, x, dt)], [dt]
    if ltype == LayerType.POOLING:
        return [_pool(name, p, x, dt)], [dt]
    if ltype == LayerType.LRN:
        if dt != DataType.FLOAT:
            fail(name, f"input has type {dt.name}; TensorRT's LRN supports FLOAT only (add_cast around it)")
        if len(x) < 3:
            fail(name, f"input has rank {len(x)}; LRN windows over dimension rank-3 and needs rank >= 3")
        ws = p["window_size"]
        if ws < 1 or ws > 15 or ws % 2 == 0:
            fail(name, f"window_size {ws} is invalid: TensorRT's LRN needs an odd window in [1, 15] "
                       "(use trtbuild.layers.lrn with a composed strategy for other sizes)")
        if not -1e20 <= p["alpha"] <= 1e20 or not 0.01 <= p["beta"] <= 1e5 or not 1e-5 <= p["k"] <= 1e10:
            fail(name, f"alpha={p['alpha']} beta={p['beta']} k={p['k']} out of range "
                       "(alpha in [-1e20, 1e20], beta in [0.01, 1e5], k in [1e-5, 1e10])")
        return [tuple(x)], [dt]
    if ltype == LayerType.NORMALIZATION:
        _need_float(name, dt)
        _same_types(name, dtypes)
        axes = bits(p["axes"], len(x), name)
        sc, bi = shapes[1], shapes[2]
        if tuple(sc) != tuple(bi):
            fail(name, f"scale shape {tuple(sc)} and bias shape {tuple(bi)} must be the same")
        if len(sc) != len(x):
            fail(name, f"scale has rank {len(sc)} but the input has rank {len(x)}")
        g = p["num_groups"]
        if g > 1:
            c = x[1]
            if c < 0 or c % g:
                fail(name, f"num_groups={g} must divide the channel dimension {c}")
            if 1 in axes or axes != list(range(2, len(x))):
                fail(name, f"group normalization needs axes over all dims from 2 on, got {axes}")
            per = c if p["is_v2"] else g
            want = tuple([1, per] + [1] * (len(x) - 2))
            if tuple(sc) != want:
                fail(name, f"scale/bias shape {tuple(sc)} should be {want} "
                           f"({'add_normalization_v2 scales per channel' if p['is_v2'] else 'add_normalization (v1) scales per group'})")
        else:
            for i, (s, d) in enumerate(zip(sc, x)):
                if s not in (1, d):
                    fail(name, f"scale shape {tuple(sc)} does not broadcast to the input {tuple(x)} at dim {i}")
        return [tuple(x)], [dt]
    if ltype == LayerType.SHUFFLE:
        s = _permute(name, p["first_transpose"], x, "first_transpose")
        s = _reshape(name, p, s)
        return [_permute(name, p["second_transpose"], s, "second_transpose")], [dt]
    if ltype == LayerType.CONCATENATION:
        _same_types(name, dtypes)
        axis = p["axis"]
        if not 0 <= axis < len(x):
            fail(name, f"axis {axis} out of range for rank {len(x)}")
        out = list(x)
        for s in shapes[1:]:
            if len(s) != len(x) or any(a != b for i, (a, b) in enumerate(zip(s, x)) if i != axis):
                fail(name, f"input shapes {[tuple(t) for t in shapes]} differ outside the concat axis {axis}")
            out[axis] = -1 if out[axis] < 0 or s[axis] < 0 else out[axis] + s[axis]
        return [tuple(out)], [dt]
    if ltype == LayerType.SLICE:
        st, sz, sd = p["start"], p["shape"], p["stride"]
        if any(s is not None for s in shapes[1:4]) or (len(shapes) > 5 and shapes[5] is not None):
            fail(name, "dynamic start/size/stride/axes inputs are not supported by the reference backend")
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
            if p["mode"] == 0 and d >= 0 and n > 0 and not (0 <= a < d and 0 <= a + (n - 1) * s < d):
                fail(name, f"dim {i}: start {a}, size {n}, stride {s} reads outside [0, {d})")
        return [tuple(sz)], [dt]
    if ltype == LayerType.PADDING:
        pre, post = p["pre_padding_nd"], p["post_padding_nd"]
        if len(pre) != 2 or len(post) != 2:
            fail(name, f"pre/post padding {tuple(pre)}/{tuple(post)}: TensorRT's padding layer supports exactly 2 dimensions (the last two)")
        if len(pre) > len(x):
            fail(name, f"pre/post padding {tuple(pre)}/{tuple(post)} do not fit the input rank {len(x)}")
        lead = len(x) - len(pre)
        out = list(x[:lead]) + [d + a + b if d >= 0 else -1 for d, a, b in zip(x[lead:], pre, post)]
        return [tuple(out)], [dt]
    if ltype == LayerType.MATRIX_MULTIPLY:
        _need_float(name, dt)
        _same_types(name, dtypes)
        return [_matmul_shape(name, p, shapes[0], shapes[1])], [dt]
    if ltype == LayerType.CAST:
        return [tuple(x)], [DataType(p["to_type"])]
    if ltype == LayerType.IDENTITY:
        return [tuple(x)], [dt]
    if ltype == LayerType.PLUGIN_V3:
        out_shapes = plugin._output_shapes([tuple(s) for s in shapes])
        return [tuple(s) for s in out_shapes], list(plugin._output_dtypes(list(dtypes)))
    fail(name, f"layer type {ltype.name} is not supported by the reference backend")

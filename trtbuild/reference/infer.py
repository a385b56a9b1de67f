"""Shape and type inference, and the checks TensorRT applies to each layer.

Shapes may hold -1 for dimensions known only at run time. Every error names the layer.
Strongly typed rules: a layer's output type follows from its input types (and add_cast);
float layers accept FLOAT, HALF and BF16; weights must have the input's type.
"""

from __future__ import annotations

import math

from . import infer_window as win
from . import quantize
from .infer_window import fail, need_float
from .ops import op_for
from .enums import (ActivationType, DataType, ElementWiseOperation, LayerType, MatrixOperation,
                    ReduceOperation, ScaleMode, UnaryOperation)

_COMPARE = (ElementWiseOperation.EQUAL, ElementWiseOperation.GREATER, ElementWiseOperation.LESS)
_LOGICAL = (ElementWiseOperation.AND, ElementWiseOperation.OR, ElementWiseOperation.XOR)




def bits(mask: int, rank: int, name: str, what: str = "axes") -> list[int]:
    if mask <= 0 or mask >= (1 << rank):
        fail(name, f"{what} bitmask {mask:#b} is invalid for a rank-{rank} input "
                   f"(bit i selects explicit dimension i, bit 0 is the batch; valid masks are 1..{(1 << rank) - 1})")
    return [i for i in range(rank) if mask >> i & 1]




def _same_types(name, dtypes):
    if len(set(dtypes)) > 1:
        fail(name, "inputs have different types (" + ", ".join(d.name for d in dtypes) +
             "); a strongly typed network does not convert implicitly, use add_cast")


def check_weights_type(name, weights, dtype, keys):
    for k in keys:
        w = weights.get(k)
        if w is not None and w.size and w.dtype != dtype:
            fail(name, f"{k} weights have type {w.dtype.name} but the input is {dtype.name}; "
                       f"in a strongly typed network weights must match the input type")


def broadcast(name, a, b):
    if len(a) != len(b):
        fail(name, f"inputs have ranks {len(a)} {tuple(a)} and {len(b)} {tuple(b)}; elementwise broadcasting needs "
                   "equal ranks (reshape with add_shuffle first)")
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
        if len(shape) < (1 if op == MatrixOperation.VECTOR else 2):
            fail(name, f"input of shape {tuple(shape)} with MatrixOperation.{op.name} needs rank >= "
                       f"{1 if op == MatrixOperation.VECTOR else 2} (a rank-1 input takes VECTOR)")
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


#: the message for a rank < 3 scale (tests/helpers/twin.py's REFERENCE_STRICTER matches it: TensorRT-RTX takes
#: rank 1 and 2)
SCALE_RANK = ("IScaleLayer needs rank >= 3 (TensorRT: \"The input tensor for this layer is required to have a "
              "minimum of 3 dimensions\")")


def _scale(name, p, w, x, dt):
    """channel_axis counts from the end when negative. A CHANNEL dim unknown at build time takes the
    weights' count (as TensorRT infers it); ELEMENTWISE weights over dims unknown at build time must
    be a multiple of the known ones (checked exactly at run time)."""
    need_float(name, dt)
    rank = len(x)
    if rank < 3:
        fail(name, f"input has rank {rank} {tuple(x)}; {SCALE_RANK}")
    mode, axis = ScaleMode(p["mode"]), p["channel_axis"]
    if not -rank <= axis < rank:
        fail(name, f"channel_axis {axis} is out of range [-{rank}, {rank}) for rank {rank}")
    axis %= rank
    counts = {k: w[k].size for k in ("shift", "scale", "power") if w[k].size}
    if len(set(counts.values())) > 1:
        fail(name, f"weights counts {counts} differ; the non-empty shift/scale/power weights must have one count")
    count = next(iter(counts.values()), 0)
    dims = {ScaleMode.UNIFORM: (), ScaleMode.CHANNEL: (x[axis],), ScaleMode.ELEMENTWISE: tuple(x[axis:])}[mode]
    out = list(x)
    if count and all(d >= 0 for d in dims) and count != math.prod(dims):
        fail(name, f"{count} weights per coefficient; {mode.name} mode on shape {tuple(x)} (channel_axis {axis}) "
                   f"needs {math.prod(dims)}")
    if count and mode == ScaleMode.CHANNEL and x[axis] < 0:
        out[axis] = count
    elif count and any(d < 0 for d in dims) and count % math.prod(d for d in dims if d >= 0):
        fail(name, f"{count} weights per coefficient cannot cover the dims {dims} of shape {tuple(x)} "
                   f"(ELEMENTWISE from channel_axis {axis})")
    check_weights_type(name, w, dt, ["shift", "scale", "power"])
    return tuple(out)



#: the message for scale/bias shapes that differ (tests/helpers/twin.py's REFERENCE_STRICTER matches it)
NORM_SAME_SHAPES = "TensorRT: \"The shape of scale and bias must be the same\""


def _single_element_instance_norm(name, p, axes, x, sc):
    """TensorRT-RTX 1.7 fails to build a normalization its builder treats as instance/group norm
    whose groups hold one element each: group norm (axes every dim from 2 on, scale per group for
    v1 / per channel for v2) over single elements, or axes the trailing dims from some a >= 2 on, of
    one element in all, with a scale that varies along dim a - 1 only (instance norm's per-channel
    scale)."""
    rank, g = len(x), p["num_groups"]
    if g > 1:  # rank >= 3 here (checked before)
        c = x[1]
        per = c if p["is_v2"] else g
        single = axes == list(range(2, rank)) and tuple(sc) == (1, per) + (1,) * (rank - 2) \
            and all(d >= 0 for d in x[1:]) and c // g * math.prod(x[2:]) == 1
    else:
        a = axes[0]
        single = a >= 2 and axes == list(range(a, rank)) and all(d >= 0 for d in x[a - 1:]) \
            and math.prod(x[a:]) == 1 and [i for i, s in enumerate(sc) if s != 1] == [a - 1]
    if single:
        fail(name, f"each of the {g} group(s) of shape {tuple(x)} holds a single element; TensorRT-RTX 1.7 cannot "
                   "build an instance/group normalization over one element (its result would be the bias)")


class _KernelTensor:
    """A kernel given as input 1 of a convolution, seen as weights (.size, .dtype) by win.conv."""

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


#: types each layer kind refuses where the generic rules would let them through (TensorRT-RTX 1.7)
_NO_BOOL_UINT8 = (DataType.BOOL, DataType.UINT8)
_ARITHMETIC_TYPES = "FLOAT, HALF, BF16, INT8, INT32 or INT64"


def infer_layer(ltype, p, w, shapes, dtypes, name, plugin=None):
    """Return ([output shapes], [output dtypes]) for a layer, or raise NetworkError."""
    op = op_for(ltype)
    if op is not None:
        return op.infer(p, w, shapes, dtypes, name, plugin)
    x = shapes[0] if shapes else None
    dt = dtypes[0] if dtypes else None
    if ltype == LayerType.SCALE:
        return [_scale(name, p, w, x, dt)], [dt]
    if ltype == LayerType.REDUCE:
        if dt in _NO_BOOL_UINT8:
            fail(name, f"input has type {dt.name}; reduce takes {_ARITHMETIC_TYPES}")
        if dt == DataType.INT8 and p["op"] == ReduceOperation.AVG:
            fail(name, "TensorRT-RTX 1.7 cannot build an AVG reduce of INT8 (no output type for the mean); "
                       "cast to FLOAT first")
        axes = bits(p["axes"], len(x), name)
        out = [1 if i in axes else d for i, d in enumerate(x)] if p["keep_dims"] else \
            [d for i, d in enumerate(x) if i not in axes]
        return [tuple(out)], [dt]
    if ltype == LayerType.ELEMENTWISE:
        op = ElementWiseOperation(p["op"])
        _same_types(name, dtypes)
        if op in _LOGICAL and dt != DataType.BOOL:
            fail(name, f"{op.name} needs BOOL inputs, got {dt.name}")
        if op not in _LOGICAL and op != ElementWiseOperation.EQUAL and dt in _NO_BOOL_UINT8:
            fail(name, f"{op.name} needs {_ARITHMETIC_TYPES} inputs, got {dt.name}")
        if op == ElementWiseOperation.POW and dt == DataType.INT8:
            fail(name, "TensorRT-RTX 1.7 cannot build POW on INT8 inputs (no output type for it); cast to FLOAT first")
        out_dt = DataType.BOOL if op in _COMPARE else dt
        return [broadcast(name, shapes[0], shapes[1])], [out_dt]
    if ltype == LayerType.UNARY:
        op = UnaryOperation(p["op"])
        if op == UnaryOperation.NOT:
            if dt != DataType.BOOL:
                fail(name, f"NOT needs a BOOL input, got {dt.name}")
            return [tuple(x)], [dt]
        if op not in (UnaryOperation.ABS, UnaryOperation.NEG, UnaryOperation.SIGN):
            need_float(name, dt)
        elif dt in _NO_BOOL_UINT8:
            fail(name, f"{op.name} needs a {_ARITHMETIC_TYPES} input, got {dt.name}")
        return [tuple(x)], [DataType.BOOL if op in (UnaryOperation.ISINF, UnaryOperation.ISNAN) else dt]
    if ltype in (LayerType.ACTIVATION, LayerType.SOFTMAX):
        # TensorRT's Activation operator: "int32 and int64 are also supported only for RELU"
        if not (ltype == LayerType.ACTIVATION and p["type"] == ActivationType.RELU
                and dt in (DataType.INT32, DataType.INT64)):
            need_float(name, dt)
        if ltype == LayerType.SOFTMAX:
            if len(x) < 2:
                fail(name, f"input has rank {len(x)} {tuple(x)}; softmax needs rank >= 2")
            axes = bits(p["axes"], len(x), name)
            if len(axes) != 1:
                fail(name, f"softmax axes {p['axes']:#b} selects {len(axes)} axes; exactly one is allowed")
        return [tuple(x)], [dt]
    if ltype in (LayerType.CONVOLUTION, LayerType.DECONVOLUTION):
        return [win.conv(ltype, name, p, _kernel_input(ltype, name, p, w, shapes, dtypes), x, dt)], [dt]
    if ltype in (LayerType.QUANTIZE, LayerType.DEQUANTIZE):
        return quantize.infer(ltype, p, shapes, dtypes, name)
    if ltype == LayerType.POOLING:
        return [win.pool(name, p, x, dt)], [dt]
    if ltype == LayerType.LRN:
        return [win.lrn(name, p, x, dt)], [dt]
    if ltype == LayerType.NORMALIZATION:
        need_float(name, dt)
        _same_types(name, dtypes)
        axes = bits(p["axes"], len(x), name)
        sc, bi = shapes[1], shapes[2]
        if tuple(sc) != tuple(bi):
            fail(name, f"scale shape {tuple(sc)} and bias shape {tuple(bi)} differ; {NORM_SAME_SHAPES}")
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
                which = ('add_normalization_v2 scales per channel' if p['is_v2']
                         else 'add_normalization (v1) scales per group')
                fail(name, f"scale/bias shape {tuple(sc)} should be {want} ({which})")
        else:
            for i, (s, d) in enumerate(zip(sc, x)):
                if s != 1 and d >= 0 and s != d:
                    fail(name, f"scale shape {tuple(sc)} does not broadcast to the input {tuple(x)} at dim {i}")
        _single_element_instance_norm(name, p, axes, x, sc)
        return [tuple(x)], [dt]
    if ltype in (LayerType.SHUFFLE, LayerType.SLICE, LayerType.CONCATENATION) and DataType.UINT8 in dtypes:
        fail(name, "input has type UINT8; TensorRT takes UINT8 only as a network input or output, converted by "
                   "add_identity or add_cast")
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
            if p["mode"] == 0 and n == 0 and (a < 0 or (s < 0 and d >= 0 and a >= d)):
                fail(name, f"dim {i}: an empty slice with start {a} and stride {s}: TensorRT-RTX 1.7 cannot build a "
                           "STRICT_BOUNDS slice starting before the input (or, with a negative stride, after it)")
        return [tuple(sz)], [dt]
    if ltype == LayerType.PADDING:
        return [win.padding(name, p, x, dt)], [dt]
    if ltype == LayerType.MATRIX_MULTIPLY:
        need_float(name, dt)
        _same_types(name, dtypes)
        return [_matmul_shape(name, p, shapes[0], shapes[1])], [dt]
    if ltype == LayerType.CAST:
        to = DataType(p["to_type"])
        if to in (DataType.FP8, DataType.INT4, DataType.FP4):
            fail(name, f"a cast to {to.name}: only a quantize layer may produce {to.name} (TensorRT-RTX); "
                       "use add_quantize")
        return [tuple(x)], [to]
    if ltype == LayerType.IDENTITY:
        return [tuple(x)], [dt]
    if ltype == LayerType.PLUGIN_V3:
        out_shapes = plugin._output_shapes([tuple(s) for s in shapes])
        return [tuple(s) for s in out_shapes], list(plugin._output_dtypes(list(dtypes)))
    fail(name, f"layer type {ltype.name} is not supported by the reference backend")

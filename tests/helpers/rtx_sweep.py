"""Seeded single-layer constructions for the reference-vs-TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py).

Each `Case` holds a description and `build(trt, network) -> [output tensors]`, which makes the same
construction on either module (trtbuild.reference or tensorrt_rtx) unchanged: enums are looked up
by name on `trt`, weights are numpy arrays made here (kept alive by the case, as TensorRT reads them
by pointer at build time) or, for BF16, `trt.Weights(BF16, pointer, count)` over raw 16-bit patterns.
Nothing here knows what either module will say: the generators draw valid and invalid
constructions alike (ranks, bitmasks, broadcasting, strides/padding/dilation/groups, dtypes).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

import numpy as np

DTYPES = ("FLOAT", "HALF", "BF16", "INT8", "INT32", "INT64", "BOOL", "UINT8")
FLOATS = ("FLOAT", "HALF", "BF16")
CAST_TARGETS = DTYPES + ("FP8", "INT4", "FP4")
_NP = {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
       "BOOL": np.bool_, "UINT8": np.uint8}


@dataclass
class Case:
    family: str
    desc: str
    build: Callable  # build(trt, network) -> list of output tensors
    dynamic: bool = False  # inputs have dim 0 = -1: the runner adds an optimization profile


def dt(trt, name: str):
    return getattr(trt.DataType, name)


def enum(trt, cls: str, name: str):
    return getattr(getattr(trt, cls), name)


class W:
    """Weights that work on both modules."""

    def __init__(self, rng: random.Random, count: int, dtype: str):
        self.dtype, self.count = dtype, int(count)
        values = np.random.default_rng(rng.randrange(1 << 32)).uniform(-2, 2, self.count)
        if dtype == "BF16":
            self.array = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        elif dtype == "BOOL":
            self.array = values > 0
        elif dtype in ("UINT8",):
            self.array = (np.abs(values) * 50).astype(np.uint8)
        else:
            self.array = (values * (1 if dtype in FLOATS else 10)).astype(_NP[dtype])

    def __call__(self, trt):
        if self.dtype == "BF16":
            return trt.Weights(dt(trt, "BF16"), self.array.ctypes.data, self.count)
        return self.array

    def __str__(self):
        return f"{self.count}x{self.dtype}"


def pick(rng, weighted: dict):
    keys = list(weighted)
    return rng.choices(keys, weights=[weighted[k] for k in keys])[0]


def some_dtype(rng, float_bias: float = 0.7) -> str:
    return rng.choice(FLOATS) if rng.random() < float_bias else rng.choice(DTYPES)


def shape_str(s) -> str:
    return "(" + ",".join(str(d) for d in s) + ")"


def dyn(shape, dynamic: bool):
    return tuple([-1] + list(shape[1:])) if dynamic and len(shape) else tuple(shape)


def single(family, desc, build, dynamic=False):
    return Case(family, desc + (" [dynamic batch]" if dynamic else ""), build, dynamic)


# -- convolution, deconvolution, pooling ------------------------------------------------------------
def _window_attrs(rng, nsp, pool: bool):
    """Random stride/dilation/padding settings: [(attribute, value)], applied after the add_*."""
    attrs = []
    if rng.random() < 0.6:
        attrs.append(("stride_nd", tuple(rng.randint(1, 3) for _ in range(nsp))))
    if not pool and rng.random() < 0.3:
        attrs.append(("dilation_nd", tuple(rng.randint(1, 2) for _ in range(nsp))))
    r = rng.random()
    lo = -1 if rng.random() < 0.05 else 0
    hi = 4 if pool else 2
    if r < 0.3:
        attrs.append(("padding_nd", tuple(rng.randint(lo, hi) for _ in range(nsp))))
    elif r < 0.6:
        attrs.append(("pre_padding", tuple(rng.randint(lo, hi) for _ in range(nsp))))
        attrs.append(("post_padding", tuple(rng.randint(lo, hi) for _ in range(nsp))))
    if rng.random() < 0.25:
        attrs.append(("padding_mode", ("PaddingMode", rng.choice(
            ["EXPLICIT_ROUND_DOWN", "EXPLICIT_ROUND_UP", "SAME_UPPER", "SAME_LOWER"]))))
    if rng.random() < 0.04:  # a dims attribute of the wrong rank
        attrs.append(("stride_nd", tuple([1] * (nsp + rng.choice([-1, 1])))))
    return attrs


def _apply(trt, layer, attrs):
    for key, value in attrs:
        if isinstance(value, tuple) and value and isinstance(value[0], str):
            value = enum(trt, *value)
        setattr(layer, key, value)


def _attr_str(attrs):
    return " ".join(f"{k}={v[1] if isinstance(v, tuple) and v and isinstance(v[0], str) else v}" for k, v in attrs)


def conv_case(rng, family="convolution"):
    deconv = family == "deconvolution"
    nsp = pick(rng, {1: 2, 2: 6, 3: 2})
    rank = nsp + 2 + pick(rng, {0: 12, -1: 1, 1: 1})
    g = pick(rng, {1: 6, 2: 2, 3: 1, 4: 1})
    c = g * rng.randint(1, 3) if rng.random() < 0.9 else rng.randint(1, 7)
    k = g * rng.randint(1, 3) if rng.random() < 0.9 else rng.randint(1, 7)
    spatial = [rng.randint(1, 9) for _ in range(nsp)]
    shape = [rng.randint(1, 2) for _ in range(rank - nsp - 1)] + [c] + spatial  # (..., C, spatial)
    ks = tuple(rng.randint(1, 4) for _ in range(nsp))
    dtype = pick(rng, {"FLOAT": 10, "HALF": 4, "BF16": 3, "INT8": 2, "INT32": 1})
    wtype = dtype if dtype in FLOATS else "FLOAT"
    if rng.random() < 0.05:
        wtype = rng.choice([t for t in FLOATS if t != wtype])
    count = (c * (k // g) if deconv else k * (c // g)) * math.prod(ks)
    if rng.random() < 0.04:
        count += rng.choice([-1, 1]) * max(1, count // 2)
    kernel = W(rng, max(count, 1), wtype)
    bias = W(rng, k if rng.random() < 0.95 else k + 1, wtype) if rng.random() < 0.6 else None
    attrs = _window_attrs(rng, nsp, pool=False) + ([("num_groups", g)] if g > 1 else [])
    dynamic = rng.random() < 0.2
    xshape = dyn(shape, dynamic)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        add = net.add_deconvolution_nd if deconv else net.add_convolution_nd
        layer = add(x, k, ks, kernel(trt), bias(trt) if bias else None)
        _apply(trt, layer, attrs)
        return [layer.get_output(0)]

    return single(family, f"{family} x={shape_str(xshape)} {dtype} maps={k} kernel={ks} w={kernel} "
                          f"bias={bias} {_attr_str(attrs)}", build, dynamic)


def deconv_case(rng):
    return conv_case(rng, "deconvolution")


def pool_case(rng):
    nsp = pick(rng, {1: 2, 2: 6, 3: 2})
    rank = nsp + pick(rng, {-1: 1, 0: 1, 1: 3, 2: 8, 3: 1})
    shape = [rng.randint(1, 3) for _ in range(max(rank - nsp, 0))] + [rng.randint(1, 9) for _ in range(nsp)]
    shape = shape[-rank:] if rank > 0 else [3]
    ws = tuple(rng.randint(1, 4) for _ in range(nsp))
    ptype = rng.choice(["MAX", "AVERAGE", "MAX_AVERAGE_BLEND"])
    dtype = pick(rng, {"FLOAT": 10, "HALF": 4, "BF16": 3, "INT8": 2, "INT32": 1})
    attrs = _window_attrs(rng, nsp, pool=True)
    if ptype == "MAX_AVERAGE_BLEND" or rng.random() < 0.1:
        attrs.append(("blend_factor", rng.choice([0.0, 0.25, 1.0, -0.5, 1.5])))
    if rng.random() < 0.3:
        attrs.append(("average_count_excludes_padding", rng.random() < 0.5))
    dynamic = rng.random() < 0.2 and len(shape) > nsp
    xshape = dyn(shape, dynamic)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        layer = net.add_pooling_nd(x, enum(trt, "PoolingType", ptype), ws)
        _apply(trt, layer, attrs)
        return [layer.get_output(0)]

    return single("pooling", f"pooling {ptype} x={shape_str(xshape)} {dtype} window={ws} {_attr_str(attrs)}",
                  build, dynamic)


def padding_case(rng):
    rank = pick(rng, {1: 1, 2: 2, 3: 3, 4: 8, 5: 2})
    shape = [rng.randint(1, 5) for _ in range(rank)]
    nd = pick(rng, {2: 10, 1: 1, 3: 1})
    lo = -3 if rng.random() < 0.3 else 0
    pre = tuple(rng.randint(lo, 2) for _ in range(nd))
    post = tuple(rng.randint(lo, 2) for _ in range(nd))
    dtype = some_dtype(rng, 0.6)
    dynamic = rng.random() < 0.2 and rank > 2
    xshape = dyn(shape, dynamic)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        return [net.add_padding_nd(x, pre, post).get_output(0)]

    return single("padding", f"padding x={shape_str(xshape)} {dtype} pre={pre} post={post}", build, dynamic)


def lrn_case(rng):
    rank = pick(rng, {2: 1, 3: 2, 4: 8, 5: 2})
    shape = [rng.randint(1, 6) for _ in range(rank)]
    window = pick(rng, {1: 1, 3: 3, 5: 4, 15: 1, 2: 1, 16: 1, 17: 1})
    alpha, beta, k = 1e-4, 0.75, 2.0
    r = rng.random()
    if r < 0.05:
        beta = rng.choice([0.0, 1e6])
    elif r < 0.1:
        k = rng.choice([0.0, 1e11])
    elif r < 0.13:
        alpha = 1e21
    dtype = pick(rng, {"FLOAT": 8, "HALF": 3, "BF16": 3, "INT32": 1, "INT8": 1})
    dynamic = rng.random() < 0.2
    xshape = dyn(shape, dynamic)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        return [net.add_lrn(x, window, alpha, beta, k).get_output(0)]

    return single("lrn", f"lrn x={shape_str(xshape)} {dtype} window={window} alpha={alpha} beta={beta} k={k}",
                  build, dynamic)


# -- pointwise ---------------------------------------------------------------------------------------
def scale_case(rng):
    rank = pick(rng, {1: 1, 2: 2, 3: 3, 4: 6, 5: 2})
    shape = [rng.randint(1, 5) for _ in range(rank)]
    nd = rng.random() < 0.6
    axis = (rng.randint(-rank - 1, rank) if nd and rng.random() < 0.3
            else (rng.randint(0, rank - 1) if nd else max(rank - 3, 0)))
    mode = rng.choice(["UNIFORM", "CHANNEL", "ELEMENTWISE"])
    a = axis + rank if -rank <= axis < 0 else axis
    if mode == "UNIFORM" or not 0 <= a < rank:
        count = 1
    elif mode == "CHANNEL":
        count = shape[a]
    else:
        count = math.prod(shape[a:])
    dtype = pick(rng, {"FLOAT": 8, "HALF": 3, "BF16": 3, "INT8": 1, "INT32": 1})
    wtype = dtype if dtype in FLOATS and rng.random() < 0.95 else rng.choice(FLOATS)
    if rng.random() < 0.05:
        count += 1
    present = [key for key in ("shift", "scale", "power") if rng.random() < 0.5]
    weights = {key: W(rng, count, wtype) for key in present}
    dynamic = rng.random() < 0.2 and rank > 1
    xshape = dyn(shape, dynamic)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        kw = {key: w(trt) for key, w in weights.items()}
        m = enum(trt, "ScaleMode", mode)
        layer = net.add_scale_nd(x, m, channel_axis=axis, **kw) if nd else net.add_scale(x, m, **kw)
        return [layer.get_output(0)]

    what = f"add_scale_nd channel_axis={axis}" if nd else "add_scale"
    return single("scale", f"{what} {mode} x={shape_str(xshape)} {dtype} "
                           f"{' '.join(f'{k}={w}' for k, w in weights.items()) or 'no weights'}", build, dynamic)


def reduce_case(rng):
    rank = rng.randint(1, 5)
    shape = [rng.randint(1, 4) for _ in range(rank)]
    axes = rng.randint(1, (1 << rank) - 1) if rng.random() < 0.92 else rng.choice([0, 1 << rank, (1 << (rank + 1)) - 1])
    op = rng.choice(["SUM", "PROD", "MAX", "MIN", "AVG"])
    keep = rng.random() < 0.5
    dtype = some_dtype(rng, 0.5)
    dynamic = rng.random() < 0.2
    xshape = dyn(shape, dynamic)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        return [net.add_reduce(x, enum(trt, "ReduceOperation", op), axes, keep).get_output(0)]

    return single("reduce", f"reduce {op} x={shape_str(xshape)} {dtype} axes={axes:#b} keep_dims={keep}", build,
                  dynamic)


EW_OPS = ("SUM", "PROD", "MAX", "MIN", "SUB", "DIV", "POW", "FLOOR_DIV", "AND", "OR", "XOR", "EQUAL", "GREATER", "LESS")


def elementwise_case(rng):
    rank = rng.randint(1, 4)
    a = [rng.randint(1, 4) for _ in range(rank)]
    b = [pick(rng, {d: 6, 1: 3, d + 1: 1}) if True else d for d in a]
    if rng.random() < 0.3:
        a, b = [1 if rng.random() < 0.3 else d for d in a], b
    if rng.random() < 0.07:
        b = b[1:] if len(b) > 1 else b + [1]
    op = rng.choice(EW_OPS)
    ta = some_dtype(rng, 0.5) if op not in ("AND", "OR", "XOR") or rng.random() < 0.3 else "BOOL"
    tb = ta if rng.random() < 0.93 else some_dtype(rng, 0.5)
    dynamic = rng.random() < 0.2
    ashape, bshape = dyn(a, dynamic), dyn(b, dynamic and rng.random() < 0.7)

    def build(trt, net):
        x = net.add_input("a", dt(trt, ta), ashape)
        y = net.add_input("b", dt(trt, tb), bshape)
        return [net.add_elementwise(x, y, enum(trt, "ElementWiseOperation", op)).get_output(0)]

    return single("elementwise", f"elementwise {op} a={shape_str(ashape)} {ta} b={shape_str(bshape)} {tb}",
                  build, dynamic)


UNARY_OPS = ("EXP", "LOG", "SQRT", "RECIP", "ABS", "NEG", "SIN", "COS", "TAN", "SINH", "COSH", "ASIN", "ACOS",
             "ATAN", "ASINH", "ACOSH", "ATANH", "CEIL", "FLOOR", "ERF", "NOT", "SIGN", "ROUND", "ISINF", "ISNAN")


def unary_case(rng):
    shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
    op = rng.choice(UNARY_OPS)
    dtype = some_dtype(rng, 0.5)
    dynamic = rng.random() < 0.2

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        return [net.add_unary(x, enum(trt, "UnaryOperation", op)).get_output(0)]

    return single("unary", f"unary {op} x={shape_str(dyn(shape, dynamic))} {dtype}", build, dynamic)


ACTIVATIONS = ("RELU", "SIGMOID", "TANH", "LEAKY_RELU", "ELU", "SELU", "SOFTSIGN", "SOFTPLUS", "CLIP",
               "HARD_SIGMOID", "SCALED_TANH", "THRESHOLDED_RELU", "GELU_ERF", "GELU_TANH")


def activation_case(rng):
    shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 5))]
    kind = rng.choice(ACTIVATIONS)
    dtype = some_dtype(rng, 0.5)
    ab = (rng.uniform(-2, 2), rng.uniform(-2, 2)) if rng.random() < 0.3 else None
    dynamic = rng.random() < 0.2

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        layer = net.add_activation(x, enum(trt, "ActivationType", kind))
        if ab:
            layer.alpha, layer.beta = ab
        return [layer.get_output(0)]

    return single("activation", f"activation {kind} x={shape_str(dyn(shape, dynamic))} {dtype} alpha/beta={ab}",
                  build, dynamic)


def identity_case(rng):
    shape = [rng.randint(1, 4) for _ in range(rng.randint(0, 4))]
    dtype = rng.choice(DTYPES)
    dynamic = rng.random() < 0.2 and shape

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        return [net.add_identity(x).get_output(0)]

    return single("identity", f"identity x={shape_str(dyn(shape, dynamic))} {dtype}", build, bool(dynamic))


def cast_cases(rng):
    """Every (input type, target type) pair, each on a random shape, static and dynamic."""
    cases = []
    for src in DTYPES:
        for dst in CAST_TARGETS:
            for dynamic in (False, True):
                shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
                xshape = dyn(shape, dynamic)

                def build(trt, net, src=src, dst=dst, xshape=xshape):
                    x = net.add_input("x", dt(trt, src), xshape)
                    return [net.add_cast(x, dt(trt, dst)).get_output(0)]

                cases.append(single("cast", f"cast {src} -> {dst} x={shape_str(xshape)}", build, dynamic))
    return cases


def constant_case(rng):
    shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(0, 4)))
    dtype = pick(rng, {"FLOAT": 3, "HALF": 2, "BF16": 2, "INT32": 2, "INT64": 2, "INT8": 2, "BOOL": 2, "UINT8": 2})
    count = math.prod(shape) + (rng.choice([-1, 1]) if rng.random() < 0.06 else 0)
    w = W(rng, max(count, 0), dtype)
    then = rng.choice([None, None, "identity", "shuffle"])

    def build(trt, net):
        y = net.add_constant(shape, w(trt)).get_output(0)
        if then == "identity":
            y = net.add_identity(y).get_output(0)
        elif then == "shuffle":
            y = net.add_shuffle(y).get_output(0)
        return [y]

    return single("constant", f"constant shape={shape_str(shape)} weights={w}" + (f" then {then}" if then else ""),
                  build)


def resize_case(rng):
    rank = pick(rng, {1: 1, 2: 2, 3: 3, 4: 8, 5: 3})
    shape = [rng.randint(1, 5) for _ in range(rank)]
    dtype = some_dtype(rng, 0.8)
    dynamic = rng.random() < 0.15 and rank > 1
    xshape = dyn(shape, dynamic)
    n = rank + (rng.choice([-1, 1]) if rng.random() < 0.05 else 0)
    resized = rng.sample(range(rank), min(rank, pick(rng, {1: 3, 2: 6, 3: 2, 4: 1})))
    if rng.random() < 0.5:
        out = ("scales", [rng.choice([0.5, 1.5, 2.0, 3.0, 0.0, -1.0] if rng.random() < 0.05 else [0.5, 1.5, 2.0, 3.0])
                          if i in resized else 1.0 for i in range(n)])
    else:
        out = ("shape", tuple((rng.randint(-1 if rng.random() < 0.05 else 0, 9) if i in resized
                               else (shape[i] if i < rank else 1)) for i in range(n)))
    attrs = [("resize_mode", ("InterpolationMode", rng.choice(["NEAREST", "LINEAR", "CUBIC"])))]
    for key, cls, names in [("coordinate_transformation", "ResizeCoordinateTransformation",
                             ["ALIGN_CORNERS", "ASYMMETRIC", "HALF_PIXEL"]),
                            ("selector_for_single_pixel", "ResizeSelector", ["FORMULA", "UPPER"]),
                            ("nearest_rounding", "ResizeRoundMode", ["HALF_UP", "HALF_DOWN", "FLOOR", "CEIL"])]:
        if rng.random() < 0.5:
            attrs.append((key, (cls, rng.choice(names))))
    if rng.random() < 0.3:
        attrs.append(("cubic_coeff", rng.choice([-0.75, -0.5, -1.0])))
    if rng.random() < 0.3:
        attrs.append(("exclude_outside", rng.random() < 0.5))

    def build(trt, net):
        layer = net.add_resize(net.add_input("x", dt(trt, dtype), xshape))
        setattr(layer, *out)
        _apply(trt, layer, attrs)
        return [layer.get_output(0)]

    return single("resize", f"resize x={shape_str(xshape)} {dtype} {out[0]}={out[1]} {_attr_str(attrs)}", build,
                  dynamic)

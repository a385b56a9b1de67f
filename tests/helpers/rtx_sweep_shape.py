"""Sweep cases (see tests/helpers/rtx_sweep.py) for the layers that move data around or mix several inputs:
shuffle, slice, concatenation, matrix multiply, softmax and normalization."""

from __future__ import annotations

import math

from helpers.rtx_sweep import DTYPES, FLOATS, dt, dyn, enum, pick, shape_str, single, some_dtype


def _perm(rng, n, valid=0.93):
    p = list(range(n))
    rng.shuffle(p)
    if rng.random() > valid and n:
        p[rng.randrange(n)] = n  # not a permutation
    return tuple(p)


def _factor(rng, volume: int, rank: int) -> list[int]:
    """`rank` positive ints whose product is `volume`."""
    dims = [1] * rank
    for p in _primes(volume):
        dims[rng.randrange(rank)] *= p
    return dims


def _primes(n: int) -> list[int]:
    out, f = [], 2
    while n > 1:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out


def shuffle_case(rng):
    rank = rng.randint(1, 5)
    shape = [rng.randint(1, 4) for _ in range(rank)]
    dynamic = rng.random() < 0.25
    xshape = dyn(shape, dynamic)
    first = _perm(rng, rank) if rng.random() < 0.5 else None
    mid = [shape[i] for i in first] if first and all(i < rank for i in first) else list(shape)
    reshape, zero_ph = None, True
    if rng.random() < 0.7:
        out_rank = rng.randint(1, 5)
        dims = _factor(rng, math.prod(mid), out_rank)
        for i in range(out_rank):  # copy-through placeholders where the sizes line up
            if i < len(mid) and dims[i] == mid[i] and rng.random() < 0.4:
                dims[i] = 0
        if rng.random() < 0.5:
            dims[rng.randrange(out_rank)] = -1
        if rng.random() < 0.06:
            dims[rng.randrange(out_rank)] += 1  # wrong volume
        if rng.random() < 0.04:
            dims = [-1, -1] + dims[2:]
        if 0 in dims and rng.random() < 0.15:
            zero_ph = False
        reshape = tuple(dims)
    out_rank = len(reshape) if reshape is not None else rank
    # (never an invalid second_transpose: TensorRT-RTX 1.7 segfaults on a shape query after one)
    second = _perm(rng, out_rank, valid=1.0) if rng.random() < 0.4 else None
    dtype = some_dtype(rng, 0.5)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        layer = net.add_shuffle(x)
        if first is not None:
            layer.first_transpose = first
        if not zero_ph:
            layer.zero_is_placeholder = False
        if reshape is not None:
            layer.reshape_dims = reshape
        if second is not None:
            layer.second_transpose = second
        return [layer.get_output(0)]

    return single("shuffle", f"shuffle x={shape_str(xshape)} {dtype} first={first} reshape={reshape} "
                             f"zero_is_placeholder={zero_ph} second={second}", build, dynamic)


SAMPLE_MODES = ("STRICT_BOUNDS", "WRAP", "CLAMP", "FILL", "REFLECT")


def slice_case(rng):
    rank = rng.randint(1, 4)
    shape = [rng.randint(1, 6) for _ in range(rank)]
    mode = pick(rng, {"STRICT_BOUNDS": 5, "WRAP": 1, "CLAMP": 1, "FILL": 1, "REFLECT": 1})
    start, size, stride = [], [], []
    for d in shape:
        s = pick(rng, {1: 6, 2: 2, 3: 1, -1: 2, -2: 1})
        n = rng.randint(1, d)
        a = rng.randint(0, d - 1)
        if rng.random() < 0.15:  # may read out of bounds
            a, n = rng.randint(-2, d + 1), rng.randint(0, d + 2)
        start.append(a), size.append(n), stride.append(s)
    dynamic = rng.random() < 0.2
    xshape = dyn(shape, dynamic)
    dtype = some_dtype(rng, 0.5)
    bad = rng.random() < 0.04
    if bad:
        stride = stride[:-1] or [1, 1]

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        layer = net.add_slice(x, tuple(start), tuple(size), tuple(stride))
        if mode != "STRICT_BOUNDS":
            layer.mode = enum(trt, "SampleMode", mode)
        return [layer.get_output(0)]

    return single("slice", f"slice {mode} x={shape_str(xshape)} {dtype} start={tuple(start)} size={tuple(size)} "
                           f"stride={tuple(stride)}", build, dynamic)


def concat_case(rng):
    n = pick(rng, {1: 1, 2: 5, 3: 3, 4: 1})
    rank = rng.randint(1, 4)
    base = [rng.randint(1, 4) for _ in range(rank)]
    axis = rng.randint(-1, rank) if rng.random() < 0.15 else rng.randint(0, rank - 1)
    set_axis = rng.random() < 0.7
    real_axis = axis if set_axis else (rank - 3 if rank >= 3 else 0)
    shapes = []
    for _ in range(n):
        s = list(base)
        if 0 <= real_axis < rank:
            s[real_axis] = rng.randint(1, 4)
        if rng.random() < 0.05:
            s[rng.randrange(rank)] += 1
        shapes.append(s)
    dtype = some_dtype(rng, 0.5)
    types = [dtype if rng.random() < 0.95 else some_dtype(rng) for _ in range(n)]
    dynamic = rng.random() < 0.2 and real_axis != 0
    shapes = [dyn(s, dynamic) for s in shapes]

    def build(trt, net):
        xs = [net.add_input(f"x{i}", dt(trt, t), s) for i, (t, s) in enumerate(zip(types, shapes))]
        layer = net.add_concatenation(xs)
        if set_axis:
            layer.axis = axis
        return [layer.get_output(0)]

    return single("concatenation", f"concatenation axis={axis if set_axis else 'default'} inputs="
                                   f"{', '.join(f'{shape_str(s)} {t}' for s, t in zip(shapes, types))}", build, dynamic)


def matmul_case(rng):
    op0 = pick(rng, {"NONE": 5, "TRANSPOSE": 3, "VECTOR": 2})
    op1 = pick(rng, {"NONE": 5, "TRANSPOSE": 3, "VECTOR": 2})
    m, k, n = rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5)
    mat_a = [k] if op0 == "VECTOR" else ([m, k] if op0 == "NONE" else [k, m])
    mat_b = [k] if op1 == "VECTOR" else ([k, n] if op1 == "NONE" else [n, k])
    batch = [rng.randint(1, 3) for _ in range(rng.randint(0, 2))]
    a = [d if rng.random() < 0.8 else 1 for d in batch] + mat_a
    b = [d if rng.random() < 0.8 else 1 for d in batch] + mat_b
    r = rng.random()
    if r < 0.06:
        a = a[1:] if len(a) > 1 else [2] + a  # ranks that do not line up
    elif r < 0.12:
        a = a[-1:]  # a rank-1 input whatever the operation
    elif r < 0.16:
        b[-1 if op1 == "TRANSPOSE" else 0] += 1  # inner dims differ
    ta = pick(rng, {"FLOAT": 8, "HALF": 3, "BF16": 3, "INT32": 1, "INT8": 1, "BOOL": 1})
    tb = ta if rng.random() < 0.95 else some_dtype(rng)
    dynamic = rng.random() < 0.2 and len(a) > 2 and len(b) > 2

    def build(trt, net):
        x = net.add_input("a", dt(trt, ta), dyn(a, dynamic))
        y = net.add_input("b", dt(trt, tb), dyn(b, dynamic))
        layer = net.add_matrix_multiply(x, enum(trt, "MatrixOperation", op0), y, enum(trt, "MatrixOperation", op1))
        return [layer.get_output(0)]

    return single("matrix_multiply", f"matrix_multiply a={shape_str(dyn(a, dynamic))} {ta} {op0} "
                                     f"b={shape_str(dyn(b, dynamic))} {tb} {op1}", build, dynamic)


def softmax_case(rng):
    rank = rng.randint(1, 5)
    shape = [rng.randint(1, 4) for _ in range(rank)]
    axes = None
    if rng.random() < 0.7:
        axes = 1 << rng.randrange(rank) if rng.random() < 0.85 else rng.choice([0, 3, 1 << rank])
    dtype = some_dtype(rng, 0.7)
    dynamic = rng.random() < 0.2

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        layer = net.add_softmax(x)
        if axes is not None:
            layer.axes = axes
        return [layer.get_output(0)]

    return single("softmax", f"softmax x={shape_str(dyn(shape, dynamic))} {dtype} axes="
                             f"{'default' if axes is None else bin(axes)}", build, dynamic)


def normalization_case(rng):
    v2 = rng.random() < 0.5
    rank = pick(rng, {2: 1, 3: 3, 4: 6, 5: 2})
    shape = [rng.randint(1, 3)] + [rng.randint(1, 6) for _ in range(rank - 1)]
    c = shape[1]
    groups = 1
    if rng.random() < 0.35:
        groups = rng.choice([g for g in range(2, 7) if c % g == 0] or [2])
    if groups > 1 and rng.random() < 0.9:
        axes = sum(1 << i for i in range(2, rank)) or 2
    else:
        axes = rng.randint(1, (1 << rank) - 1)
    kind = pick(rng, {"channel": 4, "group": 2 if groups > 1 else 0, "ones": 1, "full": 1, "random": 2, "bad": 1})
    if kind == "channel":
        sshape = [1, c] + [1] * (rank - 2)
    elif kind == "group":
        sshape = [1, groups] + [1] * (rank - 2)
    elif kind == "ones":
        sshape = [1] * rank
    elif kind == "full":
        sshape = list(shape)
    elif kind == "random":
        sshape = [d if rng.random() < 0.4 else 1 for d in shape]
    else:
        sshape = rng.choice([[d + 1 for d in shape], [1] * (rank - 1) or [1, 1], [c]])
    bshape = sshape if rng.random() < 0.95 else [1] * len(sshape)
    dtype = pick(rng, {"FLOAT": 6, "HALF": 3, "BF16": 3, "INT32": 1})
    stype = dtype if rng.random() < 0.93 else rng.choice(FLOATS)
    dynamic = rng.random() < 0.2

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        s = net.add_input("scale", dt(trt, stype), tuple(sshape))
        b = net.add_input("bias", dt(trt, stype), tuple(bshape))
        add = net.add_normalization_v2 if v2 else net.add_normalization
        layer = add(x, s, b, axes)
        if groups > 1:
            layer.num_groups = groups
        return [layer.get_output(0)]

    return single("normalization", f"{'add_normalization_v2' if v2 else 'add_normalization'} "
                                   f"x={shape_str(dyn(shape, dynamic))} {dtype} axes={axes:#b} groups={groups} "
                                   f"scale={shape_str(sshape)} bias={shape_str(bshape)} {stype}", build, dynamic)


__all__ = ["DTYPES", "shuffle_case", "slice_case", "concat_case", "matmul_case", "softmax_case", "normalization_case"]

"""Random cases of the rtx sweep (tests/reference/test_rtx_sweep.py) for shape tensors (add_shape feeding the
shape inputs of shuffle, slice and resize, constants of INT32/INT64/FLOAT as shape inputs) and for fills
(every operation and output type; alpha/beta as attributes or tensors; dims from attributes or a shape tensor)."""

from __future__ import annotations

import numpy as np

from .rtx_sweep import dt, dyn, enum, pick, shape_str, single

_INTS = {"INT32": np.int32, "INT64": np.int64, "FLOAT": np.float32}


def _const(net, values, kind: str):
    arr = np.array(values, dtype=_INTS[kind])
    return net.add_constant(arr.shape, arr).get_output(0)


def shape_tensor_case(rng):
    rank = pick(rng, {1: 1, 2: 3, 3: 3, 4: 3})
    shape = [rng.randint(1, 5) for _ in range(rank)]
    dynamic = rng.random() < 0.3
    xshape = dyn(shape, dynamic)
    kind = pick(rng, {"INT64": 6, "INT32": 3, "FLOAT": 1})
    use = pick(rng, {"flatten": 3, "dims": 2, "slice": 3, "resize": 2, "computed": 4})
    axis = rng.randint(0, rank)
    dims = [rng.choice([0, -1, 1, 2, 3, 4, 6]) for _ in range(rng.randint(1, 4))]
    halve = [rng.choice([1, 2]) for _ in range(rank)]
    start = [rng.randint(0, 1) for _ in range(rank)]
    grow = [rng.choice([1, 2]) for _ in range(rank)]
    pieces = _pieces(rng, rank)

    def build(trt, net):
        x = net.add_input("x", dt(trt, "FLOAT"), xshape)
        s = net.add_shape(x).get_output(0)
        if use == "flatten":  # concat(shape(x)[:axis], [-1])
            parts = [net.add_slice(s, (0,), (axis,), (1,)).get_output(0)] if axis else []
            d = net.add_concatenation(parts + [_const(net, [-1], "INT64")]).get_output(0)
            if kind != "INT64":
                d = net.add_cast(d, dt(trt, kind)).get_output(0)
            layer = net.add_shuffle(x)
        elif use == "dims":
            d = _const(net, dims, kind)
            layer = net.add_shuffle(x)
        elif use == "slice":
            d = net.add_elementwise(s, _const(net, halve, "INT64"), enum(trt, "ElementWiseOperation", "FLOOR_DIV"))
            d = d.get_output(0)
            layer = net.add_slice(x, start, [1] * rank, [1] * rank)
            layer.set_input(1, _const(net, start, kind))
        elif use == "computed":
            d = net.add_concatenation([_piece(trt, net, s, piece) for piece in pieces]).get_output(0)
            layer = net.add_shuffle(x)
        else:
            d = net.add_elementwise(s, _const(net, grow, "INT64"), enum(trt, "ElementWiseOperation", "PROD"))
            d = d.get_output(0)
            layer = net.add_resize(x)
        layer.set_input(2 if use == "slice" else 1, d)
        return [layer.get_output(0)]

    what = {"flatten": f"axis={axis}", "dims": f"dims={dims}", "slice": f"start={start} size=shape//{halve}",
            "resize": f"shape*{grow}", "computed": f"dims={pieces}"}[use]
    return single("shape_tensor", f"shape tensor {use} x={shape_str(xshape)} {kind} {what}", build, dynamic)


def fill_case(rng):
    op = pick(rng, {"LINSPACE": 3, "RANDOM_UNIFORM": 1, "RANDOM_NORMAL": 1})
    to = pick(rng, {"FLOAT": 4, "HALF": 2, "INT32": 2, "INT64": 2, "BF16": 1})
    rank = pick(rng, {1: 4, 2: 2, 3: 1})
    dims = [rng.randint(1, 4) for _ in range(rank)]
    tensors = rng.random() < 0.5
    tensor_type = to if rng.random() < 0.8 else rng.choice(["FLOAT", "INT32", "INT64"])
    shape_in = pick(rng, {None: 3, "INT32": 1, "INT64": 1})
    alpha, beta = (rng.randint(-3, 3), rng.randint(1, 3)) if rng.random() < 0.3 else (rng.uniform(-2, 0),
                                                                                     rng.uniform(1, 2))

    def build(trt, net):
        f = net.add_fill([0] * rank if shape_in else dims, enum(trt, "FillOperation", op), dt(trt, to))
        if shape_in:
            f.set_input(0, _const(net, dims, shape_in))
        if tensors:
            kind = tensor_type if tensor_type in _INTS else "FLOAT"
            np_type = {"INT32": np.int32, "INT64": np.int64}.get(kind, np.float32)
            a = np.array(alpha, np_type)
            b = np.array([beta] * rank if op == "LINSPACE" else beta, np_type)
            f.set_input(1, net.add_constant(a.shape, a).get_output(0))
            f.set_input(2, net.add_constant(b.shape, b).get_output(0))
        else:
            f.alpha = alpha
            f.beta = beta
        return [f.get_output(0)]

    how = f"tensors {tensor_type}" if tensors else f"alpha={alpha} beta={beta}"
    return single("fill", f"fill {op} {to} dims={dims} from {shape_in or 'attribute'} {how}", build)


_OPS = ("SUM", "SUB", "PROD", "FLOOR_DIV", "MIN", "MAX")


def _pieces(rng, rank: int) -> list:
    """Random reshape dims computed from the input's shape: ("dim", i), ("const", k), ("prod", i, j) (the product
    of dims i..j-1 by a reduce) or ("op", name, i, k) (dim i with a constant)."""
    out = []
    for _ in range(rng.randint(1, 3)):
        kind = pick(rng, {"dim": 3, "const": 2, "prod": 2, "op": 2})
        i = rng.randrange(rank)
        if kind == "dim":
            out.append(("dim", i))
        elif kind == "const":
            out.append(("const", rng.choice([-1, 0, 1, 2, 3, 4])))
        elif kind == "prod":
            out.append(("prod", i, rng.randint(i + 1, rank)))
        else:
            out.append(("op", rng.choice(_OPS), i, rng.choice([0, 1, 1, 2, 3])))
    return out


def _piece(trt, net, s, piece):
    if piece[0] == "const":
        return _const(net, [piece[1]], "INT64")
    if piece[0] == "prod":
        part = net.add_slice(s, (piece[1],), (piece[2] - piece[1],), (1,)).get_output(0)
        return net.add_reduce(part, enum(trt, "ReduceOperation", "PROD"), 1, True).get_output(0)
    dim = net.add_slice(s, (piece[-2] if piece[0] == "op" else piece[1],), (1,), (1,)).get_output(0)
    if piece[0] == "dim":
        return dim
    return net.add_elementwise(dim, _const(net, [piece[3]], "INT64"),
                               enum(trt, "ElementWiseOperation", piece[1])).get_output(0)


# -- broadcast slices: stride 0 with a shape-tensor size (expand to a dynamic size, as a class token to the batch) --

def broadcast_slice_case(rng):
    """A slice of x with stride 0 on some dims (mostly size-1 dims, sometimes a larger one read at a random
    start) and stride 1 on the others, its size a shape tensor: per dim x's own size (gathered from its
    shape) for a stride-1 dim, and for a stride-0 dim a constant or any dim of x's shape. One case in ten
    starts a dim just past its end (out of bounds unless that dim's size is 0)."""
    rank = pick(rng, {1: 1, 2: 3, 3: 4, 4: 2})
    shape = [rng.choice([1, 1, 2, 3, 4]) for _ in range(rank)]
    dynamic = rng.random() < 0.5
    xshape = dyn(shape, dynamic)
    stride = [0 if (shape[i] == 1 and rng.random() < 0.8) or rng.random() < 0.15 else 1 for i in range(rank)]
    start = [rng.randrange(shape[i]) if stride[i] == 0 and not (dynamic and i == 0) else 0 for i in range(rank)]
    if rng.random() < 0.1:  # one start just past the end of a static dim: out of bounds for a size > 0
        i = rng.randrange(1 if dynamic else 0, rank) if rank > 1 or not dynamic else 0
        start[i] = shape[i]
    sizes = [("dim", i) if stride[i] else (("const", rng.randint(0, 4)) if rng.random() < 0.5
                                           else ("dim", rng.randrange(rank))) for i in range(rank)]
    kind = pick(rng, {"INT64": 3, "INT32": 1})

    def build(trt, net):
        x = net.add_input("x", dt(trt, "FLOAT"), xshape)
        s = net.add_shape(x).get_output(0)
        parts = [_const(net, [v], "INT64") if what == "const" else
                 net.add_gather(s, _const(net, [v], "INT64"), 0).get_output(0) for what, v in sizes]
        d = net.add_concatenation(parts).get_output(0) if len(parts) > 1 else parts[0]
        if kind != "INT64":
            d = net.add_cast(d, dt(trt, kind)).get_output(0)
        layer = net.add_slice(x, start, [1] * rank, stride)
        layer.set_input(2, d)
        return [layer.get_output(0)]

    return single("broadcast_slice", f"broadcast slice x={shape_str(xshape)} start={start} stride={stride} "
                                     f"size={sizes} {kind}", build, dynamic)

"""Seeded constructions for the sweep (tests/reference/test_rtx_sweep.py): squeeze, unsqueeze, parametric ReLU,
select, gather (DEFAULT, ELEMENT, ND), cumulative and one-hot.

As in rtx_sweep.py, the generators draw valid and invalid constructions alike (axes out of range, non-unit
squeezes, rank and type mismatches, index shapes that do not fit) and know nothing of what either builder says.
Index tensors are constants (in range, so the reference can run the engine at the profile's shapes), axes
inputs are constants of the types TensorRT takes and some it does not.
"""

from __future__ import annotations

import numpy as np

from .rtx_sweep import DTYPES, W, dt, dyn, enum, pick, shape_str, single, some_dtype


def _const(net, trt, array: np.ndarray):
    return net.add_constant(array.shape, array).get_output(0)


def _axes_array(rng, axes, rank0: bool = False) -> np.ndarray:
    dtype = pick(rng, {np.int32: 6, np.int64: 3, np.float32: 1})
    return np.array(axes[0] if rank0 else axes, dtype=dtype)


def _shape(rng, lo=1, hi=4, rank=None):
    rank = pick(rng, {0: 1, 1: 2, 2: 3, 3: 3, 4: 3}) if rank is None else rank
    return [rng.choice([1, 1, rng.randint(lo, hi)]) for _ in range(rank)]


def squeeze_case(rng):
    shape = _shape(rng)
    dtype = some_dtype(rng, 0.6)
    dynamic = rng.random() < 0.2 and len(shape) > 1
    xshape = dyn(shape, dynamic)
    n = rng.randint(0, max(1, len(shape)))
    axes = [rng.randint(-len(shape) - 1, len(shape)) for _ in range(n)]
    no_axes = rng.random() < 0.15
    array = None if no_axes else _axes_array(rng, axes)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        layer = net.add_squeeze(x) if array is None else net.add_squeeze(x, _const(net, trt, array))
        return [layer.get_output(0)]

    what = "no axes" if array is None else f"axes={array.tolist()} {array.dtype}"
    return single("squeeze", f"squeeze x={shape_str(xshape)} {dtype} {what}", build, dynamic)


def unsqueeze_case(rng):
    shape = _shape(rng)
    dtype = some_dtype(rng, 0.6)
    dynamic = rng.random() < 0.2 and len(shape) > 1
    xshape = dyn(shape, dynamic)
    out_rank = len(shape) + rng.randint(1, 2)
    axes = [rng.randint(-out_rank - 1, out_rank) for _ in range(rng.randint(1, 2))]
    array = _axes_array(rng, axes)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        return [net.add_unsqueeze(x, _const(net, trt, array)).get_output(0)]

    return single("unsqueeze", f"unsqueeze x={shape_str(xshape)} {dtype} axes={array.tolist()} {array.dtype}", build,
                  dynamic)


def parametric_relu_case(rng):
    shape = _shape(rng, rank=rng.randint(1, 4))
    dtype = some_dtype(rng, 0.8)
    sdtype = dtype if rng.random() < 0.85 else some_dtype(rng, 0.8)
    dynamic = rng.random() < 0.2 and len(shape) > 1
    xshape = dyn(shape, dynamic)
    sshape = [d if rng.random() < 0.5 else 1 for d in shape]
    if rng.random() < 0.15:
        sshape = sshape[1:]  # a lower rank: TensorRT wants equal ranks
    if rng.random() < 0.1 and sshape:
        sshape[-1] += 1
    weights = W(rng, int(np.prod(sshape)) if sshape else 1, sdtype)

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        slopes = net.add_constant(tuple(sshape), weights(trt)).get_output(0)
        return [net.add_parametric_relu(x, slopes).get_output(0)]

    return single("parametric_relu", f"prelu x={shape_str(xshape)} {dtype} slopes={shape_str(sshape)} {weights}",
                  build, dynamic)


def select_case(rng):
    rank = rng.randint(0, 4)
    shape = _shape(rng, rank=rank)
    dtype = some_dtype(rng, 0.6)
    odtype = dtype if rng.random() < 0.85 else rng.choice(DTYPES)
    cdtype = "BOOL" if rng.random() < 0.9 else rng.choice(DTYPES)
    dynamic = rng.random() < 0.2 and rank > 1
    shapes = [[d if rng.random() < 0.7 else 1 for d in shape] for _ in range(3)]
    if rng.random() < 0.1 and rank:
        shapes[rng.randrange(3)][-1] += 2  # not broadcastable

    def build(trt, net):
        c = net.add_input("c", dt(trt, cdtype), dyn(shapes[0], dynamic and shapes[0][0] == shape[0]))
        a = net.add_input("a", dt(trt, dtype), tuple(shapes[1]))
        b = net.add_input("b", dt(trt, odtype), tuple(shapes[2]))
        return [net.add_select(c, a, b).get_output(0)]

    desc = f"select c={shape_str(shapes[0])} {cdtype} a={shape_str(shapes[1])} {dtype} b={shape_str(shapes[2])} " \
           f"{odtype}"
    return single("select", desc, build, dynamic and shapes[0][0] == shape[0])


def gather_case(rng):
    mode = pick(rng, {"DEFAULT": 5, "ELEMENT": 3, "ND": 3})
    shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
    rank = len(shape)
    dtype = some_dtype(rng, 0.6)
    itype = pick(rng, {"INT32": 6, "INT64": 3, "FLOAT": 1})
    axis = rng.randint(-1, rank) if rng.random() < 0.1 else rng.randrange(rank)
    ned = pick(rng, {0: 6, 1: 3, 2: 1})
    a = axis % rank if -rank <= axis < rank else 0
    if mode == "ELEMENT":
        ishape = [rng.randint(1, d) if i != a else rng.randint(1, 4) for i, d in enumerate(shape)]
        if rng.random() < 0.1:
            ishape = ishape[1:] or [2]
        high = shape[a]
    elif mode == "ND":
        q = rng.randint(1, max(1, rank - ned))
        ishape = shape[:ned] + [rng.randint(1, 3) for _ in range(rng.randint(0, 2))] + [q]
        high = min(shape[ned:ned + q] or [1])
    else:
        ishape = shape[:ned] + [rng.randint(1, 3) for _ in range(rng.randint(0, 2))]
        high = shape[a]
    rows = np.random.default_rng(rng.randrange(1 << 32)).integers(-high, high, size=ishape or None)
    indices = np.asarray(rows, dtype={"INT32": np.int32, "INT64": np.int64, "FLOAT": np.float32}[itype])

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), tuple(shape))
        layer = net.add_gather_v2(x, _const(net, trt, indices), enum(trt, "GatherMode", mode))
        layer.axis = axis
        layer.num_elementwise_dims = ned
        return [layer.get_output(0)]

    return single("gather", f"gather {mode} x={shape_str(shape)} {dtype} indices={shape_str(indices.shape)} {itype} "
                            f"axis={axis} ned={ned}", build)


def cumulative_case(rng):
    shape = _shape(rng, rank=rng.randint(0 if rng.random() < 0.1 else 1, 4))
    dtype = some_dtype(rng, 0.6)
    dynamic = rng.random() < 0.2 and len(shape) > 1
    xshape = dyn(shape, dynamic)
    axis = rng.randint(-len(shape) - 1, len(shape))
    array = _axes_array(rng, [axis], rank0=rng.random() < 0.9)
    exclusive, reverse = rng.random() < 0.5, rng.random() < 0.5

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        layer = net.add_cumulative(x, _const(net, trt, array), trt.CumulativeOperation.SUM, exclusive, reverse)
        return [layer.get_output(0)]

    return single("cumulative", f"cumulative x={shape_str(xshape)} {dtype} axis={array.tolist()} {array.dtype} "
                                f"exclusive={exclusive} reverse={reverse}", build, dynamic)


def one_hot_case(rng):
    shape = _shape(rng, rank=rng.randint(0, 3))
    itype = pick(rng, {"INT32": 6, "INT64": 3, "FLOAT": 1})
    vtype = some_dtype(rng, 0.7)
    depth = rng.randint(1, 6)
    dtype_depth = pick(rng, {np.int32: 8, np.int64: 1, np.float32: 1})
    axis = rng.randint(-len(shape) - 2, len(shape) + 1)
    dynamic = rng.random() < 0.2 and len(shape) > 1
    indices_shape = dyn(shape, dynamic)
    values = W(rng, 2 if rng.random() < 0.9 else 3, vtype)

    def build(trt, net):
        i = net.add_input("i", dt(trt, itype), indices_shape)
        v = net.add_constant((values.count,), values(trt)).get_output(0)
        d = _const(net, trt, np.array(depth, dtype=dtype_depth))
        return [net.add_one_hot(i, v, d, axis).get_output(0)]

    return single("one_hot", f"one_hot indices={shape_str(indices_shape)} {itype} values={values} depth={depth} "
                             f"{np.dtype(dtype_depth).name} axis={axis}", build, dynamic)

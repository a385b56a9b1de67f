"""Random control-flow cases for the TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py): an if-conditional
choosing between two small branches, and a loop iterating over an input with a recurrence and scan outputs.
Most draws are valid; some break one rule TensorRT enforces (the condition's shape or type, the branches'
ranks, types or static dims, a branch or body tensor marked as an output, a body layer feeding both branches,
a missing condition, trip limit or next value, a LAST_VALUE of a body tensor, an out-of-range axis)."""

from __future__ import annotations

import numpy as np

from helpers.rtx_sweep import dt, dyn, pick, shape_str, single

FLOAT_OPS = ("ABS", "NEG", "EXP")
INT_OPS = ("ABS", "NEG")


def _const(trt, net, value, dtype):
    arr = np.array(value, dtype)
    return net.add_constant(arr.shape, arr).get_output(0)


def conditional_case(rng):
    rank = rng.randint(0, 3)
    shape = tuple(rng.randint(1, 4) for _ in range(rank))
    dtype = pick(rng, {"FLOAT": 4, "HALF": 2, "INT32": 2})
    dynamic = rank > 0 and rng.random() < 0.2
    xshape = dyn(shape, dynamic)
    zdtype = dtype if rng.random() < 0.9 else pick(rng, {"FLOAT": 1, "HALF": 1, "INT32": 1})
    zshape = xshape
    if rng.random() < 0.12:  # another rank, or other static dims
        zshape = rng.choice([xshape + (1,), tuple(d + 1 if d > 0 else d for d in xshape)]) if rank else (1,)
    cshape, cdtype = ((), "BOOL") if rng.random() < 0.85 else rng.choice([((1,), "BOOL"), ((), "INT32")])
    ops = FLOAT_OPS if dtype != "INT32" else INT_OPS
    true_op, false_op = rng.choice(ops + ("input", "outside")), rng.choice(ops + ("input", "outside"))
    fault = pick(rng, {None: 20, "leak": 1, "shared": 1, "no_condition": 1})

    def build(trt, net):
        x, z = net.add_input("x", dt(trt, dtype), xshape), net.add_input("z", dt(trt, zdtype), zshape)
        cond = net.add_if_conditional()
        if fault != "no_condition":
            cond.set_condition(net.add_input("c", dt(trt, cdtype), cshape))
        xi, zi = cond.add_input(x).get_output(0), cond.add_input(z).get_output(0)
        shared = net.add_unary(xi, trt.UnaryOperation.ABS).get_output(0) if fault == "shared" else None

        def branch(op, inside, outside):
            if shared is not None:
                return net.add_unary(shared, trt.UnaryOperation.NEG).get_output(0) if inside is zi else shared
            if op == "input":
                return inside
            if op == "outside":
                return outside
            return net.add_unary(inside, getattr(trt.UnaryOperation, op)).get_output(0)

        t, f = branch(true_op, xi, x), branch(false_op, zi, z)
        outs = [cond.add_output(t, f).get_output(0)]
        if fault == "leak":
            outs.append(net.add_unary(xi, trt.UnaryOperation.NEG).get_output(0))
        return outs

    desc = (f"if x={shape_str(xshape)} {dtype} z={shape_str(zshape)} {zdtype} c={shape_str(cshape)} {cdtype} "
            f"true={true_op} false={false_op}" + (f" fault={fault}" if fault else ""))
    return single("conditional", desc, build, dynamic)


def loop_case(rng):
    rank = rng.randint(1, 3)
    shape = tuple(rng.randint(1, 4) for _ in range(rank))
    dtype = pick(rng, {"FLOAT": 4, "HALF": 2, "INT32": 2})
    dynamic = rank > 1 and rng.random() < 0.2
    xshape = dyn(shape, dynamic)
    axis = rng.randint(1 if dynamic else 0, rank - 1) if not (dynamic and rank == 1) else 0
    if rng.random() < 0.05:
        axis = rank  # out of range
    trips = shape[axis] if axis < rank else 1
    reverse = rng.random() < 0.3
    count_kind = pick(rng, {"INT32": 6, "INT64": 2, "while": 3, "none": 1, "FLOAT": 1, "1-D": 1})
    op = "SUM" if dtype == "INT32" else rng.choice(["SUM", "PROD", "MAX"])
    item = shape[:axis] + shape[axis + 1:] if axis < rank else shape
    out_kind = pick(rng, {"LAST_VALUE": 3, "CONCATENATE": 3, "REVERSE": 2})
    out_axis = rng.randint(0, len(item) + (1 if rng.random() < 0.1 else 0))
    fault = pick(rng, {None: 20, "no_next": 1, "leak": 1, "last_of_body": 1, "next_shape": 1, "no_length": 1})
    np_type = {"FLOAT": np.float32, "HALF": np.float16, "INT32": np.int32}[dtype]

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        loop = net.add_loop()
        if count_kind == "while":  # i < trips, i counting from 0
            i = loop.add_recurrence(_const(trt, net, 0, np.int32))
            limit = _const(trt, net, trips, np.int32)
            less = net.add_elementwise(i.get_output(0), limit, trt.ElementWiseOperation.LESS)
            loop.add_trip_limit(less.get_output(0), trt.TripLimit.WHILE)
            i.set_input(1, net.add_elementwise(i.get_output(0), _const(trt, net, 1, np.int32),
                                               trt.ElementWiseOperation.SUM).get_output(0))
        elif count_kind != "none":
            value, ctype = {"INT32": (trips, np.int32), "INT64": (trips, np.int64), "FLOAT": (trips, np.float32),
                            "1-D": ([trips], np.int32)}[count_kind]
            loop.add_trip_limit(_const(trt, net, value, ctype), trt.TripLimit.COUNT)
        it = loop.add_iterator(x, axis, reverse).get_output(0)
        rec = loop.add_recurrence(_const(trt, net, np.ones(item), np_type))
        body = net.add_elementwise(rec.get_output(0), it, getattr(trt.ElementWiseOperation, op)).get_output(0)
        if fault == "next_shape":
            sh = net.add_shuffle(body)
            sh.reshape_dims = (1,) + tuple(item)
            body = sh.get_output(0)
        if fault != "no_next":
            rec.set_input(1, body)
        if out_kind == "LAST_VALUE":
            out = loop.add_loop_output(body if fault == "last_of_body" else rec.get_output(0),
                                       trt.LoopOutput.LAST_VALUE)
        else:
            out = loop.add_loop_output(body, getattr(trt.LoopOutput, out_kind), out_axis)
            if fault != "no_length":
                out.set_input(1, _const(trt, net, trips, np.int32))
        outs = [out.get_output(0)]
        if fault == "leak":
            outs.append(net.add_unary(body, trt.UnaryOperation.NEG).get_output(0))
        return outs

    desc = (f"loop x={shape_str(xshape)} {dtype} iterator axis={axis} reverse={reverse} count={count_kind} op={op} "
            f"output={out_kind} axis={out_axis}" + (f" fault={fault}" if fault else ""))
    return single("loop", desc, build, dynamic)

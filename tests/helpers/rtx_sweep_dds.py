"""Sweep cases (tests/reference/test_rtx_sweep.py) of the layers with data-dependent output shapes: NonZero and
NMS. Mostly valid constructions, with a few of each kind TensorRT-RTX refuses (input and index types, ranks,
mismatched dims, threshold types and ranks, TopK box limits out of range, a negative constant box count).
TensorRT-RTX builds neither layer (no kernel: tests/helpers/twin.py RTX_NO_KERNEL): the runner takes that one
build failure as acceptance and compares the shapes and dtypes."""

from __future__ import annotations

import numpy as np

from helpers.rtx_sweep import DTYPES, FLOATS, dt, dyn, enum, pick, shape_str, single


def non_zero_case(rng):
    rank = pick(rng, {0: 1, 1: 3, 2: 4, 3: 3, 4: 2, 5: 1})
    shape = [rng.randint(1, 5) for _ in range(rank)]
    dtype = rng.choice(DTYPES) if rng.random() < 0.3 else pick(rng, {"FLOAT": 3, "HALF": 1, "BF16": 1, "INT32": 2,
                                                                     "INT64": 1, "BOOL": 2})
    dynamic = rank > 0 and rng.random() < 0.2
    xshape = dyn(shape, dynamic)
    indices = pick(rng, {None: 4, "INT32": 2, "INT64": 3, "FLOAT": 0.3, "BOOL": 0.2})
    later = rng.random() < 0.2  # set indices_type after the add instead
    setter = pick(rng, {"INT32": 2, "INT64": 2, "HALF": 0.3})

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), xshape)
        layer = net.add_non_zero(x) if indices is None else net.add_non_zero(x, dt(trt, indices))
        if later:
            layer.indices_type = dt(trt, setter)
        return [layer.get_output(0)]

    what = f"indices={indices}" + (f" then indices_type={setter}" if later else "")
    return single("non_zero", f"non_zero x={shape_str(xshape)} {dtype} {what}", build, dynamic)


def _const(trt, net, value, np_type):
    arr = np.array(value, np_type)
    return net.add_constant(arr.shape, arr).get_output(0)


def nms_case(rng):
    batch, n, c = rng.randint(1, 3), rng.randint(1, 9), rng.randint(1, 4)
    per_class = rng.random() < 0.25
    bshape = [batch, n] + ([c] if per_class else []) + [4]
    sshape = [batch, n, c]
    r = rng.random()
    if r < 0.04:
        bshape[-1] = 5
    elif r < 0.07:
        bshape = bshape[1:]
    elif r < 0.10:
        sshape[rng.randrange(3)] += 1
    elif r < 0.12:
        sshape = sshape[1:]
    dtype = rng.choice(FLOATS) if rng.random() < 0.9 else rng.choice(DTYPES)
    sdtype = dtype if rng.random() < 0.95 else rng.choice(FLOATS)
    dynamic = rng.random() < 0.2 and len(bshape) == 3 + per_class and len(sshape) == 3
    mode = pick(rng, {"const32": 6, "const64": 2, "input": 2, "const1d": 0.3, "float": 0.3, "negative": 0.3})
    max_out = rng.randint(0, 6)
    thresholds = [(i, pick(rng, {"FLOAT": 10, "HALF": 0.4, "1d": 0.4})) for i in (3, 4) if rng.random() < 0.5]
    attrs = []
    if rng.random() < 0.4:
        attrs.append(("bounding_box_format", ("BoundingBoxFormat", rng.choice(["CORNER_PAIRS", "CENTER_SIZES"]))))
    if rng.random() < 0.4:
        attrs.append(("topk_box_limit", pick(rng, {rng.randint(0, 20): 8, 5000: 1, 5001: 0.5, -1: 0.5})))
    if rng.random() < 0.2:
        attrs.append(("indices_type", ("DataType", pick(rng, {"INT32": 2, "INT64": 3, "FLOAT": 0.5}))))
    indices = pick(rng, {None: 6, "INT64": 2, "INT32": 1, "HALF": 0.2})

    def build(trt, net):
        b = net.add_input("b", dt(trt, dtype), dyn(bshape, dynamic))
        s = net.add_input("s", dt(trt, sdtype), dyn(sshape, dynamic))
        if mode == "input":
            m = net.add_input("m", dt(trt, "INT32"), ())
        else:
            value, np_type = {"const32": (max_out, np.int32), "const64": (max_out, np.int64),
                              "const1d": ([max_out], np.int32), "float": (float(max_out), np.float32),
                              "negative": (-max_out - 1, np.int32)}[mode]
            m = _const(trt, net, value, np_type)
        layer = net.add_nms(b, s, m) if indices is None else net.add_nms(b, s, m, dt(trt, indices))
        for index, kind in thresholds:
            value, np_type = {"FLOAT": (0.4, np.float32), "HALF": (0.4, np.float16), "1d": ([0.4], np.float32)}[kind]
            layer.set_input(index, _const(trt, net, value, np_type))
        for key, value in attrs:
            setattr(layer, key, enum(trt, *value) if isinstance(value, tuple) else value)
        return [layer.get_output(0), layer.get_output(1)]

    desc = (f"nms boxes={shape_str(dyn(bshape, dynamic))} {dtype} scores={shape_str(dyn(sshape, dynamic))} {sdtype} "
            f"max={mode}:{max_out} thresholds={thresholds} indices={indices} {attrs}")
    return single("nms", desc, build, dynamic)


def assertion_case(rng):
    """An assertion on a condition computed from constants (a comparison, so a BOOL tensor without a BOOL constant,
    which the reference refuses), of rank 0 to 2, true or false somewhere, or of another type; the network's output
    is an identity of an unrelated input, as an assertion has no outputs."""
    rank = pick(rng, {0: 3, 1: 4, 2: 2})
    shape = tuple(rng.randint(1, 3) for _ in range(rank))
    left = np.asarray(np.random.default_rng(rng.randrange(1 << 32)).integers(0, 3, size=shape), np.int32)
    right = left.copy()
    holds = rng.random() < 0.7
    if not holds and left.size:
        right.reshape(-1)[rng.randrange(left.size)] += 1
    kind = pick(rng, {"compare": 8, "int32": 1, "float": 1})
    message = rng.choice(["must hold", "", "shapes agree"])

    def build(trt, net):
        x = net.add_input("x", dt(trt, "FLOAT"), (2,))
        a = _const(trt, net, left, np.int32)
        if kind == "compare":
            condition = net.add_elementwise(a, _const(trt, net, right, np.int32),
                                            trt.ElementWiseOperation.EQUAL).get_output(0)
        elif kind == "int32":
            condition = a
        else:
            condition = _const(trt, net, left.astype(np.float32), np.float32)
        net.add_assertion(condition, message)
        return [net.add_identity(x).get_output(0)]

    return single("assertion", f"assertion {kind} shape={shape_str(shape)} holds={holds} message={message!r}", build)

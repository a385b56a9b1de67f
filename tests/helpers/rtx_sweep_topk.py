"""Seeded TopK, Scatter, ReverseSequence and Einsum constructions for the reference-vs-TensorRT-RTX sweep
(tests/reference/test_rtx_sweep.py), drawn valid and invalid alike: ranks, axes and bitmasks, k, index and length
tensors, dtypes, equations (syntax, diagonals, ellipses, broadcasting). Index and length tensors are constants with
values in range, so that the reference's engine runs (an index out of range fails a run by design)."""

from __future__ import annotations

import numpy as np

from helpers.rtx_sweep import DTYPES, FLOATS, dt, dyn, enum, pick, shape_str, single, some_dtype
from helpers.twin import Stricter

#: tests/helpers/twin.py cannot express this example: it needs an optimization profile (checked by
#: tests/reference/test_layers_einsum.py::test_einsum_dynamic_diagonal_entry_is_still_stricter)
EINSUM_DYNAMIC_DIAGONAL = Stricter(
    r"over a dynamic and a static dimension; the reference needs a diagonal",
    'The Einsum operator page (TensorRT 10 and 11): "The dimensions labeled with the same subscript must match."; '
    'IEinsumLayer (11.4): "Note that TensorRT does not support ellipsis or diagonal operations." TensorRT-RTX takes '
    "a diagonal over a dynamic and a static dimension where the optimization profile allows the static size; the "
    "reference, which infers without profiles, needs them equal when the layer is defined",
    lambda network, trt: network.add_einsum([network.add_input("x", trt.float32, (-1, 2))], "ii->i"))


def _const(net, arr: np.ndarray, shape):
    """A constant of `shape` holding `arr` (kept alive by the case's closure)."""
    return net.add_constant(tuple(shape), arr).get_output(0)


def _int_type(rng) -> str:
    return pick(rng, {"INT32": 6, "INT64": 3, "FLOAT": 1})


def _index_tensor(trt, net, name, values: np.ndarray, idt: str):
    """INT32/INT64 indices as a constant; FLOAT ones as a network input (refused by both)."""
    if idt == "FLOAT":
        return net.add_input(name, dt(trt, "FLOAT"), values.shape)
    return _const(net, values, values.shape)


def topk_case(rng):
    rank = pick(rng, {0: 1, 1: 2, 2: 6, 3: 6, 4: 5, 5: 2})
    shape = [rng.randint(1, 6) for _ in range(rank)]
    dtype = some_dtype(rng, 0.6)
    axis = rng.randrange(rank) if rank else 0
    r = rng.random()
    axes = (1 << axis) if r < 0.9 else rng.choice([0, 3, 1 << rank, 0b101])
    d = shape[axis] if rank else 1
    k = pick(rng, {rng.randint(0, d): 12, d + 1: 1, 3841: 1, -1: 1})
    k_tensor = rng.random() < 0.2
    k_type = rng.choice(["INT32", "INT64"]) if rng.random() < 0.95 else "FLOAT"
    k_value = rng.randint(0, d + (1 if rng.random() < 0.1 else 0))
    indices_type = pick(rng, {None: 4, "INT32": 2, "INT64": 3, "FLOAT": 1})
    then = [(a, v) for a, v in [("op", rng.choice(["MAX", "MIN"])), ("k", rng.randint(0, d))] if rng.random() < 0.15]
    dynamic = rng.random() < 0.2 and rank >= 2 and axes & 1 == 0
    op = rng.choice(["MAX", "MIN"])
    np_k = np.array([k_value], {"INT32": np.int32, "INT64": np.int64, "FLOAT": np.float32}[k_type])

    def build(trt, net):
        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        args = (x, enum(trt, "TopKOperation", op), k, axes)
        layer = net.add_topk(*args) if indices_type is None else net.add_topk(*args, dt(trt, indices_type))
        if k_tensor:
            layer.set_input(1, _const(net, np_k, ()))
        for attr, value in then:
            setattr(layer, attr, enum(trt, "TopKOperation", value) if attr == "op" else value)
        return [layer.get_output(0), layer.get_output(1)]

    return single("topk", f"topk x={shape_str(dyn(shape, dynamic))} {dtype} {op} k={k} axes={bin(axes)} "
                          f"indices_type={indices_type}" + (f" k_tensor={k_value} {k_type}" if k_tensor else "")
                  + "".join(f" then {a}={v}" for a, v in then), build, dynamic)


def scatter_case(rng):
    mode = rng.choice(["ELEMENT", "ND"])
    rank = pick(rng, {0: 1, 1: 3, 2: 5, 3: 5, 4: 3})
    x = [rng.randint(1, 5) for _ in range(rank)]
    dtype = some_dtype(rng, 0.6)
    u_type = dtype if rng.random() < 0.93 else some_dtype(rng)
    idt = _int_type(rng)
    gen = np.random.default_rng(rng.randrange(1 << 32))
    axis = None
    if mode == "ELEMENT":
        axis = rng.randint(-rank, rank - 1) if rank and rng.random() < 0.93 else rng.choice([rank, -rank - 1])
        i_shape = [rng.randint(1, d) if rng.random() < 0.97 else d + 1 for d in x]
        if rng.random() < 0.05:
            i_shape = i_shape[1:]
        size = x[axis % rank] if rank and -rank <= axis < rank else 1
        values = gen.integers(-size, size, size=i_shape)
        u_shape = list(i_shape) if rng.random() < 0.95 else [d + rng.choice([-1, 1]) for d in i_shape]
    else:
        q = rng.randint(1, rank) if rank and rng.random() < 0.95 else rank + 1
        batch = [rng.randint(1, 3) for _ in range(pick(rng, {0: 1, 1: 4, 2: 2}))]
        i_shape = batch + [q]
        values = np.stack([gen.integers(-x[j], x[j], size=batch) if j < rank else np.zeros(batch, np.int64)
                           for j in range(q)], axis=-1)
        u_shape = batch + x[q:]
        if rng.random() < 0.08:
            u_shape = u_shape[:-1] if u_shape and rng.random() < 0.5 else u_shape + [2]
    values = values.astype(np.int64 if idt == "INT64" else np.int32)

    def build(trt, net):
        data = net.add_input("x", dt(trt, dtype), tuple(x))
        layer = net.add_scatter(data, _index_tensor(trt, net, "i", values, idt),
                                net.add_input("u", dt(trt, u_type), tuple(u_shape)), enum(trt, "ScatterMode", mode))
        if axis is not None:
            layer.axis = axis
        return [layer.get_output(0)]

    return single("scatter", f"scatter {mode} x={shape_str(x)} {dtype} i={shape_str(values.shape)} {idt} "
                             f"u={shape_str(u_shape)} {u_type}" + (f" axis={axis}" if axis is not None else ""), build)


def reverse_sequence_case(rng):
    rank = pick(rng, {1: 1, 2: 5, 3: 5, 4: 3})
    x = [rng.randint(1, 5) for _ in range(rank)]
    dtype = some_dtype(rng, 0.5) if rng.random() < 0.9 else rng.choice(DTYPES)
    attrs = []
    if rng.random() < 0.7:
        attrs.append(("batch_axis", rng.randint(0, rank - 1) if rng.random() < 0.93 else rng.choice([-1, rank])))
    if rng.random() < 0.7:
        attrs.append(("sequence_axis", rng.randint(0, rank - 1) if rng.random() < 0.93 else rng.choice([-1, rank])))
    axes = {"batch_axis": 1, "sequence_axis": 0, **dict(attrs)}
    b, s = axes["batch_axis"], axes["sequence_axis"]
    n = x[b] if 0 <= b < rank else 2
    n = n if rng.random() < 0.93 else n + 1
    t = x[s] if 0 <= s < rank else 1
    ltype = _int_type(rng)
    gen = np.random.default_rng(rng.randrange(1 << 32))
    lens = gen.integers(0, t + 1, size=[n] + ([1] if rng.random() < 0.04 else []))
    lens = lens.astype(np.int64 if ltype == "INT64" else np.int32)

    def build(trt, net):
        layer = net.add_reverse_sequence(net.add_input("x", dt(trt, dtype), tuple(x)),
                                         _index_tensor(trt, net, "l", lens, ltype))
        for attr, value in attrs:
            setattr(layer, attr, value)
        return [layer.get_output(0)]

    return single("reverse_sequence", f"reverse_sequence x={shape_str(x)} {dtype} lens={shape_str(lens.shape)} "
                                      f"{ltype} " + " ".join(f"{a}={v}" for a, v in attrs), build)


def _equation(rng):
    """(equation, input shapes): random terms over a few letters with diagonals, ellipses and unit dimensions, and
    now and then a syntax or shape error."""
    letters = "abcdef"
    size = {c: rng.randint(1, 4) for c in letters}
    ell = [rng.randint(1, 3) for _ in range(pick(rng, {0: 1, 1: 2, 2: 1}))]
    n = pick(rng, {1: 5, 2: 6, 3: 1})
    terms, shapes = [], []
    for _ in range(n):
        term = [rng.choice(letters[:4]) for _ in range(pick(rng, {0: 1, 1: 3, 2: 5, 3: 3}))]
        if rng.random() < 0.25:
            term.insert(rng.randint(0, len(term)), "...")
        shape = []
        for c in term:
            if c == "...":
                e = ell if rng.random() < 0.95 else ell + [2]
                shape += [d if rng.random() < 0.85 else 1 for d in e]
            else:
                shape.append(size[c] if rng.random() < 0.9 else rng.choice([1, size[c] + 1]))
        terms.append(term)
        shapes.append(shape)
    lhs = ",".join("".join(t) for t in terms)
    used = sorted({c for t in terms for c in t if c != "..."})
    r = rng.random()
    if r < 0.3:
        eq = lhs
    else:
        out = rng.sample(used, rng.randint(0, len(used)))
        if any("..." in t for t in terms) and rng.random() < 0.8:
            out.insert(rng.randint(0, len(out)), "...")
        if rng.random() < 0.06:
            out.append(rng.choice(used + ["z", "..."]) if used else "z")
        eq = lhs + "->" + "".join(out)
    r = rng.random()
    if r < 0.04:
        eq = eq.replace(rng.choice(used or ["-"]), "A", 1)
    elif r < 0.07:
        eq = eq + rng.choice([",a", "->a", ".", "1"])
    elif r < 0.12:
        eq = " ".join(eq)
    return eq, shapes


def einsum_case(rng):
    eq, shapes = _equation(rng)
    dtype = rng.choice(FLOATS) if rng.random() < 0.85 else rng.choice(DTYPES)
    types = [dtype if rng.random() < 0.95 else some_dtype(rng) for _ in shapes]
    dynamic = len(shapes) == 1 and len(shapes[0]) >= 1 and rng.random() < 0.25

    def build(trt, net):
        ins = [net.add_input(f"x{k}", dt(trt, t), dyn(s, dynamic)) for k, (s, t) in enumerate(zip(shapes, types))]
        return [net.add_einsum(ins, eq).get_output(0)]

    return single("einsum", f"einsum {eq!r} " + " ".join(f"{shape_str(dyn(s, dynamic))} {t}"
                                                         for s, t in zip(shapes, types)), build, dynamic)

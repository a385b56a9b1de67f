"""Random IAttention cases for the TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py): padded query, key and
value with random batch, heads (grouped-query included), lengths and head sizes, sometimes mismatched; a BOOL or
float mask of a random (sometimes wrong) shape and type, or a causal kind; norm NONE or SOFTMAX; key/value lengths.
Always decomposable: TensorRT-RTX refuses a non-decomposable attention for which its target has no fused kernel
(a kernel choice the reference does not model)."""

from __future__ import annotations

from helpers.rtx_sweep import FLOATS, dt, dyn, enum, pick, shape_str, single


def attention_case(rng):
    b, hkv, sq, skv, d = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6), rng.choice([4, 8])
    hq = hkv * rng.randint(1, 3)
    qs, ks = [b, hq, sq, d], [b, hkv, skv, d]
    if rng.random() < 0.15:  # a mismatch: heads, head size, batch or rank
        which = rng.choice([(qs, 1), (qs, 3), (ks, 0), (ks, 3)])
        which[0][which[1]] += 1
    if rng.random() < 0.05:
        qs = qs[1:]
    vs = list(ks) if rng.random() < 0.95 else ks[:3] + [ks[3] + 4]
    dtype = rng.choice(FLOATS) if rng.random() < 0.9 else rng.choice(["INT32", "INT8"])
    kdtype = dtype if rng.random() < 0.93 else rng.choice(FLOATS)
    kind = pick(rng, {"NONE": 5, "UPPER_LEFT": 2, "LOWER_RIGHT": 2})
    norm = pick(rng, {"SOFTMAX": 4, "NONE": 1})
    v2 = rng.random() < 0.7 or kind == "LOWER_RIGHT"
    mask = None
    if kind == "NONE" and rng.random() < 0.5:
        full = [b, hq, sq, skv]
        mshape = [d if rng.random() < 0.6 else 1 for d in full]
        if rng.random() < 0.1:
            mshape[rng.randrange(4)] += 1
        if rng.random() < 0.05:
            mshape = mshape[2:]
        mask = [mshape, pick(rng, {"BOOL": 5, dtype: 4, "FLOAT": 1, "INT32": 1})]
    lengths = rng.random() < 0.2
    dynamic = rng.random() < 0.2
    if dynamic and mask is not None:  # a static mask batch against a dynamic one is checked at run time only
        mask[0][0] = 1

    def build(trt, net):
        q = net.add_input("q", dt(trt, dtype), dyn(qs, dynamic))
        k = net.add_input("k", dt(trt, kdtype), dyn(ks, dynamic))
        v = net.add_input("v", dt(trt, kdtype), dyn(vs, dynamic))
        norm_op = enum(trt, "AttentionNormalizationOp", norm)
        if v2:
            a = net.add_attention_v2(q, k, v, norm_op, enum(trt, "CausalMaskKind", kind))
        else:
            a = net.add_attention(q, k, v, norm_op, kind == "UPPER_LEFT")
        a.decomposable = True
        if mask is not None:
            a.mask = net.add_input("m", dt(trt, mask[1]), mask[0])
        if lengths:
            a.key_value_lengths = net.add_input("lengths", trt.DataType.INT32, (-1,) if dynamic else (b,))
        return [a.get_output(0)]

    desc = (f"attention{'_v2' if v2 else ''} q={shape_str(dyn(qs, dynamic))} k={shape_str(ks)} {dtype}/{kdtype} "
            f"v={shape_str(vs)} {kind} {norm}" + (f" mask={shape_str(mask[0])} {mask[1]}" if mask else "")
            + (" lengths" if lengths else ""))
    return single("attention", desc, build, dynamic)


def block_qdq_case(rng):
    """INT8/INT4 quantize + dequantize of an input, or dequantize of INT4 weights, with a per-tensor, per-channel
    or block scale (sometimes of a wrong shape or blocking a wrong dimension), odd volumes included."""
    rank = pick(rng, {1: 1, 2: 4, 3: 3})
    shape = [rng.randint(1, 4) * rng.choice([1, 2]) for _ in range(rank)]
    to = pick(rng, {"INT4": 3, "INT8": 2})
    weights = to == "INT4" and rng.random() < 0.4
    kind = pick(rng, {"tensor": 1, "channel": 1, "block": 4})
    axis = rng.randrange(rank)
    if kind == "tensor":
        sshape = []
    elif kind == "channel":
        sshape = [shape[axis] + (1 if rng.random() < 0.1 else 0)]
    else:
        sshape = list(shape)
        dim = rng.randrange(rank) if rng.random() < 0.2 else rank - 1 - rng.randrange(min(2, rank))
        sshape[dim] = max(1, shape[dim] // rng.choice([1, 2, 3]))
        if rng.random() < 0.1:
            sshape[rng.randrange(rank)] = 1
    dtype = rng.choice(FLOATS)

    def build(trt, net):
        import numpy as np

        s_arr = np.full(sshape, 0.25, np.float32)
        net._keep = getattr(net, "_keep", []) + [s_arr]
        s = net.add_constant(tuple(sshape), trt.Weights(s_arr)).get_output(0)
        if weights:
            count = int(np.prod(shape))
            raw = np.arange((count + 1) // 2, dtype=np.uint8)
            net._keep.append(raw)
            q = net.add_constant(tuple(shape), trt.Weights(trt.DataType.INT4, raw.ctypes.data, count)).get_output(0)
        else:
            x = net.add_input("x", dt(trt, dtype), tuple(shape))
            ql = net.add_quantize(x, s, dt(trt, to))
            ql.axis = axis
            q = ql.get_output(0)
        d = net.add_dequantize(q, s, dt(trt, dtype))
        d.axis = axis
        return [d.get_output(0)]

    desc = (f"qdq {'INT4 weights' if weights else to} {shape_str(shape)} {dtype} scale={shape_str(sshape)} "
            f"axis={axis}")
    return single("qdq_block", desc, build)

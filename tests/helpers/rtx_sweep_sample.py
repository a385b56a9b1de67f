"""Sweep cases (see tests/helpers/rtx_sweep.py) for grid sample, ragged softmax, rotary embedding and KV cache update.

Index inputs that the reference's engine reads at run time (position ids, write indices, update lengths) are
constants drawn in range, because the runner feeds network inputs random integers in [-5, 5] and an index outside
the tables or the cache fails the reference's run; everything else (ranks, dims, types, modes, attributes) is drawn
valid and invalid alike.
"""

from __future__ import annotations

import numpy as np

from helpers.rtx_sweep import DTYPES, FLOATS, dt, dyn, enum, pick, shape_str, single, some_dtype


def _maybe_wrong(rng, value: int, p: float = 0.08) -> int:
    return value + rng.choice([-1, 1]) if rng.random() < p else value


def grid_sample_case(rng):
    rank = pick(rng, {4: 6, 5: 3, 3: 1, 6: 1})
    shape = [rng.randint(1, 3), rng.randint(1, 3)] + [rng.randint(1, 5) for _ in range(rank - 2)]
    out = [rng.randint(1, 4) for _ in range(rank - 2)]
    gshape = [_maybe_wrong(rng, shape[0], 0.06)] + out + [_maybe_wrong(rng, rank - 2)]
    if rng.random() < 0.05:
        gshape = gshape[:-2] + gshape[-1:]  # a grid of the wrong rank
    xdt = some_dtype(rng, 0.75)
    gdt = xdt if rng.random() < 0.9 else some_dtype(rng, 0.8)
    mode = rng.choice(["NEAREST", "LINEAR", "CUBIC", None])
    sample = pick(rng, {None: 3, "FILL": 2, "CLAMP": 2, "REFLECT": 2, "WRAP": 1, "STRICT_BOUNDS": 1})
    align = rng.choice([None, False, True])
    dynamic = rng.random() < 0.2
    gdynamic = dynamic and rng.random() < 0.7  # else a static grid batch beside a dynamic input batch
    if dynamic and not gdynamic:
        gshape[0] = 2  # the runner's opt batch

    def build(trt, net):
        layer = net.add_grid_sample(net.add_input("x", dt(trt, xdt), dyn(shape, dynamic)),
                                    net.add_input("g", dt(trt, gdt), dyn(gshape, gdynamic)))
        if mode is not None:
            layer.interpolation_mode = enum(trt, "InterpolationMode", mode)
        if sample is not None:
            layer.sample_mode = enum(trt, "SampleMode", sample)
        if align is not None:
            layer.align_corners = align
        return [layer.get_output(0)]

    return single("grid_sample", f"grid_sample x={shape_str(dyn(shape, dynamic))} {xdt} g="
                                 f"{shape_str(dyn(gshape, gdynamic))} {gdt} mode={mode} sample={sample} align={align}",
                  build, dynamic)


def ragged_softmax_case(rng):
    rank = pick(rng, {3: 8, 2: 1, 4: 1})
    shape = [rng.randint(1, 3) for _ in range(rank - 1)] + [rng.randint(1, 6)]
    bshape = [d if rng.random() < 0.6 else 1 for d in shape[:-1]] + [1 if rng.random() < 0.9 else shape[-1]]
    if rng.random() < 0.08:
        bshape[rng.randrange(rank)] += 1
    if rng.random() < 0.04:
        bshape = bshape[1:]
    xdt = some_dtype(rng, 0.8)
    bdt = pick(rng, {"INT32": 8, "INT64": 1, "FLOAT": 1})
    dynamic = rng.random() < 0.2 and bshape[0] == shape[0]

    def build(trt, net):
        layer = net.add_ragged_softmax(net.add_input("x", dt(trt, xdt), dyn(shape, dynamic)),
                                       net.add_input("b", dt(trt, bdt), dyn(bshape, dynamic)))
        return [layer.get_output(0)]

    return single("ragged_softmax", f"ragged_softmax x={shape_str(dyn(shape, dynamic))} {xdt} "
                                    f"bounds={shape_str(dyn(bshape, dynamic))} {bdt}", build, dynamic)


def rotary_embedding_case(rng):
    rank = pick(rng, {4: 10, 3: 1, 5: 1})
    b, n, s, h = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 4), 2 * rng.randint(1, 4)
    if rng.random() < 0.05:
        h += 1
    shape = ([b, n, s, h] + [2])[:rank] if rank <= 5 else [b, n, s, h]
    dim = pick(rng, {0: 5, 2: 2, 4: 2, h: 1, h + 2: 1, 3: 1, -2: 1})
    half = max((dim or h) // 2, 1)
    positions = rng.random() < 0.35
    max_pos = rng.randint(1, 6)
    cshape = [max_pos, half] if positions else [b, s, half]
    if rng.random() < 0.12:
        i = rng.randrange(len(cshape))
        cshape[i] = _maybe_wrong(rng, cshape[i], 1.0) or 2
    if rng.random() < 0.05:
        cshape = [b, s, half] if positions else [max_pos, half]
    pshape = [b, s] if rng.random() < 0.9 else rng.choice([[s], [1, s], [b, s + 1]])
    pdt = pick(rng, {"INT64": 5, "INT32": 3, "FLOAT": 1})
    rows = max(cshape[0], 1) if len(cshape) == 2 else max_pos  # ids index the tables actually drawn
    pos_values = np.random.default_rng(rng.randrange(1 << 32)).integers(0, rows, size=pshape)
    xdt = some_dtype(rng, 0.8)
    cdt = xdt if rng.random() < 0.9 else rng.choice(FLOATS + ("INT32",))
    interleaved = rng.random() < 0.5
    set_dim = rng.choice([None] * 6 + [0, 2, 3, h])
    dynamic = rng.random() < 0.15 and not positions and len(shape) == 4
    pos_array = pos_values.astype(np.int64 if pdt == "INT64" else np.int32 if pdt == "INT32" else np.float32)

    def build(trt, net):
        layer = net.add_rotary_embedding(net.add_input("x", dt(trt, xdt), dyn(shape, dynamic)),
                                         net.add_input("c", dt(trt, cdt), dyn(cshape, dynamic)),
                                         net.add_input("s", dt(trt, cdt), dyn(cshape, dynamic)), interleaved, dim)
        if positions:
            layer.set_input(3, net.add_constant(pos_array.shape, pos_array).get_output(0))
        if set_dim is not None:
            layer.rotary_embedding_dim = set_dim
        return [layer.get_output(0)]

    return single("rotary_embedding", f"rotary_embedding x={shape_str(dyn(shape, dynamic))} {xdt} caches="
                                      f"{shape_str(dyn(cshape, dynamic))} {cdt} interleaved={interleaved} dim={dim} "
                                      f"set_dim={set_dim} positions={pshape if positions else None} {pdt}",
                  build, dynamic)


def kv_cache_update_case(rng):
    """Write indices and lengths fit the update actually drawn, so that an accepted case never writes outside
    the cache (the sequences of a packed update are at most the cache's: more build, and fail at run time)."""
    b, n, smax, h = rng.randint(1, 3), rng.randint(1, 3), rng.randint(2, 8), rng.randint(1, 4)
    cache = [b, n, smax, h] if rng.random() < 0.95 else [b, n, smax]
    packed = rng.random() < 0.35
    ub = rng.randint(1, b) if packed or rng.random() < 0.9 else b + 1
    if packed:
        counts = [rng.randint(0, smax) for _ in range(ub)]
        counts[0] += not sum(counts)  # at least one token: the reference's add_input refuses a zero dim
        starts = [rng.randint(0, smax - c) for c in counts]
        cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        update = [int(cum[-1]), _maybe_wrong(rng, n, 0.05), _maybe_wrong(rng, h, 0.05)]
    else:
        cum = None
        update = [ub, _maybe_wrong(rng, n, 0.05), _maybe_wrong(rng, rng.randint(1, smax), 0.04),
                  _maybe_wrong(rng, h, 0.05)]
        update[2] = max(update[2], 1)
        starts = [rng.randint(0, max(smax - update[2], 0)) for _ in range(ub)]
    if rng.random() < 0.05:
        update = update[1:]
    wlen = ub if rng.random() < 0.93 else ub + 1
    starts = (starts + [0])[:wlen]
    wdt = pick(rng, {"INT32": 10, "INT64": 1, "FLOAT": 1})
    cdt = pick(rng, {"FLOAT": 5, "HALF": 2, "BF16": 2, "INT32": 1, "INT8": 1})
    udt = cdt if rng.random() < 0.92 else rng.choice(FLOATS)
    form = "PACKED_NHD" if packed else ("PADDED_BHND" if rng.random() < 0.3 else None)
    set_lengths = packed if rng.random() < 0.93 else not packed
    len_dt = "INT32" if rng.random() < 0.93 else "INT64"
    cache_input = rng.random() < 0.95
    w_array = np.asarray(starts, np.int64 if wdt == "INT64" else np.int32 if wdt == "INT32" else np.float32)
    if cum is None:
        cum = np.arange(ub + 1, dtype=np.int32)
    len_array = cum.astype(np.int64 if len_dt == "INT64" else np.int32)

    def build(trt, net):
        c = net.add_input("c", dt(trt, cdt), cache)
        if not cache_input:
            c = net.add_identity(c).get_output(0)
        layer = net.add_kv_cache_update(c, net.add_input("u", dt(trt, udt), update),
                                        net.add_constant(w_array.shape, w_array).get_output(0),
                                        enum(trt, "KVCacheMode", "LINEAR"))
        if form is not None:
            layer.update_form = enum(trt, "AttentionIOForm", form)
        if set_lengths:
            layer.update_lengths = net.add_constant(len_array.shape, len_array).get_output(0)
        return [layer.get_output(0)]

    return single("kv_cache_update", f"kv_cache_update cache={shape_str(cache)} {cdt} update={shape_str(update)} "
                                     f"{udt} write_indices={starts} {wdt} form={form} lengths="
                                     f"{cum.tolist() if set_lengths else None} {len_dt} cache_input={cache_input}",
                  build)


assert DTYPES  # the generators draw from rtx_sweep's type lists

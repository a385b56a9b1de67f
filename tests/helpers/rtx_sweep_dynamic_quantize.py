"""Random IDynamicQuantizeLayer cases for the TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py), built for
sm120 (TensorRT-RTX builds FP4/FP8 data for Blackwell only): 2-D or 3-D inputs (sometimes 1-D or 4-D), FP4 or FP8
data with FP8 or E8M0 scales (NVFP4, MXFP8, MXFP4, and the mismatches), axis/block_size blocks or a v2
block_shape (1-D and 2-D, sometimes not dividing, spanning a whole dimension or of an unsupported size), the
double quantization scale present or not, a constant of FLOAT or the input's type or a network input; the
outputs are the raw data and scales, or NVFP4/MX data dequantized with them (DQ(data, DQ(scales, s2)),
DQ(data, scales))."""

from __future__ import annotations

from helpers.rtx_sweep import FLOATS, dt, dyn, pick, shape_str, single
from helpers.twin import Stricter

#: a block_shape that does not divide the input: TensorRT-RTX 1.7 builds it (ceil-divided scales, partial blocks)
PARTIAL_BLOCK = Stricter(
    r"the block extent \d+ does not divide the input's dimension",
    "TensorRT's DynamicQuantize operator: the extent of the blocked axis \"must be a compile-time constant that is "
    "divisible by block_size\"; IDynamicQuantizeLayer: \"The size of the blocked axis must be divisible by the block "
    "size.\" No TensorRT document defines a partial block",
    lambda network, trt: network.add_dynamic_quantize_v2(network.add_input("x", trt.float16, (3, 16)), (4, -1),
                                                         trt.DataType.FP8, trt.DataType.E8M0))


def _shape(rng, blocked_dim, rank):
    shape = [rng.randint(1, 4) for _ in range(rank)]
    shape[blocked_dim] = pick(rng, {16: 2, 32: 3, 64: 3, 48: 1, 24: 1, 8: 1})
    return shape


def _block_shape(rng, shape):
    rank = len(shape)
    block = [1] * rank
    kind = pick(rng, {"1d": 5, "2d": 3, "odd": 1})
    if kind == "1d":
        i = rank - 1 - rng.randrange(2) if rng.random() < 0.9 else rng.randrange(rank)
        block[i] = pick(rng, {16: 2, 32: 2, -1: 1, 8: 1})
    elif kind == "2d":
        block[-1] = pick(rng, {16: 2, 32: 2, -1: 1})
        if rank >= 2:
            block[-2] = pick(rng, {2: 2, -1: 1, 4: 1})
        if rank == 3 and rng.random() < 0.2:  # a non-one block off the last two dimensions
            block[0] = 2
    else:
        block = [rng.choice([1, 2, -1, 16]) for _ in range(rank)]
    return block


def dynamic_quantize_case(rng):
    rank = pick(rng, {2: 6, 3: 5, 1: 1, 4: 1})
    scheme = pick(rng, {"NVFP4": 5, "MXFP8": 4, "MXFP4": 2, "FP8/FP8": 1})
    to, scale_type = {"NVFP4": ("FP4", "FP8"), "MXFP8": ("FP8", "E8M0"), "MXFP4": ("FP4", "E8M0"),
                      "FP8/FP8": ("FP8", "FP8")}[scheme]
    v2 = rng.random() < 0.25
    axis = rank - 1 - rng.randrange(min(2, rank)) if rng.random() < 0.85 else rng.randrange(-rank, rank)
    shape = _shape(rng, axis % rank if not v2 else rank - 1, rank)
    if v2 and rank >= 2 and rng.random() < 0.5:
        shape[-2] = pick(rng, {16: 1, 32: 2, 4: 1, 2: 1})
    block = _block_shape(rng, shape) if v2 else None
    size = pick(rng, {16: 4, 32: 4, 8: 1}) if scheme != "NVFP4" else pick(rng, {16: 6, 32: 1})
    dtype = rng.choice(FLOATS)
    s2 = None
    if (scale_type == "FP8") == (rng.random() < 0.9):
        s2 = pick(rng, {"FLOAT": 6, "same": 2, "input": 1})
    dequantize = rng.random() < 0.5 and not v2 and rank in (2, 3)
    # a dynamic batch inside a v2 block only where the block spans it (1 or -1): the runner's profile (1..3) holds no
    # extent a larger block divides, and TensorRT-RTX's partial blocks are the documented PARTIAL_BLOCK difference
    dynamic = rng.random() < 0.2 and rank >= 2 and not (v2 and block[0] not in (1, -1))
    out_type = rng.choice(FLOATS) if rng.random() < 0.3 else dtype

    def build(trt, net):
        import numpy as np

        x = net.add_input("x", dt(trt, dtype), dyn(shape, dynamic))
        if v2:
            layer = net.add_dynamic_quantize_v2(x, tuple(block), dt(trt, to), dt(trt, scale_type))
        else:
            layer = net.add_dynamic_quantize(x, axis, size, dt(trt, to), dt(trt, scale_type))
        s2_tensor = None
        if s2 == "input":
            s2_tensor = net.add_input("s2", dt(trt, "FLOAT"), ())
        elif s2 is not None:
            arr = np.array(0.5, np.float16 if s2 == "same" and dtype == "HALF" else np.float32)
            net._keep = getattr(net, "_keep", []) + [arr]
            s2_tensor = net.add_constant((), trt.Weights(arr)).get_output(0)
        if s2_tensor is not None:
            layer.set_input(1, s2_tensor)
        data, scales = layer.get_output(0), layer.get_output(1)
        if not dequantize:
            return [data, scales]
        if scale_type == "FP8" and s2_tensor is not None:
            scales = net.add_dequantize(scales, s2_tensor, dt(trt, out_type)).get_output(0)
        return [net.add_dequantize(data, scales, dt(trt, out_type)).get_output(0)]

    how = f"block_shape={shape_str(block)}" if v2 else f"axis={axis} block_size={size}"
    desc = (f"dynamic_quantize {scheme} {shape_str(shape)} {dtype} {how} s2={s2}"
            + (f" dequantized to {out_type}" if dequantize else ""))
    return single("dynamic_quantize", desc, build, dynamic)

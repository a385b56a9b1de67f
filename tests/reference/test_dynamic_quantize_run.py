"""IDynamicQuantizeLayer's values: NVFP4 (FP4 data, FP8 block scales, a double quantization scale), MXFP8 (FP8
data, E8M0 scales) and MXFP4 (FP4 data, E8M0 scales) against a float64 numpy implementation of the rule written
here (trtbuild/reference/ops/dynamic_quantize.py's module doc cites where each part comes from):

    amax = max |x| per block; vmax = 6 (FP4) or 448 (FP8)
    E8M0 scale = the smallest power of two >= amax / vmax (in [2^-127, 2^127])
    FP8 scale  = amax / vmax / s2 rounded to the nearest E4M3 value (ties to even), saturated to 448; s_eff = scale * s2
    data       = x / s_eff rounded to the data type (ties to even), saturated; 0 where s_eff is 0

Every network is twinned with TensorRT-RTX building for sm120 (it judges every construction and refusal; it runs
nothing). Raw outputs are read from their bytes: FP4 two codes a byte (low nibble first), FP8 E4M3 bytes, E8M0
biased exponents."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trtbuild.reference as trt

FP4, FP8, E8M0 = trt.DataType.FP4, trt.DataType.FP8, trt.DataType.E8M0
F32, F16, BF16 = trt.float32, trt.float16, trt.bfloat16
NP_OF = {F32: np.float32, F16: np.float16}

# -- the rule in float64 numpy, written out from the formulas above --------------------------------------------
#: E2M1 magnitudes by code (0..7)
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
#: E4M3 magnitudes by code (0..126): subnormals m/8 * 2^-6, then (1 + m/8) * 2^(e-7) for e = 1..15 (code 127: NaN)
E4M3 = np.array([m / 8 * 2.0 ** -6 for m in range(8)]
                + [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8)])[:127]


def round_to_grid(v, grid):
    """Each |v| saturated to the grid's top and rounded to the nearest grid value, a tie to the even code; the sign
    of v kept."""
    a = np.minimum(np.abs(v), grid[-1])[..., None]
    dist = np.abs(a - grid)
    best = dist.min(axis=-1, keepdims=True)
    codes = np.arange(len(grid))
    # among the nearest (one, or two at a tie) the even code; np.argmin takes the first of equal keys
    key = np.where(dist == best, codes % 2, 2)
    mag = grid[np.argmin(key, axis=-1)]
    return np.where(v < 0, -mag, mag)


def e8m0_up(r):
    """The smallest power of two >= r (r >= 0), as its exponent in [-127, 127]."""
    mant, exp = np.frexp(r)  # r = mant * 2^exp, mant in [0.5, 1)
    exp = np.where(mant == 0.5, exp - 1, exp)
    exp = np.where(r > 0, exp, -127)
    return np.clip(exp, -127, 127)


def blocks_of(shape, axis, size):
    b = [1] * len(shape)
    b[axis % len(shape)] = size
    return b


def block_amax(x, blocks):
    shape = [v for d, b in zip(x.shape, blocks) for v in (d // b, b)]
    return np.abs(x).reshape(shape).max(axis=tuple(range(1, 2 * x.ndim, 2)))


def spread(s, blocks):
    for i, b in enumerate(blocks):
        s = np.repeat(s, b, axis=i)
    return s


def expected(x, blocks, to, scale_type, s2=None):
    """(quantized data values, block scale values, dequantized values), all float64."""
    x = np.asarray(x, np.float64)
    vmax = 6.0 if to == FP4 else 448.0
    amax = block_amax(x, blocks)
    if scale_type == E8M0:
        scale = 2.0 ** e8m0_up(amax / vmax)
        eff = scale
    else:
        scale = round_to_grid(amax / vmax / s2, E4M3)
        eff = scale * s2
    eff_x = spread(eff, blocks)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(eff_x == 0, 0.0, x / eff_x)
    data = round_to_grid(v, E2M1 if to == FP4 else E4M3)
    return data, scale, data * eff_x


# -- networks ---------------------------------------------------------------------------------------------------
@pytest.fixture
def net(rtx):
    from helpers.twin import TwinRefNet

    twin = TwinRefNet(rtx, targets=("12.0",))
    yield twin
    twin.twin.finish()


def const(net, value, dtype=np.float32):
    return net.network.add_constant((), trt.Weights(np.array(value, dtype))).get_output(0)


def dynamic_quantize(net, x, axis, size, to, scale_type, s2=None):
    layer = net.network.add_dynamic_quantize(x, axis, size, to, scale_type)
    s2_tensor = None
    if scale_type == FP8:
        s2_tensor = const(net, s2)
        layer.set_input(1, s2_tensor)
    return layer, s2_tensor


def round_trip(net, x, axis, size, to, scale_type, s2=None, out=None):
    """DQ(data, DQ(scales, s2)) for FP8 scales (NVFP4), DQ(data, scales) for E8M0 ones: TensorRT's way back."""
    out = out or x.dtype
    layer, s2_tensor = dynamic_quantize(net, x, axis, size, to, scale_type, s2)
    scale = layer.get_output(1)
    if scale_type == FP8:
        scale = net.network.add_dequantize(scale, s2_tensor, out).get_output(0)
    return net.network.add_dequantize(layer.get_output(0), scale, out).get_output(0)


def sample(shape, seed, dtype=np.float32):
    """Normal values, each block row scaled by its own power of ten (1e-3 .. 1e3), with exact zeros sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, size=shape[:-1] + (1,))
    x[rng.random(shape) < 0.05] = 0.0
    return x.astype(dtype)


CASES = [  # (data, scale type, block size, shape, axis)
    (FP4, FP8, 16, (4, 64), 1), (FP4, FP8, 16, (64, 6), 0), (FP4, FP8, 16, (2, 3, 32), -1),
    (FP4, FP8, 16, (2, 32, 4), -2),
    (FP8, E8M0, 32, (4, 64), 1), (FP8, E8M0, 32, (64, 4), 0), (FP8, E8M0, 16, (2, 3, 32), 2),
    (FP8, E8M0, 16, (2, 32, 3), 1),
    (FP4, E8M0, 32, (4, 64), -1), (FP4, E8M0, 16, (32, 4), -2),
]


@pytest.mark.parametrize("to,scale_type,size,shape,axis", CASES)
@pytest.mark.parametrize("dtype", [F32, F16])
def test_dequantize_of_quantize_is_x_rounded_to_the_block_format(net, to, scale_type, size, shape, axis, dtype):
    x_np = sample(shape, seed=len(CASES) * size + axis, dtype=NP_OF[dtype])
    x_np[(0,) * (len(shape) - 1)] = 0.0  # a whole row of zeros: along the last axis, all-zero blocks
    s2 = 0.5 if scale_type == FP8 else None
    y = round_trip(net, net.input("x", shape, dtype), axis, size, to, scale_type, s2)
    got = net.run({"x": torch.from_numpy(x_np)}, y=y)["y"]
    _, _, want = expected(x_np, blocks_of(shape, axis, size), to, scale_type, s2)
    assert not torch.isnan(got).any()
    np.testing.assert_array_equal(got.double().numpy(), want.astype(NP_OF[dtype]).astype(np.float64))


def test_nvfp4_with_a_global_double_quantization_scale(net):
    """s2 = amax(x) / (6 * 448), the usual NVFP4 global scale (not a power of two): the FP8 scale uses its range."""
    x_np = sample((8, 64), seed=7)
    s2 = float(np.float32(np.abs(x_np).max() / (6 * 448)))
    y = round_trip(net, net.input("x", (8, 64)), 1, 16, FP4, FP8, s2)
    got = net.run({"x": torch.from_numpy(x_np)}, y=y)["y"]
    _, scale, want = expected(x_np, [1, 16], FP4, FP8, s2)
    assert scale.max() > 400  # the largest block's scale lands near the top of E4M3
    np.testing.assert_allclose(got.double().numpy(), want, rtol=2e-7, atol=0)


# -- raw outputs: the data and scale bytes ----------------------------------------------------------------------
def run_raw(plan, x: torch.Tensor, outputs: dict) -> dict:
    """Run `plan` on input x; `outputs`: name -> (shape, type); each output comes back as its raw bytes."""
    from trtbuild.reference.runtime import device

    from helpers.refnet import CapturingLogger

    engine = trt.Runtime(CapturingLogger()).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    feed = x.to(device()).contiguous()
    context.set_input_shape("x", tuple(x.shape))
    context.set_tensor_address("x", feed.data_ptr())
    buffers = {}
    for name, (shape, dtype) in outputs.items():
        assert engine.get_tensor_dtype(name) == dtype
        count = math.prod(shape)
        nbytes = (count + 1) // 2 if dtype == FP4 else count * {F32: 4}.get(dtype, 1)
        buffers[name] = torch.full((nbytes,), 0xAA, dtype=torch.uint8, device=device())
        context.set_tensor_address(name, buffers[name].data_ptr())
    assert context.execute_async_v3(0)
    return {k: v.cpu().numpy() for k, v in buffers.items()}


def fp4_values(packed, count):
    codes = np.stack([packed & 0xF, packed >> 4], axis=1).reshape(-1)[:count]
    return np.where(codes >= 8, -1.0, 1.0) * E2M1[codes & 7]


def e4m3_values(raw):
    codes = raw.astype(np.int64)
    return np.where(codes >= 128, -1.0, 1.0) * E4M3[codes & 127]


@pytest.mark.parametrize("to,scale_type,size", [(FP4, FP8, 16), (FP8, E8M0, 32), (FP4, E8M0, 32)])
def test_raw_data_and_scale_bytes(net, to, scale_type, size):
    shape = (4, 64)
    x_np = sample(shape, seed=size)
    layer, _ = dynamic_quantize(net, net.input("x", shape), 1, size, to, scale_type, s2=0.25)
    layer.get_output(0).name, layer.get_output(1).name = "q", "s"
    net.network.mark_output(layer.get_output(0))
    net.network.mark_output(layer.get_output(1))
    sshape = (4, 64 // size)
    raw = run_raw(net.build(), torch.from_numpy(x_np), {"q": (shape, to), "s": (sshape, scale_type)})
    data, scale, _ = expected(x_np, [1, size], to, scale_type, 0.25)
    got = fp4_values(raw["q"], 256) if to == FP4 else e4m3_values(raw["q"])
    np.testing.assert_array_equal(got.reshape(shape), data)
    if scale_type == E8M0:  # the biased exponent of the power of two >= amax / vmax
        vmax = 6.0 if to == FP4 else 448.0
        np.testing.assert_array_equal(raw["s"].reshape(sshape), e8m0_up(block_amax(x_np, [1, size]) / vmax) + 127)
    else:
        np.testing.assert_array_equal(e4m3_values(raw["s"]).reshape(sshape), scale)


# -- hand-computed edge cases -----------------------------------------------------------------------------------
def run_nvfp4(net, row, s2=1.0):
    """The round trip of one block `row` (a second block of zeros beside it: a one-value block scale is refused)."""
    x = net.input("x", (2, 16))
    feed = torch.tensor([row, [0.0] * 16], dtype=torch.float32)
    return net.run({"x": feed}, y=round_trip(net, x, 1, 16, FP4, FP8, s2))["y"]


def test_nvfp4_ties_round_half_to_even(net):
    """amax 6 and s2 1: scale 1, so x itself is rounded to E2M1; the midpoints go to the even code."""
    row = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0, 0.0, -0.0, 0.3, -6.0]
    want = [6.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -0.0, -1.0, -2.0, -4.0, 0.0, -0.0, 0.5, -6.0]
    assert run_nvfp4(net, row)[0].tolist() == want


def test_nvfp4_scale_rounds_to_nearest_even_fp8(net):
    """amax 6.375 gives amax / 6 = 1.0625, halfway between the E4M3 values 1 and 1.125: the scale is 1 (even
    mantissa; rounding up would give 1.125), so 6.375 saturates to 6 and 3.1875 rounds to 3."""
    row = [6.375, 3.1875] + [0.0] * 14
    assert run_nvfp4(net, row)[0].tolist()[:3] == [6.0, 3.0, 0.0]


def test_nvfp4_scale_saturates_at_448(net):
    """amax / 6 / s2 = 1000 / 6 / 0.01 ~ 16667 > 448: the FP8 scale is 448, s_eff 4.48, and every x / 4.48 beyond 6
    saturates to 6 (6 * 4.48 = 26.88)."""
    row = [1000.0, -100.0, 4.48] + [0.0] * 13
    got = run_nvfp4(net, row, s2=0.01)[0].tolist()
    s_eff = float(np.float32(448 * np.float32(0.01)))
    np.testing.assert_allclose(got[:4], [6 * s_eff, -6 * s_eff, s_eff, 0.0], rtol=1e-7)


def test_nvfp4_all_zero_block_and_a_scale_that_underflows(net):
    """A block of zeros has scale 0 and outputs 0 (no NaN); so does a block whose amax / 6 rounds to FP8 zero
    (below half of E4M3's smallest subnormal, 2^-9)."""
    x = net.input("x", (2, 16))
    y = round_trip(net, x, 1, 16, FP4, FP8, 1.0)
    feed = torch.zeros(2, 16)
    feed[1, 0] = 6 * 2.0 ** -11  # amax / 6 = 2^-11 < 2^-10: rounds to 0
    got = net.run({"x": feed}, y=y)["y"]
    assert not torch.isnan(got).any() and got.abs().max().item() == 0.0


def run_mxfp8(net, row):
    x = net.input("x", (2, 32))
    feed = torch.tensor([row, [0.0] * 32], dtype=torch.float32)
    return net.run({"x": feed}, y=round_trip(net, x, 1, 32, FP8, E8M0))["y"]


def test_mxfp8_scale_rounds_up_to_a_power_of_two(net):
    """amax 470: 470 / 448 lies between 1 and 2 and the scale is 2 (rounded up; to nearest it would be 1, and 470
    would saturate to 448): 470 / 2 = 235 rounds to the E4M3 value 240, so 480 comes back; 1.0625 / 2 halfway
    between 0.5 and 0.5625 goes to the even 0.5."""
    row = [470.0, 1.0625, -3.0] + [0.0] * 29
    assert run_mxfp8(net, row)[0].tolist()[:4] == [480.0, 1.0, -3.0, 0.0]


def test_mxfp8_exact_power_of_two_keeps_its_scale(net):
    """amax 448: the scale is exactly 1, so x is rounded to E4M3 itself: 17 halfway between 16 and 18 goes to 16,
    19 to 20, 1.1875 to 1.25."""
    row = [448.0, 17.0, 19.0, 1.1875, -17.0] + [0.0] * 27
    assert run_mxfp8(net, row)[0].tolist()[:5] == [448.0, 16.0, 20.0, 1.25, -16.0]


def test_mxfp8_all_zero_and_tiny_blocks(net):
    """A zero block gets E8M0's smallest scale (2^-127, byte 0) and outputs zeros, no NaN; so does a block whose
    amax / 448 lies below 2^-127, whose values are then scaled by 2^127 and rounded to E4M3."""
    x = net.input("x", (2, 32))
    layer, _ = dynamic_quantize(net, x, 1, 32, FP8, E8M0)
    layer.get_output(1).name = "s"
    y = net.network.add_dequantize(layer.get_output(0), layer.get_output(1), F32).get_output(0)
    y.name = "y"
    net.network.mark_output(y)
    net.network.mark_output(layer.get_output(1))
    feed = torch.zeros(2, 32)
    feed[1, 3], feed[1, 4] = 1e-40, -3e-41  # float32 subnormals: 1e-40 / 448 < 2^-127
    plan = net.build()
    raw = run_raw(plan, feed, {"s": ((2, 1), E8M0), "y": ((2, 32), F32)})
    assert raw["s"].tolist() == [0, 0]
    got = torch.from_numpy(raw["y"].view(np.float32).reshape(2, 32))
    _, _, want = expected(feed.double().numpy(), [1, 32], FP8, E8M0)
    assert not torch.isnan(got).any() and got[0].abs().max().item() == 0.0 and got[1, 3].item() > 0
    np.testing.assert_array_equal(got.double().numpy(), want.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_half_inputs_dequantize_to_their_type(net, dtype):
    """A HALF or BF16 input: the block scales come from its exact values; the DQ chain gives the input's type back."""
    torch_type = torch.float16 if dtype == F16 else torch.bfloat16
    x_t = torch.from_numpy(sample((2, 32), seed=3)).to(torch_type)
    y = round_trip(net, net.input("x", (2, 32), dtype), 1, 16, FP4, FP8, 1.0)
    got = net.run({"x": x_t}, y=y)["y"]
    assert got.dtype == torch_type
    _, _, want = expected(x_t.double().numpy(), [1, 16], FP4, FP8, 1.0)
    np.testing.assert_array_equal(got.double().numpy(), torch.from_numpy(want).to(torch_type).double().numpy())


def test_v2_one_dimensional_block(net):
    """add_dynamic_quantize_v2 with E8M0 scales and a (1, 32) block: the same as axis 1, block_size 32."""
    x_np = sample((4, 64), seed=11)
    layer = net.network.add_dynamic_quantize_v2(net.input("x", (4, 64)), (1, 32), FP8, E8M0)
    y = net.network.add_dequantize(layer.get_output(0), layer.get_output(1), F32).get_output(0)
    got = net.run({"x": torch.from_numpy(x_np)}, y=y)["y"]
    np.testing.assert_array_equal(got.double().numpy(), expected(x_np, [1, 32], FP8, E8M0)[2])


def test_v2_two_dimensional_block(net):
    """A (2, 32) block (FP8 data): one E8M0 scale per 2 x 32 tile, read from the raw outputs (the reference's
    dequantize takes block scales blocked along one dimension only)."""
    x_np = sample((4, 64), seed=12)
    layer = net.network.add_dynamic_quantize_v2(net.input("x", (4, 64)), (2, 32), FP8, E8M0)
    layer.get_output(0).name, layer.get_output(1).name = "q", "s"
    net.network.mark_output(layer.get_output(0))
    net.network.mark_output(layer.get_output(1))
    raw = run_raw(net.build(), torch.from_numpy(x_np), {"q": ((4, 64), FP8), "s": ((2, 2), E8M0)})
    data, _, _ = expected(x_np, [2, 32], FP8, E8M0)
    np.testing.assert_array_equal(e4m3_values(raw["q"]).reshape(4, 64), data)
    np.testing.assert_array_equal(raw["s"].reshape(2, 2), e8m0_up(block_amax(x_np, [2, 32]) / 448.0) + 127)


# -- refusals: one sentence each, TensorRT-RTX refusing the same for sm120 ---------------------------------------
def refused(net, match):
    assert net.build() is None
    message = net.logger.errors[-1]
    assert message.startswith("layer '") and message.count(". ") == 0, message
    assert match in message, message


def test_fp8_data_with_fp8_scales_is_refused(net):
    layer, _ = dynamic_quantize(net, net.input("x", (4, 32)), 1, 16, FP8, FP8, 1.0)
    net.network.mark_output(layer.get_output(0))
    refused(net, "FP8 data takes E8M0 block scales (MXFP8), not FP8")


def test_nvfp4_blocks_of_32_are_refused(net):
    layer, _ = dynamic_quantize(net, net.input("x", (4, 64)), 1, 32, FP4, FP8, 1.0)
    net.network.mark_output(layer.get_output(0))
    refused(net, "NVFP4 (FP4 data, FP8 scales) takes blocks of 16, not 32")


def test_nvfp4_block_shape_is_refused(net):
    layer = net.network.add_dynamic_quantize_v2(net.input("x", (4, 32)), (1, 16), FP4, FP8)
    layer.set_input(1, const(net, 1.0))
    net.network.mark_output(layer.get_output(0))
    refused(net, "not a block_shape")


def test_a_double_quantization_scale_from_an_input_is_refused(net):
    x = net.input("x", (4, 32))
    layer = net.network.add_dynamic_quantize(x, 1, 16, FP4, FP8)
    layer.set_input(1, net.input("s2", ()))
    net.network.mark_output(layer.get_output(0))
    refused(net, "its double quantization scale 's2' is computed from the network input 's2'")


@pytest.mark.parametrize("block,to,match", [
    ((1, 8), FP8, "blocks dimension 1 by 8; a 1-D block holds 16 or 32 elements"),
    ((1, 64), FP8, "blocks no dimension of the input (4, 64): its one block spans a whole dimension"),
    ((1, -1), FP8, "blocks no dimension of the input (4, 64)"),
    ((4, 1), FP8, "blocks no dimension of the input (4, 64)"),
    ((1, 1), FP8, "has 0 values other than 1"),
    ((2, 32), FP4, "is a 2-D block, which TensorRT-RTX builds only for FP8 data"),
])
def test_e8m0_block_shape_refusals(net, block, to, match):
    layer = net.network.add_dynamic_quantize_v2(net.input("x", (4, 64)), block, to, E8M0)
    net.network.mark_output(layer.get_output(0))
    refused(net, match)


def test_a_quantize_takes_no_e8m0_scale():
    """Only a dequantize reads E8M0 scales: a quantize's scale stays FLOAT, HALF or BF16. (Not twinned: TensorRT-RTX
    1.7's builder crashes, a segmentation fault, on a quantize with an E8M0 scale.)"""
    from helpers.refnet import RefNet

    net = RefNet()
    x = net.input("x", (4, 64))
    layer = net.network.add_dynamic_quantize(x, 1, 32, FP8, E8M0)
    with pytest.raises(trt.NetworkError, match="the scale has type E8M0; it must be FLOAT, HALF or BF16$"):
        net.network.add_quantize(x, layer.get_output(1), FP8).get_output(0).shape  # noqa: B018


def test_a_dynamic_dimension_in_a_2d_block(net):
    """TensorRT-RTX takes a dynamic dimension inside a 2-D block (a 1-D one must be static): (16, 16) blocks of a
    (-1, 32) input give (-1, 2) scales; a run whose rows the block does not divide is refused, naming the layer
    (TensorRT-RTX would use a partial block, which no TensorRT document defines)."""
    from helpers.refnet import CapturingLogger, add_profile
    from trtbuild.reference.runtime import device

    x = net.input("x", (-1, 32))
    add_profile(net, {"x": ((16, 32), (32, 32), (48, 32))})
    layer = net.network.add_dynamic_quantize_v2(x, (16, 16), FP8, E8M0)
    assert tuple(layer.get_output(1).shape) == (-1, 2)
    layer.get_output(0).name, layer.get_output(1).name = "q", "s"
    net.network.mark_output(layer.get_output(0))
    net.network.mark_output(layer.get_output(1))
    plan = net.build()
    x_np = sample((32, 32), seed=5)
    raw = run_raw(plan, torch.from_numpy(x_np), {"q": ((32, 32), FP8), "s": ((2, 2), E8M0)})
    np.testing.assert_array_equal(e4m3_values(raw["q"]).reshape(32, 32), expected(x_np, [16, 16], FP8, E8M0)[0])
    np.testing.assert_array_equal(raw["s"].reshape(2, 2), e8m0_up(block_amax(x_np, [16, 16]) / 448.0) + 127)
    context = trt.Runtime(CapturingLogger()).deserialize_cuda_engine(plan).create_execution_context()
    feed = torch.zeros(24, 32, device=device())
    out = {n: torch.zeros(24 * 32, dtype=torch.uint8, device=device()) for n in ("q", "s")}
    with pytest.raises(trt.NetworkError, match=r"the block extent 16 does not divide the input's dimension 0 \(24\)"):
        context.set_input_shape("x", (24, 32))
        context.set_tensor_address("x", feed.data_ptr())
        for n, t in out.items():
            context.set_tensor_address(n, t.data_ptr())
        context.execute_async_v3(0)


def test_e8m0_scales_cast_to_half_dequantize_the_data(net):
    """A cast reads E8M0 scales as their powers of two: DQ(data, cast(scales, HALF)) is DQ(data, scales). (TensorRT-RTX
    builds this; its builder crashes, a segmentation fault, on an E8M0 -> FLOAT cast marked as a network output.)"""
    x_np = sample((2, 64), seed=9).astype(np.float16)
    layer, _ = dynamic_quantize(net, net.input("x", (2, 64), F16), 1, 32, FP8, E8M0)
    scale = net.network.add_cast(layer.get_output(1), F16).get_output(0)
    y = net.network.add_dequantize(layer.get_output(0), scale, F16).get_output(0)
    got = net.run({"x": torch.from_numpy(x_np)}, y=y)["y"]
    want = expected(x_np, [1, 32], FP8, E8M0)[2].astype(np.float16)
    np.testing.assert_array_equal(got.numpy(), want)

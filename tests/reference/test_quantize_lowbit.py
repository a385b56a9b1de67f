"""INT4, FP4 and FP8 as constant and Q/DQ types, and block quantization: values against hand-computed tables
(INT4 [-8, 7] with rounding half to even, FP4 E2M1 with ties to the even code, FP8 E4M3 saturated to +-448),
INT4 weight-only block quantization of a linear layer against float64 numpy; every construction twinned with
TensorRT-RTX (sm86 for INT4; FP8 and FP4 build only for newer targets, so those twins target sm120)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import RefNet, close

INT4, FP4, FP8 = trt.DataType.INT4, trt.DataType.FP4, trt.DataType.FP8


@pytest.fixture
def refnet120(rtx):
    """A reference network twinned with TensorRT-RTX building for sm120 (FP8 and FP4 need it)."""
    from helpers.twin import TwinRefNet

    net = TwinRefNet(rtx, targets=("12.0",))
    yield net
    net.twin.finish()


def packed(values, dtype) -> tuple[np.ndarray, trt.Weights]:
    """TensorRT's packed Weights of INT4 values or FP4 codes: two per byte, the first in the low four bits."""
    nib = np.asarray(values, np.int64).reshape(-1) & 0xF
    if nib.size % 2:
        nib = np.append(nib, 0)
    raw = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)
    return raw, trt.Weights(dtype, raw.ctypes.data, len(np.asarray(values).reshape(-1)))


def const(net, shape, array):
    array = np.ascontiguousarray(array)
    return net.network.add_constant(array.shape if shape is None else shape, trt.Weights(array)).get_output(0)


def qdq(net, x, scale, to, out=trt.float32):
    s = const(net, None, np.asarray(scale, np.float32))
    q = net.network.add_quantize(x, s, to)
    return q, net.network.add_dequantize(q.get_output(0), s, out)


# -- hand-computed tables ----------------------------------------------------------------------
def test_int4_quantize_rounds_half_even_and_clamps():
    x = [-5.0, -4.25, -0.75, -0.25, 0.25, 0.75, 1.25, 3.5, 3.75, 10.0]
    # x / 0.5 = -10, -8.5, -1.5, -0.5, 0.5, 1.5, 2.5, 7, 7.5, 20 -> half to even, then [-8, 7]
    want = [-8, -8, -2, 0, 0, 2, 2, 7, 7, 7]
    net = RefNet()
    q, d = qdq(net, net.input("x", (10,)), 0.5, INT4)
    y = net.run({"x": torch.tensor(x)}, y=d.get_output(0))["y"]
    assert y.tolist() == [v * 0.5 for v in want]


def test_fp4_quantize_rounds_to_e2m1_ties_to_even():
    x = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.3, -2.6, 100.0, -0.2]
    # the E2M1 grid 0 0.5 1 1.5 2 3 4 6: ties go to the even code (0, 1, 2, 4), beyond 6 saturates
    want = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -0.5, -3.0, 6.0, -0.0]
    net = RefNet()
    q, d = qdq(net, net.input("x", (12,)), 1.0, FP4)
    y = net.run({"x": torch.tensor(x)}, y=d.get_output(0))["y"]
    assert y.tolist() == want


def test_fp8_quantize_saturates_and_rounds_to_e4m3():
    x = [500.0, -1000.0, 1.0625, 1.1875, 0.001953125, 449.0]
    # 1.0625 is halfway between 1 and 1.125 (mantissa step 1/8): the even mantissa, 1; 1.1875 -> 1.25;
    # 2^-9 is E4M3's smallest subnormal; beyond 448 saturates
    want = [448.0, -448.0, 1.0, 1.25, 0.001953125, 448.0]
    net = RefNet()
    q, d = qdq(net, net.input("x", (6,)), 1.0, FP8)
    assert net.run({"x": torch.tensor(x)}, y=d.get_output(0))["y"].tolist() == want


def test_int4_weights_unpack_low_nibble_first():
    values = [1, 2, -8, -1, 7, 0, -3]
    raw, w = packed(values, INT4)
    assert raw.tolist() == [0x21, 0xF8, 0x07, 0x0D] and w.size == 7
    assert w.numpy().tolist() == values


def test_fp4_weights_decode():
    codes = [1, 2, 3, 4, 5, 6, 7, 9, 15, 0]
    _, w = packed(codes, FP4)
    assert w.numpy().tolist() == [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -6.0, 0.0]


# -- constants and block dequantization, twinned -------------------------------------------------
def test_int4_constant_block_dequantize(refnet):
    """(4, 6) INT4 weights, a (2, 6) block scale: rows 0-1 use scale row 0, rows 2-3 scale row 1."""
    w = np.array([[-8, -1, 0, 1, 7, 3], [2, -2, 5, -5, 6, -6], [1, 1, 1, 1, 1, 1], [-4, 4, -7, 7, 0, -1]])
    scale = np.array([[0.5, 1, 2, 0.25, 1, 3], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]], np.float32)
    _, weights = packed(w, INT4)
    c = refnet.network.add_constant((4, 6), weights)
    assert c.get_output(0).dtype == INT4
    d = refnet.network.add_dequantize(c.get_output(0), const(refnet, None, scale), trt.float32)
    expected = np.empty((4, 6))
    for r in range(4):
        for k in range(6):
            expected[r, k] = np.float32(w[r, k]) * scale[r // 2, k]  # a float32 product, as TensorRT computes
    close(refnet.run({}, y=d.get_output(0))["y"], expected, atol=0, rtol=0)


def test_int4_weight_only_linear(refnet):
    """x [3, 8] times INT4 weights [8, 4] dequantized with one HALF scale per 4 rows of K (block 4 along K)."""
    rng = np.random.default_rng(4)
    w = rng.integers(-8, 8, size=(8, 4))
    scale = rng.uniform(0.01, 0.1, size=(2, 4)).astype(np.float16)
    _, weights = packed(w, INT4)
    c = refnet.network.add_constant((8, 4), weights).get_output(0)
    d = refnet.network.add_dequantize(c, const(refnet, None, scale), trt.float16)
    x = refnet.input("x", (3, 8), trt.float16)
    y = refnet.network.add_matrix_multiply(x, trt.MatrixOperation.NONE, d.get_output(0), trt.MatrixOperation.NONE)
    xv = torch.from_numpy(rng.uniform(-1, 1, size=(3, 8)).astype(np.float16))
    out = refnet.run({"x": xv}, y=y.get_output(0))["y"]
    dequant = w * np.repeat(scale.astype(np.float64), 4, axis=0)
    close(out, xv.double().numpy() @ dequant, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("to,blocked", [(INT4, 1), (INT4, 0), (trt.DataType.INT8, 1)])
def test_block_quantize_activations(refnet, to, blocked):
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    sshape = (4, 2) if blocked == 1 else (2, 8)
    scale = np.arange(1, 1 + np.prod(sshape), dtype=np.float32).reshape(sshape) / 8
    q, d = qdq(refnet, refnet.input("x", (4, 8)), scale, to)
    full = np.repeat(scale, 4, axis=1) if blocked == 1 else np.repeat(scale, 2, axis=0)
    lo, hi = (-8, 7) if to == INT4 else (-128, 127)
    expected = np.clip(np.round(x.astype(np.float64) * (1 / full.astype(np.float32)).astype(np.float64)), lo, hi)
    y = refnet.run({"x": torch.from_numpy(x)}, y=d.get_output(0))["y"]
    close(y, expected * full, atol=1e-6, rtol=1e-6)


def test_fp4_constant_block_dequantize(refnet120):
    codes = [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 0, 8]
    _, weights = packed(codes, FP4)
    c = refnet120.network.add_constant((2, 8), weights)
    scale = np.array([[2.0, 0.5], [1.0, 4.0]], np.float32)  # blocks of 4 along the last dimension
    d = refnet120.network.add_dequantize(c.get_output(0), const(refnet120, None, scale), trt.float32)
    grid = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    vals = np.array([(-1 if k >= 8 else 1) * grid[k & 7] for k in codes]).reshape(2, 8)
    close(refnet120.run({}, y=d.get_output(0))["y"], vals * np.repeat(scale, 4, axis=1), atol=0, rtol=0)


def test_fp8_constant_dequantize(refnet120):
    raw = np.array([0x38, 0x7E, 0xB8, 0x01], np.uint8)  # 1, 448, -1, 2^-9
    c = refnet120.network.add_constant((4,), trt.Weights(FP8, raw.ctypes.data, 4))
    d = refnet120.network.add_dequantize(c.get_output(0), const(refnet120, None, np.float32(0.5)), trt.float32)
    assert refnet120.run({}, y=d.get_output(0))["y"].tolist() == [0.5, 224.0, -0.5, 2.0 ** -10]


@pytest.mark.parametrize("to", [FP4, FP8])
def test_fp4_fp8_block_qdq(refnet120, to):
    x = np.linspace(-7, 7, 32, dtype=np.float32).reshape(2, 16)
    scale = np.array([[1.0, 0.5], [2.0, 0.25]], np.float32)
    q, d = qdq(refnet120, refnet120.input("x", (2, 16)), scale, to)
    y = refnet120.run({"x": torch.from_numpy(x)}, y=d.get_output(0))["y"]
    assert q.get_output(0).dtype == to and tuple(y.shape) == (2, 16)
    v = x / np.repeat(scale, 8, axis=1)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    if to == FP4:  # no tie among these values: the nearest grid point
        want = np.sign(v) * grid[np.abs(np.abs(np.clip(v, -6, 6))[..., None] - grid).argmin(-1)]
    else:
        want = torch.from_numpy(np.clip(v, -448, 448)).to(torch.float8_e4m3fn).double().numpy()
    close(y, want * np.repeat(scale, 8, axis=1), atol=0, rtol=0)


@pytest.mark.parametrize("sshape,match", [((2, 2), "in 2 dimensions"), ((8, 4), "in 0 dimensions"),
                                          ((3, 4), "do not divide"), ((2,), "per-channel"),
                                          ((2, 8, 4), "block scale has the input's rank")])
def test_block_scale_refusals(refnet, sshape, match):
    _, weights = packed(np.zeros(32, np.int64), INT4)
    c = refnet.network.add_constant((8, 4), weights).get_output(0)
    d = refnet.network.add_dequantize(c, const(refnet, None, np.full(sshape, 0.5, np.float32)), trt.float32)
    d.axis = 0
    with pytest.raises(trt.NetworkError, match=match):
        d.get_output(0).shape  # noqa: B018 - the shape query is what raises


@pytest.mark.parametrize("to,target", [(INT4, "8.6"), (FP4, "12.0")])
def test_an_odd_four_bit_quantize_is_refused(rtx, to, target):
    from helpers.twin import TwinRefNet

    net = TwinRefNet(rtx, targets=(target,))
    q, d = qdq(net, net.input("x", (3, 5)), 0.5, to)
    with pytest.raises(trt.NetworkError, match="15 values, an odd count"):
        q.get_output(0).shape  # noqa: B018


def test_an_odd_int4_constant_is_refused_by_its_dequantize(refnet):
    values = [1, -2, 3, -4, 5, -6, 7]
    raw, weights = packed(values, INT4)
    assert raw.size == 4 and weights.numpy().tolist() == values  # 7 values pack into 4 bytes
    c = refnet.network.add_constant((7,), weights).get_output(0)
    d = refnet.network.add_dequantize(c, const(refnet, None, np.float32(0.5)), trt.float32)
    with pytest.raises(trt.NetworkError, match="7 values, an odd count"):
        d.get_output(0).shape  # noqa: B018


def test_block_must_be_one_of_the_last_two_dimensions(refnet):
    _, weights = packed(np.zeros(64, np.int64), INT4)
    c = refnet.network.add_constant((2, 8, 4), weights).get_output(0)
    d = refnet.network.add_dequantize(c, const(refnet, None, np.full((1, 8, 4), 0.5, np.float32)), trt.float32)
    with pytest.raises(trt.NetworkError, match="last or second-to-last"):
        d.get_output(0).shape  # noqa: B018


def test_an_int4_constant_feeds_dequantize_only(refnet):
    _, weights = packed(np.zeros(8, np.int64), INT4)
    c = refnet.network.add_constant((2, 4), weights)
    refnet.network.mark_output(c.get_output(0))
    assert refnet.build() is None
    assert "INT4 weights make a quantized constant" in refnet.logger.errors[-1]


@pytest.mark.parametrize("to,codes", [(INT4, [0x0, 0x1, 0xF, 0x8, 0x7, 0x2]),  # 0, 1, -1, -8, 7 (clamped: -9, 9), 2
                                      (FP4, [0x0, 0x2, 0x9, 0xF, 0x7, 0x4])])   # 0, 1, -0.5, -6, 6 (saturated), 2
def test_a_four_bit_network_output_is_packed(refnet, to, codes):
    """A quantize output may be a network output (TensorRT-RTX builds it: INT4 for sm86, FP4 for sm120); its
    buffer holds two values a byte, the first in the low four bits."""
    from helpers.refnet import run_plan  # noqa: F401 - the same deserialize / bind / execute path, by hand here
    from trtbuild.reference.runtime import device

    if to == FP4:
        refnet.rtxnet.config.num_compute_capabilities = 1
        from trtbuild.engine.rtx import set_targets

        set_targets(refnet.rtxnet.trt, refnet.rtxnet.config, ("12.0",))
    x = refnet.input("x", (6,))
    s = const(refnet, None, np.float32(0.5) if to == INT4 else np.float32(1.0))
    q = refnet.network.add_quantize(x, s, to)
    q.get_output(0).name = "q"
    refnet.network.mark_output(q.get_output(0))
    plan = refnet.build()
    engine = trt.Runtime(refnet.logger).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    feed = torch.tensor([0.0, 0.5, -0.5, -4.5, 4.5, 1.0] if to == INT4 else [0.0, 1.0, -0.5, -7.0, 7.0, 2.0])
    feed = feed.to(device())
    out = torch.full((3,), 0xAA, dtype=torch.uint8, device=device())
    context.set_input_shape("x", (6,))
    context.set_tensor_address("x", feed.data_ptr())
    context.set_tensor_address("q", out.data_ptr())
    assert engine.get_tensor_dtype("q") == to
    assert context.execute_async_v3(0)
    want = [codes[0] | codes[1] << 4, codes[2] | codes[3] << 4, codes[4] | codes[5] << 4]
    assert out.cpu().tolist() == want


F32, F16 = trt.float32, trt.float16


@pytest.mark.parametrize("to,x_type,q_scale,dq_scale,out,match", [
    (INT4, F16, F32, F16, F16, None), (INT4, F32, F16, F16, F32, "takes a FLOAT scale, not HALF"),
    (INT4, F16, F16, F32, F16, "takes a HALF scale, not FLOAT"), (INT4, F16, F16, F16, F32, "takes a FLOAT scale"),
    (FP8, F16, F32, F32, F16, None), (FP8, F32, F16, F16, F16, "takes a FLOAT scale, not HALF"),
    (FP8, F16, F16, F16, F32, "takes a FLOAT scale, not HALF"),
    (FP4, F16, F32, F16, F16, "takes a HALF scale, not FLOAT"), (FP4, F16, F16, F32, F16, "takes a HALF scale"),
    (FP4, F16, F16, F16, F16, None),
])
def test_scale_types_of_the_narrow_types(refnet120, to, x_type, q_scale, dq_scale, out, match):
    """TensorRT-RTX 1.7 compiles a quantize to INT4/FP8 with a FLOAT scale or one of the input's type (FP4: the
    input's type), a dequantize of INT4/FP4 with a scale of the output's type (FP8: FLOAT too); INT8 takes any."""
    np_of = {F32: np.float32, F16: np.float16}
    x = refnet120.input("x", (2, 4), x_type)
    q = refnet120.network.add_quantize(x, const(refnet120, None, np.array(0.5, np_of[q_scale])), to)
    d = refnet120.network.add_dequantize(q.get_output(0), const(refnet120, None, np.array(0.5, np_of[dq_scale])), out)
    if match is None:
        assert d.get_output(0).dtype == out
        return
    with pytest.raises(trt.NetworkError, match=match):
        _ = q.get_output(0).shape, d.get_output(0).shape  # the shape queries are what raise


def test_a_one_value_block_scale_is_refused(refnet):
    x = refnet.input("x", (4, 1))
    q, d = qdq(refnet, x, np.full((1, 1), 0.5, np.float32), trt.DataType.INT8)
    with pytest.raises(trt.NetworkError, match="one value: per-tensor scales are 0-D or 1-D"):
        q.get_output(0).shape  # noqa: B018

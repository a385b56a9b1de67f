"""Q/DQ (add_quantize / add_dequantize): the reference against TensorRT-RTX 1.7's builder, and the
reference's values against hand-computed ones.

Each probe is built by the same `build(trt, network)` on trtbuild.reference and on tensorrt_rtx
(tests/helpers/rtx_sweep_runner.py): both must agree on acceptance and on every output's shape and dtype,
except the documented reference-stricter entries (QDQ_STRICTER), each of which TensorRT-RTX really
builds (test_stricter_entries_are_accepted_by_tensorrt_rtx). TensorRT-RTX compiles FP8 only for
sm89 and newer ("Cannot compile for target(s) sm86, because the model contains HW-specific
datatypes: fp8_e4m3"), so the probes target sm89.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import RefNet
from helpers.rtx_sweep import Case
from helpers.rtx_sweep_runner import RtxRunner, judge, run_reference
from trtbuild.reference import NetworkError

#: what the reference refuses although TensorRT-RTX 1.7 builds it: (pattern of the reference's message, why)
QDQ_STRICTER = [
    (r"must be a build-time constant", "IQuantizeLayer: \"The subgraph which terminates with the scale tensor "
                                       "must be a build-time constant\""),
]


def _stricter(case, message: str) -> bool:
    return any(re.search(p, message) for p, _ in QDQ_STRICTER)


class _Consts:
    """Numpy arrays kept alive by the case (TensorRT reads weights by pointer at build time)."""

    def __init__(self):
        self.keep = []

    def __call__(self, net, array, shape=None):
        a = np.ascontiguousarray(np.asarray(array))
        self.keep.append(a)
        return net.add_constant(a.shape if shape is None else shape, a).get_output(0)


def _qdq_case(desc, *, to="INT8", scale=0.1, axis=None, x_type="FLOAT", x_shape=(1, 4, 3, 3), out="FLOAT",
              dq=True, scale_type=np.float32, dq_axis=None):
    k = _Consts()

    def build(trt, net):
        x = net.add_input("x", getattr(trt.DataType, x_type), x_shape)
        s = k(net, np.asarray(scale, scale_type))
        q = net.add_quantize(x, s, getattr(trt.DataType, to))
        if axis is not None:
            q.axis = axis
        if not dq:
            return [q.get_output(0)]
        d = net.add_dequantize(q.get_output(0), s, getattr(trt.DataType, out))
        if (axis if dq_axis is None else dq_axis) is not None:
            d.axis = axis if dq_axis is None else dq_axis
        return [d.get_output(0)]
    return Case("qdq", desc, build)


def _conv_case(desc, *, weights="float-q-dq", to="INT8", x_q=True, kernel_type=np.float32, kernel_shape=(8, 4, 3, 3)):
    """A conv whose kernel is input 1: a float constant through Q/DQ per output channel, an INT8
    constant through a DQ, a plain float constant, or a Q without DQ."""
    k = _Consts()
    w = np.random.default_rng(0).uniform(-1, 1, (8, 4, 3, 3)).astype(np.float32)
    sc = np.abs(w).reshape(8, -1).max(1) / 127

    def build(trt, net):
        x = net.add_input("x", trt.float32, (1, 4, 5, 5))
        dt = getattr(trt.DataType, to)
        if x_q:
            s = k(net, np.float32(0.05))
            x = net.add_dequantize(net.add_quantize(x, s, dt).get_output(0), s, trt.float32).get_output(0)
        s = k(net, sc.astype(np.float32))
        if weights == "int8-dq":
            d = net.add_dequantize(k(net, np.clip(np.round(w / sc[:, None, None, None]), -128, 127).astype(np.int8)),
                                   s, trt.float32)
            d.axis = 0
            kernel = d.get_output(0)
        elif weights == "float-const":
            kernel = k(net, w.astype(kernel_type).reshape(kernel_shape))
        else:
            q = net.add_quantize(k(net, w), s, dt)
            q.axis = 0
            kernel = q.get_output(0)
            if weights == "float-q-dq":
                d = net.add_dequantize(kernel, s, trt.float32)
                d.axis = 0
                kernel = d.get_output(0)
        b = np.linspace(-1, 1, 8).astype(np.float32)
        k.keep.append(b)
        conv = net.add_convolution_nd(x, 8, (3, 3), trt.Weights(), b)
        conv.set_input(1, kernel)
        return [conv.get_output(0)]
    return Case("qdq-conv", desc, build)


def _matmul_case(desc, to="INT8"):
    k = _Consts()
    w = np.random.default_rng(1).uniform(-1, 1, (5, 6)).astype(np.float32)

    def build(trt, net):
        dt = getattr(trt.DataType, to)
        x = net.add_input("x", trt.float32, (2, 6))
        s = k(net, np.float32(0.02))
        a = net.add_dequantize(net.add_quantize(x, s, dt).get_output(0), s, trt.float32).get_output(0)
        sw = k(net, (np.abs(w).max(1) / 127).astype(np.float32))
        q = net.add_quantize(k(net, w), sw, dt)
        q.axis = 0
        d = net.add_dequantize(q.get_output(0), sw, trt.float32)
        d.axis = 0
        mm = net.add_matrix_multiply(a, trt.MatrixOperation.NONE, d.get_output(0), trt.MatrixOperation.TRANSPOSE)
        return [mm.get_output(0)]
    return Case("qdq-matmul", desc, build)


def _int8_constant_case(desc, consumer):
    k = _Consts()

    def build(trt, net):
        c = k(net, np.arange(-3, 3, dtype=np.int8).reshape(2, 3))
        if consumer == "output":
            return [c]
        if consumer == "identity":
            return [net.add_identity(c).get_output(0)]
        return [net.add_dequantize(c, k(net, np.float32(0.5)), trt.float32).get_output(0)]
    return Case("qdq-const", desc, build)


def _runtime_scale_case():
    def build(trt, net):
        x = net.add_input("x", trt.float32, (2, 3))
        s = net.add_input("s", trt.float32, ())
        q = net.add_quantize(x, s, trt.DataType.INT8)
        return [net.add_dequantize(q.get_output(0), s, trt.float32).get_output(0)]
    return Case("qdq", "scale fed by a network input", build)


def _dq_of_input_case(x_type):
    k = _Consts()

    def build(trt, net):
        x = net.add_input("x", getattr(trt.DataType, x_type), (2, 3))
        return [net.add_dequantize(x, k(net, np.float32(0.5)), trt.float32).get_output(0)]
    return Case("qdq", f"dequantize of a {x_type} network input", build)


def probes() -> list[Case]:
    per_channel = np.linspace(0.05, 0.2, 4).astype(np.float32)
    cases = [
        _qdq_case("INT8 per tensor, 0-D scale"),
        _qdq_case("INT8 per tensor, (1,) scale", scale=[0.1]),
        _qdq_case("FP8 per tensor", to="FP8"),
        _qdq_case("INT8 per channel axis 1", scale=per_channel, axis=1),
        _qdq_case("FP8 per channel axis 1", to="FP8", scale=per_channel, axis=1),
        _qdq_case("INT8 per channel, default axis (-1) of size 3 vs 4 scales", scale=per_channel),
        _qdq_case("INT8 per channel axis -1, 3 scales", scale=[0.1, 0.2, 0.3], axis=-1),
        _qdq_case("INT8 per channel axis 0 of size 1 vs 4 scales", scale=per_channel, axis=0),
        _qdq_case("INT8 axis 4 of a rank-4 input", scale=per_channel, axis=4),
        _qdq_case("INT8 per tensor with axis 1 set", axis=1),
        _qdq_case("INT8 per tensor with axis 5 set on rank 2", axis=5, x_shape=(2, 3)),
        _qdq_case("INT8 per tensor with axis -3 on rank 2", axis=-3, x_shape=(2, 3)),
        _qdq_case("negative scale", scale=-0.1),
        _qdq_case("zero scale", scale=0.0),
        _qdq_case("HALF scale on a FLOAT input", scale_type=np.float16),
        _qdq_case("HALF input, HALF scale, HALF out", x_type="HALF", out="HALF", scale_type=np.float16),
        _qdq_case("HALF input, FLOAT scale", x_type="HALF", out="HALF"),
        _qdq_case("BF16 input, dequantize to BF16", x_type="BF16", out="BF16"),
        _qdq_case("dequantize to HALF", out="HALF"),
        _qdq_case("dequantize to INT32", out="INT32"),
        _qdq_case("dequantize to INT8", out="INT8"),
        _qdq_case("quantize to HALF", to="HALF"),
        _qdq_case("quantize to INT32", to="INT32"),
        _qdq_case("quantize an INT32 input", x_type="INT32"),
        _qdq_case("quantize an INT8 input", x_type="INT8"),
        _qdq_case("INT32 scale", scale=2, scale_type=np.int32),
        _qdq_case("INT8 Q without DQ as a network output", dq=False),
        _qdq_case("FP8 Q without DQ as a network output", to="FP8", dq=False),
        _qdq_case("(1, 1) scale (block quantization rank)", scale=[[0.1]]),
        _qdq_case("(4, 1, 1) scale", scale=np.full((4, 1, 1), 0.1), axis=1),
        _qdq_case("rank-1 input", x_shape=(7,)),
        _qdq_case("rank-2 input per channel axis 0", x_shape=(4, 5), scale=per_channel, axis=0),
        _qdq_case("0-D input", x_shape=()),
        _qdq_case("Q per tensor, DQ per channel", dq_axis=1),
        _qdq_case("INT4 output", to="INT4"),
        *[_qdq_case(f"{to} block scale {s} on (4, 6)", to=to, scale=np.full(s, 0.1), x_shape=(4, 6))
          for to in ("INT8", "FP8") for s in ((4, 1), (2, 6), (4, 6))],
        _runtime_scale_case(),
        _dq_of_input_case("INT8"), _dq_of_input_case("FLOAT"),
        _conv_case("conv: activations Q/DQ, float weights Q/DQ per channel"),
        _conv_case("conv: activations Q/DQ, INT8 weights through DQ", weights="int8-dq"),
        _conv_case("conv: FP8 activations and weights", to="FP8"),
        _conv_case("conv: weights Q/DQ, activations not quantized", x_q=False),
        _conv_case("conv: a quantized kernel without DQ", weights="q-only"),
        _conv_case("conv: float kernel tensor", weights="float-const"),
        _conv_case("conv: HALF kernel tensor, FLOAT input", weights="float-const", kernel_type=np.float16),
        _conv_case("conv: flat kernel tensor", weights="float-const", kernel_shape=(288,)),
        _conv_case("conv: kernel tensor of the wrong shape", weights="float-const", kernel_shape=(8, 2, 3, 6)),
        _matmul_case("matmul: both inputs Q/DQ INT8"), _matmul_case("matmul: both inputs Q/DQ FP8", "FP8"),
        _int8_constant_case("INT8 constant as a network output", "output"),
        _int8_constant_case("INT8 constant into an identity", "identity"),
        _int8_constant_case("INT8 constant into a dequantize", "dq"),
    ]
    return cases


@pytest.fixture(scope="module")
def runner(rtx):
    return RtxRunner(rtx, targets=("8.9",))


def test_qdq_probes_agree_with_tensorrt_rtx(runner):
    cases = probes()
    tally, problems = judge(cases, runner, _stricter)
    assert not problems, "\n".join(problems)
    # the probes are not all one-sided
    assert tally.both_accept >= 20 and tally.both_reject >= 12, tally
    assert tally.stricter == 1, tally  # the runtime scale


def test_stricter_entries_are_accepted_by_tensorrt_rtx(runner):
    cases = [_runtime_scale_case()]
    for case, verdict in zip(cases, runner.verdicts(cases)):
        assert verdict.accepted, f"TensorRT-RTX now refuses '{case.desc}': drop its QDQ_STRICTER entry"
        ref = run_reference(case)
        assert not ref.accepted and _stricter(case, ref.message), ref.message


def test_fp8_needs_sm89_on_tensorrt_rtx(rtx):
    """Why the probes target sm89: the same FP8 network does not build for sm86."""
    sm86 = RtxRunner(rtx, targets=("8.6",))
    case = _qdq_case("FP8 per tensor", to="FP8")
    verdict = sm86.verdicts([case])[0]
    assert not verdict.accepted and "fp8" in verdict.message.lower(), verdict.message


# -- values: the reference's execution against hand-computed numbers ---------------------------
def _run_qdq(x, scale, to, axis=None, out=trt.float32, x_type=trt.float32):
    """Quantize then dequantize `x` on the reference; returns (q, dq) as the engine outputs them."""
    net = RefNet()
    xt = net.input("x", tuple(x.shape), x_type)
    scale = np.asarray(scale, np.float32)
    s = net.network.add_constant(scale.shape, scale).get_output(0)
    q = net.network.add_quantize(xt, s, to)
    d = net.network.add_dequantize(q.get_output(0), s, out)
    if axis is not None:
        q.axis = d.axis = axis
    res = net.run({"x": x}, q=q.get_output(0), y=d.get_output(0))
    return res["q"], res["y"]


def test_int8_rounds_half_to_even_and_saturates():
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 127.0, 127.5, 128.0, -128.0, -128.5, -129.0, -1e4, 1e9]])
    q, y = _run_qdq(x, 1.0, trt.DataType.INT8)
    assert q.dtype == torch.int8
    assert q.tolist() == [[0, 2, 2, 0, -2, -2, 0, 127, 127, 127, -128, -128, -128, -128, 127]]
    assert y.tolist() == q.float().tolist()


def test_int8_exact_halves():
    """Halves exactly representable after the division (scale 0.5): 0.25/0.5 = 0.5 -> 0, 0.75 -> 2."""
    x = torch.tensor([[0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 63.75, 63.25, -64.25, -64.0]])
    q, y = _run_qdq(x, 0.5, trt.DataType.INT8)
    assert q.tolist() == [[0, 2, 2, 0, -2, -2, 127, 126, -128, -128]]
    assert y.tolist() == [[0.0, 1.0, 1.0, 0.0, -1.0, -1.0, 63.5, 63.0, -64.0, -64.0]]


def test_int8_exact_ties_with_a_reciprocal_scale():
    """Scale 0.25 (1 / scale = 4 exactly): 0.625 -> 2.5 -> 2, 0.875 -> 3.5 -> 4, -0.625 -> -2.5 -> -2 and
    -2.625 -> -10.5 -> -10, half to even; half up would give 3 for 2.5, half away from zero 3, -3 and -11."""
    x = torch.tensor([[0.625, 0.875, -0.625, -2.625]])
    q, y = _run_qdq(x, 0.25, trt.DataType.INT8)
    assert q.tolist() == [[2, 4, -2, -10]]
    assert y.tolist() == [[0.5, 1.0, -0.5, -2.5]]


def test_int8_multiplies_by_the_reciprocal_scale():
    """TensorRT computes round(x * (1 / scale)) in float32, not round(x / scale): with scale 0.1,
    8.15 * (1 / 0.1) is 81.5 in float32 (half to even: 82), while 8.15 / 0.1 is 81.49999 (81)."""
    x = torch.tensor([[8.15, -8.15, 11.15]])
    assert torch.round(x / torch.tensor(0.1)).tolist() == [[81, -81, 111]]  # the division rounds the other way
    q, _ = _run_qdq(x, 0.1, trt.DataType.INT8)
    assert q.tolist() == [[82, -82, 112]]
    q, _ = _run_qdq(x.reshape(1, 3, 1), [0.1, 0.1, 0.1], trt.DataType.INT8, axis=1)  # per channel alike
    assert q.flatten().tolist() == [82, -82, 112]


def test_fp8_multiplies_by_the_reciprocal_scale():
    """The same reciprocal in FP8: with scale 0.1, 0.19375 * (1 / 0.1) is 1.9375 in float32, the tie between the
    E4M3 values 1.875 (mantissa 111) and 2.0: to even, 2.0; 0.19375 / 0.1 is 1.9374999, below the tie: 1.875."""
    x = torch.tensor([[0.19375, -0.19375]])
    assert (x / torch.tensor(0.1)).to(torch.float8_e4m3fn).float().tolist() == [[1.875, -1.875]]
    q, _ = _run_qdq(x, 0.1, trt.DataType.FP8)
    assert q.float().tolist() == [[2.0, -2.0]]


def test_int8_per_channel_scales():
    x = torch.tensor([[[1.0, -3.0], [1.0, -3.0], [1.0, -300.0]]])  # (1, 3, 2), channels on axis 1
    q, y = _run_qdq(x, [1.0, 0.5, 2.0], trt.DataType.INT8, axis=1)
    assert q.tolist() == [[[1, -3], [2, -6], [0, -128]]]  # 1/2 = 0.5 -> 0 (half to even)
    assert y.tolist() == [[[1.0, -3.0], [1.0, -3.0], [0.0, -256.0]]]


def test_int8_per_channel_on_the_last_axis_by_default():
    x = torch.tensor([[4.0, 4.0]])
    q, _ = _run_qdq(x, [1.0, 4.0], trt.DataType.INT8)
    assert q.tolist() == [[4, 1]]


def test_fp8_rounds_to_nearest_even_and_saturates():
    # E4M3 has 3 mantissa bits: in [1, 2) the step is 0.125; 1.0625 is halfway between 1.0 (mantissa
    # 000) and 1.125 (001): to even, 1.0; 1.1875 between 1.125 and 1.25 (010): 1.25. The largest
    # finite value is 448; beyond it TensorRT saturates (ONNX QuantizeLinear saturate=1), never NaN.
    # 2**-10 is halfway between 0 and the smallest subnormal 2**-9: to even, 0.
    x = torch.tensor([[1.0625, 1.1875, -1.0625, 3.3, 447.0, 460.0, 500.0, -1e6, 2.0 ** -10, 2.0 ** -9 * 1.4]])
    q, y = _run_qdq(x, 1.0, trt.DataType.FP8)
    assert q.dtype == torch.float8_e4m3fn
    assert q.float().tolist() == [[1.0, 1.25, -1.0, 3.25, 448.0, 448.0, 448.0, -448.0, 0.0, 2.0 ** -9]]
    assert y.tolist() == q.float().tolist()


def test_fp8_per_channel_and_scale_division():
    x = torch.tensor([[[10.0], [10.0]]])  # x / scale: 10/2 = 5 (exact), 10/4 = 2.5 (exact)
    q, y = _run_qdq(x, [2.0, 4.0], trt.DataType.FP8, axis=1)
    assert q.float().tolist() == [[[5.0], [2.5]]]
    assert y.tolist() == [[[10.0], [10.0]]]


@pytest.mark.parametrize("out, torch_type", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_dequantize_output_types(out, torch_type):
    x = torch.tensor([[1.0, -2.0, 300.0]])
    q, y = _run_qdq(x, 1.0 / 3, trt.DataType.INT8, out=out)
    assert y.dtype == torch_type
    assert q.tolist() == [[3, -6, 127]]
    torch.testing.assert_close(y.float(), (torch.tensor([[3.0, -6.0, 127.0]]) / 3).to(torch_type).float())


def test_half_input_quantizes():
    x = torch.tensor([[0.5, 1.5, 70000.0 / 1000]], dtype=torch.float16)
    q, _ = _run_qdq(x, 0.5, trt.DataType.INT8, out=trt.float16, x_type=trt.float16)
    assert q.tolist() == [[1, 3, 127]]


def test_conv_with_a_dequantized_int8_kernel():
    """Input 1 of a convolution is the kernel: the INT8 weights times their per-channel scale."""
    rng = np.random.default_rng(3)
    wq = rng.integers(-127, 128, (3, 2, 3, 3)).astype(np.int8)
    scale = np.array([0.01, 0.02, 0.5], np.float32)
    bias = np.array([1.0, -1.0, 0.5], np.float32)
    net = RefNet()
    x = net.input("x", (1, 2, 5, 5))
    k = net.network.add_constant(wq.shape, wq).get_output(0)
    s = net.network.add_constant(scale.shape, scale).get_output(0)
    d = net.network.add_dequantize(k, s, trt.float32)
    d.axis = 0
    conv = net.network.add_convolution_nd(x, 3, (3, 3), trt.Weights(), bias)
    conv.set_input(1, d.get_output(0))
    xs = torch.randn(1, 2, 5, 5, generator=torch.Generator().manual_seed(0))
    got = net.run({"x": xs}, y=conv.get_output(0))["y"]
    kernel = torch.from_numpy(wq).float() * torch.from_numpy(scale).reshape(3, 1, 1, 1)
    torch.testing.assert_close(got, torch.nn.functional.conv2d(xs, kernel, torch.from_numpy(bias)))


def test_scale_must_be_a_build_time_constant():
    net = RefNet()
    x = net.input("x", (2, 3))
    s = net.input("s", ())
    q = net.network.add_quantize(x, s, trt.DataType.INT8)
    net.network.mark_output(net.network.add_dequantize(q.get_output(0), s, trt.float32).get_output(0))
    assert net.build() is None
    assert any("build-time constant" in e and "'s'" in e for e in net.logger.errors), net.logger.errors


def test_int8_constant_outside_a_dequantize_is_refused_at_build():
    net = RefNet()
    c = net.network.add_constant((2, 3), np.arange(6, dtype=np.int8))
    c.name = "w_int8"
    copy = net.network.add_identity(c.get_output(0))
    copy.name = "copy"
    net.network.mark_output(copy.get_output(0))
    assert net.build() is None
    assert any(e.startswith("layer 'w_int8': INT8 weights make a quantized constant") and "feeds layer 'copy'" in e
               for e in net.logger.errors), net.logger.errors


def test_refusals_name_the_layer():
    net = RefNet()
    x = net.input("x", (1, 4, 3, 3))
    s = net.network.add_constant((4,), np.ones(4, np.float32)).get_output(0)
    q = net.network.add_quantize(x, s, trt.DataType.INT8)
    q.name = "act_q"
    with pytest.raises(NetworkError, match=r"act_q.*4 values on axis -1.*has 3 there"):
        _ = q.get_output(0).shape
    q.axis = 1
    assert tuple(q.get_output(0).shape) == (1, 4, 3, 3) and q.get_output(0).dtype == trt.DataType.INT8
    d = net.network.add_dequantize(x, s, trt.float32)
    d.name = "x_dq"
    with pytest.raises(NetworkError,
                       match=r"layer 'x_dq': input has type FLOAT but a dequantize layer takes INT8, FP8"):
        _ = d.get_output(0).dtype


def test_python_defaults_are_tensorrt_10s():
    net = RefNet()
    x = net.input("x", (2, 3))
    s = net.network.add_constant((), np.array(1.0, np.float32)).get_output(0)
    q = net.network.add_quantize(x, s)
    d = net.network.add_dequantize(q.get_output(0), s)
    assert (q.axis, q.to_type, d.axis, d.to_type) == (-1, trt.DataType.INT8, -1, trt.DataType.FLOAT)
    assert q.type == trt.LayerType.QUANTIZE and d.type == trt.LayerType.DEQUANTIZE
    q.to_type = trt.DataType.FP8
    assert q.get_output(0).dtype == trt.DataType.FP8


def test_a_zero_point_input_is_refused():
    """TensorRT's Q/DQ are symmetric ("zeroPt must only contain zero-valued coefficients"); the
    reference takes no zero point at all and says so."""
    net = RefNet()
    x = net.input("x", (2, 3))
    s = net.network.add_constant((), np.array(1.0, np.float32)).get_output(0)
    z = net.network.add_constant((), np.array(0.0, np.float32)).get_output(0)
    q = net.network.add_quantize(x, s, trt.DataType.INT8)
    q.set_input(2, z)
    with pytest.raises(NetworkError, match="zero-point input"):
        _ = q.get_output(0).shape

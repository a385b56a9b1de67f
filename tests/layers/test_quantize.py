"""trtbuild.layers.quantize: Q/DQ builders against a PyTorch fake-quant reference written here
(torch.fake_quantize_per_tensor_affine / per_channel_affine for INT8, a hand-written FP8
fake-quant), and every builder's network built by TensorRT-RTX."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import RefNet, RtxNet, concrete
from trtbuild.layers.common import BuilderError
from trtbuild.layers.quantize import qadd, qconv, qlinear, quantize_dequantize, quantized_weights

GEN = torch.Generator().manual_seed(0)


def _int8_tensor(x, amax):
    return torch.fake_quantize_per_tensor_affine(x, amax / 127, 0, -128, 127)


def _int8_channels(w, amax_per_channel):
    scale = torch.where(amax_per_channel > 0, amax_per_channel / 127, 1.0).to(torch.float32)  # zeros: any scale
    return torch.fake_quantize_per_channel_affine(w, scale, torch.zeros_like(scale, dtype=torch.int32), 0, -128, 127)


def _fp8(x, scale):
    """x / scale saturated to +-448, rounded to float8 E4M3, times scale."""
    return torch.clamp(x / scale, -448, 448).to(torch.float8_e4m3fn).to(torch.float32) * scale


def _fake(dtype, x, amax):
    return _int8_tensor(x, amax) if dtype == "int8" else _fp8(x, amax / 448)


def _fake_channels(dtype, w):
    amax = w.abs().reshape(w.shape[0], -1).amax(1)
    if dtype == "int8":
        return _int8_channels(w, amax)
    return _fp8(w, torch.where(amax > 0, amax / 448, 1.0).reshape(-1, *[1] * (w.dim() - 1)))


@pytest.mark.parametrize("dtype", ["int8", "fp8"])
def test_qconv_matches_pytorch_fake_quant(dtype):
    w = torch.randn(6, 3, 3, 3, generator=GEN) * 0.3
    w[2] = 0  # an all-zero output channel
    b = torch.randn(6, generator=GEN)
    x = torch.randn(2, 3, 7, 7, generator=GEN) * 2
    amax = 3.0  # some values of x saturate
    net = RefNet()
    y = qconv(net.network, net.input("x", (2, 3, 7, 7)), w.numpy(), b.numpy(), "conv1", amax, dtype,
              stride=2, padding=1)
    got = net.run({"x": x}, y=y)["y"]
    want = F.conv2d(_fake(dtype, x, amax), _fake_channels(dtype, w), b, stride=2, padding=1)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    # the quantization did something: the fake-quant result differs from the plain conv
    assert (want - F.conv2d(x, w, b, stride=2, padding=1)).abs().max() > 1e-3


@pytest.mark.parametrize("dtype", ["int8", "fp8"])
def test_qlinear_matches_pytorch_fake_quant(dtype):
    w = torch.randn(5, 8, generator=GEN)
    b = torch.randn(5, generator=GEN)
    x = torch.randn(3, 8, generator=GEN)
    net = RefNet()
    y = qlinear(net.network, net.input("x", (3, 8)), w.numpy(), b.numpy(), "fc", 1.5, dtype)
    got = net.run({"x": x}, y=y)["y"]
    want = F.linear(_fake(dtype, x, 1.5), _fake_channels(dtype, w), b)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def test_qadd_quantizes_the_residual_only():
    net = RefNet()
    a, r = net.input("a", (1, 4)), net.input("r", (1, 4))
    y = qadd(net.network, a, r, "add1", 1.0)
    # a and r differ, and each has values int8 with amax 1 changes (0.013, 0.3: off the grid; 2.0, -5.0:
    # saturated), so quantizing a instead of r, or both, gives other sums
    av, rv = torch.tensor([[0.013, 2.0, -5.0, 0.3]]), torch.tensor([[0.3, -0.013, 0.5, 2.0]])
    got = net.run({"a": av, "r": rv}, y=y)["y"]
    torch.testing.assert_close(got, av + _int8_tensor(rv, 1.0), atol=1e-7, rtol=0)
    assert (_int8_tensor(av, 1.0) + rv - got).abs().max() > 1e-2  # not the other operand quantized


def test_layers_are_named_and_the_last_layer_has_no_qdq():
    net = RefNet()
    x = net.input("x", (1, 3, 5, 5))
    y = qconv(net.network, x, np.ones((4, 3, 3, 3), np.float32), None, "c", 2.0)
    names = [concrete(net.network.get_layer(i)).name for i in range(net.network.num_layers)]
    assert names == ["c/input_q/scale", "c/input_q/quantize", "c/input_q", "c/weight_q/scale", "c/weight_q/int8",
                     "c/weight_q", "c"]
    assert y.name == "c" and y.dtype == trt.float32
    kinds = [concrete(net.network.get_layer(i)).type for i in range(net.network.num_layers)]
    assert kinds[-1] == trt.LayerType.CONVOLUTION  # nothing quantizes the output


def test_quantized_int8_weights_are_stored_as_int8():
    net = RefNet()
    w = np.array([[0.5, -1.0, 0.25], [3.0, 1.5, -0.75]], np.float32)  # scales 1/127 and 3/127
    t = quantized_weights(net.network, w, "w")
    const = concrete(net.network.get_layer(1))
    assert const.name == "w/int8" and const.weights.dtype == trt.DataType.INT8
    # 0.5 * 127 = 63.5 -> 64, -127, 31.75 -> 32; 127, 63.5 -> 64, -31.75 -> -32. 63.5 rounds to 64 half to even
    # and half up alike: the ties that tell the rules apart are in the tests below
    assert const.weights.numpy().reshape(2, 3).tolist() == [[64, -127, 32], [127, 64, -32]]
    assert tuple(t.shape) == (2, 3) and t.dtype == trt.float32


def _int8_weights(w) -> list:
    net = RefNet()
    quantized_weights(net.network, np.asarray(w, np.float32), "w")
    return concrete(net.network.get_layer(1)).weights.numpy().reshape(np.shape(w)).tolist()


def test_int8_weights_round_exact_ties_half_to_even():
    """Scale 31.75 / 127 = 0.25 exactly, so w * 4 is exact: 2.5, 3.5, -2.5 and -10.5 are true ties.
    Half to even: 2, 4, -2, -10 (half up would give 3 for 2.5; half away from zero 3, -3 and -11)."""
    assert _int8_weights([[31.75, 0.625, 0.875, -0.625, -2.625]]) == [[127, 2, 4, -2, -10]]


def test_int8_weights_multiply_by_the_reciprocal_scale():
    """TensorRT quantizes with w * (1 / scale) in float32, not w / scale. Scale 12.7 / 127 is float32(0.1);
    8.15 * (1 / 0.1) is 81.5 in float32 (half to even: 82) while 8.15 / 0.1 is 81.49999 (81)."""
    w = np.array([12.7, 8.15, -8.15, 11.15], np.float32)
    scale = np.float32(0.1)
    assert np.round(w / scale).tolist() == [127, 81, -81, 111]  # the division rounds the other way
    assert (w * (np.float32(1) / scale)).tolist() == [127, 81.5, -81.5, 111.5]
    assert _int8_weights([w]) == [[127, 82, -82, 112]]


@pytest.mark.parametrize("amax", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_amax_is_refused_naming_the_layer(amax):
    net = RefNet()
    with pytest.raises(BuilderError, match=r"layer 'act': amax .* must be finite and > 0"):
        quantize_dequantize(net.network, net.input("x", (1, 2)), amax, "act")


def test_unknown_type_is_refused():
    net = RefNet()
    with pytest.raises(BuilderError, match=r"layer 'act': quantization type 'int4'"):
        quantize_dequantize(net.network, net.input("x", (1, 2)), 1.0, "act", dtype="int4")


def _builder_networks():
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    fc = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)

    def conv_net(network, dtype):
        x = network.add_input("x", trt_of_net(network).float32, (1, 3, 6, 6))
        y = qconv(network, x, w, np.zeros(4, np.float32), "conv", 2.0, dtype, padding=1)
        y = qadd(network, y, qconv(network, x, w, None, "conv_b", 2.0, dtype, padding=1), "add", 4.0, dtype)
        return [y]

    def linear_net(network, dtype):
        x = network.add_input("x", trt_of_net(network).float32, (2, 16))
        return [qlinear(network, x, fc, np.ones(5, np.float32), "fc", 1.0, dtype)]

    return {"qconv+qadd": conv_net, "qlinear": linear_net}


def trt_of_net(network):
    from trtbuild.backend import trt_of

    return trt_of(network)


@pytest.mark.parametrize("dtype", ["int8", "fp8"])
@pytest.mark.parametrize("which", list(_builder_networks()))
def test_tensorrt_rtx_builds_each_builders_network(rtx, which, dtype):
    net = RtxNet(rtx, targets=("8.9",))
    outs = _builder_networks()[which](net.network, dtype)
    for t in outs:
        net.network.mark_output(t)
    assert net.build() is not None, net.errors
    # the reference builds the same network with the same output shape and type
    ref = RefNet()
    ref_outs = _builder_networks()[which](ref.network, dtype)
    assert [(tuple(t.shape), t.dtype.name) for t in ref_outs] == [(tuple(t.shape), t.dtype.name) for t in outs]


def _qmodel(dtype):
    from trtbuild.layers.basic import flatten, relu

    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    fc = np.random.default_rng(1).standard_normal((5, 4 * 6 * 6)).astype(np.float32)

    def define(network, x):
        y = relu(network, qconv(network, x, w, np.zeros(4, np.float32), "conv", 2.0, dtype, padding=1), "relu")
        return {"logits": qlinear(network, flatten(network, y, "flat"), fc, None, "fc", 3.0, dtype)}
    return define


@pytest.mark.parametrize("dtype, targets", [("int8", None), ("fp8", ("8.9", "12.0"))])
def test_build_plan_cross_checks_a_quantized_model(rtx, dtype, targets):
    """build_plan(cross_check=True): the reference and TensorRT-RTX agree on every tensor of a
    qconv -> relu -> qlinear model (INT8 for the default targets, FP8 for sm89 and sm120)."""
    from trtbuild.engine.build import build_plan

    plan = build_plan(trt, _qmodel(dtype), input_shape=(1, 3, 6, 6), cross_check=True, progress=False,
                      targets=targets)
    check = plan.info["cross_check"]
    assert check["tensors_compared"] >= 15 and check["outputs"][0]["dtype"] == "FLOAT", check


def test_fp8_cross_check_for_sm86_names_the_reason(rtx):
    from trtbuild.engine import CrossCheckError
    from trtbuild.engine.build import build_plan

    with pytest.raises(CrossCheckError, match=r"Cannot compile for target\(s\) sm86.*fp8"):
        build_plan(trt, _qmodel("fp8"), input_shape=(1, 3, 6, 6), cross_check=True, progress=False)

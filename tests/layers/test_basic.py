"""trtbuild.layers.basic on the reference backend, against torch.nn.functional."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from trtbuild.layers import basic
from trtbuild.layers.common import BuilderError
from trtbuild.engine.quick import run_network
from trtbuild.weights import WeightMap

from helpers.builder_cases import POOL_CASES
from helpers.refnet import concrete

GEN = torch.Generator().manual_seed(0)


def rand(*shape):
    return torch.randn(*shape, generator=GEN)


def npr(*shape):
    return rand(*shape).numpy()


def run(build, x, half=False):
    """Build ``build(network, input) -> tensor`` and run it on ``x``; returns (output, network)."""
    holder = {}

    def define(network):
        t = network.add_input("x", trt.DataType.HALF if half else trt.DataType.FLOAT, trt.Dims(tuple(x.shape)))
        holder["network"] = network
        return {"y": build(network, t)}

    y = run_network(define, {"x": x})["y"]
    assert y.dtype == (torch.float16 if half else torch.float32)
    return y.float(), holder["network"]


def close(y, ref, atol=1e-5, rtol=1e-5):
    assert y.shape == ref.shape, (y.shape, ref.shape)
    torch.testing.assert_close(y, ref, atol=atol, rtol=rtol)


def fp16_close(y, ref):
    """fp16 tolerance used throughout: max error <= 1e-2 * max|ref| (and cosine > 0.999)."""
    assert y.shape == ref.shape
    err = (y - ref).abs().max().item()
    assert err <= 1e-2 * ref.abs().max().item(), err
    assert F.cosine_similarity(y.flatten(), ref.flatten(), dim=0).item() > 0.999


# ------------------------------------------------------------------ conv

@pytest.mark.parametrize("nsp,stride,padding,dilation,groups", [
    (1, 2, 1, 1, 1), (2, 1, 1, 1, 1), (2, 2, 2, 2, 2), (2, (2, 1), (1, 0), 1, 4), (3, 1, 1, 1, 2), (2, 4, 2, 1, 1),
])
def test_conv_matches_torch(nsp, stride, padding, dilation, groups):
    x = rand(2, 8, *([9] * nsp))
    w = npr(12, 8 // groups, *([3] * nsp))
    b = npr(12)
    y, net = run(lambda n, t: basic.conv(n, t, w, b, "c", stride, padding, dilation, groups), x)
    ref = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp](x, torch.from_numpy(w), torch.from_numpy(b), stride, padding,
                                                       dilation, groups)
    close(y, ref)
    if nsp == 1:  # TensorRT has no 1-D kernels: a 2-D convolution on (N, C, L, 1) between two shuffles
        assert [concrete(net.get_layer(i)).name for i in range(net.num_layers)] == ["c/2d", "c/conv2d", "c"]
    else:
        assert net.num_layers == 1 and concrete(net.get_layer(0)).name == "c"


def test_conv_without_bias_and_fp16():
    x = rand(1, 4, 10, 10)
    w = npr(6, 4, 3, 3)
    ref = F.conv2d(x, torch.from_numpy(w), None, 1, 1)
    y, net = run(lambda n, t: basic.conv(n, t, w, None, "c", padding=1), x.half(), half=True)
    assert concrete(net.get_layer(0)).kernel.dtype == trt.DataType.HALF
    fp16_close(y, ref)
    y32, _ = run(lambda n, t: basic.conv(n, t, w, None, "c", padding=1), x)
    close(y32, ref)


def test_conv_rejects_bad_input_with_layer_name():
    with pytest.raises(BuilderError, match=r"'conv9'.*5 channels.*expects 4"):
        run(lambda n, t: basic.conv(n, t, npr(6, 2, 3, 3), None, "conv9", groups=2), rand(1, 5, 8, 8))
    with pytest.raises(BuilderError, match=r"'c'.*bias has 3 values; expected 6"):
        run(lambda n, t: basic.conv(n, t, npr(6, 4, 3, 3), npr(3), "c"), rand(1, 4, 8, 8))
    with pytest.raises(BuilderError, match=r"'c'.*rank-4 input"):
        run(lambda n, t: basic.conv(n, t, npr(6, 4, 3, 3), None, "c"), rand(1, 4, 8))
    with pytest.raises(BuilderError, match=r"'c'.*stride=\(1, 2, 3\) has 3 values"):
        run(lambda n, t: basic.conv(n, t, npr(6, 4, 3, 3), None, "c", stride=(1, 2, 3)), rand(1, 4, 8, 8))


# ------------------------------------------------------------------ pooling


@pytest.mark.parametrize("hw,k,s,p,ceil", POOL_CASES)
def test_max_pool_matches_torch(hw, k, s, p, ceil):
    x = rand(2, 3, *hw)
    y, _ = run(lambda n, t: basic.max_pool(n, t, k, s, p, "pool", ceil_mode=ceil), x)
    close(y, F.max_pool2d(x, k, s, p, ceil_mode=ceil), atol=0, rtol=0)


@pytest.mark.parametrize("hw,k,s,p,ceil", [c for c in POOL_CASES if c[1] != (2, 3)])
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool_matches_torch(hw, k, s, p, ceil, include_pad):
    x = rand(1, 3, *hw)
    y, _ = run(lambda n, t: basic.avg_pool(n, t, k, s, p, "pool", ceil_mode=ceil, count_include_pad=include_pad), x)
    close(y, F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include_pad))


def test_max_pool_1d_3d_and_default_stride():
    x1 = rand(2, 3, 11)
    y, _ = run(lambda n, t: basic.max_pool(n, t, 3, None, 1, "p", ceil_mode=True), x1)
    close(y, F.max_pool1d(x1, 3, None, 1, ceil_mode=True), atol=0, rtol=0)
    x3 = rand(1, 2, 5, 6, 7)
    y, _ = run(lambda n, t: basic.max_pool(n, t, (2, 2, 3), 2, 0, "p", ceil_mode=True), x3)
    close(y, F.max_pool3d(x3, (2, 2, 3), 2, 0, ceil_mode=True), atol=0, rtol=0)


@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("include_pad", [False, True])
def test_avg_pool_1d(include_pad, ceil):  # TensorRT pools 2-D/3-D windows only: run as 2-D on (N, C, L, 1)
    x = rand(2, 3, 11)
    y, _ = run(lambda n, t: basic.avg_pool(n, t, 3, 2, 1, "p", ceil_mode=ceil, count_include_pad=include_pad), x)
    close(y, F.avg_pool1d(x, 3, 2, 1, ceil_mode=ceil, count_include_pad=include_pad))


@pytest.mark.parametrize("size", range(3, 14))
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (2, 2, 1), (3, 2, 1), (3, 2, 0), (3, 3, 1), (4, 3, 2)])
def test_pool_output_size_agrees_with_torch(size, k, s, p):
    for ceil in (False, True):
        expect = F.max_pool1d(torch.zeros(1, 1, size), k, s, p, ceil_mode=ceil).shape[-1]
        assert basic.pool_output_size(size, k, s, p, ceil) == expect


MAX_POOLS, AVG_POOLS = (F.max_pool1d, F.max_pool2d, F.max_pool3d), (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)


def _torch_pool(pool, x, k, s, p, ceil):
    """PyTorch's pooling of x, or None where PyTorch refuses it."""
    try:
        return pool(x, k, s, p, ceil_mode=ceil)
    except RuntimeError:  # "Output size is too small"; avg_pool3d also "input image ... smaller than kernel size"
        return None


def _pooled(builder, x, k, s, p, ceil):
    return run(lambda n, t: builder(n, t, k, s, p, "pool5", ceil_mode=ceil), x)[0]


@pytest.mark.parametrize("nsp", [1, 2, 3])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_with_an_empty_output_is_refused_where_torch_refuses_it(nsp, kind):
    """A window larger than the padded input: refused at the pooling layer itself (TensorRT would
    accept it and fail at the next layer), exactly where PyTorch's max pooling finds no output
    (avg_pool3d alone refuses more: any input smaller than the kernel, padding ignored)."""
    builder, pool = (basic.max_pool, MAX_POOLS[nsp - 1]) if kind == "max" else (basic.avg_pool, AVG_POOLS[nsp - 1])
    refused = 0
    for size, k, s, ceil in itertools.product((1, 2, 3), (1, 2, 3, 4), (1, 2), (False, True)):
        for p in range(k // 2 + 1):
            x = rand(1, 2, *([4] * (nsp - 1)), size)
            sized = _torch_pool(MAX_POOLS[nsp - 1], x, k, s, p, ceil)
            if sized is None:
                refused += 1
                with pytest.raises(BuilderError, match=r"^layer 'pool5': the pooling window .* so no window fits"):
                    _pooled(builder, x, k, s, p, ceil)
                continue
            y = _pooled(builder, x, k, s, p, ceil)
            expected = _torch_pool(pool, x, k, s, p, ceil)
            if expected is None:  # avg_pool3d's own limit: the size max pooling gives
                assert y.shape == sized.shape
            else:
                close(y, expected)
    assert refused >= 6  # the sweep does reach the refusal


def test_pool_rejects_large_padding():
    with pytest.raises(BuilderError, match=r"'pool'.*padding \(2, 2\) must be at most half"):
        run(lambda n, t: basic.max_pool(n, t, 3, 1, 2, "pool"), rand(1, 1, 6, 6))


@pytest.mark.parametrize("hw,out", [((7, 7), (3, 3)), ((2, 2), (6, 6)), ((12, 12), (6, 6)), ((5, 9), (1, 1)),
                                     ((1, 1), (6, 6)), ((13, 10), (6, 4)), ((6, 6), 6)])
def test_adaptive_avg_pool_matches_torch(hw, out):
    x = rand(2, 3, *hw)
    y, net = run(lambda n, t: basic.adaptive_avg_pool(n, t, out, "ap"), x)
    close(y, F.adaptive_avg_pool2d(x, out), atol=1e-6, rtol=1e-5)
    kinds = [type(concrete(net.get_layer(i))) for i in range(net.num_layers)]  # IPoolingLayer.type is a PoolingType
    if hw == (6, 6):
        assert kinds == [trt.IIdentityLayer]
    elif hw == (12, 12):
        assert kinds == [trt.IPoolingLayer]
    elif out == (1, 1):
        assert kinds == [trt.IReduceLayer]
    else:
        assert trt.IMatrixMultiplyLayer in kinds


def test_adaptive_avg_pool_fp16():
    x = rand(1, 4, 7, 5)
    y, _ = run(lambda n, t: basic.adaptive_avg_pool(n, t, (3, 2), "ap"), x.half(), half=True)
    fp16_close(y, F.adaptive_avg_pool2d(x, (3, 2)))


def test_global_avg_pool_keeps_dims():
    x = rand(2, 5, 4, 6)
    y, _ = run(lambda n, t: basic.global_avg_pool(n, t, "gap"), x)
    close(y, x.mean(dim=(2, 3), keepdim=True), atol=1e-6, rtol=1e-6)


# ------------------------------------------------------------------ linear, flatten, add, relu

def test_linear_flattens_and_adds_bias():
    x = rand(2, 3, 2, 2)
    w, b = npr(5, 12), npr(5)
    y, net = run(lambda n, t: basic.linear(n, t, w, b, "fc"), x)
    close(y, F.linear(x.flatten(1), torch.from_numpy(w), torch.from_numpy(b)))
    names = [concrete(net.get_layer(i)).name for i in range(net.num_layers)]
    assert names == ["fc/flatten", "fc/weight", "fc/matmul", "fc/bias", "fc"]


def test_linear_without_bias_fp16():
    x = rand(3, 16)
    w = npr(4, 16)
    y, _ = run(lambda n, t: basic.linear(n, t, w, None, "fc"), x.half(), half=True)
    fp16_close(y, x @ torch.from_numpy(w).T)


def test_linear_rejects_feature_mismatch():
    with pytest.raises(BuilderError, match=r"'fc'.*10 features.*expects 12"):
        run(lambda n, t: basic.linear(n, t, npr(5, 12), None, "fc"), rand(2, 10))


def test_flatten_relu_add():
    x = rand(2, 3, 4, 5)
    y, _ = run(lambda n, t: basic.flatten(n, t, "f"), x)
    close(y, x.flatten(1), atol=0, rtol=0)
    y, _ = run(lambda n, t: basic.relu(n, t, "r"), x)
    close(y, F.relu(x), atol=0, rtol=0)
    y, _ = run(lambda n, t: basic.add(n, basic.relu(n, t, "r"), t, "sum"), x)
    close(y, F.relu(x) + x)


# ------------------------------------------------------------------ conv + BN folding

def _conv_bn_module(c_in, c_out, bias, groups=1, stride=1, padding=1):
    conv = torch.nn.Conv2d(c_in, c_out, 3, stride, padding, groups=groups, bias=bias)
    bn = torch.nn.BatchNorm2d(c_out)
    with torch.no_grad():
        bn.running_mean.normal_(0, 0.5, generator=GEN)
        bn.running_var.uniform_(0.5, 2.0, generator=GEN)
        bn.weight.uniform_(0.5, 1.5, generator=GEN)
        bn.bias.normal_(0, 0.2, generator=GEN)
    return torch.nn.Sequential(conv, bn).eval()


@pytest.mark.parametrize("bias,groups,stride", [(False, 1, 1), (True, 2, 2)])
def test_conv_bn_folds_into_one_layer(bias, groups, stride):
    m = _conv_bn_module(4, 6, bias, groups, stride)
    wm = WeightMap.from_module(m)
    x = rand(1, 4, 9, 9)
    y, net = run(lambda n, t: basic.conv_bn(n, t, wm, "0", "1", "conv", stride=stride, padding=1, groups=groups), x)
    with torch.no_grad():
        ref = m(x)
    close(y, ref)
    assert net.num_layers == 1 and isinstance(concrete(net.get_layer(0)), trt.IConvolutionLayer)
    assert [k for k in wm.unused() if not k.endswith("num_batches_tracked")] == []


def test_conv_bn_relu_fp16():
    m = _conv_bn_module(3, 5, False)
    wm = WeightMap.from_module(m)
    x = rand(1, 3, 8, 8)
    y, net = run(lambda n, t: basic.conv_bn_relu(n, t, wm, "0", "1", "conv", padding=1), x.half(), half=True)
    with torch.no_grad():
        ref = F.relu(m(x))
    fp16_close(y, ref)
    assert [concrete(net.get_layer(i)).name for i in range(net.num_layers)] == ["conv", "conv/relu"]


def test_read_conv_weight_infers_groups_from_flat_storage():
    w = npr(12, 2, 3, 3)  # 8 input channels in 4 groups
    wm = WeightMap.from_state_dict({"c.weight": w.reshape(-1)})
    got, groups = basic.read_conv_weight(wm, "c.weight", 12, 8, 3)
    assert groups == 4 and got.shape == (12, 2, 3, 3) and (got == w).all()
    with pytest.raises(BuilderError, match=r"'c.weight' has 216 values.*12 out x \(in/groups\) x kernel \(5, 5\)"):
        basic.read_conv_weight(wm, "c.weight", 12, 8, 5)
    with pytest.raises(BuilderError, match=r"'c.weight' has 216 values.*for 7 input channels"):
        basic.read_conv_weight(wm, "c.weight", 12, 7, 3)


def test_conv_bn_checks_given_groups_and_flat_kernel():
    m = _conv_bn_module(4, 6, False, groups=2)
    flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in m.state_dict().items()})
    with pytest.raises(BuilderError, match=r"'conv'.*stored flat.*pass kernel="):
        run(lambda n, t: basic.conv_bn(n, t, flat, "0", "1", "conv", padding=1), rand(1, 4, 6, 6))
    with pytest.raises(BuilderError, match=r"'conv': groups=1 but 0.weight.*implies groups=2"):
        run(lambda n, t: basic.conv_bn(n, t, flat, "0", "1", "conv", padding=1, groups=1, kernel=3), rand(1, 4, 6, 6))
    x = rand(1, 4, 6, 6)
    y, _ = run(lambda n, t: basic.conv_bn(n, t, flat, "0", "1", "conv", padding=1, kernel=3), x)
    with torch.no_grad():
        close(y, m(x))

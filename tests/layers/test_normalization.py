"""Instance/group/layer norm builders vs torch InstanceNorm{1,2,3}d(affine=True), GroupNorm, LayerNorm."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import trtbuild.reference as trt
from helpers.layer_harness import assert_close, assert_named_under, new_network, run_builder, run_network, random_affine
from helpers.refnet import concrete
from trtbuild.layers.common import BuilderError
from trtbuild.layers.normalization import _native, group_norm, instance_norm, layer_norm


def _x(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3 + 1


@pytest.mark.parametrize("impl", ["native", "composed"])
@pytest.mark.parametrize("shape, cls", [((2, 6, 7), nn.InstanceNorm1d), ((2, 6, 4, 5), nn.InstanceNorm2d),
                                        ((2, 6, 3, 4, 2), nn.InstanceNorm3d)])
def test_instance_norm_matches_torch(shape, cls, impl):
    m = cls(6, affine=True).double()
    gamma, beta = random_affine(m)
    x = _x(shape)
    y, _ = run_builder(instance_norm, x.float(), gamma, beta, m.eps, "in1", impl=impl)
    assert_close(y, m(x), 1e-5, 1e-6, f"instance {shape} {impl}")


@pytest.mark.parametrize("impl", ["auto", "native", "composed"])
@pytest.mark.parametrize("shape, groups", [((2, 6, 7), 3), ((2, 6, 4, 5), 2), ((2, 6, 3, 4, 2), 6), ((2, 6, 4, 5), 1),
                                           ((3, 12, 2, 2), 4)])
def test_group_norm_matches_torch(shape, groups, impl):
    m = nn.GroupNorm(groups, shape[1], eps=1e-4).double()
    gamma, beta = random_affine(m, seed=groups)
    x = _x(shape, seed=groups)
    y, _ = run_builder(group_norm, x.float(), groups, gamma, beta, m.eps, "gn1", impl=impl)
    assert_close(y, m(x), 1e-5, 1e-6, f"group {shape} G={groups} {impl}")


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_rank2_composed_and_auto(groups):
    m = nn.GroupNorm(groups, 6).double()
    gamma, beta = random_affine(m)
    x = _x((4, 6))
    for impl in ("auto", "composed"):
        y, _ = run_builder(group_norm, x.float(), groups, gamma, beta, m.eps, "gn", impl=impl)
        assert_close(y, m(x), 1e-5, 1e-6, f"rank-2 G={groups} {impl}")


def test_group_norm_rank2_native_rejected():
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (4, 6))
    with pytest.raises(BuilderError, match="layer 'gn'.*needs spatial dims"):
        group_norm(network, x, 2, None, None, 1e-5, "gn", impl="native")


def _v1_group_network(x, groups, scale, bias, eps):
    """A raw v1 INormalizationLayer with [1, G, 1, 1] scale/bias (TensorRT's per-group affine)."""
    builder, network = new_network()
    inp = network.add_input("x", trt.DataType.FLOAT, tuple(x.shape))
    shape = (1, groups, 1, 1)
    sc = network.add_constant(shape, trt.Weights(np.asarray(scale, np.float32).reshape(shape))).get_output(0)
    bi = network.add_constant(shape, trt.Weights(np.asarray(bias, np.float32).reshape(shape))).get_output(0)
    layer = network.add_normalization(inp, sc, bi, 0b1100)
    layer.num_groups, layer.epsilon = groups, eps
    network.mark_output(layer.get_output(0))
    return run_network(builder, network, {"x": x.float()})[layer.get_output(0).name]


def test_group_norm_v1_per_group_scale_differs_from_torch_and_v1_fallback_fixes_it():
    m = nn.GroupNorm(2, 6).double()
    gamma, beta = random_affine(m)  # gamma varies within each group of 3 channels
    x = _x((2, 6, 3, 3))
    expected = m(x)
    # v1 can only scale per group: the best it can do with a per-group gamma (here the group mean) is wrong
    per_group = _v1_group_network(x, 2, gamma.reshape(2, 3).mean(1), beta.reshape(2, 3).mean(1), m.eps)
    assert (per_group.double() - expected).abs().max().item() > 0.1
    # v1 with ones/zeros + a per-channel affine after it (the builder's fallback) matches torch
    builder, network = new_network()
    inp = network.add_input("x", trt.DataType.FLOAT, (2, 6, 3, 3))
    y = _native(network, inp, gamma.reshape(1, 6, 1, 1), beta.reshape(1, 6, 1, 1), 0b1100, m.eps, 2, "gn",
                use_v2=False)
    assert any(isinstance(layer, trt.INormalizationLayer) and not layer.is_v2 for layer in map(concrete, network))
    network.mark_output(y)
    got = run_network(builder, network, {"x": x.float()})[y.name]
    assert_close(got, expected, 1e-5, 1e-6, "v1 fallback")
    # and v2 (the default) scales per channel directly
    v2, net2 = run_builder(group_norm, x.float(), 2, gamma, beta, m.eps, "gn", impl="native")
    assert any(isinstance(layer, trt.INormalizationLayer) and layer.is_v2 for layer in map(concrete, net2))
    assert_close(v2, expected, 1e-5, 1e-6, "v2")


def test_group_norm_v1_rejects_per_channel_scale():
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 6, 2, 2))
    c = network.add_constant((1, 6, 1, 1), trt.Weights(np.ones(6, np.float32))).get_output(0)
    layer = network.add_normalization(x, c, c, 0b1100)
    layer.num_groups = 2
    with pytest.raises(trt.NetworkError, match="v1.*scales per group"):
        _ = layer.get_output(0).shape


@pytest.mark.parametrize("impl", ["auto", "composed"])
@pytest.mark.parametrize("shape, normalized", [((2, 6, 7), (7,)), ((2, 6, 4, 5), (6, 4, 5)), ((2, 6, 4, 5), (4, 5)),
                                               ((3, 8), 8), ((6,), (6,))])  # rank 1: the reference's
# normalization crashed with an IndexError there (TensorRT-RTX builds it)
def test_layer_norm_matches_torch(shape, normalized, impl):
    m = nn.LayerNorm(normalized).double()
    gamma, beta = random_affine(m)
    x = _x(shape)
    y, _ = run_builder(layer_norm, x.float(), normalized, gamma, beta, m.eps, "ln", impl=impl)
    assert_close(y, m(x), 1e-5, 1e-6, f"layer {shape} {normalized} {impl}")


@pytest.mark.parametrize("impl", ["native", "composed"])
def test_no_affine(impl):
    x = _x((2, 4, 3, 3))
    y, _ = run_builder(layer_norm, x.float(), (3, 3), None, None, 1e-5, "ln", impl=impl)
    assert_close(y, nn.LayerNorm((3, 3), elementwise_affine=False).double()(x), 1e-5, 1e-6)
    y, _ = run_builder(instance_norm, x.float(), None, None, 1e-5, "in", impl=impl)
    assert_close(y, nn.InstanceNorm2d(4).double()(x), 1e-5, 1e-6)


def test_dynamic_batch_native_and_composed():
    m = nn.GroupNorm(2, 4).double()
    gamma, beta = random_affine(m)
    x = _x((3, 4, 2, 3))
    for impl in ("native", "composed"):
        y, _ = run_builder(group_norm, x.float(), 2, gamma, beta, m.eps, "gn", impl=impl, input_shape=(-1, 4, 2, 3))
        assert_close(y, m(x), 1e-5, 1e-6, impl)


def _c(x):
    return x.shape[1]


BUILDERS = {
    "instance": lambda net, x, **kw: instance_norm(net, x, np.ones(_c(x)), np.zeros(_c(x)), 1e-5, "blk/norm", **kw),
    "group": lambda net, x, **kw: group_norm(net, x, 3, np.ones(_c(x)), np.zeros(_c(x)), 1e-5, "blk/norm", **kw),
    "layer": lambda net, x, **kw: layer_norm(net, x, tuple(x.shape)[-2:], np.ones(tuple(x.shape)[-2:]),
                                             np.zeros(tuple(x.shape)[-2:]), 1e-5, "blk/norm", **kw),
}


@pytest.mark.parametrize("which", list(BUILDERS))
@pytest.mark.parametrize("dtype", [trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16])
@pytest.mark.parametrize("impl", ["native", "composed"])
@pytest.mark.parametrize("strategy", ["safe", "naive"])
@pytest.mark.parametrize("shape", [(2, 6, 3), (2, 6, 3, 3), (1, 6, 2, 3, 3)])
def test_every_layer_named_under_name(which, dtype, impl, strategy, shape):
    _, network = new_network()
    x = network.add_input("x", dtype, shape)
    y = BUILDERS[which](network, x, impl=impl, strategy=strategy)
    assert_named_under(network, "blk/norm", y)
    assert y.dtype == dtype and tuple(y.shape) == shape


@pytest.mark.parametrize("strategy", ["safe", "naive"])
def test_group_norm_without_v2_layer_names_every_layer(strategy, monkeypatch):
    """Where the network has no add_normalization_v2 (TensorRT before 10.x's v2 layer), group norm takes the
    v1 path (ones/zeros per group, then the per-channel affine): named under the name too."""
    for klass in trt.INetworkDefinition.__mro__:  # the class and the mixin that defines it
        if "add_normalization_v2" in vars(klass):
            monkeypatch.delattr(klass, "add_normalization_v2")
    _, network = new_network()
    x = network.add_input("x", trt.DataType.HALF, (2, 6, 3, 3))
    y = BUILDERS["group"](network, x, impl="native", strategy=strategy)
    assert_named_under(network, "blk/norm", y)
    kinds = [network.get_layer(i).type for i in range(network.num_layers)]
    names = [network.get_layer(i).name for i in range(network.num_layers)]
    assert trt.LayerType.NORMALIZATION in kinds and {"blk/norm/ones", "blk/norm/norm"} <= set(names)


@pytest.mark.parametrize("call, pattern", [
    (lambda n, x: instance_norm(n, x, np.ones(5), None, 1e-5, "in3"), r"layer 'in3': gamma has 5 values but 6"),
    (lambda n, x: group_norm(n, x, 4, None, None, 1e-5, "gn3"),
     r"layer 'gn3': num_groups=4 must be a positive integer dividing the 6"),
    (lambda n, x: group_norm(n, x, 3, None, np.ones(3), 1e-5, "gn3"), r"layer 'gn3': beta has 3 values but 6"),
    (lambda n, x: layer_norm(n, x, (4, 4), None, None, 1e-5, "ln3"),
     r"layer 'ln3': normalized_shape \(4, 4\) must equal"),
    (lambda n, x: layer_norm(n, x, (3, 3), np.ones(8), None, 1e-5, "ln3"), r"layer 'ln3': gamma has 8 values but 9"),
    (lambda n, x: layer_norm(n, x, (3, 3), None, None, 1e-5, "ln3", impl="fused"), r"layer 'ln3': impl='fused'"),
    (lambda n, x: instance_norm(n, x, None, None, -1.0, "in3"), r"layer 'in3': eps must be finite"),
])
def test_rejected_constructions(call, pattern):
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (2, 6, 3, 3))
    with pytest.raises(BuilderError, match=pattern):
        call(network, x)

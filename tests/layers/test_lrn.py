"""LRN builder vs torch.nn.functional.local_response_norm / nn.LocalResponseNorm."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trtbuild.reference as trt
from helpers.layer_harness import assert_close, assert_named_under, new_network, run_builder
from trtbuild.layers.common import BuilderError
from trtbuild.layers.lrn import lrn, native_lrn_allowed

from helpers.builder_cases import LRN_SHAPES as SHAPES
from helpers.refnet import concrete


def _x(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("size", [1, 3, 5, 15])
@pytest.mark.parametrize("k", [1.0, 2.0, 0.25])
def test_native_matches_torch(shape, size, k):
    """k = 1 alone cannot tell k from a constant 1; with alpha 1e-2 the window term is small, so k dominates."""
    x = _x(shape, size)
    y, _ = run_builder(lrn, x.float(), size, 1e-2, 0.75, k, "norm1", impl="native")
    assert_close(y, F.local_response_norm(x, size, 1e-2, 0.75, k), 1e-5, 1e-6, f"native {shape} size {size} k {k}")


@pytest.mark.parametrize("impl", ["native", "composed"])
def test_k_hand_computed(impl):
    # one channel, size 1, alpha 1, beta 1, k 3: y = x / (3 + x^2): 1 -> 1/4, 2 -> 2/7, -3 -> -3/12
    x = torch.tensor([1.0, 2.0, -3.0]).reshape(1, 1, 3, 1)
    y, _ = run_builder(lrn, x, 1, 1.0, 1.0, 3.0, "n", impl=impl)
    assert y.flatten().tolist() == pytest.approx([0.25, 2.0 / 7.0, -0.25], rel=1e-6)
    assert F.local_response_norm(x, 1, 1.0, 1.0, 3.0).flatten().tolist() == pytest.approx([0.25, 2.0 / 7.0, -0.25],
                                                                                          rel=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("size", [1, 2, 4, 5, 6, 16, 21])
def test_composed_matches_torch_any_size(shape, size):
    x = _x(shape, size) * 2
    y, _ = run_builder(lrn, x.float(), size, 0.5, 0.6, 2.0, "norm1", impl="composed")
    assert_close(y, F.local_response_norm(x, size, 0.5, 0.6, 2.0), 1e-5, 1e-6, f"composed {shape} size {size}")


def test_matches_module_alexnet_params():
    m = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
    x = _x((2, 96, 6, 6)) * 20
    for impl in ("native", "composed"):
        y, _ = run_builder(lrn, x.float(), 5, 1e-4, 0.75, 2.0, "norm1", impl=impl)
        assert_close(y, m(x), 1e-5, 1e-6, impl)


def test_even_window_pads_like_torch_hand_computed():
    # C=2, size=2, k=1, alpha=1, beta=1. torch pads size//2 = 1 channel before, (size-1)//2 = 0 after:
    # c=0 window {pad, x0}: sum 1 -> 1 / (1 + 1/2 * 1) = 2/3;  c=1 window {x0, x1}: sum 10 -> 3 / (1 + 5) = 0.5
    x = torch.tensor([1.0, 3.0]).reshape(1, 2, 1, 1)
    y, _ = run_builder(lrn, x, 2, 1.0, 1.0, 1.0, "n")
    assert y.flatten().tolist() == pytest.approx([2.0 / 3.0, 0.5], rel=1e-6)
    assert F.local_response_norm(x, 2, 1.0, 1.0, 1.0).flatten().tolist() == pytest.approx([2.0 / 3.0, 0.5], rel=1e-6)


@pytest.mark.parametrize("size, k, native", [(5, 2.0, True), (15, 1.0, True), (4, 1.0, False), (17, 1.0, False),
                                             (5, 0.0, False)])
def test_auto_picks_native_when_allowed(size, k, native):
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 20, 3, 3))
    lrn(network, x, size, 1e-4, 0.75, k, "n")
    layers = [concrete(network.get_layer(i)) for i in range(network.num_layers)]  # IPoolingLayer.type: PoolingType
    assert any(isinstance(layer, trt.ILRNLayer) for layer in layers) == native
    assert any(isinstance(layer, trt.IPoolingLayer) for layer in layers) == (not native)


@pytest.mark.parametrize("size, pattern", [(4, "odd window in \\[1, 15\\], got size=4"),
                                           (17, "odd window in \\[1, 15\\], got size=17")])
def test_native_rejects_bad_window_naming_the_layer(size, pattern):
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 20, 3, 3))
    with pytest.raises(BuilderError, match=f"layer 'norm1': impl='native' is not possible: .*{pattern}"):
        lrn(network, x, size, 1e-4, 0.75, 1.0, "norm1", impl="native")


def test_native_rejects_k_out_of_range_and_reference_agrees():
    assert "k in [1e-5, 1e10]" in native_lrn_allowed(5, 1e-4, 0.75, 0.0)
    assert native_lrn_allowed(5, 1e-4, 0.75, 1.0) is None
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 20, 3, 3))
    with pytest.raises(BuilderError, match=r"layer 'norm1': impl='native' is not possible: .*k in \[1e-5, 1e10\]"):
        lrn(network, x, 5, 1e-4, 0.75, 0.0, "norm1", impl="native")
    # the backend's own k check agrees, on both sides of each limit
    for k in (0.0, 1e-6, 2e10):
        assert "k in [1e-5, 1e10]" in native_lrn_allowed(5, 1e-4, 0.75, k)
        with pytest.raises(trt.NetworkError, match=rf"k={k} out of range .*k in \[1e-5, 1e10\]"):
            network.add_lrn(x, 5, 1e-4, 0.75, k)
    for k in (1e-5, 1e10):
        assert native_lrn_allowed(5, 1e-4, 0.75, k) is None
        network.add_lrn(x, 5, 1e-4, 0.75, k)


@pytest.mark.parametrize("bad, pattern", [
    ({"size": 0}, "size must be a positive integer"),
    ({"size": 2.5}, "size must be a positive integer"),
    ({"impl": "cudnn"}, "impl='cudnn'"),
    ({"strategy": "fast"}, "strategy='fast'"),
])
def test_rejects_bad_arguments(bad, pattern):
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 8, 3, 3))
    args = {"size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1.0, **bad}
    with pytest.raises(BuilderError, match=pattern):
        lrn(network, x, name="n", **args)


def test_rejects_rank2():
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (4, 8))
    with pytest.raises(BuilderError, match=r"layer 'n'.*rank 2"):
        lrn(network, x, 5, 1e-4, 0.75, 1.0, "n")


@pytest.mark.parametrize("dtype", [trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16])
@pytest.mark.parametrize("impl", ["native", "composed"])
@pytest.mark.parametrize("strategy", ["safe", "naive"])
@pytest.mark.parametrize("shape", [(1, 8, 3), (1, 8, 3, 3), (1, 8, 2, 3, 3)])
def test_every_layer_named_under_name(dtype, impl, strategy, shape):
    _, network = new_network()
    x = network.add_input("x", dtype, shape)
    y = lrn(network, x, 5, 1e-4, 0.75, 2.0, "norm1", impl=impl, strategy=strategy)
    assert_named_under(network, "norm1", y)
    assert y.dtype == dtype and tuple(y.shape) == shape


def test_composed_dynamic_batch():
    x = _x((3, 6, 2, 2))
    y, _ = run_builder(lrn, x.float(), 4, 0.1, 0.75, 1.0, "n", impl="composed", input_shape=(-1, 6, 2, 2))
    assert_close(y, F.local_response_norm(x, 4, 0.1, 0.75, 1.0), 1e-5, 1e-6)


@pytest.mark.parametrize("shape", SHAPES)
def test_native_lrn_layer_always_sees_nchw(shape):
    # TensorRT's LRN windows over dim rank-3 (C of NCHW): 3-D/5-D inputs are viewed as (N, C, S, 1)
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, shape)
    y = lrn(network, x, 3, 1e-4, 0.75, 1.0, "n", impl="native")
    (layer,) = [concrete(network.get_layer(i)) for i in range(network.num_layers)
                if isinstance(concrete(network.get_layer(i)), trt.ILRNLayer)]
    in_shape = tuple(layer.get_input(0).shape)
    assert len(in_shape) == 4 and in_shape[:2] == shape[:2]
    assert tuple(y.shape) == shape


BOUNDS = [("alpha", 1e20, True), ("alpha", -1e20, True), ("alpha", 1.0001e20, False), ("alpha", -1.0001e20, False),
          ("beta", 0.01, True), ("beta", 0.0099, False), ("beta", 1e5, True), ("beta", 100001.0, False),
          ("k", 1e-5, True), ("k", 0.99e-5, False), ("k", 1e10, True), ("k", 1.0001e10, False)]


@pytest.mark.parametrize("which,value,accepted", BOUNDS, ids=[f"{w}={v:g}" for w, v, _ in BOUNDS])
def test_native_lrn_bounds_are_tensorrt_rtxs_inclusive_bounds(which, value, accepted, rtx):
    """native_lrn_allowed agrees with TensorRT-RTX's ILRNLayer at and just past each bound (inclusive bounds:
    a mutation audit showed `<=` could become `<` unnoticed)."""
    from trtbuild.engine import new_network as engine_network

    params = {"alpha": 1e-4, "beta": 0.75, "k": 2.0, which: value}
    assert (native_lrn_allowed(5, **params) is None) == accepted
    _, network, logger = engine_network(rtx)
    logger.clear()
    x = network.add_input("x", rtx.float32, (1, 4, 3, 3))
    layer = network.add_lrn(x, 5, params["alpha"], params["beta"], params["k"])
    refused = layer is None or any("ILRNLayer::set" in e for e in logger.errors)
    assert refused != accepted

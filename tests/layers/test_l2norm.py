"""L2Norm builder vs trtbuild.models.pytorch.L2Norm (ssd.pytorch semantics), on the reference backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.layer_harness import assert_close, assert_named_under, layer_names, new_network, run_builder
from trtbuild.layers.common import BuilderError
from trtbuild.layers.l2norm import l2norm
from trtbuild.models.pytorch import L2Norm
from helpers.refnet import concrete


def _module(weight: np.ndarray, eps=1e-10):
    m = L2Norm(weight.size, 1.0, eps=eps).double()
    m.weight.data = torch.tensor(weight, dtype=torch.float64)
    return m


@pytest.mark.parametrize("strategy", ["safe", "naive"])
@pytest.mark.parametrize("shape", [(1, 512, 5, 5), (2, 16, 3, 7), (3, 1, 2, 2)])
def test_fp32_matches_torch(shape, strategy):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3
    w = np.random.RandomState(0).uniform(5, 25, shape[1])
    y, _ = run_builder(l2norm, x.float(), w, "conv4_3_norm", strategy=strategy)
    assert_close(y, _module(w)(x), 1e-5, 1e-6, f"l2norm {shape} {strategy}")


def test_eps_is_added_after_sqrt_hand_computed():
    # one channel holds 1e-10, the other 0: out = 1e-10 / (sqrt(1e-20) + 1e-10) * w = 0.5 * w
    x = torch.zeros(1, 2, 1, 1)
    x[0, 0] = 1e-10
    y, _ = run_builder(l2norm, x, np.array([4.0, 4.0]), "n")
    assert y[0, 0, 0, 0].item() == pytest.approx(2.0, rel=1e-5)
    assert y[0, 1, 0, 0].item() == 0.0
    # a larger eps changes it the same way torch does: 1e-10 / (1e-10 + 3e-10) * 4 = 1
    y3, _ = run_builder(l2norm, x, np.array([4.0, 4.0]), "n", eps=3e-10)
    assert y3[0, 0, 0, 0].item() == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_all_zero_input_gives_zero(dtype):
    x = torch.zeros(2, 64, 3, 3, dtype=dtype)
    x[1, :, 0, 0] = 1.0  # one non-zero position so the check is not vacuous
    y, _ = run_builder(l2norm, x, np.full(64, 20.0), "n")
    assert torch.isfinite(y).all()
    assert (y[0] == 0).all() and (y[1, :, 1:, :] == 0).all()
    assert y[1, :, 0, 0].double() == pytest.approx(np.full(64, 20.0 / 8.0), rel=1e-2)


def test_safe_carries_eps_for_subnormal_fp16_inputs():
    # x = 2**-24 (smallest fp16 subnormal) in one channel: out = x / (x + 1e-10) = 0.998325...
    x = torch.zeros(1, 4, 1, 1, dtype=torch.float16)
    x[0, 2] = 2.0 ** -24
    y, _ = run_builder(l2norm, x, np.ones(4), "n")
    expected = 2.0 ** -24 / (2.0 ** -24 + 1e-10)
    assert y[0, 2, 0, 0].item() == pytest.approx(expected, abs=3e-4)
    assert y[0, 2, 0, 0].item() < 1.0  # eps was not lost


def test_naive_is_the_tensorrtx_composition_and_layers_are_named():
    builder, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 8, 2, 2))
    y = l2norm(network, x, np.ones(8), "conv4_3_norm", strategy="naive")
    types = [concrete(network.get_layer(i)).type for i in range(network.num_layers)]
    assert types == [trt.LayerType.SCALE, trt.LayerType.REDUCE, trt.LayerType.UNARY, trt.LayerType.SCALE,
                     trt.LayerType.ELEMENTWISE, trt.LayerType.SCALE]
    sq, red = concrete(network.get_layer(0)), concrete(network.get_layer(1))
    assert sq.power.numpy().tolist() == [2.0] and red.axes == 1 << 1 and red.keep_dims
    assert concrete(network.get_layer(3)).shift.numpy().tolist() == [pytest.approx(1e-10)]  # eps is there
    assert concrete(network.get_layer(5)).mode == trt.ScaleMode.CHANNEL
    assert layer_names(network)[:3] == ["conv4_3_norm/sq", "conv4_3_norm/sumsq", "conv4_3_norm/norm"]
    assert_named_under(network, "conv4_3_norm", y)


@pytest.mark.parametrize("dtype", [trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16])
@pytest.mark.parametrize("strategy", ["safe", "naive"])
def test_every_layer_named_under_name(dtype, strategy):
    _, network = new_network()
    x = network.add_input("x", dtype, (1, 8, 2, 2))
    y = l2norm(network, x, np.ones(8), "l2", strategy=strategy)
    assert_named_under(network, "l2", y)
    assert y.dtype == dtype


def test_dynamic_batch():
    x = torch.randn(3, 8, 2, 2)
    w = np.linspace(1, 2, 8)
    y, _ = run_builder(l2norm, x, w, "n", input_shape=(-1, 8, 2, 2))
    assert_close(y, _module(w)(x.double()), 1e-5, 1e-6)


def test_rejects_wrong_weight_length():
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 8, 2, 2))
    with pytest.raises(BuilderError, match=r"layer 'conv4_3_norm'.*weight has 7 values but 8"):
        l2norm(network, x, np.ones(7), "conv4_3_norm")


@pytest.mark.parametrize("kwargs, pattern", [
    ({"strategy": "fast"}, "strategy='fast'"),
    ({"eps": -1.0}, "eps must be finite"),
])
def test_rejects_bad_options(kwargs, pattern):
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 8, 2, 2))
    with pytest.raises(BuilderError, match=pattern):
        l2norm(network, x, np.ones(8), "n", **kwargs)


def test_rejects_rank2_and_int_inputs():
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (4, 8))
    with pytest.raises(BuilderError, match=r"layer 'n'.*rank 2"):
        l2norm(network, x, np.ones(8), "n")
    xi = network.add_input("xi", trt.DataType.INT32, (1, 8, 2, 2))
    with pytest.raises(BuilderError, match="FLOAT, HALF or BF16"):
        l2norm(network, xi, np.ones(8), "n")


def test_fp16_weight_beyond_fp16_range():
    # 4 equal channels: x / |x| = 0.5, times 7e4 = 3.5e4 (fits fp16, the weight 7e4 does not)
    x = torch.full((1, 4, 2, 2), 3.0, dtype=torch.float16)
    w = np.full(4, 7e4)
    safe, _ = run_builder(l2norm, x, w, "n")
    naive, _ = run_builder(l2norm, x, w, "n", strategy="naive")
    assert safe.dtype == torch.float16
    assert safe.double().flatten().tolist() == pytest.approx([3.5e4] * 16, rel=1e-3)
    assert torch.isinf(naive).all()

"""BatchNorm builders vs torch BatchNorm1d/2d/3d in eval mode (folded) and train mode (batch stats)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import trtbuild.reference as trt
from helpers.layer_harness import assert_close, assert_named_under, new_network, run_builder
from trtbuild.layers.batchnorm import batchnorm, batchnorm_batch_stats
from trtbuild.layers.common import BuilderError

from helpers.builder_cases import BATCHNORM_CASES as CASES
from helpers.refnet import concrete


def _bn(cls, c=6, seed=0, affine=True, eps=1e-5):
    g = torch.Generator().manual_seed(seed)
    m = cls(c, eps=eps, affine=affine).double()
    with torch.no_grad():
        if affine:
            m.weight.copy_(torch.rand(c, generator=g, dtype=torch.float64) + 0.5)
            m.bias.copy_(torch.randn(c, generator=g, dtype=torch.float64))
        m.running_mean.copy_(torch.randn(c, generator=g, dtype=torch.float64))
        m.running_var.copy_(torch.rand(c, generator=g, dtype=torch.float64) + 0.3)
    return m


def _params(m):
    w = None if m.weight is None else m.weight.detach().numpy()
    b = None if m.bias is None else m.bias.detach().numpy()
    return w, b, m.running_mean.numpy(), m.running_var.numpy(), m.eps


def _x(shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 + 0.5


@pytest.mark.parametrize("shape, cls", CASES)
def test_eval_matches_torch(shape, cls):
    m = _bn(cls).eval()
    x = _x(shape)
    y, _ = run_builder(batchnorm, x.float(), *_params(m), "bn1")
    assert_close(y, m(x), 1e-5, 1e-6, f"eval {shape}")


@pytest.mark.parametrize("shape, cls", CASES)
def test_batch_stats_match_torch_train_mode(shape, cls):
    m = _bn(cls, seed=2).train()
    x = _x(shape, seed=3)
    y, _ = run_builder(batchnorm_batch_stats, x.float(), m.weight.detach().numpy(), m.bias.detach().numpy(), m.eps,
                       "bn1")
    expected = m(x)  # train mode: normalized with the batch mean and biased variance
    assert_close(y, expected, 1e-5, 1e-6, f"train {shape}")
    # and it is not the eval-mode answer (the running statistics differ from the batch's)
    assert not torch.allclose(y.double(), m.eval()(x), atol=1e-3)


def test_affine_false():
    m = _bn(nn.BatchNorm2d, affine=False).eval()
    x = _x((2, 6, 3, 3))
    y, _ = run_builder(batchnorm, x.float(), *_params(m), "bn")
    assert_close(y, m(x), 1e-5, 1e-6)
    mt = _bn(nn.BatchNorm2d, affine=False).train()
    y, _ = run_builder(batchnorm_batch_stats, x.float(), None, None, mt.eps, "bn")
    assert_close(y, mt(x), 1e-5, 1e-6)


def test_eval_is_one_channel_scale_with_folded_weights():
    m = _bn(nn.BatchNorm2d).eval()
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 6, 4, 4))
    y = batchnorm(network, x, *_params(m), "layer1.0.bn1")
    assert network.num_layers == 1
    layer = network.get_layer(0)
    assert layer.type == trt.LayerType.SCALE
    layer.__class__ = trt.IScaleLayer  # get_layer returns an ILayer, as TensorRT's does: downcast it
    assert layer.mode == trt.ScaleMode.CHANNEL and layer.channel_axis == 1
    gamma, beta, mean, var, eps = (np.asarray(v, dtype=np.float64) for v in _params(m))
    scale = gamma / np.sqrt(var + eps)  # folded by hand, in float64, as the issue asks
    np.testing.assert_allclose(layer.scale.numpy(), scale.astype(np.float32), rtol=0, atol=0)
    np.testing.assert_allclose(layer.shift.numpy(), (beta - mean * scale).astype(np.float32), rtol=0, atol=0)
    assert layer.name == "layer1.0.bn1/scale" and y.name == "layer1.0.bn1"


@pytest.mark.parametrize("strategy, weight_type", [("safe", np.float32), ("naive", np.float16)])
def test_fp16_weights_by_strategy(strategy, weight_type):
    m = _bn(nn.BatchNorm2d).eval()
    _, network = new_network()
    x = network.add_input("x", trt.DataType.HALF, (1, 6, 4, 4))
    y = batchnorm(network, x, *_params(m), "bn", strategy=strategy)
    scales = [concrete(network.get_layer(i)) for i in range(network.num_layers)
              if isinstance(concrete(network.get_layer(i)), trt.IScaleLayer)]
    assert len(scales) == 1 and scales[0].scale.numpy().dtype == weight_type
    assert y.dtype == trt.DataType.HALF


def test_fp16_folded_scale_overflow_handled():
    # channel 0 never fires: running var 0, eps 1e-12 -> folded scale 1e6 (> 65504); its input is 0
    m = _bn(nn.BatchNorm2d, eps=1e-12).eval()
    with torch.no_grad():
        m.running_var[0], m.running_mean[0] = 0.0, 0.0
    x = _x((2, 6, 3, 3))
    x[:, 0] = 0
    x16 = x.half()
    expected = m(x16.double())
    safe, _ = run_builder(batchnorm, x16, *_params(m), "bn")
    naive, _ = run_builder(batchnorm, x16, *_params(m), "bn", strategy="naive")
    assert_close(safe, expected, 2e-3, 2e-3, "safe fp16")
    assert torch.isnan(naive[:, 0]).all()  # inf * 0 in the fp16 weights


@pytest.mark.parametrize("shape, cls", CASES)
def test_bf16_inputs(shape, cls):
    m = _bn(cls).eval()
    x = _x(shape).bfloat16()
    y, _ = run_builder(batchnorm, x, *_params(m), "bn")
    assert y.dtype == torch.bfloat16
    assert_close(y, m(x.double()), 8e-3, 8e-3, "bf16 eval")


def test_dynamic_batch_rank2():
    m = _bn(nn.BatchNorm1d).eval()
    x = _x((5, 6))
    y, _ = run_builder(batchnorm, x.float(), *_params(m), "bn", input_shape=(-1, 6))
    assert_close(y, m(x), 1e-5, 1e-6)


@pytest.mark.parametrize("dtype", [trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16])
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
@pytest.mark.parametrize("strategy", ["safe", "naive"])
def test_every_layer_named_under_name(dtype, rank, strategy):
    m = _bn(nn.BatchNorm2d)
    for fn, args in ((batchnorm, _params(m)),
                     (batchnorm_batch_stats, (m.weight.detach().numpy(), m.bias.detach().numpy(), 1e-5))):
        _, network = new_network()
        x = network.add_input("x", dtype, (2, 6, 3, 3, 2)[:rank])
        y = fn(network, x, *args, "stage1/bn", strategy=strategy)
        assert_named_under(network, "stage1/bn", y)
        assert y.dtype == dtype and tuple(y.shape) == tuple(x.shape)


@pytest.mark.parametrize("which", ["gamma", "beta", "mean", "var"])
def test_rejects_wrong_parameter_length(which):
    m = _bn(nn.BatchNorm2d)
    params = dict(zip(["gamma", "beta", "mean", "var", "eps"], _params(m)))
    params[which] = params[which][:5]
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 6, 2, 2))
    with pytest.raises(BuilderError, match=f"layer 'layer2.bn': {which} has 5 values but 6 are needed"):
        batchnorm(network, x, name="layer2.bn", **params)


def test_rejects_negative_variance_and_dynamic_channels():
    m = _bn(nn.BatchNorm2d)
    gamma, beta, mean, var, eps = _params(m)
    var = var.copy()
    var[2] = -1.0
    _, network = new_network()
    x = network.add_input("x", trt.DataType.FLOAT, (1, 6, 2, 2))
    with pytest.raises(BuilderError, match=r"layer 'bn'.*var \+ eps must be > 0 \(channel 2"):
        batchnorm(network, x, gamma, beta, mean, var, eps, "bn")
    xd = network.add_input("xd", trt.DataType.FLOAT, (1, -1, 2, 2))
    with pytest.raises(BuilderError, match="must be known at build time"):
        batchnorm(network, xd, *_params(m), "bn")
    with pytest.raises(BuilderError, match="eps must be finite and > 0"):
        batchnorm_batch_stats(network, x, None, None, 0.0, "bn")

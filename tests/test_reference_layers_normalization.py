"""trtbuild.reference: INormalizationLayer (add_normalization = v1, add_normalization_v2) against
torch's instance/group/layer norm. TensorRT's docs: Y = (X - Mean(X, axes)) / Sqrt(Variance(X) + eps) * S + B;
for group norm, v1 takes scale/bias of shape [1, G, 1, 1] (per group) and v2 [1, C, 1, 1] (per channel)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import close as shared_close


gen = torch.Generator().manual_seed(1)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


close = functools.partial(shared_close, atol=1e-4, rtol=1e-4)


def const(refnet, array: torch.Tensor):
    return refnet.network.add_constant(tuple(array.shape), array.numpy().astype(np.float32)).get_output(0)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_instance_norm(refnet, version):
    x, gamma, beta = randn(2, 3, 5, 4), randn(3), randn(3)
    add = refnet.network.add_normalization if version == "v1" else refnet.network.add_normalization_v2
    layer = add(refnet.input("x", tuple(x.shape)), const(refnet, gamma.reshape(1, 3, 1, 1)),
                const(refnet, beta.reshape(1, 3, 1, 1)), (1 << 2) | (1 << 3))
    assert layer.epsilon == pytest.approx(1e-5) and layer.num_groups == 1
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.instance_norm(x, weight=gamma, bias=beta, eps=1e-5))


def test_group_norm_v2_scales_per_channel(refnet):
    x, gamma, beta = randn(2, 6, 4, 4), randn(6), randn(6)
    layer = refnet.network.add_normalization_v2(refnet.input("x", tuple(x.shape)), const(refnet, gamma.reshape(1, 6, 1, 1)),
                                             const(refnet, beta.reshape(1, 6, 1, 1)), (1 << 2) | (1 << 3))
    layer.num_groups = 3
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.group_norm(x, 3, weight=gamma, bias=beta, eps=1e-5))


def test_group_norm_v1_scales_per_group(refnet):
    """v1: scale/bias [1, G, 1, 1]; group g's value applies to all of its C/G channels."""
    x, gamma_g, beta_g = randn(2, 6, 4, 4), randn(3), randn(3)
    layer = refnet.network.add_normalization(refnet.input("x", tuple(x.shape)), const(refnet, gamma_g.reshape(1, 3, 1, 1)),
                                          const(refnet, beta_g.reshape(1, 3, 1, 1)), (1 << 2) | (1 << 3))
    layer.num_groups = 3
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    per_channel = lambda v: v.repeat_interleave(2)  # noqa: E731 - channels 0,1 -> group 0, ...
    close(y, F.group_norm(x, 3, weight=per_channel(gamma_g), bias=per_channel(beta_g), eps=1e-5))


def test_group_norm_v1_and_v2_differ_in_scale_shape(refnet):
    """The same per-group scale given both ways gives the same result (v2 needs it repeated per channel)."""
    x, g = randn(1, 4, 3, 3), torch.tensor([2.0, -1.0])
    t = refnet.input("x", tuple(x.shape))
    v1 = refnet.network.add_normalization(t, const(refnet, g.reshape(1, 2, 1, 1)),
                                          const(refnet, torch.zeros(1, 2, 1, 1)), 0b1100)
    v2 = refnet.network.add_normalization_v2(t, const(refnet, g.repeat_interleave(2).reshape(1, 4, 1, 1)),
                                          const(refnet, torch.zeros(1, 4, 1, 1)), 0b1100)
    v1.num_groups = v2.num_groups = 2
    out = refnet.run({"x": x}, a=v1.get_output(0), b=v2.get_output(0))
    close(out["a"], out["b"], atol=1e-6, rtol=1e-6)
    close(out["a"], F.group_norm(x, 2, weight=g.repeat_interleave(2), eps=1e-5))


def test_layer_norm_over_last_dim(refnet):
    x, gamma, beta = randn(2, 5, 8), randn(8), randn(8)
    layer = refnet.network.add_normalization_v2(refnet.input("x", tuple(x.shape)), const(refnet, gamma.reshape(1, 1, 8)),
                                             const(refnet, beta.reshape(1, 1, 8)), 1 << 2)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.layer_norm(x, (8,), weight=gamma, bias=beta, eps=1e-5))


def test_layer_norm_over_last_two_dims_with_epsilon(refnet):
    x, gamma, beta = randn(2, 3, 4, 5), randn(4, 5), randn(4, 5)
    layer = refnet.network.add_normalization_v2(refnet.input("x", tuple(x.shape)), const(refnet, gamma.reshape(1, 1, 4, 5)),
                                             const(refnet, beta.reshape(1, 1, 4, 5)), (1 << 2) | (1 << 3))
    layer.epsilon = 0.5  # large on purpose, so a wrong epsilon shows
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.layer_norm(x, (4, 5), weight=gamma, bias=beta, eps=0.5))


def test_normalization_rejects_scale_bias_shape_mismatch(refnet):
    t = refnet.input("x", (1, 3, 4, 4))
    layer = refnet.network.add_normalization_v2(t, const(refnet, torch.ones(1, 3, 1, 1)),
                                                const(refnet, torch.ones(1, 1, 1, 1)),
                                             0b1100)
    layer.name = "norm_mismatch"
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert any("norm_mismatch" in m and "bias" in m for m in refnet.logger.errors), refnet.logger.errors


def test_group_norm_rejects_groups_not_dividing_channels(refnet):
    t = refnet.input("x", (1, 6, 4, 4))
    layer = refnet.network.add_normalization_v2(t, const(refnet, torch.ones(1, 6, 1, 1)),
                                                const(refnet, torch.ones(1, 6, 1, 1)),
                                             0b1100)
    layer.num_groups = 4
    layer.name = "gn_groups"
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert any("gn_groups" in m and "num_groups" in m for m in refnet.logger.errors), refnet.logger.errors

"""trtbuild.reference: INormalizationLayer (add_normalization = v1, add_normalization_v2) against
torch's instance/group/layer norm. TensorRT's docs: Y = (X - Mean(X, axes)) / Sqrt(Variance(X) + eps) * S + B;
for group norm, v1 takes scale/bias of shape [1, G, 1, 1] (per group) and v2 [1, C, 1, 1] (per channel)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import close as shared_close


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
    layer = refnet.network.add_normalization_v2(refnet.input("x", tuple(x.shape)),
                                                const(refnet, gamma.reshape(1, 6, 1, 1)),
                                             const(refnet, beta.reshape(1, 6, 1, 1)), (1 << 2) | (1 << 3))
    layer.num_groups = 3
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.group_norm(x, 3, weight=gamma, bias=beta, eps=1e-5))


def test_group_norm_v1_scales_per_group(refnet):
    """v1: scale/bias [1, G, 1, 1]; group g's value applies to all of its C/G channels."""
    x, gamma_g, beta_g = randn(2, 6, 4, 4), randn(3), randn(3)
    layer = refnet.network.add_normalization(refnet.input("x", tuple(x.shape)),
                                             const(refnet, gamma_g.reshape(1, 3, 1, 1)),
                                          const(refnet, beta_g.reshape(1, 3, 1, 1)), (1 << 2) | (1 << 3))
    layer.num_groups = 3
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    per_channel = lambda v: v.repeat_interleave(2)  # channels 0,1 -> group 0, ...
    close(y, F.group_norm(x, 3, weight=per_channel(gamma_g), bias=per_channel(beta_g), eps=1e-5))


def test_group_norm_v1_and_v2_agree_given_each_its_scale_shape(refnet):
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


@pytest.mark.parametrize("v2", [False, True], ids=["v1_given_per_channel", "v2_given_per_group"])
def test_group_norm_v1_and_v2_differ_in_scale_shape(v2):
    """Each version refuses the other's scale shape at build time, naming the shape it wants
    (v1 [1, G, 1, 1] per group, v2 [1, C, 1, 1] per channel): neither silently broadcasts it."""
    from helpers.refnet import RefNet

    net = RefNet()
    g = torch.tensor([2.0, -1.0])
    scale = g.reshape(1, 2, 1, 1) if v2 else g.repeat_interleave(2).reshape(1, 4, 1, 1)
    add = net.network.add_normalization_v2 if v2 else net.network.add_normalization
    layer = add(net.input("x", (1, 4, 3, 3)), const(net, scale), const(net, torch.zeros(scale.shape)), 0b1100)
    layer.num_groups = 2
    net.network.mark_output(layer.get_output(0))
    assert net.build() is None
    want, got = ("(1, 4, 1, 1)", "(1, 2, 1, 1)") if v2 else ("(1, 2, 1, 1)", "(1, 4, 1, 1)")
    what = "add_normalization_v2 scales per channel" if v2 else "add_normalization (v1) scales per group"
    assert any(f"scale/bias shape {got} should be {want} ({what})" in e for e in net.logger.errors), net.logger.errors


def test_layer_norm_over_last_dim(refnet):
    x, gamma, beta = randn(2, 5, 8), randn(8), randn(8)
    layer = refnet.network.add_normalization_v2(refnet.input("x", tuple(x.shape)),
                                                const(refnet, gamma.reshape(1, 1, 8)),
                                             const(refnet, beta.reshape(1, 1, 8)), 1 << 2)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.layer_norm(x, (8,), weight=gamma, bias=beta, eps=1e-5))


def test_layer_norm_over_last_two_dims_with_epsilon(refnet):
    x, gamma, beta = randn(2, 3, 4, 5), randn(4, 5), randn(4, 5)
    layer = refnet.network.add_normalization_v2(refnet.input("x", tuple(x.shape)),
                                                const(refnet, gamma.reshape(1, 1, 4, 5)),
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


# -- rules found by the TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py) ----------------------------------
def test_scale_and_bias_of_different_shapes_are_refused(refnet):
    """Stricter than TensorRT-RTX 1.7 (which broadcasts each), as TensorRT documents: add_normalization
    "The shape of scale and bias must be the same, and must have the same rank and be unidirectionally
    broadcastable to the shape of input." (tests/helpers/twin.py REFERENCE_STRICTER)."""
    layer = refnet.network.add_normalization_v2(refnet.input("x", (1, 5, 6)), refnet.input("s", (1, 5, 1)),
                                                refnet.input("b", (1, 1, 1)), 0b11)
    with pytest.raises(trt.NetworkError, match=r"The shape of scale and bias must be the same"):
        layer.get_output(0).shape  # noqa: B018


def test_scale_may_fix_a_dynamic_input_dim(refnet):
    """A scale dim against a dynamic input dim broadcasts if the run-time size matches (TensorRT-RTX
    builds it and checks at the profile's opt shape); layer norm over the last two dims, per batch item."""
    from helpers.refnet import add_profile

    x, s, b = randn(2, 3, 4), randn(2, 3, 4), randn(2, 3, 4)
    layer = refnet.network.add_normalization(refnet.input("x", (-1, 3, 4)), const(refnet, s), const(refnet, b), 0b110)
    add_profile(refnet, {"x": ((1, 3, 4), (2, 3, 4), (2, 3, 4))})
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.layer_norm(x, (3, 4), eps=1e-5) * s + b)


@pytest.mark.parametrize("shape,groups,axes,sshape,rejected", [
    ((2, 3, 1, 1), 1, 0b1100, (1, 3, 1, 1), True),  # instance norm over 1x1
    ((2, 3, 1), 1, 0b100, (1, 3, 1), True),
    ((2, 4, 1, 1), 4, 0b1100, (1, 4, 1, 1), True),  # group norm, one channel of 1x1 per group
    ((2, 3, 4, 1), 1, 0b1000, (1, 1, 4, 1), True),  # trailing dim of 1, scale along the dim before it
    ((2, 3, 4, 1), 1, 0b1000, (1, 3, 1, 1), False),  # the scale varies along another dim
    ((2, 3, 4, 1), 1, 0b1000, (1, 3, 4, 1), False),
    ((3, 1), 1, 0b10, (3, 1), False),  # axes from dim 1: not treated as instance norm
    ((2, 6, 1, 1), 3, 0b1100, (1, 3, 1, 1), False),  # two channels per group
])
def test_instance_norm_over_single_elements_is_rejected(refnet, shape, groups, axes, sshape, rejected):
    """TensorRT-RTX 1.7 fails to build ("Error during shape inference of ... inorm") a normalization it
    treats as instance/group norm whose groups hold one element each (the result would be the bias)."""
    layer = refnet.network.add_normalization(refnet.input("x", shape), const(refnet, torch.ones(sshape)),
                                             const(refnet, torch.zeros(sshape)), axes)
    layer.num_groups = groups
    if not rejected:
        assert tuple(layer.get_output(0).shape) == shape
        return
    with pytest.raises(trt.NetworkError, match=r"holds a single element"):
        layer.get_output(0).shape  # noqa: B018


# -- IScaleLayer ------------------------------------------------------------------------------------------
def test_scale_negative_channel_axis_counts_from_the_end(refnet):
    """As on TensorRT-RTX: channel_axis -1 of a rank-4 input is dimension 3 ("channel axis must be in
    range [-4, 4)")."""
    x = randn(2, 3, 4, 5)
    scale, shift = randn(5), randn(5)
    layer = refnet.network.add_scale_nd(refnet.input("x", tuple(x.shape)), trt.ScaleMode.CHANNEL,
                                        shift.numpy(), scale.numpy(), None, -1)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x * scale + shift)


def test_scale_channel_axis_out_of_range_is_rejected(refnet):
    with pytest.raises(trt.NetworkError, match=r"channel_axis -5 is out of range \[-4, 4\)"):
        refnet.network.add_scale_nd(refnet.input("x", (2, 3, 4, 5)), trt.ScaleMode.UNIFORM, None, None, None, -5)


def test_scale_weights_of_different_counts_are_rejected(refnet):
    """TensorRT-RTX: "shift count 1 conflicts with 3 count scale"."""
    with pytest.raises(trt.NetworkError, match=r"weights counts .* differ"):
        refnet.network.add_scale_nd(refnet.input("x", (2, 3, 4, 5)), trt.ScaleMode.CHANNEL,
                                    np.ones(1, np.float32), np.ones(3, np.float32), None, 1)


def test_scale_channel_dim_unknown_at_build_time_takes_the_weight_count(refnet):
    """As TensorRT-RTX infers it: a dynamic CHANNEL dim becomes the weights' count."""
    from helpers.refnet import add_profile

    x, scale = randn(2, 3, 4), randn(3)
    layer = refnet.network.add_scale_nd(refnet.input("x", (2, -1, 4)), trt.ScaleMode.CHANNEL, None,
                                        scale.numpy(), None, 1)
    assert tuple(layer.get_output(0).shape) == (2, 3, 4)
    add_profile(refnet, {"x": ((2, 1, 4), (2, 3, 4), (2, 3, 4))})
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x * scale.reshape(1, 3, 1))


@pytest.mark.parametrize("count,builds", [(60, True), (120, True), (240, False)])
def test_scale_elementwise_over_a_dynamic_batch(refnet, count, builds):
    """ELEMENTWISE from channel_axis 0 of (-1, 3, 4, 5): the count must be a multiple of 60 that some
    batch of the profile (1..2) gives; the run then needs that batch."""
    from helpers.refnet import add_profile

    layer = refnet.network.add_scale_nd(refnet.input("x", (-1, 3, 4, 5)), trt.ScaleMode.ELEMENTWISE, None,
                                        np.full(count, 2.0, np.float32), None, 0)
    add_profile(refnet, {"x": ((1, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 5))})
    layer.get_output(0).name = "y"
    refnet.network.mark_output(layer.get_output(0))
    if not builds:
        assert refnet.build() is None
        assert any("volumes 60..120" in m for m in refnet.logger.errors), refnet.logger.errors
        return
    x = randn(count // 60, 3, 4, 5)
    from helpers.refnet import run_plan

    plan = refnet.build()
    assert plan is not None, refnet.logger.errors
    close(run_plan(plan, {"x": x})["y"], x * 2.0)

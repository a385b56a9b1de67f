"""trtbuild.reference: ParametricReLU against F.prelu / torch.where; each construction also built by TensorRT-RTX
(the `refnet` twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(24)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def test_parametric_relu_per_channel_matches_f_prelu(refnet):
    x, s = randn(2, 3, 4, 5), randn(1, 3, 1, 1)
    layer = refnet.network.add_parametric_relu(refnet.input("x", (2, 3, 4, 5)), refnet.input("s", (1, 3, 1, 1)))
    y = refnet.run({"x": x, "s": s}, y=layer.get_output(0))["y"]
    close(y, F.prelu(x, s.reshape(3)))


@pytest.mark.parametrize("slopes", [(2, 3, 4), (1, 1, 1), (1, 3, 4), (2, 1, 4)])
def test_parametric_relu_broadcast_slopes(refnet, slopes):
    x, s = randn(2, 3, 4), randn(*slopes)
    layer = refnet.network.add_parametric_relu(refnet.input("x", (2, 3, 4)), refnet.input("s", slopes))
    assert tuple(layer.get_output(0).shape) == (2, 3, 4)
    y = refnet.run({"x": x, "s": s}, y=layer.get_output(0))["y"]
    close(y, torch.where(x >= 0, x, x * s))


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_parametric_relu_half_types(refnet, dt, torch_dt):
    x, s = randn(2, 3, 4).to(torch_dt), randn(1, 3, 1).to(torch_dt)
    layer = refnet.network.add_parametric_relu(refnet.input("x", (2, 3, 4), dt), refnet.input("s", (1, 3, 1), dt))
    y = refnet.run({"x": x, "s": s}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt
    close(y, torch.where(x.float() >= 0, x.float(), x.float() * s.float()).to(torch_dt).float())


@pytest.mark.parametrize("x_shape, s_shape, words", [
    ((2, 3, 4), (3, 1), "rank"),
    ((2, 1, 4), (1, 3, 1), "do not broadcast"),
    ((2, 3, 4), (1, 2, 1), "do not broadcast"),
])
def test_parametric_relu_refuses_slopes_that_do_not_broadcast(refnet, x_shape, s_shape, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_parametric_relu(refnet.input("x", x_shape), refnet.input("s", s_shape))


@pytest.mark.parametrize("x_dt, s_dt, words", [(trt.float32, trt.float16, "different types"),
                                                (trt.int32, trt.int32, "INT32"),
                                                (trt.int64, trt.int64, "INT64")])
def test_parametric_relu_refuses_types(refnet, x_dt, s_dt, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_parametric_relu(refnet.input("x", (2, 3), x_dt), refnet.input("s", (1, 3), s_dt))


def test_slopes_against_a_dynamic_dimension_build_and_the_run_checks_them(refnet):
    """TensorRT-RTX builds slopes of size 2 against a -1 input dimension (the output keeps the input's -1); so
    does the reference, which runs it where the run's size matches and refuses, naming the layer, where not."""
    from helpers.refnet import add_profile, run_plan

    slopes = np.array([0.5, 0.25], np.float32).reshape(2, 1, 1)
    s = refnet.network.add_constant(slopes.shape, trt.Weights(slopes)).get_output(0)
    layer = refnet.network.add_parametric_relu(refnet.input("x", (-1, 1, 3)), s)
    layer.name = "prelu"
    assert tuple(layer.get_output(0).shape) == (-1, 1, 3)
    add_profile(refnet, {"x": ((1, 1, 3), (2, 1, 3), (3, 1, 3))})
    refnet.network.mark_output(layer.get_output(0))
    plan = refnet.build()
    assert plan is not None
    x = -torch.ones(2, 1, 3)
    close(run_plan(plan, {"x": x})[layer.get_output(0).name], x * torch.from_numpy(slopes))
    with pytest.raises(trt.NetworkError, match=r"layer 'prelu': slopes of shape \(2, 1, 1\) do not broadcast"):
        run_plan(plan, {"x": torch.zeros(3, 1, 3)})

"""trtbuild.reference: Cumulative (SUM; inclusive/exclusive, forward/reverse) against torch.cumsum; each
construction also built by TensorRT-RTX (the `refnet` twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

SUM = trt.CumulativeOperation.SUM
gen = torch.Generator().manual_seed(49)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def axis_const(refnet, axis, dtype=np.int32):
    arr = np.array(axis, dtype=dtype)
    return refnet.network.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def expected_cumsum(x, axis, exclusive, reverse):
    """The documented index ranges: inclusive forward 0..j, reverse j..n-1, exclusive forward 0..j-1,
    exclusive reverse j+1..n-1; computed in float64."""
    x = x.double()
    if reverse:
        x = x.flip(axis)
    y = torch.cumsum(x, axis)
    if exclusive:
        y = y - x
    return y.flip(axis) if reverse else y


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumulative_sum(refnet, axis, exclusive, reverse):
    x = randn(3, 4, 5)
    layer = refnet.network.add_cumulative(refnet.input("x", (3, 4, 5)), axis_const(refnet, axis), SUM,
                                          exclusive, reverse)
    assert layer.op == SUM and layer.exclusive == exclusive and layer.reverse == reverse
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, expected_cumsum(x, axis, exclusive, reverse), atol=1e-5, rtol=1e-5)
    if not exclusive and not reverse:
        close(y, torch.cumsum(x, axis))


def test_cumulative_attributes_can_change(refnet):
    x = randn(2, 6)
    layer = refnet.network.add_cumulative(refnet.input("x", (2, 6)), axis_const(refnet, 1, np.int64), SUM,
                                          False, False)
    layer.exclusive, layer.reverse = True, True
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, expected_cumsum(x, 1, True, True))


@pytest.mark.parametrize("dt, torch_dt", [(trt.int32, torch.int32), (trt.int64, torch.int64),
                                          (trt.float16, torch.float16)])
def test_cumulative_types(refnet, dt, torch_dt):
    x = (randn(3, 4) * 4).to(torch_dt)
    layer = refnet.network.add_cumulative(refnet.input("x", (3, 4), dt), axis_const(refnet, 0), SUM, False, False)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt
    close(y.double(), torch.cumsum(x.double(), 0).to(torch_dt).double(), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("axis, words", [(2, "out of range"), (-3, "out of range")])
def test_cumulative_refuses_an_axis_out_of_range(refnet, axis, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_cumulative(refnet.input("x", (3, 4)), axis_const(refnet, axis), SUM, False, False)


@pytest.mark.parametrize("dt", [trt.int8, trt.bool])
def test_cumulative_refuses_types(refnet, dt):
    with pytest.raises(trt.NetworkError, match="FLOAT, HALF, BF16, INT32 or INT64"):
        refnet.network.add_cumulative(refnet.input("x", (3, 4), dt), axis_const(refnet, 0), SUM, False, False)


def test_cumulative_refuses_an_axis_that_is_not_a_0d_int_constant(refnet):
    with pytest.raises(trt.NetworkError, match="0-D constant"):
        refnet.network.add_cumulative(refnet.input("x", (3, 4)), axis_const(refnet, [1]), SUM, False, False)
    with pytest.raises(trt.NetworkError, match="INT32 or INT64"):
        refnet.network.add_cumulative(refnet.input("y", (3, 4)), axis_const(refnet, 1, np.float32), SUM, False, False)

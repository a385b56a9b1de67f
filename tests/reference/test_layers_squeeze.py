"""trtbuild.reference: Squeeze and Unsqueeze, against PyTorch; each construction also built by TensorRT-RTX
(the `refnet` twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(20)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def const(refnet, values, dtype=np.int64):
    arr = np.asarray(values, dtype=dtype)
    return refnet.network.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


# -- Squeeze ------------------------------------------------------------------------------------
@pytest.mark.parametrize("axes, dtype", [([1, -1], np.int64), ([1], np.int32), ([3], np.int64), ([-3], np.int32)])
def test_squeeze_axes(refnet, axes, dtype):
    x = randn(2, 1, 3, 1)
    layer = refnet.network.add_squeeze(refnet.input("x", (2, 1, 3, 1)), const(refnet, axes, dtype))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x.squeeze(tuple(axes)))


def test_squeeze_without_axes_removes_every_unit_dimension(refnet):
    x = randn(1, 2, 1, 3, 1)
    layer = refnet.network.add_squeeze(refnet.input("x", (1, 2, 1, 3, 1)))
    assert layer.num_inputs == 1
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x.squeeze())


@pytest.mark.parametrize("dt", [trt.int32, trt.int64, trt.bool, trt.float16, trt.int8])
def test_squeeze_keeps_the_type(refnet, dt):
    layer = refnet.network.add_squeeze(refnet.input("x", (2, 1, 3), dt), const(refnet, [1]))
    assert tuple(layer.get_output(0).shape) == (2, 3) and layer.get_output(0).dtype == dt


@pytest.mark.parametrize("axes, values, words", [
    ([0], np.int64, "has size 2"),
    ([1, 1], np.int64, "unique"),
    ([4], np.int64, "out of range"),
    ([-5], np.int32, "out of range"),
    ([1], np.float32, "INT32 or INT64"),
    ([[1]], np.int64, "1-D constant"),
])
def test_squeeze_refusals(refnet, axes, values, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_squeeze(refnet.input("x", (2, 1, 3, 1)), const(refnet, axes, values))


def test_squeeze_refuses_axes_from_a_network_input(refnet):
    with pytest.raises(trt.NetworkError, match="1-D constant"):
        refnet.network.add_squeeze(refnet.input("x", (2, 1, 3, 1)), refnet.input("a", (1,), trt.int64))


# -- Unsqueeze ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axes", [[0], [2], [-1], [0, -1], [1, 3], [-4, 2]])
def test_unsqueeze_axes(refnet, axes):
    x = randn(2, 3)
    layer = refnet.network.add_unsqueeze(refnet.input("x", (2, 3)), const(refnet, axes))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    expected = x
    rank = 2 + len(axes)
    for a in sorted(a % rank for a in axes):
        expected = expected.unsqueeze(a)
    close(y, expected)


def test_unsqueeze_int32_axes_and_integer_input(refnet):
    x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    layer = refnet.network.add_unsqueeze(refnet.input("x", (2, 3), trt.int32), const(refnet, [1], np.int32))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert torch.equal(y, x.unsqueeze(1))


@pytest.mark.parametrize("axes, words", [([3], "out of range"), ([-4], "out of range"), ([1, 1], "unique"),
                                         ([2, -2], "unique")])
def test_unsqueeze_refusals(refnet, axes, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_unsqueeze(refnet.input("x", (2, 3)), const(refnet, axes))


def test_unsqueeze_refuses_uint8(refnet):
    with pytest.raises(trt.NetworkError, match="UINT8"):
        refnet.network.add_unsqueeze(refnet.input("x", (2, 3), trt.uint8), const(refnet, [1]))


def test_squeeze_then_unsqueeze_round_trip(refnet):
    x = randn(4, 1, 5)
    sq = refnet.network.add_squeeze(refnet.input("x", (4, 1, 5)), const(refnet, [1]))
    un = refnet.network.add_unsqueeze(sq.get_output(0), const(refnet, [1]))
    y = refnet.run({"x": x}, y=un.get_output(0))["y"]
    close(y, x)


def test_squeezing_a_dynamic_dimension_builds_and_the_run_checks_its_size(refnet):
    """TensorRT-RTX builds a squeeze of a -1 dimension (its size is known only at run time); so does the
    reference, which runs it where the size is 1 and refuses, naming the layer, where it is not."""
    from helpers.refnet import add_profile

    layer = refnet.network.add_squeeze(refnet.input("x", (-1, 3)), const(refnet, [0]))
    layer.name = "drop_batch"
    assert tuple(layer.get_output(0).shape) == (3,)
    add_profile(refnet, {"x": ((1, 3), (1, 3), (2, 3))})
    refnet.network.mark_output(layer.get_output(0))
    plan = refnet.build()
    assert plan is not None
    from helpers.refnet import run_plan

    x = torch.arange(3.0).reshape(1, 3)
    close(run_plan(plan, {"x": x})[layer.get_output(0).name], x.reshape(3))
    with pytest.raises(trt.NetworkError, match=r"layer 'drop_batch': squeeze axis 0 has size 2"):
        run_plan(plan, {"x": torch.zeros(2, 3)})

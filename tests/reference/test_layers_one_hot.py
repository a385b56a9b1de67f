"""trtbuild.reference: OneHot against F.one_hot; each construction also built by TensorRT-RTX (the `refnet`
twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt

gen = torch.Generator().manual_seed(40)


def depth_const(refnet, depth, dtype=np.int32):
    arr = np.array(depth, dtype=dtype)
    return refnet.network.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3])
@pytest.mark.parametrize("idt, torch_idt", [(trt.int32, torch.int32), (trt.int64, torch.int64)])
def test_one_hot_matches_f_one_hot(refnet, axis, idt, torch_idt):
    i = torch.randint(0, 4, (2, 3), generator=gen).to(torch_idt)
    v = torch.tensor([-0.5, 2.0])
    layer = refnet.network.add_one_hot(refnet.input("i", (2, 3), idt), refnet.input("v", (2,)),
                                       depth_const(refnet, 4), axis)
    y = refnet.run({"i": i, "v": v}, y=layer.get_output(0))["y"]
    expected = torch.where(F.one_hot(i.long(), 4).bool(), 2.0, -0.5).movedim(-1, axis % 3)
    assert torch.equal(y, expected)


def test_one_hot_negative_and_out_of_range_indices(refnet):
    i = torch.tensor([0, -1, 5, -6, 2], dtype=torch.int32)
    layer = refnet.network.add_one_hot(refnet.input("i", (5,), trt.int32), refnet.input("v", (2,), trt.int32),
                                       depth_const(refnet, 5, np.int64), -1)
    y = refnet.run({"i": i, "v": torch.tensor([0, 1], dtype=torch.int32)}, y=layer.get_output(0))["y"]
    expected = F.one_hot(torch.tensor([0, 4, 0, 0, 2]), 5).int()
    expected[2] = 0
    expected[3] = 0
    assert y.dtype == torch.int32 and torch.equal(y, expected)


@pytest.mark.parametrize("dt", [trt.float16, trt.bfloat16, trt.int64, trt.bool])
def test_one_hot_output_has_the_values_type(refnet, dt):
    layer = refnet.network.add_one_hot(refnet.input("i", (2, 3), trt.int32), refnet.input("v", (2,), dt),
                                       depth_const(refnet, 3), -1)
    assert tuple(layer.get_output(0).shape) == (2, 3, 3) and layer.get_output(0).dtype == dt


@pytest.mark.parametrize("axis", [3, -4])
def test_one_hot_refuses_an_axis_out_of_range(refnet, axis):
    with pytest.raises(trt.NetworkError, match="out of range"):
        refnet.network.add_one_hot(refnet.input("i", (2, 3), trt.int32), refnet.input("v", (2,)),
                                   depth_const(refnet, 4), axis)


def test_one_hot_refusals(refnet):
    with pytest.raises(trt.NetworkError, match="INT32 or INT64 indices"):
        refnet.network.add_one_hot(refnet.input("f", (2, 3)), refnet.input("v", (2,)), depth_const(refnet, 4), -1)
    with pytest.raises(trt.NetworkError, match="0-D constant"):
        refnet.network.add_one_hot(refnet.input("i", (2, 3), trt.int32), refnet.input("w", (2,)),
                                   depth_const(refnet, [4]), -1)
    with pytest.raises(trt.NetworkError, match="positive"):
        refnet.network.add_one_hot(refnet.input("j", (2, 3), trt.int32), refnet.input("u", (2,)),
                                   depth_const(refnet, -2), -1)

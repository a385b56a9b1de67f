"""trtbuild.reference: Select against torch.where; each construction also built by TensorRT-RTX (the `refnet`
twin)."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(30)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


@pytest.mark.parametrize("c_shape, a_shape, b_shape", [
    ((2, 3, 4), (2, 3, 4), (2, 3, 4)),
    ((2, 1, 4), (1, 3, 4), (2, 3, 1)),
    ((1, 1, 1), (2, 3, 4), (1, 1, 1)),
    ((2, 3, 4), (1, 1, 1), (1, 3, 1)),
])
def test_select_broadcasts_like_torch_where(refnet, c_shape, a_shape, b_shape):
    c, a, b = randn(*c_shape) > 0, randn(*a_shape), randn(*b_shape)
    layer = refnet.network.add_select(refnet.input("c", c_shape, trt.bool), refnet.input("a", a_shape),
                                      refnet.input("b", b_shape))
    y = refnet.run({"c": c, "a": a, "b": b}, y=layer.get_output(0))["y"]
    close(y, torch.where(c, a, b))


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16),
                                          (trt.int32, torch.int32), (trt.int64, torch.int64),
                                          (trt.bool, torch.bool), (trt.int8, torch.int8)])
def test_select_keeps_the_type(refnet, dt, torch_dt):
    c = randn(2, 3) > 0
    a, b = (randn(2, 3) * 4).to(torch_dt), (randn(2, 3) * 4).to(torch_dt)
    layer = refnet.network.add_select(refnet.input("c", (2, 3), trt.bool), refnet.input("a", (2, 3), dt),
                                      refnet.input("b", (2, 3), dt))
    assert layer.get_output(0).dtype == dt
    if dt == trt.int8:  # an INT8 network output needs a scale; the type is what is checked
        return
    y = refnet.run({"c": c, "a": a, "b": b}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt and torch.equal(y, torch.where(c, a, b))


@pytest.mark.parametrize("c_dt, a_dt, b_dt, c_shape, words", [
    (trt.float32, trt.float32, trt.float32, (2, 3, 4), "BOOL condition"),
    (trt.int32, trt.float32, trt.float32, (2, 3, 4), "BOOL condition"),
    (trt.bool, trt.float32, trt.float16, (2, 3, 4), "different types"),
    (trt.bool, trt.float32, trt.float32, (4,), "ranks"),
    (trt.bool, trt.float32, trt.float32, (2, 2, 4), "does not broadcast"),
])
def test_select_refusals(refnet, c_dt, a_dt, b_dt, c_shape, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_select(refnet.input("c", c_shape, c_dt), refnet.input("a", (2, 3, 4), a_dt),
                                  refnet.input("b", (2, 3, 4), b_dt))

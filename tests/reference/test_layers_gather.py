"""trtbuild.reference: Gather in DEFAULT, ELEMENT and ND modes against torch.index_select / torch.gather /
torch.take_along_dim / advanced indexing; each construction also built by TensorRT-RTX (the `refnet` twin)."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

G = trt.GatherMode
gen = torch.Generator().manual_seed(16)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def randint(high, *shape, dtype=torch.int32) -> torch.Tensor:
    return torch.randint(-high, high, shape, generator=gen).to(dtype)  # negative indices count from the end


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("idt, torch_idt", [(trt.int32, torch.int32), (trt.int64, torch.int64)])
def test_gather_default(refnet, axis, idt, torch_idt):
    x = randn(4, 5, 6)
    i = randint(x.shape[axis], 2, 3, dtype=torch_idt)
    layer = refnet.network.add_gather(refnet.input("x", (4, 5, 6)), refnet.input("i", (2, 3), idt), axis)
    assert layer.mode == G.DEFAULT and layer.axis == axis and layer.num_elementwise_dims == 0
    y = refnet.run({"x": x, "i": i}, y=layer.get_output(0))["y"]
    ii = i.long() % x.shape[axis]
    expected = x.index_select(axis, ii.reshape(-1)).reshape(x.shape[:axis] + ii.shape + x.shape[axis + 1:])
    close(y, expected)


def test_gather_default_scalar_index_removes_the_axis(refnet):
    x, i = randn(4, 5, 6), torch.tensor(2, dtype=torch.int32)
    layer = refnet.network.add_gather(refnet.input("x", (4, 5, 6)), refnet.input("i", (), trt.int32), 1)
    y = refnet.run({"x": x, "i": i}, y=layer.get_output(0))["y"]
    close(y, x[:, 2])


@pytest.mark.parametrize("axis, i_shape", [(1, (4, 3)), (2, (4, 2, 3)), (2, (1, 3))])
def test_gather_default_one_elementwise_dim(refnet, axis, i_shape):
    x = randn(4, 5, 6)
    i = randint(x.shape[axis], *i_shape)
    layer = refnet.network.add_gather_v2(refnet.input("x", (4, 5, 6)), refnet.input("i", i_shape, trt.int32),
                                         G.DEFAULT)
    layer.axis = axis
    layer.num_elementwise_dims = 1
    y = refnet.run({"x": x, "i": i}, y=layer.get_output(0))["y"]
    ii = (i.long() % x.shape[axis]).expand((4,) + i_shape[1:])
    expected = torch.stack([x[b].index_select(axis - 1, ii[b].reshape(-1)).reshape(
        x.shape[1:axis] + ii.shape[1:] + x.shape[axis + 1:]) for b in range(4)])
    close(y, expected)


@pytest.mark.parametrize("axis, i_shape", [(0, (3, 5, 6)), (1, (4, 2, 6)), (2, (4, 5, 9)), (1, (2, 2, 3))])
def test_gather_element_matches_torch_gather(refnet, axis, i_shape):
    x = randn(4, 5, 6)
    i = randint(x.shape[axis], *i_shape, dtype=torch.int64)
    layer = refnet.network.add_gather_v2(refnet.input("x", (4, 5, 6)), refnet.input("i", i_shape, trt.int64),
                                         G.ELEMENT)
    layer.axis = axis
    y = refnet.run({"x": x, "i": i}, y=layer.get_output(0))["y"]
    close(y, torch.gather(x, axis, i % x.shape[axis]))
    if i.shape[:axis] + i.shape[axis + 1:] == x.shape[:axis] + x.shape[axis + 1:]:
        close(y, torch.take_along_dim(x, i % x.shape[axis], dim=axis))


@pytest.mark.parametrize("ned, i_shape", [(0, (3, 2)), (0, (3, 3)), (0, (2, 1)), (0, (2, 2, 1)), (1, (4, 2, 1)),
                                          (1, (4, 2)), (2, (4, 5, 1))])
def test_gather_nd(refnet, ned, i_shape):
    x = randn(4, 5, 6)
    q = i_shape[-1]
    i = torch.stack([randint(x.shape[ned + j], *i_shape[:-1]) for j in range(q)], dim=-1)
    layer = refnet.network.add_gather_v2(refnet.input("x", (4, 5, 6)), refnet.input("i", i_shape, trt.int32), G.ND)
    layer.num_elementwise_dims = ned
    y = refnet.run({"x": x, "i": i}, y=layer.get_output(0))["y"]
    ii = i.long()
    bt = 1 if ned == 0 else x.shape[:ned].numel()
    data = x.reshape((bt,) + x.shape[ned:])
    flat = ii.reshape(bt, -1, q)
    rows = [[data[(b,) + tuple(int(flat[b, n, j]) for j in range(q))] for n in range(flat.shape[1])]
            for b in range(bt)]
    expected = torch.stack([torch.stack(r) for r in rows]).reshape(i_shape[:-1] + x.shape[ned + q:])
    close(y, expected)


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.int32, torch.int32),
                                          (trt.int64, torch.int64), (trt.bool, torch.bool)])
def test_gather_keeps_the_data_type(refnet, dt, torch_dt):
    x = (randn(4, 5) * 4).to(torch_dt)
    i = torch.tensor([3, 0, -1], dtype=torch.int32)
    layer = refnet.network.add_gather(refnet.input("x", (4, 5), dt), refnet.input("i", (3,), trt.int32), 0)
    y = refnet.run({"x": x, "i": i}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt and torch.equal(y, x[[3, 0, 3]])


@pytest.mark.parametrize("x_shape, i_shape, idt, axis, words", [
    ((4, 5, 6), (2,), trt.int32, 3, "out of range"),
    ((4, 5, 6), (2,), trt.int32, -1, "out of range"),
    ((4, 5, 6), (2,), trt.float32, 0, "INT32 or INT64"),
    ((4, 5, 6), (2,), trt.int8, 0, "INT32 or INT64"),
    ((), (2,), trt.int32, 0, "scalar"),
])
def test_gather_refusals(refnet, x_shape, i_shape, idt, axis, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_gather(refnet.input("x", x_shape), refnet.input("i", i_shape, idt), axis)


@pytest.mark.parametrize("mode, axis, ned, i_shape, words", [
    (G.DEFAULT, 0, 1, (4, 3), "axis must be >= 1"),
    (G.DEFAULT, 2, 1, (3, 3), "must be 1 or equal"),
    (G.DEFAULT, 2, 2, (4, 5), "takes 0 or 1"),
    (G.ELEMENT, 1, 1, (4, 2, 6), "takes 0"),
    (G.ELEMENT, 1, 0, (4, 2), "equal ranks"),
    (G.ELEMENT, 1, 0, (4, 7, 7), "at most"),
    (G.ND, 0, 0, (3, 4), "must be in"),
    (G.ND, 0, 1, (4, 3), "must be in"),
    (G.ND, 0, 3, (4, 5, 6, 1), "takes 0 to 2"),
    (G.ND, 0, 1, (3, 2, 1), "must be equal"),
])
def test_gather_v2_refusals(refnet, mode, axis, ned, i_shape, words):
    layer = refnet.network.add_gather_v2(refnet.input("x", (4, 5, 6)), refnet.input("i", i_shape, trt.int32), mode)
    layer.axis = axis
    layer.num_elementwise_dims = ned
    with pytest.raises(trt.NetworkError, match=words):
        layer.get_output(0).shape  # noqa: B018

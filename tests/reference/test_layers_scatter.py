"""trtbuild.reference: Scatter in ELEMENT mode (against torch.scatter) and ND mode (against a numpy loop of
ONNX ScatterND's definition), with unique indices (duplicates are undefined); each construction also built by
TensorRT-RTX (the `refnet` twin)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

S = trt.ScatterMode
gen = torch.Generator().manual_seed(37)


def randn(*shape) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def unique_element_indices(data_shape, i_shape, axis) -> torch.Tensor:
    """Indices along `axis` without repeats in any line along it (each line a prefix of a permutation)."""
    n = data_shape[axis]
    lines = [torch.randperm(n, generator=gen)[:i_shape[axis]] for _ in range(int(np.prod(i_shape)) // i_shape[axis])]
    moved = torch.stack(lines).reshape(tuple(d for a, d in enumerate(i_shape) if a != axis) + (i_shape[axis],))
    return moved.movedim(-1, axis).contiguous()


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("idt, torch_idt", [(trt.int32, torch.int32), (trt.int64, torch.int64)])
def test_scatter_element_matches_torch_scatter(refnet, axis, idt, torch_idt):
    xs, i_shape = (4, 5, 6), (3, 4, 5)
    x, u = randn(*xs), randn(*i_shape)
    i = unique_element_indices(xs, i_shape, axis % 3)
    i = torch.where(torch.rand(i.shape, generator=gen) < 0.3, i - xs[axis % 3], i).to(torch_idt)  # some negative
    layer = refnet.network.add_scatter(refnet.input("x", xs), refnet.input("i", i_shape, idt),
                                       refnet.input("u", i_shape), S.ELEMENT)
    assert layer.axis == 0 and layer.mode == S.ELEMENT
    layer.axis = axis
    y = refnet.run({"x": x, "i": i, "u": u}, y=layer.get_output(0))["y"]
    close(y, x.double().scatter(axis, i.long() % xs[axis % 3], u.double()))


def test_scatter_documented_example(refnet):
    """TensorRT's operator page example (ELEMENT, axis 2)."""
    x = torch.tensor([[[-3.0, -2.0, -1.0, 10.0, -25.0]], [[0.0, 1.0, 2.0, -2.0, -1.0]]])
    i = torch.tensor([[[1, 2, 3, 0, 4]], [[4, 1, 2, 3, 0]]], dtype=torch.int32)
    u = torch.tensor([[[-1.0, 2.4, 3.2, 10.8, 8.9]], [[0.0, -11.2, 34.2, 223.9, -100.0]]])
    layer = refnet.network.add_scatter(refnet.input("x", (2, 1, 5)), refnet.input("i", (2, 1, 5), trt.int32),
                                       refnet.input("u", (2, 1, 5)), S.ELEMENT)
    layer.axis = 2
    y = refnet.run({"x": x, "i": i, "u": u}, y=layer.get_output(0))["y"]
    close(y, [[[10.8, -1.0, 2.4, 3.2, 8.9]], [[-100.0, -11.2, 34.2, 223.9, 0.0]]])


def scatter_nd_loop(x: np.ndarray, i: np.ndarray, u: np.ndarray) -> np.ndarray:
    """ONNX ScatterND's reference definition: output[indices[idx]] = updates[idx] for each idx."""
    out = np.array(x, dtype=np.float64)
    for idx in itertools.product(*[range(d) for d in i.shape[:-1]]):
        out[tuple(i[idx])] = u[idx]
    return out


@pytest.mark.parametrize("xs, i_shape", [((4, 5, 6), (3, 1)), ((4, 5, 6), (2, 3, 2)), ((4, 5, 6), (5, 3)),
                                         ((4, 5), (2,)), ((4, 5, 6), (2, 2, 1))])
def test_scatter_nd_matches_the_onnx_definition(refnet, xs, i_shape):
    q = i_shape[-1]
    n = int(np.prod(i_shape[:-1]))
    flat = torch.randperm(int(np.prod(xs[:q])), generator=gen)[:n]  # unique positions
    i = torch.stack(torch.unravel_index(flat, xs[:q]), -1).reshape(i_shape)
    i = torch.where(torch.rand(i.shape, generator=gen) < 0.3, i - torch.tensor(xs[:q]), i).to(torch.int32)
    u_shape = i_shape[:-1] + xs[q:]
    x, u = randn(*xs), randn(*u_shape)
    layer = refnet.network.add_scatter(refnet.input("x", xs), refnet.input("i", i_shape, trt.int32),
                                       refnet.input("u", u_shape), S.ND)
    y = refnet.run({"x": x, "i": i, "u": u}, y=layer.get_output(0))["y"]
    wrapped = (i.long() % torch.tensor(xs[:q])).numpy()
    close(y, scatter_nd_loop(x.numpy(), wrapped, u.double().numpy()))


def test_scatter_nd_ignores_the_axis(refnet):
    x, u = randn(4, 3), randn(2, 3)
    i = torch.tensor([[3], [0]], dtype=torch.int64)
    layer = refnet.network.add_scatter(refnet.input("x", (4, 3)), refnet.input("i", (2, 1), trt.int64),
                                       refnet.input("u", (2, 3)), S.ND)
    layer.axis = 5
    y = refnet.run({"x": x, "i": i, "u": u}, y=layer.get_output(0))["y"]
    close(y, scatter_nd_loop(x.numpy(), i.numpy(), u.numpy()))


def test_scatter_mode_can_change(refnet):
    x, u = randn(4, 3), randn(4, 3)
    i = torch.tensor([[3, 1, 0], [0, 2, 1], [1, 0, 3], [2, 3, 2]], dtype=torch.int32)
    layer = refnet.network.add_scatter(refnet.input("x", (4, 3)), refnet.input("i", (4, 3), trt.int32),
                                       refnet.input("u", (4, 3)), S.ND)
    layer.mode = S.ELEMENT
    y = refnet.run({"x": x, "i": i, "u": u}, y=layer.get_output(0))["y"]
    close(y, x.scatter(0, i.long(), u))


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16),
                                          (trt.int32, torch.int32), (trt.int64, torch.int64), (trt.int8, torch.int8),
                                          (trt.bool, torch.bool)])
def test_scatter_types(refnet, dt, torch_dt):
    x, u = (randn(3, 4) * 5).to(torch_dt), (randn(2, 4) * 5).to(torch_dt)
    i = torch.tensor([[2, 0, 1, 2], [0, 1, 2, 1]], dtype=torch.int32)
    layer = refnet.network.add_scatter(refnet.input("x", (3, 4), dt), refnet.input("i", (2, 4), trt.int32),
                                       refnet.input("u", (2, 4), dt), S.ELEMENT)
    y = refnet.run({"x": x, "i": i, "u": u}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt
    assert torch.equal(y, x.scatter(0, i.long(), u))


@pytest.mark.parametrize("xs, i_shape, u_shape, axis, words", [
    ((3, 4), (2,), (2,), 0, "one rank"),
    ((3, 4), (2, 4), (2, 3), 0, "must have the shape of indices"),
    ((3, 4), (2, 4), (1, 4), 0, "must have the shape of indices"),
    ((3, 4), (3, 5), (3, 5), 0, "at most data's"),
    ((3, 4), (5, 4), (5, 4), 0, "at most data's"),
    ((3, 4), (2, 4), (2, 4), 2, "out of range"),
    ((3, 4), (2, 4), (2, 4), -3, "out of range"),
    ((), (), (), 0, "rank >= 1"),
])
def test_scatter_element_refusals(refnet, xs, i_shape, u_shape, axis, words):
    with pytest.raises(trt.NetworkError, match=words):
        layer = refnet.network.add_scatter(refnet.input("x", xs), refnet.input("i", i_shape, trt.int32),
                                           refnet.input("u", u_shape), S.ELEMENT)
        layer.axis = axis
        tuple(layer.get_output(0).shape)


@pytest.mark.parametrize("xs, i_shape, u_shape, words", [
    ((4, 3), (2, 3), (2,), "exceeds the rank"),
    ((4, 3), (2, 1), (2, 4), r"must have shape \(2, 3\)"),
    ((4, 3), (2, 1), (1, 3), r"must have shape \(2, 3\)"),
    ((4, 3), (2, 1), (6,), r"must have shape \(2, 3\)"),
    ((4, 3), (), (4, 3), "rank >= 1"),
])
def test_scatter_nd_refusals(refnet, xs, i_shape, u_shape, words):
    with pytest.raises(trt.NetworkError, match=words):
        layer = refnet.network.add_scatter(refnet.input("x", xs), refnet.input("i", i_shape, trt.int32),
                                           refnet.input("u", u_shape), S.ND)
        tuple(layer.get_output(0).shape)


def test_scatter_refuses_float_indices_and_mixed_types(refnet):
    layer = refnet.network.add_scatter(refnet.input("x", (3, 4)), refnet.input("i", (2, 4)),
                                       refnet.input("u", (2, 4)), S.ELEMENT)
    with pytest.raises(trt.NetworkError, match="INT32 or INT64 indices"):
        tuple(layer.get_output(0).shape)
    layer = refnet.network.add_scatter(refnet.input("y", (3, 4)), refnet.input("j", (2, 4), trt.int32),
                                       refnet.input("v", (2, 4), trt.float16), S.ELEMENT)
    with pytest.raises(trt.NetworkError, match="one type"):
        tuple(layer.get_output(0).shape)


def test_scatter_index_out_of_range_fails_the_run(refnet):
    layer = refnet.network.add_scatter(refnet.input("x", (3, 4)), refnet.input("i", (1, 4), trt.int32),
                                       refnet.input("u", (1, 4)), S.ELEMENT)
    with pytest.raises(Exception, match="out of range"):
        refnet.run({"x": randn(3, 4), "i": torch.tensor([[0, 3, 1, 2]], dtype=torch.int32), "u": randn(1, 4)},
                   y=layer.get_output(0))

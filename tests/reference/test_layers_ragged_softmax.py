"""trtbuild.reference: RaggedSoftMax, a softmax over the first bounds[i] elements of each sequence and zeros after
them (NVIDIA's RaggedSoftMax operator: "Values outside of the specified lengths are set to zero"), against values
computed by hand in float64; each construction also built by TensorRT-RTX (the `refnet` twin), which takes only
rank-3 inputs with INT32 bounds of the same rank (each dim the input's or 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(18)


def expected(x: torch.Tensor, bounds: torch.Tensor) -> np.ndarray:
    """Row by row in float64: exp(x_j) / sum_{k < n} exp(x_k) for j < n, 0 for j >= n (n clipped to [0, S])."""
    x64 = x.double().numpy()
    n_all = np.broadcast_to(bounds.numpy(), x64.shape[:-1] + (1,))
    out = np.zeros_like(x64)
    for idx in np.ndindex(*x64.shape[:-1]):
        n = int(min(max(n_all[idx][0], 0), x64.shape[-1]))
        row = [math.exp(v) for v in x64[idx][:n]]
        out[idx][:n] = [r / sum(row) for r in row]
    return out


def ragged(refnet, x, bounds, x_dt=trt.float32):
    layer = refnet.network.add_ragged_softmax(refnet.input("x", tuple(x.shape), x_dt),
                                              refnet.input("b", tuple(bounds.shape), trt.int32))
    assert layer.num_inputs == 2 and tuple(layer.get_output(0).shape) == tuple(x.shape)
    return refnet.run({"x": x, "b": bounds}, y=layer.get_output(0))["y"]


def test_the_operator_page_example(refnet):
    """NVIDIA's example: bounds 5 and 3 over two rows of 5."""
    x = torch.tensor([[[1.0, 1.0, 1.0, 1.0, 0.5], [3.0, 4.0, -20.0, 10.0, 5.0]]])
    y = ragged(refnet, x, torch.tensor([[[5], [3]]], dtype=torch.int32))
    close(y, [[[0.21, 0.21, 0.21, 0.21, 0.13], [0.26, 0.73, 0.01, 0.0, 0.0]]], atol=1.1e-2, rtol=0)  # as printed
    close(y, expected(x, torch.tensor([[[5], [3]]])))


def test_bounds_of_every_length(refnet):
    """0 (nothing kept: all zeros), 1 (a single 1), the full row, and beyond it (the full row)."""
    x = torch.randn(2, 4, 6, generator=gen)
    bounds = torch.tensor([[[0], [1], [3], [6]], [[7], [100], [-2], [5]]], dtype=torch.int32)
    y = ragged(refnet, x, bounds)
    close(y, expected(x, bounds))
    assert torch.all(y[0, 0] == 0) and torch.all(y[1, 2] == 0) and y[0, 1, 0] == 1
    close(y[0, 3], torch.softmax(x[0, 3].double(), 0))


@pytest.mark.parametrize("b_shape", [(2, 1, 1), (1, 3, 1), (1, 1, 1)])
def test_bounds_broadcast(refnet, b_shape):
    x = torch.randn(2, 3, 5, generator=gen)
    bounds = torch.randint(0, 6, b_shape, generator=gen, dtype=torch.int32)
    close(ragged(refnet, x, bounds), expected(x, bounds))


def test_bounds_with_the_sequence_dim_bound_each_element(refnet):
    """Bounds of the input's shape (TensorRT-RTX accepts them): element j is kept where j < bounds[..., j]."""
    x = torch.randn(1, 2, 4, generator=gen)
    bounds = torch.tensor([[[4, 4, 4, 4], [3, 0, 3, 3]]], dtype=torch.int32)  # row 1 keeps elements 0 and 2
    y = ragged(refnet, x, bounds)
    close(y[0, 0], torch.softmax(x[0, 0].double(), 0))
    e0, e2 = math.exp(x[0, 1, 0].item()), math.exp(x[0, 1, 2].item())
    close(y[0, 1], [e0 / (e0 + e2), 0.0, e2 / (e0 + e2), 0.0])


def test_large_values_do_not_overflow(refnet):
    x = torch.tensor([[[1000.0, 999.0, -1e30, 5.0]]])
    y = ragged(refnet, x, torch.tensor([[[2]]], dtype=torch.int32))
    e = 1 / (1 + math.exp(-1))
    close(y, [[[e, 1 - e, 0.0, 0.0]]])


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_half_types_keep_their_type(refnet, dt, torch_dt):
    x = torch.randn(2, 3, 5, generator=gen).to(torch_dt)
    bounds = torch.tensor([[[1], [3], [5]], [[2], [4], [0]]], dtype=torch.int32)
    y = ragged(refnet, x, bounds, dt)
    assert y.dtype == torch_dt
    close(y, expected(x, bounds), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("x_shape, b_shape, words", [
    ((3, 5), (3, 1), "rank 2; a ragged softmax takes rank 3"),
    ((1, 2, 3, 5), (1, 2, 3, 1), "rank 4; a ragged softmax takes rank 3"),
    ((2, 3, 5), (3, 1), "bounds have rank 2 but the input has rank 3"),
    ((2, 3, 5), (2, 3, 2), "each dim must equal the input's or be 1"),
    ((2, 3, 5), (2, 4, 1), "each dim must equal the input's or be 1"),
])
def test_refused_shapes(refnet, x_shape, b_shape, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_ragged_softmax(refnet.input("x", x_shape), refnet.input("b", b_shape, trt.int32))


@pytest.mark.parametrize("x_dt, b_dt, words", [
    (trt.float32, trt.int64, "bounds have type INT64; a ragged softmax takes INT32 bounds"),
    (trt.float32, trt.float32, "bounds have type FLOAT"),
    (trt.int32, trt.int32, "needs FLOAT, HALF or BF16"),
    (trt.int8, trt.int32, "INT8, a quantized type"),
])
def test_refused_types(refnet, x_dt, b_dt, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_ragged_softmax(refnet.input("x", (2, 3, 5), x_dt), refnet.input("b", (2, 3, 1), b_dt))

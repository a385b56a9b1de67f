"""trtbuild.reference: ReverseSequence (batch_axis, sequence_axis, INT32/INT64 lengths) against a numpy loop of
the documented definition; each construction also built by TensorRT-RTX (the `refnet` twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(83)


def reverse_loop(x: np.ndarray, lens, batch_axis: int, sequence_axis: int) -> np.ndarray:
    """For the i-th slice along batch_axis, reverse its first lens[i] elements along sequence_axis."""
    out = np.array(x, dtype=np.float64)
    for i, n in enumerate(lens):
        for t in range(n):
            src = [slice(None)] * x.ndim
            dst = [slice(None)] * x.ndim
            src[batch_axis] = dst[batch_axis] = i
            src[sequence_axis], dst[sequence_axis] = n - 1 - t, t
            out[tuple(dst)] = x[tuple(src)]
    return out


def test_reverse_sequence_documented_example(refnet):
    """TensorRT's operator page (defaults: batch_axis 1, sequence_axis 0)."""
    x = torch.arange(16, dtype=torch.float32).reshape(4, 4).T.contiguous()
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (4, 4)), refnet.input("l", (4,), trt.int32))
    assert layer.batch_axis == 1 and layer.sequence_axis == 0
    y = refnet.run({"x": x, "l": torch.tensor([4, 3, 2, 1], dtype=torch.int32)}, y=layer.get_output(0))["y"]
    close(y, [[3.0, 6.0, 9.0, 12.0], [2.0, 5.0, 8.0, 13.0], [1.0, 4.0, 10.0, 14.0], [0.0, 7.0, 11.0, 15.0]])


@pytest.mark.parametrize("shape, b, s", [((3, 5), 0, 1), ((5, 3), 1, 0), ((3, 2, 6), 0, 2), ((6, 4, 3), 2, 0),
                                         ((2, 5, 3, 4), 3, 1), ((2, 3, 4, 5), 1, 3)])
@pytest.mark.parametrize("ldt, torch_ldt", [(trt.int32, torch.int32), (trt.int64, torch.int64)])
def test_reverse_sequence_axes(refnet, shape, b, s, ldt, torch_ldt):
    x = torch.randn(shape, generator=gen)
    lens = torch.randint(0, shape[s] + 1, (shape[b],), generator=gen).to(torch_ldt)
    layer = refnet.network.add_reverse_sequence(refnet.input("x", shape), refnet.input("l", (shape[b],), ldt))
    layer.batch_axis, layer.sequence_axis = b, s  # equal for a moment where b = 0: checked only when used
    y = refnet.run({"x": x, "l": lens}, y=layer.get_output(0))["y"]
    close(y, reverse_loop(x.numpy(), lens.tolist(), b, s))


def test_reverse_sequence_lengths_from_a_constant(refnet):
    x = torch.randn((4, 3), generator=gen)
    lens = np.array([1, 3, 2], np.int64)
    lens_t = refnet.network.add_constant((3,), trt.Weights(lens)).get_output(0)
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (4, 3)), lens_t)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, reverse_loop(x.numpy(), lens.tolist(), 1, 0))


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16),
                                          (trt.int32, torch.int32), (trt.int64, torch.int64), (trt.int8, torch.int8),
                                          (trt.bool, torch.bool)])
def test_reverse_sequence_types(refnet, dt, torch_dt):
    x = (torch.randn((5, 3), generator=gen) * 4).to(torch_dt)
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (5, 3), dt), refnet.input("l", (3,), trt.int32))
    y = refnet.run({"x": x, "l": torch.tensor([5, 0, 2], dtype=torch.int32)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt
    assert torch.equal(y, torch.as_tensor(reverse_loop(x.double().numpy(), [5, 0, 2], 1, 0)).to(torch_dt))


def test_reverse_sequence_refuses_equal_axes(refnet):
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (3, 4)), refnet.input("l", (3,), trt.int32))
    layer.batch_axis = 0
    with pytest.raises(trt.NetworkError, match="both 0; they must differ"):
        tuple(layer.get_output(0).shape)


@pytest.mark.parametrize("attr, value", [("batch_axis", 2), ("batch_axis", -1), ("sequence_axis", -2),
                                         ("sequence_axis", 5)])
def test_reverse_sequence_setters_refuse_an_axis_out_of_range(refnet, attr, value):
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (3, 4)), refnet.input("l", (4,), trt.int32))
    with pytest.raises(trt.NetworkError, match=r"must be in \[0, 1\]"):
        setattr(layer, attr, value)


@pytest.mark.parametrize("xs, ls, words", [((3,), (3,), "rank >= 2"), ((4, 3), (3, 1), "1-D sequence_lens")])
def test_reverse_sequence_refuses_ranks_when_added(refnet, xs, ls, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_reverse_sequence(refnet.input("x", xs), refnet.input("l", ls, trt.int32))


@pytest.mark.parametrize("n", [4, 1])
def test_reverse_sequence_refuses_lengths_not_matching_the_batch(refnet, n):
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (4, 3)), refnet.input("l", (n,), trt.int32))
    with pytest.raises(trt.NetworkError, match=f"sequence_lens has {n} lengths"):
        tuple(layer.get_output(0).shape)


def test_reverse_sequence_refuses_float_lengths(refnet):
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (4, 3)), refnet.input("l", (3,)))
    with pytest.raises(trt.NetworkError, match="INT32 or INT64 lengths"):
        tuple(layer.get_output(0).shape)


def test_reverse_sequence_length_beyond_the_sequence_fails_the_run(refnet):
    layer = refnet.network.add_reverse_sequence(refnet.input("x", (4, 3)), refnet.input("l", (3,), trt.int32))
    with pytest.raises(Exception, match=r"must be in \[0, 4\]"):
        refnet.run({"x": torch.zeros(4, 3), "l": torch.tensor([1, 5, 2], dtype=torch.int32)}, y=layer.get_output(0))

"""trtbuild.reference: TopK (MAX/MIN, k as attribute or 0-D constant tensor, INT32/INT64 indices) against
torch.topk and a stable sort in float64; each construction also built by TensorRT-RTX (the `refnet` twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import RefNet, close

MAX, MIN = trt.TopKOperation.MAX, trt.TopKOperation.MIN
gen = torch.Generator().manual_seed(61)


def distinct(*shape) -> torch.Tensor:
    """Values without ties (a permutation of 0..n-1, scaled), so that indices are unique."""
    n = int(np.prod(shape))
    return (torch.randperm(n, generator=gen).reshape(shape).double() * 0.25 - n / 8).float()


def k_const(net, k, dtype=np.int32):
    arr = np.array(k, dtype=dtype)
    return net.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


@pytest.mark.parametrize("op", [MAX, MIN])
@pytest.mark.parametrize("shape, axis, k", [((3, 7), 1, 3), ((3, 7), 0, 2), ((2, 3, 4, 5), 3, 5),
                                            ((2, 3, 4, 5), 0, 1), ((2, 6, 3), 1, 6)])
def test_topk_values_and_indices(refnet, op, shape, axis, k):
    x = distinct(*shape)
    layer = refnet.network.add_topk(refnet.input("x", shape), op, k, 1 << axis)
    assert layer.op == op and layer.k == k and layer.axes == 1 << axis and layer.indices_type == trt.int32
    assert layer.num_outputs == 2
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    ev, ei = torch.topk(x.double(), k, dim=axis, largest=op == MAX, sorted=True)
    close(out["v"], ev)
    assert out["i"].dtype == torch.int32
    assert torch.equal(out["i"].long(), ei)


def test_topk_documented_example(refnet):
    """TensorRT's operator page: [[-3, -2, -1, 10, -25], [0, 1, 2, -2, -1]], MAX, k = 3 on axis 1."""
    x = torch.tensor([[-3.0, -2.0, -1.0, 10.0, -25.0], [0.0, 1.0, 2.0, -2.0, -1.0]])
    layer = refnet.network.add_topk(refnet.input("x", (2, 5)), MAX, 3, 2)
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    close(out["v"], [[10.0, -1.0, -2.0], [2.0, 1.0, 0.0]])
    assert out["i"].tolist() == [[3, 2, 1], [2, 1, 0]]


def test_topk_ties_keep_the_lower_index_first(refnet):
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
    layer = refnet.network.add_topk(refnet.input("x", (2, 5)), MAX, 3, 2)
    layer.op = MIN
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    close(out["v"], [[0.0, 1.0, 3.0], [2.0, 2.0, 2.0]])
    assert out["i"].tolist() == [[3, 0, 1], [0, 1, 2]]


@pytest.mark.parametrize("dt, torch_dt", [(trt.int32, torch.int32), (trt.int64, torch.int64),
                                          (trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16),
                                          (trt.int8, torch.int8)])
def test_topk_types_and_int64_indices(refnet, dt, torch_dt):
    x = torch.randperm(24, generator=gen).reshape(4, 6).sub(12).to(torch_dt)
    layer = refnet.network.add_topk(refnet.input("x", (4, 6), dt), MIN, 4, 2, trt.int64)
    assert layer.indices_type == trt.int64
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    ev, ei = torch.topk(x.double(), 4, dim=1, largest=False)
    assert out["v"].dtype == torch_dt and out["i"].dtype == torch.int64
    close(out["v"], ev)
    assert torch.equal(out["i"], ei)


def test_topk_attributes_can_change(refnet):
    x = distinct(5, 6)
    layer = refnet.network.add_topk(refnet.input("x", (5, 6)), MAX, 2, 2)
    layer.k, layer.axes, layer.op, layer.indices_type = 4, 1, MIN, trt.int64
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    ev, ei = torch.topk(x.double(), 4, dim=0, largest=False)
    close(out["v"], ev)
    assert torch.equal(out["i"], ei)


@pytest.mark.parametrize("kdt", [np.int32, np.int64])
def test_topk_k_from_a_0d_constant_tensor(refnet, kdt):
    x = distinct(3, 8)
    layer = refnet.network.add_topk(refnet.input("x", (3, 8)), MAX, 1, 2)
    layer.set_input(1, k_const(refnet.network, 5, kdt))
    assert layer.k == -1 and layer.num_inputs == 2  # TensorRT-RTX: "getK works only for static k"
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    ev, ei = torch.topk(x.double(), 5, dim=1)
    close(out["v"], ev)
    assert torch.equal(out["i"].long(), ei)


def test_topk_k_zero_gives_an_empty_axis(refnet):
    layer = refnet.network.add_topk(refnet.input("x", (3, 4)), MAX, 0, 2)
    assert tuple(layer.get_output(0).shape) == (3, 0) and tuple(layer.get_output(1).shape) == (3, 0)


def test_topk_k_up_to_3840(refnet):
    layer = refnet.network.add_topk(refnet.input("x", (2, 4000)), MAX, 3840, 2)
    assert tuple(layer.get_output(1).shape) == (2, 3840)


@pytest.mark.parametrize("k, words", [(3841, r"K in \[0, 3840\]"), (-1, r"K in \[0, 3840\]")])
def test_topk_refuses_k_out_of_range_when_added(refnet, k, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_topk(refnet.input("x", (2, 4000)), MAX, k, 2)


def test_topk_refuses_k_larger_than_the_axis(refnet):
    layer = refnet.network.add_topk(refnet.input("x", (3, 5)), MAX, 6, 2)
    with pytest.raises(trt.NetworkError, match="k = 6 exceeds the size 5 of the reduced dimension 1"):
        tuple(layer.get_output(0).shape)
    layer = refnet.network.add_topk(refnet.input("y", (3, 5)), MAX, 2, 2)
    with pytest.raises(trt.NetworkError, match="k = 3841 is refused"):
        layer.k = 3841


def test_topk_k_tensor_replaces_a_static_k_and_a_static_k_replaces_the_tensor(refnet):
    """TensorRT-RTX checks k against the axis when the layer is used: a k too large when added is fine once a k
    tensor is set; setting k afterwards drops the tensor (input 1 reads None)."""
    x = distinct(4, 2)
    layer = refnet.network.add_topk(refnet.input("x", (4, 2)), MAX, 5, 1)
    layer.set_input(1, k_const(refnet.network, 2))
    assert tuple(layer.get_output(0).shape) == (2, 2)
    layer.k = 3
    assert layer.k == 3 and layer.get_input(1) is None and layer.num_inputs == 2
    out = refnet.run({"x": x}, v=layer.get_output(0), i=layer.get_output(1))
    ev, ei = torch.topk(x.double(), 3, dim=0)
    close(out["v"], ev)
    assert torch.equal(out["i"].long(), ei)


def test_topk_refuses_a_k_tensor_larger_than_the_axis(refnet):
    layer = refnet.network.add_topk(refnet.input("x", (3, 5)), MAX, 1, 2)
    layer.set_input(1, k_const(refnet.network, 7))
    with pytest.raises(trt.NetworkError, match="k = 7 exceeds"):
        tuple(layer.get_output(0).shape)


def test_topk_refuses_a_k_tensor_that_is_not_a_0d_constant():
    """Plain reference (not twinned): TensorRT-RTX takes a k computed at run time; the reference resolves only
    constants, and says so."""
    net = RefNet().network
    layer = net.add_topk(net.add_input("x", trt.float32, (3, 5)), MAX, 1, 2)
    layer.set_input(1, k_const(net, [2]))
    with pytest.raises(trt.NetworkError, match="0-D constant"):
        tuple(layer.get_output(0).shape)
    layer.set_input(1, net.add_input("k", trt.int32, ()))
    with pytest.raises(trt.NetworkError, match="0-D constant"):
        tuple(layer.get_output(0).shape)


@pytest.mark.parametrize("axes", [0b11, 0b100])
def test_topk_refuses_axes_that_are_not_one_dimension(refnet, axes):
    layer = refnet.network.add_topk(refnet.input("x", (3, 5)), MAX, 1, axes)
    with pytest.raises(trt.NetworkError, match="exactly one dimension"):
        tuple(layer.get_output(0).shape)


def test_topk_refuses_an_empty_axes_bitmask(refnet):
    with pytest.raises(trt.NetworkError, match="must have a bit set"):
        refnet.network.add_topk(refnet.input("x", (3, 5)), MAX, 1, 0)


def test_topk_refuses_an_axis_before_the_last_four(refnet):
    """Documented ("it must be one of the last four dimensions"); TensorRT-RTX takes it (REFERENCE_STRICTER)."""
    layer = refnet.network.add_topk(refnet.input("x", (2, 2, 2, 2, 3)), MAX, 1, 1)
    with pytest.raises(trt.NetworkError, match="last four dimensions"):
        tuple(layer.get_output(0).shape)
    layer = refnet.network.add_topk(refnet.input("y", (2, 2, 2, 2, 3)), MAX, 1, 2)  # dimension 1: the fourth last
    assert tuple(layer.get_output(0).shape) == (2, 1, 2, 2, 3)


def test_topk_refuses_rank_below_2(refnet):
    layer = refnet.network.add_topk(refnet.input("x", (5,)), MAX, 1, 1)
    with pytest.raises(trt.NetworkError, match="rank >= 2"):
        tuple(layer.get_output(0).shape)


@pytest.mark.parametrize("dt", [trt.bool, trt.uint8])
def test_topk_refuses_types(refnet, dt):
    layer = refnet.network.add_topk(refnet.input("x", (3, 5), dt), MAX, 1, 2)
    with pytest.raises(trt.NetworkError, match="FLOAT, HALF, BF16, INT32, INT64 or INT8"):
        tuple(layer.get_output(0).shape)


def test_topk_refuses_a_float_indices_type(refnet):
    with pytest.raises(trt.NetworkError, match="INT32 or INT64"):
        refnet.network.add_topk(refnet.input("x", (3, 5)), MAX, 1, 2, trt.float32)
    layer = refnet.network.add_topk(refnet.input("y", (3, 5)), MAX, 1, 2)
    with pytest.raises(trt.NetworkError, match="INT32 or INT64"):
        layer.indices_type = trt.float32


def test_topk_axes_setter_refuses_an_empty_bitmask(refnet):
    layer = refnet.network.add_topk(refnet.input("x", (3, 5)), MAX, 1, 2)
    with pytest.raises(trt.NetworkError, match="axes = 0 is refused: the axes bitmask must have a bit set"):
        layer.axes = 0


@pytest.mark.parametrize("seed", range(4))
def test_topk_takes_torch_topk_only_where_it_gives_the_documented_order(seed):
    """run() uses torch.topk where no tie or NaN can reorder the indices and a stable sort otherwise; either way
    the result is the stable sort's (equal values: lower index first), including ties at the k-th value."""
    from trtbuild.reference.ops.topk import run

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 6, (8, 12), generator=g).float()  # many ties
    x[0] = torch.randperm(12, generator=g).float()  # a row without ties
    x[1, 3] = float("nan")
    for op, descending in ((MAX, True), (MIN, False)):
        for k in (1, 3, 12):
            values, indices = run({"axes": 2, "k": k, "op": int(op), "k_tensor": None}, {}, [x], None)
            ev, ei = torch.sort(x, dim=1, descending=descending, stable=True)
            assert torch.equal(indices, ei[:, :k]) and torch.allclose(values, ev[:, :k], equal_nan=True)

"""Type rules of the reference backend found by the TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py).

Each test states one rule; the `refnet` fixture twins it on TensorRT-RTX (tests/helpers/twin.py), so every
rejection here is also TensorRT-RTX's, except the documented ones ("stricter", tests/helpers/twin.py
REFERENCE_STRICTER), whose TensorRT documentation line the test quotes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt

from helpers.refnet import TORCH_OF

E = trt.ElementWiseOperation
U = trt.UnaryOperation
R = trt.ReduceOperation


# -- BOOL and UINT8 where TensorRT-RTX takes neither ---------------------------------------------
@pytest.mark.parametrize("dtype", [trt.bool, trt.uint8])
@pytest.mark.parametrize("op", [R.SUM, R.MAX, R.AVG])
def test_reduce_rejects_bool_and_uint8(refnet, dtype, op):
    with pytest.raises(trt.NetworkError, match=rf"(?s)Reduce.*type {dtype.name}; reduce takes FLOAT, HALF"):
        refnet.network.add_reduce(refnet.input("x", (2, 3), dtype), op, 0b10, False)


def test_reduce_avg_of_int8_is_rejected_but_sum_is_exact(refnet):
    """TensorRT-RTX 1.7 builds SUM/PROD/MAX/MIN of INT8 but finds no output type for an INT8 mean."""
    x = refnet.input("x", (2, 3), trt.int8)
    with pytest.raises(trt.NetworkError, match=r"AVG reduce of INT8"):
        refnet.network.add_reduce(x, R.AVG, 0b10, False)
    layer = refnet.network.add_reduce(x, R.SUM, 0b10, False)
    y = refnet.run({"x": torch.tensor([[1, 2, 3], [-4, 5, 6]], dtype=torch.int8)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.int8 and y.tolist() == [6, 7]


@pytest.mark.parametrize("op", [E.SUM, E.PROD, E.MAX, E.SUB, E.DIV, E.POW, E.FLOOR_DIV, E.GREATER, E.LESS])
@pytest.mark.parametrize("dtype", [trt.bool, trt.uint8])
def test_elementwise_arithmetic_and_ordering_reject_bool_and_uint8(refnet, op, dtype):
    a, b = refnet.input("a", (2, 3), dtype), refnet.input("b", (2, 3), dtype)
    with pytest.raises(trt.NetworkError, match=rf"{op.name} needs FLOAT, HALF, BF16, INT8, INT32 or INT64 inputs"):
        refnet.network.add_elementwise(a, b, op)


def test_elementwise_equal_and_logical_ops_take_bool(refnet):
    a, b = refnet.input("a", (1, 4), trt.bool), refnet.input("b", (1, 4), trt.bool)
    eq = refnet.network.add_elementwise(a, b, E.EQUAL).get_output(0)
    xor = refnet.network.add_elementwise(a, b, E.XOR).get_output(0)
    va, vb = torch.tensor([[True, True, False, False]]), torch.tensor([[True, False, True, False]])
    out = refnet.run({"a": va, "b": vb}, eq=eq, xor=xor)
    assert out["eq"].tolist() == [[True, False, False, True]] and out["xor"].tolist() == [[False, True, True, False]]


def test_elementwise_pow_of_int8_is_rejected(refnet):
    a, b = refnet.input("a", (2, 3), trt.int8), refnet.input("b", (2, 3), trt.int8)
    with pytest.raises(trt.NetworkError, match=r"cannot build POW on INT8"):
        refnet.network.add_elementwise(a, b, E.POW)


@pytest.mark.parametrize("dtype", [trt.int32, trt.int64])
def test_integer_division_by_zero_gives_zero(refnet, dtype):
    """Undefined in TensorRT; the reference's engine gives 0 there instead of failing (no
    ZeroDivisionError). Elsewhere DIV truncates and FLOOR_DIV floors."""
    a, b = refnet.input("a", (1, 4), dtype), refnet.input("b", (1, 4), dtype)
    div = refnet.network.add_elementwise(a, b, E.DIV).get_output(0)
    floor = refnet.network.add_elementwise(a, b, E.FLOOR_DIV).get_output(0)
    t = TORCH_OF[dtype]
    out = refnet.run({"a": torch.tensor([[7, -7, 5, 0]], dtype=t), "b": torch.tensor([[2, 2, 0, 0]], dtype=t)},
                     div=div, floor=floor)
    assert out["div"].tolist() == [[3, -3, 0, 0]] and out["floor"].tolist() == [[3, -4, 0, 0]]


@pytest.mark.parametrize("op", [U.ABS, U.NEG, U.SIGN])
@pytest.mark.parametrize("dtype", [trt.bool, trt.uint8])
def test_unary_abs_neg_sign_reject_bool_and_uint8(refnet, op, dtype):
    with pytest.raises(trt.NetworkError, match=rf"{op.name} needs a FLOAT, HALF, BF16, INT8, INT32 or INT64 input"):
        refnet.network.add_unary(refnet.input("x", (2, 3), dtype), op)


# -- INT8: a quantized type (documented, stricter than TensorRT-RTX) -------------------------------
@pytest.mark.parametrize("make", ["activation", "unary", "pooling", "lrn"])
def test_int8_into_float_layers_is_refused(refnet, make):
    """Stricter than TensorRT-RTX 1.7, which computes some of these on INT8 directly. TensorRT's
    DataType.INT8: "Signed 8-bit integer representing a quantized floating-point value." Its scale
    comes from a Q/DQ pair, which the reference does not implement (tests/helpers/twin.py REFERENCE_STRICTER)."""
    x = refnet.input("x", (1, 2, 4, 4), trt.int8)
    n = refnet.network
    add = {"activation": lambda: n.add_activation(x, trt.ActivationType.LEAKY_RELU),
           "unary": lambda: n.add_unary(x, U.ERF),
           "pooling": lambda: n.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2)).get_output(0).shape,
           "lrn": lambda: n.add_lrn(x, 3, 1e-4, 0.75, 2.0)}[make]
    with pytest.raises(trt.NetworkError,
                       match=r"INT8, a quantized type .*Signed 8-bit integer representing a quantized"):
        add()


# -- UINT8: network inputs and outputs only ---------------------------------------------------------
@pytest.mark.parametrize("make", ["shuffle", "slice", "concatenation"])
def test_uint8_is_refused_by_data_movement_layers(refnet, make):
    x = refnet.input("x", (2, 3), trt.uint8)
    n = refnet.network
    add = {"shuffle": lambda: n.add_shuffle(x), "slice": lambda: n.add_slice(x, (0, 0), (1, 3), (1, 1)),
           "concatenation": lambda: n.add_concatenation([x, x])}[make]
    with pytest.raises(trt.NetworkError, match=r"UINT8 only as a network input or output"):
        add().get_output(0).shape  # noqa: B018


def test_uint8_input_converted_by_identity_and_cast(refnet):
    x = refnet.input("x", (1, 3), trt.uint8)
    same = refnet.network.add_identity(x).get_output(0)
    f = refnet.network.add_cast(x, trt.float32).get_output(0)
    out = refnet.run({"x": torch.tensor([[0, 7, 255]], dtype=torch.uint8)}, same=same, f=f)
    assert out["same"].dtype == torch.uint8 and out["f"].tolist() == [[0.0, 7.0, 255.0]]


@pytest.mark.parametrize("chain", ["cast_then_identity", "identity_then_cast"])
def test_uint8_between_layers_is_refused(refnet, chain):
    """TensorRT-RTX: "has datatype UInt8 but is not network-level IO" (DataType.UINT8: convert with the
    IdentityLayer "prior to use with other TensorRT layers")."""
    if chain == "cast_then_identity":
        mid = refnet.network.add_cast(refnet.input("x", (2, 3)), trt.uint8)
        last = refnet.network.add_identity(mid.get_output(0))
    else:
        mid = refnet.network.add_identity(refnet.input("x", (2, 3), trt.uint8))
        last = refnet.network.add_cast(mid.get_output(0), trt.float32)
    refnet.network.mark_output(last.get_output(0))
    assert refnet.build() is None
    assert any("UINT8 and feeds other layers" in m for m in refnet.logger.errors), refnet.logger.errors


# -- quantized types the reference cannot hold --------------------------------------------------------
@pytest.mark.parametrize("to", [trt.DataType.FP8, trt.DataType.INT4, trt.DataType.FP4])
def test_casts_to_quantized_types_are_refused(refnet, to):
    """TensorRT-RTX builds them only where a quantize layer produces the type."""
    with pytest.raises(trt.NetworkError, match=rf"a cast to {to.name}: only a quantize layer"):
        refnet.network.add_cast(refnet.input("x", (2, 3)), to)


@pytest.mark.parametrize("dtype", [trt.DataType.FP8, trt.DataType.INT4, trt.DataType.FP4])
def test_quantized_network_inputs_are_refused(dtype):
    """Stricter than TensorRT-RTX 1.7 for INT4 (which it passes through a shuffle), as TensorRT documents
    DataType.INT4: "Signed 4-bit integer representing a quantized floating-point value." (only Q/DQ
    layers interpret it; the reference has none, nor storage for 4-bit types). Not twinned: the twin
    harness cannot replay add_input refusals (tests/reference/test_rtx_sweep.py checks RTX's side)."""
    from helpers.refnet import RefNet

    with pytest.raises(trt.NetworkError, match=r"only Q/DQ layers interpret"):
        RefNet().input("x", (2, 4), dtype)


# -- constants --------------------------------------------------------------------------------------------
def test_constant_rejects_uint8_weights(refnet):
    """(INT8 weights make a quantized constant, refused at build unless it feeds dequantize layers
    only, as TensorRT-RTX does: tests/reference/test_quantize.py.)"""
    with pytest.raises(trt.NetworkError, match="UINT8 weights"):
        refnet.network.add_constant((4,), np.arange(4, dtype=np.uint8))


def test_constant_rejects_bool_weights(refnet):
    """Stricter than TensorRT-RTX 1.7 (which builds BOOL constants), as TensorRT documents:
    IConstantLayer "Note: This layer does not support boolean and uint8 types." (tests/helpers/twin.py
    REFERENCE_STRICTER)."""
    with pytest.raises(trt.NetworkError, match=r"does not support boolean and uint8 types"):
        refnet.network.add_constant((2,), np.array([True, False]))


def test_an_empty_constant_keeps_its_type_through_the_plan(rtxnet):
    """trt.Weights(DataType.INT32) is an empty INT32 constant (TensorRT-RTX builds it, here into a squeeze with
    no axes); the plan stores no array for it and must still give it its type when the engine is loaded and run."""
    from helpers.refnet import RefNet

    rtx = rtxnet.trt
    for net, mod in ((RefNet(), trt), (rtxnet, rtx)):
        empty = net.network.add_constant((0,), mod.Weights(mod.DataType.INT32)).get_output(0)
        y = net.network.add_squeeze(net.network.add_input("x", mod.float32, (2, 1)), empty).get_output(0)
        assert (empty.dtype.name, tuple(empty.shape), tuple(y.shape)) == ("INT32", (0,), (2, 1)), mod.__name__
    ref = RefNet()
    empty = ref.network.add_constant((0,), trt.Weights(trt.DataType.INT32)).get_output(0)
    y = ref.network.add_squeeze(ref.input("x", (2, 1)), empty).get_output(0)
    result = ref.run({"x": torch.ones(2, 1)}, y=y, e=empty)
    assert result["e"].dtype == torch.int32 and result["e"].shape == (0,)
    assert result["y"].shape == (2, 1)


def test_an_empty_numpy_array_is_refused_as_constant_weights(refnet):
    """TensorRT requires count > 0 exactly when the values pointer is non-null, and an empty numpy array has a
    pointer: TensorRT-RTX's add_constant refuses it (and returns None); the reference says why in one sentence."""
    with pytest.raises(trt.NetworkError, match="hold no values but point at memory"):
        refnet.network.add_constant((0,), np.zeros(0, np.int32))

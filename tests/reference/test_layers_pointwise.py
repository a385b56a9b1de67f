"""trtbuild.reference: Scale, Reduce, ElementWise, Unary and Activation layers, against numpy /
torch and the formulas in TensorRT's documentation, plus the constructions TensorRT rejects."""

from __future__ import annotations

import functools

import math

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close as shared_close

rng = np.random.default_rng(0)


def rand(*shape, low=-2.0, high=2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(np.float32)


close = functools.partial(shared_close, equal_nan=True)


# -- Scale -------------------------------------------------------------------------------------
def test_scale_uniform_with_power(refnet):
    x = rand(1, 3, 4, 4, low=0.1, high=2.0)
    t = refnet.input("x", x.shape)
    layer = refnet.network.add_scale(t, trt.ScaleMode.UNIFORM, shift=np.array([1.0], np.float32),
                                  scale=np.array([2.0], np.float32), power=np.array([2.0], np.float32))
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, (2 * x.astype(np.float64) + 1) ** 2)


def test_scale_channel_default_axis_and_missing_weights(refnet):
    """Per-channel scale on NCHW (axis 1); absent shift/power default to 0 and 1."""
    x = rand(2, 3, 2, 5)
    scale = np.array([1.0, -2.0, 0.5], np.float32)
    t = refnet.input("x", x.shape)
    layer = refnet.network.add_scale(t, trt.ScaleMode.CHANNEL, scale=scale)
    assert layer.channel_axis == 1
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, x * scale.reshape(1, 3, 1, 1))


def test_scale_elementwise(refnet):
    x = rand(1, 2, 3, 4)
    shift = rand(2 * 3 * 4)
    scale = rand(2 * 3 * 4)
    t = refnet.input("x", x.shape)
    layer = refnet.network.add_scale(t, trt.ScaleMode.ELEMENTWISE, shift=shift, scale=scale)
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, x * scale.reshape(1, 2, 3, 4) + shift.reshape(1, 2, 3, 4))


def test_scale_nd_channel_axis_last(refnet):
    x = rand(1, 4, 3, 5)
    shift = np.arange(5, dtype=np.float32)
    t = refnet.input("x", x.shape)
    layer = refnet.network.add_scale_nd(t, trt.ScaleMode.CHANNEL, shift, None, None, 3)
    assert layer.channel_axis == 3
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, x + shift.reshape(1, 1, 1, 5))


def test_add_scale_channel_axis_is_c_of_nchw(refnet):
    """add_scale on an explicit-batch NCHW tensor scales per C (axis 1 = the third from last)."""
    x = rand(2, 3, 4, 5)
    scale = rand(3)
    layer = refnet.network.add_scale(refnet.input("x", x.shape), trt.ScaleMode.CHANNEL, scale=scale)
    assert layer.channel_axis == 1
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, x * scale.reshape(1, 3, 1, 1))


def test_scale_rejects_rank_below_three(refnet):
    """Stricter than TensorRT-RTX 1.7 (which accepts ranks 1 and 2), as TensorRT documents: IScaleLayer
    "The input tensor for this layer is required to have a minimum of 3 dimensions." (tests/helpers/twin.py
    REFERENCE_STRICTER lets the twin accept this one rejection)."""
    t = refnet.input("flat_input", (4, 5))
    with pytest.raises(trt.NetworkError, match=r"(?s)Scale.*rank.*flat_input"):
        refnet.network.add_scale(t, trt.ScaleMode.UNIFORM, scale=np.ones(1, np.float32))


@pytest.mark.parametrize("mode,count", [(trt.ScaleMode.UNIFORM, 2), (trt.ScaleMode.CHANNEL, 2),
                                        (trt.ScaleMode.ELEMENTWISE, 3)])
def test_scale_rejects_wrong_weight_counts(refnet, mode, count):
    t = refnet.input("x", (1, 3, 2, 2))
    with pytest.raises(trt.NetworkError, match=r"(?s)Scale.*weights.*'x'"):
        refnet.network.add_scale(t, mode, scale=np.ones(count, np.float32))


def test_scale_rejects_weights_of_another_type(refnet):
    t = refnet.input("x", (1, 3, 2, 2), trt.float16)
    with pytest.raises(trt.NetworkError, match="FLOAT.*HALF|HALF.*FLOAT"):
        refnet.network.add_scale(t, trt.ScaleMode.CHANNEL, scale=np.ones(3, np.float32))


# -- Reduce ------------------------------------------------------------------------------------
REDUCE_TORCH = {
    trt.ReduceOperation.SUM: lambda x, d, k: x.sum(dim=d, keepdim=k),
    trt.ReduceOperation.PROD: lambda x, d, k: x.prod(dim=d[0], keepdim=k) if len(d) == 1 else
    x.prod(dim=d[1], keepdim=True).prod(dim=d[0], keepdim=True).reshape(_kept(x.shape, d, k)),
    trt.ReduceOperation.MAX: lambda x, d, k: x.amax(dim=d, keepdim=k),
    trt.ReduceOperation.MIN: lambda x, d, k: x.amin(dim=d, keepdim=k),
    trt.ReduceOperation.AVG: lambda x, d, k: x.mean(dim=d, keepdim=k),
}


def _kept(shape, dims, keep):
    if keep:
        return [1 if i in dims else s for i, s in enumerate(shape)]
    return [s for i, s in enumerate(shape) if i not in dims]


@pytest.mark.parametrize("op", list(REDUCE_TORCH))
@pytest.mark.parametrize("keep_dims", [True, False])
def test_reduce_ops(refnet, op, keep_dims):
    x = rand(2, 3, 4, 5, low=0.5, high=1.5)
    t = refnet.input("x", x.shape)
    layer = refnet.network.add_reduce(t, op, (1 << 2) | (1 << 3), keep_dims)
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    expected = REDUCE_TORCH[op](torch.from_numpy(x).double(), [2, 3], keep_dims)
    assert list(y.shape) == _kept(x.shape, [2, 3], keep_dims)
    close(y, expected.numpy(), rtol=1e-5)


def test_reduce_bit_zero_is_the_batch_dimension(refnet):
    x = rand(2, 3, 4)
    t = refnet.input("x", x.shape)
    layer = refnet.network.add_reduce(t, trt.ReduceOperation.SUM, 1, False)
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, x.sum(axis=0))


@pytest.mark.parametrize("mask", [1 << 3, 0b1001])
def test_reduce_rejects_masks_beyond_the_rank(refnet, mask):
    t = refnet.input("x", (2, 3, 4))
    with pytest.raises(trt.NetworkError, match=r"(?s)Reduce.*bitmask.*'x'"):
        refnet.network.add_reduce(t, trt.ReduceOperation.SUM, mask, True)


# -- ElementWise -------------------------------------------------------------------------------
EW = trt.ElementWiseOperation
EW_NUMPY = {
    EW.SUM: np.add, EW.PROD: np.multiply, EW.MAX: np.maximum, EW.MIN: np.minimum, EW.SUB: np.subtract,
    EW.DIV: np.divide, EW.POW: np.power, EW.FLOOR_DIV: lambda a, b: np.floor(a / b),
}


@pytest.mark.parametrize("op", list(EW_NUMPY))
def test_elementwise_arithmetic_with_broadcasting(refnet, op):
    a = rand(1, 3, 1, 5, low=0.5, high=3.0)
    b = rand(2, 1, 4, 5, low=0.5, high=3.0) * np.where(rng.random((2, 1, 4, 5)) < 0.5, -1, 1).astype(np.float32)
    if op == EW.POW:
        b = np.round(b)  # integer exponents keep negative bases real
    ta, tb = refnet.input("a", a.shape), refnet.input("b", b.shape)
    layer = refnet.network.add_elementwise(ta, tb, op)
    assert tuple(layer.get_output(0).shape) == (2, 3, 4, 5)
    y = refnet.run({"a": torch.from_numpy(a), "b": torch.from_numpy(b)}, y=layer.get_output(0))["y"]
    close(y, EW_NUMPY[op](a.astype(np.float64), b.astype(np.float64)), rtol=1e-5)


def test_elementwise_floor_div_rounds_toward_minus_infinity(refnet):
    a = np.array([[[7.0, -7.0, 7.0, -7.0, 6.0]]], np.float32)
    b = np.array([[[2.0, 2.0, -2.0, -2.0, 3.0]]], np.float32)
    ta, tb = refnet.input("a", a.shape), refnet.input("b", b.shape)
    layer = refnet.network.add_elementwise(ta, tb, EW.FLOOR_DIV)
    y = refnet.run({"a": torch.from_numpy(a), "b": torch.from_numpy(b)}, y=layer.get_output(0))["y"]
    close(y, [[[3.0, -4.0, -4.0, 3.0, 2.0]]])


@pytest.mark.parametrize("op,expected", [(EW.EQUAL, [False, True, False]), (EW.GREATER, [True, False, False]),
                                         (EW.LESS, [False, False, True])])
def test_elementwise_comparisons_give_bool(refnet, op, expected):
    a = torch.tensor([[3.0, 2.0, 1.0]])
    b = torch.tensor([[2.0, 2.0, 2.0]])
    layer = refnet.network.add_elementwise(refnet.input("a", (1, 3)), refnet.input("b", (1, 3)), op)
    assert layer.get_output(0).dtype == trt.bool
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.bool and y.tolist() == [expected]


@pytest.mark.parametrize("op,expected", [(EW.AND, [True, False, False, False]), (EW.OR, [True, True, True, False]),
                                         (EW.XOR, [False, True, True, False])])
def test_elementwise_logical_ops(refnet, op, expected):
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    layer = refnet.network.add_elementwise(refnet.input("a", (4,), trt.bool), refnet.input("b", (4,), trt.bool), op)
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    assert y.tolist() == expected


def test_elementwise_rejects_unequal_ranks(refnet):
    ta, tb = refnet.input("a", (2, 3, 4)), refnet.input("b", (3, 4))
    with pytest.raises(trt.NetworkError, match=r"(?s)ElementWise.*ranks.*'a'.*'b'"):
        refnet.network.add_elementwise(ta, tb, EW.SUM)


def test_elementwise_rejects_non_broadcastable_dims(refnet):
    ta, tb = refnet.input("a", (2, 3)), refnet.input("b", (2, 4))
    with pytest.raises(trt.NetworkError, match=r"(?s)dimension 1.*'a'"):
        refnet.network.add_elementwise(ta, tb, EW.SUM)


def test_elementwise_rejects_mixed_types_in_strongly_typed_network(refnet):
    ta, tb = refnet.input("a", (2, 3)), refnet.input("b", (2, 3), trt.float16)
    with pytest.raises(trt.NetworkError, match=r"(?s)different types.*add_cast"):
        refnet.network.add_elementwise(ta, tb, EW.SUM)


# -- Unary -------------------------------------------------------------------------------------
U = trt.UnaryOperation
UNARY_NUMPY = {  # op: (numpy function, input range)
    U.EXP: (np.exp, (-3, 3)), U.LOG: (np.log, (0.1, 5)), U.SQRT: (np.sqrt, (0, 5)), U.RECIP: (np.reciprocal, (0.5, 3)),
    U.ABS: (np.abs, (-3, 3)), U.NEG: (np.negative, (-3, 3)), U.SIN: (np.sin, (-3, 3)), U.COS: (np.cos, (-3, 3)),
    U.TAN: (np.tan, (-1.2, 1.2)), U.SINH: (np.sinh, (-3, 3)), U.COSH: (np.cosh, (-3, 3)),
    U.ASIN: (np.arcsin, (-0.99, 0.99)), U.ACOS: (np.arccos, (-0.99, 0.99)), U.ATAN: (np.arctan, (-3, 3)),
    U.ASINH: (np.arcsinh, (-3, 3)), U.ACOSH: (np.arccosh, (1.01, 4)), U.ATANH: (np.arctanh, (-0.95, 0.95)),
    U.CEIL: (np.ceil, (-3, 3)), U.FLOOR: (np.floor, (-3, 3)), U.SIGN: (np.sign, (-3, 3)),
    U.ERF: (np.vectorize(math.erf), (-3, 3)),
}


@pytest.mark.parametrize("op", list(UNARY_NUMPY))
def test_unary_float_ops(refnet, op):
    fn, (lo, hi) = UNARY_NUMPY[op]
    x = rand(2, 3, 7, low=lo, high=hi)
    layer = refnet.network.add_unary(refnet.input("x", x.shape), op)
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, fn(x.astype(np.float64)), atol=1e-5, rtol=1e-5)


def test_unary_round_is_half_to_even(refnet):
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6])
    layer = refnet.network.add_unary(refnet.input("x", (7,)), U.ROUND)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert y.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0]


def test_unary_isinf_isnan_not(refnet):
    x = torch.tensor([1.0, math.inf, -math.inf, math.nan])
    t = refnet.input("x", (4,))
    isinf, isnan = refnet.network.add_unary(t, U.ISINF), refnet.network.add_unary(t, U.ISNAN)
    negated = refnet.network.add_unary(isinf.get_output(0), U.NOT)
    out = refnet.run({"x": x}, isinf=isinf.get_output(0), isnan=isnan.get_output(0), notinf=negated.get_output(0))
    assert out["isinf"].tolist() == [False, True, True, False]
    assert out["isnan"].tolist() == [False, False, False, True]
    assert out["notinf"].tolist() == [True, False, False, True]


@pytest.mark.parametrize("op,expected", [(U.ABS, [3, 0, 5]), (U.NEG, [3, 0, -5]), (U.SIGN, [-1, 0, 1])])
def test_unary_integer_ops(refnet, op, expected):
    layer = refnet.network.add_unary(refnet.input("x", (3,), trt.int32), op)
    y = refnet.run({"x": torch.tensor([-3, 0, 5], dtype=torch.int32)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.int32 and y.tolist() == expected


def test_unary_rejects_float_op_on_int_and_not_on_float(refnet):
    with pytest.raises(trt.NetworkError, match="EXP|FLOAT"):
        refnet.network.add_unary(refnet.input("i", (3,), trt.int32), U.EXP)
    with pytest.raises(trt.NetworkError, match="NOT.*BOOL"):
        refnet.network.add_unary(refnet.input("f", (3,)), U.NOT)


# -- Activation (formulas quoted from TensorRT's ActivationType docs) ---------------------------
A = trt.ActivationType


def _np_erf(x):
    return np.vectorize(math.erf)(x)


ACTIVATIONS = {  # type: (alpha, beta, formula(x, alpha, beta))
    A.RELU: (0.0, 0.0, lambda x, a, b: np.maximum(x, 0)),
    A.SIGMOID: (0.0, 0.0, lambda x, a, b: 1 / (1 + np.exp(-x))),
    A.TANH: (0.0, 0.0, lambda x, a, b: np.tanh(x)),
    A.LEAKY_RELU: (0.1, 0.0, lambda x, a, b: np.where(x >= 0, x, a * x)),  # x if x >= 0, alpha * x if x < 0
    A.ELU: (0.7, 0.0, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1))),
    A.SELU: (1.6732632, 1.0507010, lambda x, a, b: np.where(x > 0, b * x, b * (a * np.exp(x) - a))),
    A.SOFTSIGN: (0.0, 0.0, lambda x, a, b: x / (1 + np.abs(x))),
    A.SOFTPLUS: (1.5, 0.8, lambda x, a, b: a * np.log(np.exp(b * x) + 1)),
    A.CLIP: (-0.5, 1.2, lambda x, a, b: np.maximum(a, np.minimum(b, x))),
    A.HARD_SIGMOID: (0.2, 0.5, lambda x, a, b: np.maximum(0, np.minimum(1, a * x + b))),
    A.SCALED_TANH: (1.7, 0.6, lambda x, a, b: a * np.tanh(b * x)),
    A.THRESHOLDED_RELU: (0.3, 0.0, lambda x, a, b: np.where(x > a, x, 0)),
    A.GELU_ERF: (0.0, 0.0, lambda x, a, b: 0.5 * x * (1 + _np_erf(np.sqrt(0.5) * x))),
    A.GELU_TANH: (0.0, 0.0, lambda x, a, b: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (0.044715 * x ** 3 + x)))),
}


@pytest.mark.parametrize("kind", list(ACTIVATIONS))
def test_activation_formulas(refnet, kind):
    alpha, beta, formula = ACTIVATIONS[kind]
    x = np.concatenate([rand(40, low=-3, high=3), np.array([0.0, alpha, -alpha], np.float32)]).reshape(1, 1, 43)
    layer = refnet.network.add_activation(refnet.input("x", x.shape), kind)
    layer.alpha, layer.beta = alpha, beta
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    a32, b32 = float(np.float32(alpha)), float(np.float32(beta))  # TensorRT keeps alpha/beta as float32
    close(y, formula(x.astype(np.float64), a32, b32), atol=1e-5, rtol=1e-5)


#: alpha, beta that add_activation gives each type, as TensorRT-RTX 1.7 does (float32 values; the
#: twin harness compares each read with RTX's). It was (0, 0) for every type before the RTX twin.
ACTIVATION_DEFAULTS = {A.LEAKY_RELU: (0.01, 0.0), A.ELU: (1.0, 0.0), A.SELU: (1.6732632, 1.050701),
                       A.SOFTPLUS: (1.0, 1.0), A.CLIP: (-3.4028235e38, 3.4028235e38), A.HARD_SIGMOID: (0.2, 0.5),
                       A.SCALED_TANH: (1.0, 1.0), A.THRESHOLDED_RELU: (1.0, 0.0)}


@pytest.mark.parametrize("kind", list(A))
def test_activation_alpha_beta_defaults(refnet, kind):
    layer = refnet.network.add_activation(refnet.input("x", (1, 4)), kind)
    expected = ACTIVATION_DEFAULTS.get(kind, (0.0, 0.0))
    assert (layer.alpha, layer.beta) == pytest.approx(expected, rel=1e-6)


def test_activation_default_alpha_of_leaky_relu_is_one_hundredth(refnet):
    x = np.array([[-2.0, -0.5, 0.0, 1.5]], np.float32)
    layer = refnet.network.add_activation(refnet.input("x", x.shape), A.LEAKY_RELU)
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, [[-0.02, -0.005, 0.0, 1.5]])


def test_activation_type_change_keeps_alpha_beta(refnet):
    """As on TensorRT-RTX: the defaults are set by add_activation, not by assigning `type`."""
    layer = refnet.network.add_activation(refnet.input("x", (1, 4)), A.RELU)
    layer.type = A.LEAKY_RELU
    assert (layer.alpha, layer.beta) == (0.0, 0.0)


def test_activation_clip_with_alpha_above_beta_follows_the_formula(refnet):
    x = np.array([[-5.0, 0.0, 5.0]], np.float32)
    layer = refnet.network.add_activation(refnet.input("x", x.shape), A.CLIP)
    layer.alpha, layer.beta = 1.0, -1.0
    y = refnet.run({"x": torch.from_numpy(x)}, y=layer.get_output(0))["y"]
    close(y, [[1.0, 1.0, 1.0]])


@pytest.mark.parametrize("kind", [A.SIGMOID, A.LEAKY_RELU, A.CLIP])
def test_activation_rejects_integer_input(refnet, kind):
    with pytest.raises(trt.NetworkError, match=r"(?s)Activation.*INT32.*'i'"):
        refnet.network.add_activation(refnet.input("i", (3,), trt.int32), kind)


@pytest.mark.parametrize("dtype", [trt.int32, trt.int64])
def test_activation_relu_takes_int32_and_int64(refnet, dtype):
    """TensorRT's Activation operator: "int32 and int64 are also supported only for RELU"."""
    torch_dtype = torch.int32 if dtype == trt.int32 else torch.int64
    layer = refnet.network.add_activation(refnet.input("i", (4,), dtype), A.RELU)
    assert layer.get_output(0).dtype == dtype
    y = refnet.run({"i": torch.tensor([-5, 0, 7, 2 ** 30 + 1], dtype=torch_dtype)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dtype and y.tolist() == [0, 0, 7, 2 ** 30 + 1]


def test_add_scale_channel_is_the_third_to_last_dimension(refnet):
    """ScaleMode.CHANNEL (TensorRT's docstring): the channel is the third-to-last dimension, so a
    rank-5 (N, C, D, H, W) input is scaled along D by add_scale; add_scale_nd picks the axis."""
    x = torch.arange(2 * 2 * 3 * 1 * 1, dtype=torch.float32).reshape(2, 2, 3, 1, 1)
    scale = np.array([1.0, 10.0, 100.0], np.float32)
    layer = refnet.network.add_scale(refnet.input("x", x.shape), trt.ScaleMode.CHANNEL, scale=scale)
    assert layer.channel_axis == 2
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    torch.testing.assert_close(y, x * torch.tensor([1.0, 10.0, 100.0]).reshape(1, 1, 3, 1, 1))

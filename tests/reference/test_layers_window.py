"""Convolution, deconvolution, pooling, padding and LRN rules found by the TensorRT-RTX sweep
(tests/reference/test_rtx_sweep.py): output sizes at the edges, leading batch dims, what TensorRT-RTX's builder
cannot build. The `refnet` fixture twins every test on TensorRT-RTX (tests/helpers/twin.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt

from helpers.refnet import close

P = trt.PoolingType
PM = trt.PaddingMode
gen = torch.Generator().manual_seed(3)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def np32(t: torch.Tensor) -> np.ndarray:
    return t.numpy().astype(np.float32).reshape(-1)


# -- leading batch dims ------------------------------------------------------------------------------
@pytest.mark.parametrize("deconv", [False, True])
def test_dims_before_the_channel_are_batch_dims(refnet, deconv):
    """As on TensorRT-RTX: a 2-D kernel on a rank-5 input (B1, B2, C, H, W) convolves each (B1, B2)."""
    x = randn(2, 3, 4, 6, 5)
    w, b = (randn(4, 5, 3, 2) if deconv else randn(5, 4, 3, 2)), randn(5)
    add = refnet.network.add_deconvolution_nd if deconv else refnet.network.add_convolution_nd
    layer = add(refnet.input("x", tuple(x.shape)), 5, (3, 2), np32(w), np32(b))
    layer.stride_nd, layer.padding_nd = (2, 1), (1, 0)
    fn = F.conv_transpose2d if deconv else F.conv2d
    expected = fn(x.reshape(6, 4, 6, 5), w, b, stride=(2, 1), padding=(1, 0))
    assert tuple(layer.get_output(0).shape) == (2, 3) + tuple(expected.shape[1:])
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, expected.reshape(2, 3, *expected.shape[1:]), atol=1e-4, rtol=1e-4)


# -- output sizes -------------------------------------------------------------------------------------
def test_convolution_round_up_keeps_a_window_reaching_past_the_padding(refnet):
    """H=2, kernel 3, stride 2: ROUND_DOWN has no window (rejected, "image size is smaller than filter
    size"), ROUND_UP ceil((2 - 3) / 2) + 1 = 1 window, reading one zero past the input."""
    x, w = randn(1, 1, 2, 4), randn(1, 1, 3, 1)
    layer = refnet.network.add_convolution_nd(refnet.input("x", (1, 1, 2, 4)), 1, (3, 1), np32(w))
    layer.stride_nd, layer.padding_mode = (2, 1), PM.EXPLICIT_ROUND_UP
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.conv2d(F.pad(x, (0, 0, 0, 1)), w, stride=(2, 1)), atol=1e-5, rtol=1e-5)


def test_convolution_smaller_than_its_kernel_is_rejected(refnet):
    layer = refnet.network.add_convolution_nd(refnet.input("x", (1, 1, 2, 4)), 1, (3, 1), np.ones(3, np.float32))
    layer.stride_nd = (2, 1)
    with pytest.raises(trt.NetworkError, match=r"smaller than the dilated kernel 3"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("attr", ["pre_padding", "post_padding", "padding_nd"])
@pytest.mark.parametrize("what", ["conv", "deconv", "pool"])
def test_negative_padding_is_refused_by_the_setter(refnet, what, attr):
    """As TensorRT-RTX's setters ("allDimsGtEq(prePadding, 0)"): the value is refused, the layer keeps
    its padding."""
    x = refnet.input("x", (1, 2, 6, 6))
    if what == "pool":
        layer = refnet.network.add_pooling_nd(x, P.MAX, (2, 2))
    else:
        add = refnet.network.add_convolution_nd if what == "conv" else refnet.network.add_deconvolution_nd
        layer = add(x, 2, (2, 2), np.ones(16, np.float32))
    with pytest.raises(trt.NetworkError, match=rf"{attr} = \(-1, 0\) is refused: padding must be >= 0"):
        setattr(layer, attr, (-1, 0))
    assert tuple(layer.pre_padding) == tuple(layer.post_padding) == (0, 0)


def test_pooling_window_larger_than_the_input_gives_an_empty_dim(refnet):
    """floor((2 - 3) / 1) + 1 = 0 windows: an empty output, not an error (TensorRT-RTX)."""
    empty = refnet.network.add_pooling_nd(refnet.input("x", (1, 1, 2, 4)), P.MAX, (3, 1))
    assert tuple(empty.get_output(0).shape) == (1, 1, 0, 4)
    y = refnet.run({"x": torch.zeros(1, 1, 2, 4)}, y=empty.get_output(0))["y"]
    assert tuple(y.shape) == (1, 1, 0, 4)


def test_pooling_with_a_negative_output_size_is_rejected(refnet):
    """floor((2 - 5) / 2) + 1 = -1 ("inherently negative length" on TensorRT-RTX)."""
    negative = refnet.network.add_pooling_nd(refnet.input("x", (1, 1, 2, 4)), P.MAX, (5, 1))
    negative.stride_nd = (2, 1)
    with pytest.raises(trt.NetworkError, match=r"window 5 is larger than the padded input.*output size -1"):
        negative.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("pre,expected", [(1, 0), (2, -1)])
def test_deconvolution_padding_may_empty_but_not_overdraw(refnet, pre, expected):
    """Output (H - 1) * S + K - pre - post with H 1, K 2, post 1: pre 1 gives an empty dim, pre 2 -1."""
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", (1, 1, 1, 4)), 1, (2, 1), np.ones(2, np.float32))
    layer.pre_padding, layer.post_padding = (pre, 0), (1, 0)
    if expected < 0:
        with pytest.raises(trt.NetworkError, match=r"output size -1 is negative"):
            layer.get_output(0).shape  # noqa: B018
        return
    assert tuple(layer.get_output(0).shape) == (1, 1, 0, 4)
    y = refnet.run({"x": torch.ones(1, 1, 1, 4)}, y=layer.get_output(0))["y"]
    assert tuple(y.shape) == (1, 1, 0, 4)


# -- what TensorRT-RTX 1.7's builder cannot build -------------------------------------------------------
def test_bf16_deconvolution_is_rejected(refnet):
    """TensorRT-RTX 1.7 (sm86): "Could not infer output types for operation: deconv" in BF16."""
    bits = np.zeros(16, np.uint16)  # BF16 zeros
    w = trt.Weights(trt.bfloat16, bits.ctypes.data, bits.size)
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", (1, 2, 3, 3), trt.bfloat16), 2, (2, 2), w)
    with pytest.raises(trt.NetworkError, match=r"cannot build a BF16 deconvolution"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("empty", [False, True])
def test_strided_and_dilated_deconvolution_is_rejected_unless_empty(refnet, empty):
    """TensorRT-RTX 1.7: "Strided & Dilated Deconv are currently not supported" (any dim strided, any
    dim dilated); an empty output needs no kernel and builds."""
    x = refnet.input("x", (1, 1, 1 if empty else 3, 4))
    layer = refnet.network.add_deconvolution_nd(x, 2, (2, 2), np.ones(8, np.float32))
    layer.stride_nd, layer.dilation_nd = (2, 1), (2, 1)
    if empty:
        layer.pre_padding, layer.post_padding = (2, 0), (1, 0)
        assert tuple(layer.get_output(0).shape) == (1, 2, 0, 5)
        return
    with pytest.raises(trt.NetworkError, match=r"both strided and dilated"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("blend", [-0.5, 1.5])
def test_pooling_blend_factor_outside_zero_one_is_refused(refnet, blend):
    layer = refnet.network.add_pooling_nd(refnet.input("x", (1, 1, 4, 4)), P.MAX_AVERAGE_BLEND, (2, 2))
    with pytest.raises(trt.NetworkError, match=rf"blend_factor = {blend} is refused: blend_factor must be in"):
        layer.blend_factor = blend
    assert layer.blend_factor == 0.0


# -- padding -----------------------------------------------------------------------------------------
def test_padding_trims_and_pads_in_one_dim(refnet):
    """pre -2 with post +1 on a width of 3: output width 2 reads input columns 2..3 (the second is past
    the input: zero). Output index i reads input i - pre."""
    x = torch.arange(1.0, 7.0).reshape(1, 1, 2, 3)
    layer = refnet.network.add_padding_nd(refnet.input("x", (1, 1, 2, 3)), (0, -2), (1, 1))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, [[[[3.0, 0.0], [6.0, 0.0], [0.0, 0.0]]]])


@pytest.mark.parametrize("post,expected", [(-1, 0), (-2, -1)])
def test_padding_may_empty_a_dim_but_not_overdraw(refnet, post, expected):
    x = refnet.input("x", (1, 1, 3, 4))
    if expected < 0:
        with pytest.raises(trt.NetworkError, match=r"dim 2: size 3 padded -2/-2 would be -1"):
            refnet.network.add_padding_nd(x, (-2, 0), (post, 0))
        return
    layer = refnet.network.add_padding_nd(x, (-2, 0), (post, 0))
    y = refnet.run({"x": torch.ones(1, 1, 3, 4)}, y=layer.get_output(0))["y"]
    assert tuple(y.shape) == (1, 1, 0, 4)


def test_padding_needs_rank_four(refnet):
    with pytest.raises(trt.NetworkError, match=r"padding layer needs rank >= 4"):
        refnet.network.add_padding_nd(refnet.input("x", (2, 3, 4)), (1, 1), (1, 1))


@pytest.mark.parametrize("dtype", [trt.int32, trt.int64, trt.bool, trt.uint8])
def test_padding_rejects_non_float_types_except_int8(refnet, dtype):
    with pytest.raises(trt.NetworkError, match=r"padding layer takes FLOAT, HALF, BF16 or INT8 only"):
        refnet.network.add_padding_nd(refnet.input("x", (1, 1, 2, 2), dtype), (1, 1), (1, 1))


def test_padding_of_int8_moves_the_values(refnet):
    layer = refnet.network.add_padding_nd(refnet.input("x", (1, 1, 1, 2), trt.int8), (0, 1), (0, 0))
    y = refnet.run({"x": torch.tensor([[[[5, -3]]]], dtype=torch.int8)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.int8 and y.tolist() == [[[[0, 5, -3]]]]


# -- LRN -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [trt.float16, trt.bfloat16])
def test_lrn_takes_half_and_bf16(refnet, dtype):
    """TensorRT-RTX builds LRN in HALF and BF16 (not FLOAT only): computed in FLOAT and
    rounded, y = x / (k + alpha / n * sum of x^2 over the n channels around) ^ beta."""
    torch_type = torch.float16 if dtype == trt.float16 else torch.bfloat16
    x = randn(1, 5, 2, 3).to(torch_type)
    layer = refnet.network.add_lrn(refnet.input("x", (1, 5, 2, 3), dtype), 3, 0.5, 0.75, 2.0)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_type
    xf = x.double()
    sq = F.pad(xf * xf, (0, 0, 0, 0, 1, 1))
    window = sq[:, 0:5] + sq[:, 1:6] + sq[:, 2:7]
    close(y.double(), xf / (2.0 + 0.5 / 3 * window) ** 0.75, atol=1e-2, rtol=1e-2)


def test_lrn_needs_rank_four(refnet):
    with pytest.raises(trt.NetworkError, match=r"LRN needs rank >= 4"):
        refnet.network.add_lrn(refnet.input("x", (4, 5, 6)), 3, 1e-4, 0.75, 2.0)


def test_max_pooling_of_a_window_wholly_in_padding_is_minus_infinity(refnet):
    """(Documenting the reference's choice: TensorRT documents no value for such windows.)"""
    layer = refnet.network.add_pooling_nd(refnet.input("x", (1, 1, 1, 1)), P.MAX, (1, 1))
    layer.pre_padding = (1, 0)
    y = refnet.run({"x": torch.ones(1, 1, 1, 1)}, y=layer.get_output(0))["y"]
    assert y.flatten().tolist() == [-math.inf, 1.0]

"""trtbuild.reference: Convolution / Deconvolution (nd), Pooling (nd) and LRN against torch,
with output sizes from the PaddingMode formulas of TensorRT's NvInfer.h:

    conv  EXPLICIT_ROUND_DOWN  O = floor((M - DK) / S) + 1,  M = I + B + A, DK = 1 + D * (F - 1)
          EXPLICIT_ROUND_UP    O = ceil((M - DK) / S) + 1
          SAME_UPPER / LOWER   O = ceil(I / S), P = floor((I - 1) / S) * S + DK - I,
                               UPPER: B = floor(P / 2), A = P - B;  LOWER: A = floor(P / 2), B = P - A
    deconv EXPLICIT_*          O = (I - 1) * S + DK - (B + A)
          SAME_UPPER / LOWER   O = min(I * S, (I - 1) * S + DK), P = max(DK - S, 0), B/A split as above
"""

from __future__ import annotations

import re
import functools

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import close as shared_close

PM = trt.PaddingMode
gen = torch.Generator().manual_seed(0)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


close = functools.partial(shared_close, atol=1e-4, rtol=1e-4)


def np32(t: torch.Tensor) -> np.ndarray:
    return t.numpy().astype(np.float32)


def pad_spatial(x: torch.Tensor, pads, value=0.0) -> torch.Tensor:
    """pads: [(before, after)] per spatial dim, first spatial dim first."""
    flat = [v for pair in reversed(pads) for v in pair]
    return F.pad(x, flat, value=value)


def same_pads(size, k, s, d, mode):
    dk = 1 + d * (k - 1)
    p = max(((size - 1) // s) * s + dk - size, 0)
    small, big = p // 2, p - p // 2
    return (small, big) if mode == PM.SAME_UPPER else (big, small)


# -- Convolution -------------------------------------------------------------------------------
@pytest.mark.parametrize("nsp", [2, 3])
def test_convolution_nd_matches_torch(refnet, nsp):
    conv_fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
    x = randn(2, 4, *([7] * nsp))
    w = randn(6, 2, *([3] * nsp))  # groups=2: 4 input channels -> 2 per group
    b = randn(6)
    stride, dilation, padding = (2, 1, 1)[:nsp], (1, 2, 1)[:nsp], (1, 2, 0)[:nsp]
    layer = refnet.network.add_convolution_nd(refnet.input("x", tuple(x.shape)), 6, (3,) * nsp, np32(w), np32(b))
    layer.stride_nd, layer.dilation_nd, layer.padding_nd, layer.num_groups = stride, dilation, padding, 2
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, conv_fn(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=2))


def test_convolution_pre_and_post_padding(refnet):
    x, w, b = randn(1, 2, 6, 5), randn(3, 2, 3, 3), randn(3)
    layer = refnet.network.add_convolution_nd(refnet.input("x", (1, 2, 6, 5)), 3, (3, 3), np32(w), np32(b))
    layer.pre_padding, layer.post_padding = (2, 0), (0, 1)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.conv2d(pad_spatial(x, [(2, 0), (0, 1)]), w, b))


@pytest.mark.parametrize("mode", [PM.SAME_UPPER, PM.SAME_LOWER])
@pytest.mark.parametrize("size,k,s,d", [(8, 3, 2, 1), (7, 4, 2, 1), (6, 3, 1, 2), (9, 2, 3, 1)])
def test_convolution_same_padding(refnet, mode, size, k, s, d):
    x, w, b = randn(1, 1, size, size), randn(1, 1, k, k), randn(1)
    layer = refnet.network.add_convolution_nd(refnet.input("x", tuple(x.shape)), 1, (k, k), np32(w), np32(b))
    layer.stride_nd, layer.dilation_nd, layer.padding_mode = (s, s), (d, d), mode
    layer.pre_padding = (5, 5)  # padding_mode takes precedence over explicit padding
    assert tuple(layer.get_output(0).shape)[2:] == (math.ceil(size / s),) * 2
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    p = same_pads(size, k, s, d, mode)
    close(y, F.conv2d(pad_spatial(x, [p, p]), w, b, stride=s, dilation=d))


def test_convolution_explicit_round_up(refnet):
    """I=6, pre=post=1, K=3, S=2: ceil((8 - 3) / 2) + 1 = 4 outputs (round down gives 3)."""
    x, w, b = randn(1, 1, 6, 6), randn(1, 1, 3, 3), randn(1)
    layer = refnet.network.add_convolution_nd(refnet.input("x", tuple(x.shape)), 1, (3, 3), np32(w), np32(b))
    layer.stride_nd, layer.padding_nd, layer.padding_mode = (2, 2), (1, 1), PM.EXPLICIT_ROUND_UP
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    # the 4th window starts at padded index 6 and reads one element past the padding: zeros (plus the bias)
    expected = F.conv2d(pad_spatial(x, [(1, 2), (1, 2)]), w, b, stride=2)
    assert expected.shape[2:] == (4, 4)
    close(y, expected)


@pytest.mark.parametrize("kernel_count", [8, 10])
def test_convolution_rejects_wrong_kernel_count(refnet, kernel_count):
    """Kernel weights are GKCRS: 2 x 1 x 1 x 3 x 3 = 18 here; a wrong count fails the build."""
    layer = refnet.network.add_convolution_nd(refnet.input("x", (1, 1, 5, 5)), 2, (3, 3),
                                              np.ones(kernel_count, np.float32))
    layer.name = "conv_bad_kernel"
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert any("conv_bad_kernel" in m and "kernel" in m for m in refnet.logger.errors), refnet.logger.errors


def test_convolution_rejects_kernel_rank_not_matching_input(refnet):
    layer = refnet.network.add_convolution_nd(refnet.input("x", (1, 1, 5, 5, 5)), 1, (3, 3), np.ones(9, np.float32))
    layer.name = "conv_rank"
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert any("conv_rank" in m for m in refnet.logger.errors)


# -- Deconvolution -----------------------------------------------------------------------------
@pytest.mark.parametrize("nsp", [2, 3])
def test_deconvolution_nd_matches_torch(refnet, nsp):
    deconv_fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nsp]
    x = randn(1, 4, *([4] * nsp))
    w = randn(4, 3, *([3] * nsp))  # CKRS with groups=2: 4 input channels, 6 outputs (3 per group)
    b = randn(6)
    stride, padding = (2, 1, 3)[:nsp], (1, 0, 1)[:nsp]
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", tuple(x.shape)), 6, (3,) * nsp, np32(w), np32(b))
    layer.stride_nd, layer.padding_nd, layer.num_groups = stride, padding, 2
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, deconv_fn(x, w, b, stride=stride, padding=padding, groups=2))


def test_deconvolution_asymmetric_padding_crops(refnet):
    """O = (I - 1) * S + DK - (B + A): B rows cropped at the start, A at the end."""
    x, w = randn(1, 2, 3, 3), randn(2, 1, 4, 4)
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", tuple(x.shape)), 1, (4, 4), np32(w))
    layer.stride_nd, layer.pre_padding, layer.post_padding = (2, 2), (1, 0), (2, 1)
    full = F.conv_transpose2d(x, w, stride=2)  # 8 x 8
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, full[:, :, 1:8 - 2, 0:8 - 1])


def test_deconvolution_dilation(refnet):
    x, w = randn(1, 1, 4, 4), randn(1, 1, 3, 3)
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", tuple(x.shape)), 1, (3, 3), np32(w))
    layer.dilation_nd = (2, 2)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.conv_transpose2d(x, w, dilation=2))


@pytest.mark.parametrize("mode", [PM.SAME_UPPER, PM.SAME_LOWER])
def test_deconvolution_same_padding(refnet, mode):
    x, w = randn(1, 1, 4, 4), randn(1, 1, 3, 3)  # I=4, S=2, DK=3: O = min(8, 9) = 8, P = 1
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", tuple(x.shape)), 1, (3, 3), np32(w))
    layer.stride_nd, layer.padding_mode = (2, 2), mode
    full = F.conv_transpose2d(x, w, stride=2)  # 9 x 9
    b, a = (0, 1) if mode == PM.SAME_UPPER else (1, 0)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, full[:, :, b:9 - a, b:9 - a])


def test_deconvolution_rejects_wrong_kernel_count(refnet):
    kernel = np.ones(2 * 4 * 2 * 2 - 1, np.float32)  # CKRS needs 2 * 4 * 2 * 2 = 32
    layer = refnet.network.add_deconvolution_nd(refnet.input("x", (1, 2, 3, 3)), 4, (2, 2), kernel)
    layer.name = "deconv_bad"
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert any("deconv_bad" in m and "kernel" in m for m in refnet.logger.errors)


# -- Pooling -----------------------------------------------------------------------------------
P = trt.PoolingType


@pytest.mark.parametrize("nsp", [2, 3])
def test_max_pooling_nd(refnet, nsp):
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
    x = randn(2, 3, *([7] * nsp))
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.MAX, (3,) * nsp)
    layer.stride_nd, layer.padding_nd = (2,) * nsp, (1,) * nsp
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, fn(x, 3, 2, 1))


@pytest.mark.parametrize("excludes", [True, False])
def test_average_pooling_count_excludes_padding(refnet, excludes):
    x = randn(1, 2, 6, 6)
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.AVERAGE, (3, 3))
    assert layer.average_count_excludes_padding is True  # TensorRT's default
    layer.stride_nd, layer.padding_nd, layer.average_count_excludes_padding = (2, 2), (1, 1), excludes
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.avg_pool2d(x, 3, 2, 1, count_include_pad=not excludes))


def test_average_pooling_corner_by_hand(refnet):
    """2x2 window, padding 1: the corner window holds one real value (excluding: x; including: x / 4)."""
    x = torch.arange(1.0, 5.0).reshape(1, 1, 2, 2)
    t = refnet.input("x", (1, 1, 2, 2))
    incl = refnet.network.add_pooling_nd(t, P.AVERAGE, (2, 2))
    excl = refnet.network.add_pooling_nd(t, P.AVERAGE, (2, 2))
    for layer, flag in ((incl, False), (excl, True)):
        layer.stride_nd, layer.padding_nd, layer.average_count_excludes_padding = (2, 2), (1, 1), flag
    out = refnet.run({"x": x}, incl=incl.get_output(0), excl=excl.get_output(0))
    assert out["excl"].flatten().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert out["incl"].flatten().tolist() == [0.25, 0.5, 0.75, 1.0]


def test_max_average_blend(refnet):
    x = randn(1, 2, 6, 6)
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.MAX_AVERAGE_BLEND, (2, 2))
    layer.stride_nd, layer.blend_factor = (2, 2), 0.3
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, 0.7 * F.max_pool2d(x, 2, 2) + 0.3 * F.avg_pool2d(x, 2, 2))


def test_pooling_explicit_round_up(refnet):
    """I=7, F=2, S=2: ceil(5 / 2) + 1 = 4 outputs; the last window sees only the 7th row."""
    x = randn(1, 1, 7, 7)
    t = refnet.input("x", tuple(x.shape))
    mx = refnet.network.add_pooling_nd(t, P.MAX, (2, 2))
    av = refnet.network.add_pooling_nd(t, P.AVERAGE, (2, 2))
    for layer in (mx, av):
        layer.stride_nd, layer.padding_mode = (2, 2), PM.EXPLICIT_ROUND_UP
    assert tuple(mx.get_output(0).shape) == (1, 1, 4, 4)
    out = refnet.run({"x": x}, mx=mx.get_output(0), av=av.get_output(0))
    close(out["mx"], F.max_pool2d(x, 2, 2, ceil_mode=True))
    close(out["av"], F.avg_pool2d(x, 2, 2, ceil_mode=True))


@pytest.mark.parametrize("mode", [PM.SAME_UPPER, PM.SAME_LOWER])
def test_pooling_same_padding(refnet, mode):
    x = randn(1, 1, 6, 6)
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.MAX, (3, 3))
    layer.stride_nd, layer.padding_mode = (2, 2), mode
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    p = same_pads(6, 3, 2, 1, mode)  # P = 1: UPPER (0, 1), LOWER (1, 0)
    close(y, F.max_pool2d(pad_spatial(x, [p, p], value=-math.inf), 3, 2))


def test_average_pooling_same_padding_excluded_from_count(refnet):
    """I=6, F=3, S=2, SAME_UPPER: P = 1 (after); excluding padding, the last window averages 2x2 or 2x3 values."""
    x = randn(1, 1, 6, 6)
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.AVERAGE, (3, 3))
    layer.stride_nd, layer.padding_mode = (2, 2), PM.SAME_UPPER
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    total = F.avg_pool2d(F.pad(x, (0, 1, 0, 1)), 3, 2, divisor_override=1)
    count = F.avg_pool2d(F.pad(torch.ones_like(x), (0, 1, 0, 1)), 3, 2, divisor_override=1)
    close(y, total / count)


def test_average_pooling_same_padding_included_in_count(refnet):
    x = randn(1, 1, 6, 6)
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.AVERAGE, (3, 3))
    layer.stride_nd, layer.padding_mode, layer.average_count_excludes_padding = (2, 2), PM.SAME_UPPER, False
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.avg_pool2d(F.pad(x, (0, 1, 0, 1)), 3, 2))  # every window covers 9 padded-input cells


def test_max_pooling_padding_not_smaller_than_window(refnet):
    """As on TensorRT-RTX: padding >= the window is accepted for MAX pooling. Windows overlapping the
    input take their max; a window lying wholly in the padding gives -inf (the max of nothing)."""
    x = randn(1, 1, 3, 3)
    layer = refnet.network.add_pooling_nd(refnet.input("x", (1, 1, 3, 3)), P.MAX, (2, 2))
    layer.padding_nd = (2, 2)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert tuple(y.shape) == (1, 1, 6, 6)
    padded = F.pad(x, (2, 2, 2, 2), value=-math.inf)
    close(y, F.max_pool2d(padded, 2, 1), equal_nan=True)
    assert y[0, 0, 0, 0] == -math.inf and y[0, 0, 1, 1] == x[0, 0, 0, 0]


def test_average_pooling_padding_not_smaller_than_window_counts_the_padding(refnet):
    """Accepted when the padding counts (average_count_excludes_padding=False): zeros averaged in."""
    x = randn(1, 2, 3, 4)
    layer = refnet.network.add_pooling_nd(refnet.input("x", tuple(x.shape)), P.AVERAGE, (2, 2))
    layer.pre_padding, layer.post_padding, layer.average_count_excludes_padding = (2, 0), (0, 3), False
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.avg_pool2d(F.pad(x, (0, 3, 2, 0)), 2, 1))


@pytest.mark.parametrize("mode,pre,post", [(PM.EXPLICIT_ROUND_DOWN, (2, 0), (0, 0)),
                                           (PM.EXPLICIT_ROUND_UP, (1, 1), (1, 1))])
def test_average_pooling_excluding_padding_needs_padding_below_window(refnet, mode, pre, post):
    """TensorRT-RTX: "the padding size is larger than or equal to the filter size for
    exclusive-counting pooling"; EXPLICIT_ROUND_UP's extra end padding counts (6 + 1 + 1 - 2 = 6
    with stride 4 rounds up to 3 windows, reading 2 more cells: end padding 3 >= 2)."""
    layer = refnet.network.add_pooling_nd(refnet.input("x", (1, 1, 6, 6)), P.AVERAGE, (2, 2))
    layer.pre_padding, layer.post_padding, layer.padding_mode = pre, post, mode
    layer.stride_nd = (4, 4)
    with pytest.raises(trt.NetworkError, match=r"(?s)Pooling.*not smaller than the window"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("add", ["conv", "deconv", "pool"])
def test_one_dimensional_kernels_and_windows_are_rejected(refnet, add):
    """TensorRT(-RTX): kernel and window dims must be 2 or 3 ("(kernelSize).nbDims == 2 ||
    (kernelSize).nbDims == 3"); 1-D data takes a unit dim first."""
    x = refnet.input("x", (1, 2, 7))
    if add == "pool":
        layer = refnet.network.add_pooling_nd(x, P.MAX, (3,))
    else:
        fn = refnet.network.add_convolution_nd if add == "conv" else refnet.network.add_deconvolution_nd
        layer = fn(x, 2, (3,), np.ones(12, np.float32))
    with pytest.raises(trt.NetworkError, match=r"has 1 dims; TensorRT takes 2-D or 3-D ones only"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("add", ["conv", "pool"])
def test_two_dimensional_kernels_need_rank_four(refnet, add):
    x = refnet.input("x", (2, 7, 7))
    if add == "pool":
        layer = refnet.network.add_pooling_nd(x, P.MAX, (3, 3))
    else:
        layer = refnet.network.add_convolution_nd(x, 2, (3, 3), np.ones(36, np.float32))
    with pytest.raises(trt.NetworkError, match=r"needs an input of rank >= 4"):
        layer.get_output(0).shape  # noqa: B018


# -- LRN ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("window", [1, 3, 5, 15])
def test_lrn_matches_torch_for_odd_windows(refnet, window):
    x = randn(2, 16, 4, 4)
    layer = refnet.network.add_lrn(refnet.input("x", tuple(x.shape)), window, 1e-2, 0.75, 2.0)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.local_response_norm(x, window, alpha=1e-2, beta=0.75, k=2.0))


@pytest.mark.parametrize("window", [0, 2, 4, 16, 17])
def test_lrn_rejects_even_or_too_large_windows(refnet, window):
    with pytest.raises(trt.NetworkError, match=r"(?s)LRN.*window.*'x'"):
        refnet.network.add_lrn(refnet.input("x", (1, 8, 4, 4)), window, 1e-4, 0.75, 1.0)


@pytest.mark.parametrize("alpha,beta,k", [(1e21, 0.75, 1.0), (1e-4, 0.001, 1.0), (1e-4, 2e5, 1.0),
                                          (1e-4, 0.75, 1e-6), (1e-4, 0.75, 2e10)])
def test_lrn_rejects_parameters_out_of_range(refnet, alpha, beta, k):
    """Valid: alpha in [-1e20, 1e20], beta in [0.01, 1e5], k in [1e-5, 1e10] (ILRNLayer docs)."""
    # The message names every parameter, so "alpha|beta|k" would match any refusal: pin the values given
    # and the reason (out of range, with the documented ranges), not e.g. a window or shape complaint.
    ranges = re.escape("(alpha in [-1e20, 1e20], beta in [0.01, 1e5], k in [1e-5, 1e10])")
    with pytest.raises(trt.NetworkError, match=re.escape(f"alpha={alpha} beta={beta} k={k} out of range ") + ranges):
        refnet.network.add_lrn(refnet.input("x", (1, 8, 4, 4)), 3, alpha, beta, k)


@pytest.mark.parametrize("alpha,beta,k", [(-1e20, 0.01, 1e-5), (1e20, 1e5, 1e10)])
def test_lrn_accepts_range_limits(refnet, alpha, beta, k):
    layer = refnet.network.add_lrn(refnet.input("x", (1, 8, 4, 4)), 3, alpha, beta, k)
    assert tuple(layer.get_output(0).shape) == (1, 8, 4, 4)

"""The involution CUDA kernels (torch extension) against the unfold reference. Needs a CUDA GPU."""

from __future__ import annotations

import pytest
import torch

from trtbuild.ops import _involution_ext
from trtbuild.ops.involution import InvolutionFunction, involution, involution_output_size, involution_reference

pytestmark = [pytest.mark.gpu, pytest.mark.compile]


@pytest.fixture(scope="module", autouse=True)
def _need_cuda_extension():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the involution CUDA kernels cannot run here")
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        pytest.skip("CUDA toolkit (nvcc) not found by torch.utils.cpp_extension: cannot build the extension")
    _involution_ext.load_extension()  # a build failure is a test failure, with the compiler's message


# (N, C, H, W, K, stride, padding, dilation, groups); K 3/5/7 take the unrolled paths, others the generic one.
CASES = [
    (2, 16, 13, 11, 3, 1, 1, 1, 4),
    (2, 64, 28, 28, 7, 1, 3, 1, 4),     # RedNet stage shape (group_channels=16)
    (1, 32, 29, 30, 7, 2, 3, 1, 2),
    (2, 12, 17, 15, 5, 2, 2, 1, 3),
    (1, 8, 20, 20, 3, 1, 2, 2, 1),
    (2, 6, 12, 13, 4, 3, 1, 1, 3),      # generic K, stride 3
    (1, 5, 9, 9, 1, 1, 0, 1, 5),
    (1, 256, 14, 14, 7, 1, 3, 1, 1),    # one group of 256 channels: exercises channel chunking
]
IDS = ["N{}C{}H{}W{}K{}s{}p{}d{}g{}".format(*c) for c in CASES]


def make(case, dtype, device="cuda", seed=0):
    n, c, h, w, k, s, p, d, g = case
    gen = torch.Generator().manual_seed(seed)
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(w, k, s, p, d)
    x = torch.randn(n, c, h, w, generator=gen).to(device, dtype)
    wt = torch.randn(n, g, k * k, ho, wo, generator=gen).to(device, dtype)
    return x, wt


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_fp32_matches_reference(case):
    x, w = make(case, torch.float32)
    out = InvolutionFunction.apply(x, w, *case[4:])
    expected = involution_reference(x.double(), w.double(), *case[4:])
    assert out.dtype == torch.float32 and out.shape == expected.shape
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_fp16_matches_reference(case):
    x, w = make(case, torch.float16)
    out = InvolutionFunction.apply(x, w, *case[4:])
    assert out.dtype == torch.float16
    expected = involution_reference(x.double(), w.double(), *case[4:])
    # The kernels accumulate in fp32 and round once to fp16, so the result is the exact one rounded to fp16
    # up to ties: within 2**-10 * max|expected| of expected.half(). This is the bound that
    # test_involution_kernels_emulated.py verifies on the same kernel source (atol/rtol 1e-2 was ~25x looser).
    bound = 2 ** -10 * expected.abs().max().item()
    torch.testing.assert_close(out.double(), expected.half().double(), atol=bound, rtol=0)


@pytest.mark.parametrize("case", CASES[:6], ids=IDS[:6])
def test_backward_fp32_matches_reference_autograd(case):
    x, w = make(case, torch.float32)
    grad = torch.randn(x.shape[0], x.shape[1], w.shape[3], w.shape[4], device="cuda")
    xa, wa = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    InvolutionFunction.apply(xa, wa, *case[4:]).backward(grad)
    xr, wr = x.double().requires_grad_(True), w.double().requires_grad_(True)
    involution_reference(xr, wr, *case[4:]).backward(grad.double())
    torch.testing.assert_close(xa.grad.double(), xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(wa.grad.double(), wr.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", [(1, 4, 6, 7, 3, 1, 1, 1, 2), (2, 6, 7, 6, 5, 2, 2, 1, 3),
                                  (1, 4, 8, 8, 2, 3, 1, 2, 1)],
                         ids=["K3", "K5s2", "K2s3d2"])
def test_gradcheck_float64(case):
    x, w = make(case, torch.float64)
    x.requires_grad_(True)
    w.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: InvolutionFunction.apply(a, b, *case[4:]), (x, w), eps=1e-6, atol=1e-7)


def test_dispatch_uses_the_kernels_on_cuda():
    x, w = make(CASES[0], torch.float32)
    x.requires_grad_(True)
    out = involution(x, w, *CASES[0][4:])
    assert "InvolutionFunction" in type(out.grad_fn).__name__
    bf16 = involution(x.detach().bfloat16(), w.bfloat16(), *CASES[0][4:])  # no bf16 kernel: reference
    assert bf16.dtype == torch.bfloat16


def test_non_contiguous_inputs_and_flat_kernels():
    case = CASES[3]
    x, w = make(case, torch.float32)
    x_nc = x.transpose(2, 3).contiguous().transpose(2, 3)   # same values, non-contiguous strides
    assert not x_nc.is_contiguous()
    n, g, kk, ho, wo = w.shape
    out = InvolutionFunction.apply(x_nc, w.reshape(n, g * kk, ho, wo), *case[4:])
    torch.testing.assert_close(out, involution_reference(x, w, *case[4:]), atol=1e-5, rtol=1e-5)


def test_kernels_run_on_the_current_stream():
    x, w = make(CASES[1], torch.float32)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = InvolutionFunction.apply(x, w, *CASES[1][4:])
    stream.synchronize()
    torch.testing.assert_close(out, involution_reference(x, w, *CASES[1][4:]), atol=1e-5, rtol=1e-5)


def test_extension_reports_bad_shapes():
    ext = _involution_ext.load_extension()
    x, w = make(CASES[0], torch.float32)
    with pytest.raises(RuntimeError, match="w must have sizes"):
        ext.forward(x, w[:, :, :, :-1], *CASES[0][4:])
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        ext.forward(x.cpu(), w.cpu(), *CASES[0][4:])

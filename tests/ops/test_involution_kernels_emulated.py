"""The involution CUDA kernels' device code, run on the CPU (no GPU needed).

plugins/involution/tests/host_emulation.cpp compiles involution_kernels.cuh with the host C++
compiler and runs each kernel thread by thread; here its results are compared with the unfold
reference for every kernel (forward fast paths K=3/5/7 and the generic path, grad-input,
grad-weight), every dtype, channel chunking and grid-stride loops (grids smaller than the work).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trtbuild.ops.involution import involution_output_size, involution_reference

pytestmark = pytest.mark.compile

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "plugins" / "involution" / "tests" / "host_emulation.cpp"
DTYPES = {torch.float32: 0, torch.float16: 1, torch.float64: 2}


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++/c++/clang++) to build the kernel emulation")
    lib = tmp_path_factory.mktemp("involution_emulation") / "libinvolution_emulation.so"
    cmd = [cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Wno-unknown-pragmas", "-Werror", "-shared", "-fPIC",
           str(SOURCE), "-o", str(lib)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"host emulation failed to compile:\n{result.stderr}"
    handle = ctypes.CDLL(str(lib))
    p = ctypes.c_void_p
    i64p = ctypes.POINTER(ctypes.c_int64)
    u = ctypes.c_uint
    handle.emulated_forward.argtypes = [ctypes.c_int, i64p, ctypes.c_int64, ctypes.c_int, p, p, p, u, u]
    handle.emulated_backward_input.argtypes = [ctypes.c_int, i64p, p, p, p, u, u]
    handle.emulated_backward_weight.argtypes = [ctypes.c_int, i64p, p, p, p, u, u]
    return handle


def dims_of(case):
    n, c, h, w, k, s, p, d, g = case
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(w, k, s, p, d)
    arr = (ctypes.c_int64 * 11)(n, c, h, w, g, ho, wo, k, s, p, d)
    return arr, ho, wo


def ptr(t: torch.Tensor):
    assert t.is_contiguous()
    return ctypes.c_void_p(t.data_ptr())


def make(case, dtype, seed=0):
    n, c, h, w, k, s, p, d, g = case
    gen = torch.Generator().manual_seed(seed)
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(w, k, s, p, d)
    x = torch.randn(n, c, h, w, generator=gen).to(dtype)
    wt = torch.randn(n, g, k * k, ho, wo, generator=gen).to(dtype)
    gy = torch.randn(n, c, ho, wo, generator=gen).to(dtype)
    return x, wt, gy


def forward(emu, case, x, w, channels_per_thread, specialize=1, blocks=3, threads=32):
    dims, ho, wo = dims_of(case)
    out = torch.full((case[0], case[1], ho, wo), float("nan"), dtype=x.dtype)  # every element must be written
    rc = emu.emulated_forward(DTYPES[x.dtype], dims, channels_per_thread, specialize, ptr(x), ptr(w), ptr(out),
                              blocks, threads)
    assert rc == 0
    return out


def backward(emu, case, gy, x, w, blocks=2, threads=64):
    """grad-input and grad-weight kernels; every output element must be written (NaN-filled first)."""
    dims, _, _ = dims_of(case)
    gx, gw = torch.full_like(x, float("nan")), torch.full_like(w, float("nan"))
    code = DTYPES[x.dtype]
    assert emu.emulated_backward_input(code, dims, ptr(gy), ptr(w), ptr(gx), blocks, threads) == 0
    assert emu.emulated_backward_weight(code, dims, ptr(gy), ptr(x), ptr(gw), blocks, threads) == 0
    return gx, gw


# (N, C, H, W, K, stride, padding, dilation, groups)
CASES = [
    (2, 8, 7, 6, 3, 1, 1, 1, 2),
    (1, 16, 9, 9, 7, 1, 3, 1, 2),
    (2, 6, 9, 10, 5, 2, 2, 1, 3),
    (1, 4, 9, 9, 3, 2, 2, 2, 1),
    (2, 6, 8, 7, 4, 3, 1, 1, 3),   # generic K
    (1, 3, 5, 4, 1, 1, 0, 1, 3),
    (1, 4, 5, 5, 3, 1, 0, 2, 2),   # Ho = 1
]
IDS = ["N{}C{}H{}W{}K{}s{}p{}d{}g{}".format(*c) for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_kernel_float64_all_paths(emu, case):
    x, w, _ = make(case, torch.float64)
    expected = involution_reference(x, w, *case[4:])
    cg = case[1] // case[8]
    for cpt in sorted({1, 2, 3, cg}):  # 3: a short last chunk (Cg=8) or one clamped chunk (Cg<3)
        for specialize in (1, 0):
            out = forward(emu, case, x, w, cpt, specialize)
            torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12,
                                       msg=lambda m, cpt=cpt, specialize=specialize:
                                       f"channels_per_thread={cpt} specialize={specialize}: {m}")


@pytest.mark.parametrize("case", CASES[:3], ids=IDS[:3])
def test_forward_kernel_float32_and_float16(emu, case):
    x, w, _ = make(case, torch.float32)
    out32 = forward(emu, case, x, w, 2)
    torch.testing.assert_close(out32.double(), involution_reference(x.double(), w.double(), *case[4:]),
                               atol=1e-5, rtol=1e-5)
    if not emu.emulation_has_half():
        pytest.skip("host compiler has no _Float16: fp16 emulation unavailable")
    xh, wh = x.half(), w.half()
    out16 = forward(emu, case, xh, wh, 2)
    expected = involution_reference(xh.double(), wh.double(), *case[4:])
    torch.testing.assert_close(out16.double(), expected, atol=1e-2, rtol=1e-2)
    # fp32 accumulation then one rounding: equal to rounding the exact result to fp16, up to ties.
    assert (out16.double() - expected.half().double()).abs().max().item() <= 2 ** -10 * expected.abs().max().item()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_backward_kernels_match_autograd_of_reference(emu, case):
    x, w, gy = make(case, torch.float64)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    involution_reference(xr, wr, *case[4:]).backward(gy)
    gx, gw = backward(emu, case, gy, x, w, blocks=2, threads=64)
    torch.testing.assert_close(gx, xr.grad, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(gw, wr.grad, atol=1e-12, rtol=1e-12)


def test_backward_kernels_float32(emu):
    case = CASES[2]
    x, w, gy = make(case, torch.float32)
    xr, wr = x.double().requires_grad_(True), w.double().requires_grad_(True)
    involution_reference(xr, wr, *case[4:]).backward(gy.double())
    gx, gw = backward(emu, case, gy, x, w, blocks=5, threads=32)
    torch.testing.assert_close(gx.double(), xr.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gw.double(), wr.grad, atol=1e-5, rtol=1e-5)


def test_emulation_detects_a_wrong_result(emu):
    """The comparison can fail: a kernel fed transposed per-pixel kernels gives another result."""
    case = CASES[0]
    x, w, _ = make(case, torch.float64)
    n, g, kk, ho, wo = w.shape
    k = case[4]
    w_t = w.view(n, g, k, k, ho, wo).transpose(2, 3).contiguous().view(n, g, kk, ho, wo)
    out = forward(emu, case, x, w_t, 1)
    assert not torch.allclose(out, involution_reference(x, w, *case[4:]))
    assert np.isfinite(out.numpy()).all()


class _EmulatedKernels(torch.autograd.Function):
    """The device kernels (run on the CPU by host_emulation.cpp) as an autograd op, float64 only."""

    @staticmethod
    def forward(ctx, x, w, emu, case):
        ctx.save_for_backward(x, w)
        ctx.emu, ctx.case = emu, case
        return forward(emu, case, x.contiguous(), w.contiguous(), 2)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gx, gw = backward(ctx.emu, ctx.case, gy.contiguous(), x.contiguous(), w.contiguous(), blocks=3, threads=32)
        return gx, gw, None, None


@pytest.mark.parametrize("case", [(1, 4, 6, 7, 3, 1, 1, 1, 2), (2, 6, 7, 6, 5, 2, 2, 1, 3),
                                  (1, 4, 8, 8, 2, 3, 1, 2, 1)],
                         ids=["K3", "K5s2", "K2s3d2"])
def test_gradcheck_float64_on_emulated_kernels(emu, case):
    """torch.autograd.gradcheck with the kernels' own forward and backward (finite differences of the
    forward kernel against the analytic grad-input and grad-weight kernels)."""
    x, w, _ = make(case, torch.float64, seed=3)
    x.requires_grad_(True)
    w.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: _EmulatedKernels.apply(a, b, emu, case), (x, w),
                                    eps=1e-6, atol=1e-8, rtol=1e-6)


def test_gradcheck_catches_a_wrong_backward_kernel(emu):
    """The gradcheck above can fail: swapping grad-input for zeros is detected."""
    case = (1, 4, 6, 7, 3, 1, 1, 1, 2)
    x, w, _ = make(case, torch.float64, seed=3)

    class Broken(_EmulatedKernels):
        @staticmethod
        def backward(ctx, gy):
            gx, gw, _, _ = _EmulatedKernels.backward(ctx, gy)
            return torch.zeros_like(gx), gw, None, None

    x.requires_grad_(True)
    w.requires_grad_(True)
    assert not torch.autograd.gradcheck(lambda a, b: Broken.apply(a, b, emu, case), (x, w),
                                        eps=1e-6, atol=1e-8, rtol=1e-6, raise_exception=False)


@st.composite
def geometries(draw):
    """Random (N, C, H, W, K, stride, padding, dilation, groups) whose output is not empty."""
    k = draw(st.integers(1, 7))
    stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    padding = draw(st.integers(0, 3))
    span = dilation * (k - 1) + 1
    h = draw(st.integers(max(1, span - 2 * padding), max(1, span - 2 * padding) + 6))
    w = draw(st.integers(max(1, span - 2 * padding), max(1, span - 2 * padding) + 6))
    groups = draw(st.integers(1, 3))
    c = groups * draw(st.integers(1, 4))
    return (draw(st.integers(1, 2)), c, h, w, k, stride, padding, dilation, groups)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=geometries(), cpt=st.integers(1, 4), blocks=st.integers(1, 4))
def test_kernels_match_reference_for_any_geometry(emu, case, cpt, blocks):
    """Any K, stride, padding, dilation and groups: forward (both paths, any chunking and grid) and
    both backward kernels equal the unfold reference and its autograd in float64."""
    x, w, gy = make(case, torch.float64)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    expected = involution_reference(xr, wr, *case[4:])
    expected.backward(gy)
    for specialize in (1, 0):
        out = forward(emu, case, x, w, cpt, specialize, blocks=blocks)
        torch.testing.assert_close(out, expected.detach(), atol=1e-12, rtol=1e-12)
    gx, gw = backward(emu, case, gy, x, w, blocks=blocks, threads=32)
    torch.testing.assert_close(gx, xr.grad, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(gw, wr.grad, atol=1e-12, rtol=1e-12)

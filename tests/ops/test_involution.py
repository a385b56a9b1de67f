"""trtbuild.ops.involution: the unfold reference against a naive loop, gradcheck, the RedNet module."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trtbuild.ops.involution import Involution, involution, involution_output_size, involution_reference

from helpers.involution_naive import naive_involution

GEN = torch.Generator().manual_seed(0)


def rand(*shape, dtype=torch.float64):
    return torch.randn(*shape, generator=GEN, dtype=dtype)


# (N, C, H, W, K, stride, padding, dilation, groups)
CASES = [
    (2, 4, 6, 7, 3, 1, 1, 1, 1),
    (1, 6, 9, 8, 3, 2, 1, 1, 2),
    (2, 8, 7, 7, 3, 1, 2, 2, 4),
    (1, 4, 10, 9, 5, 3, 2, 1, 2),
    (1, 3, 6, 5, 2, 1, 0, 1, 3),   # even kernel, one channel per group
    (1, 4, 5, 6, 1, 2, 0, 1, 1),   # 1x1 kernel with stride
    (1, 2, 4, 4, 3, 1, 1, 2, 1),   # dilation 2: most taps fall into the padding
    (1, 4, 11, 11, 7, 2, 3, 1, 2),  # RedNet-like K=7, stride 2
]


def make_inputs(case, dtype=torch.float64):
    n, c, h, w, k, s, p, d, g = case
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(w, k, s, p, d)
    return rand(n, c, h, w, dtype=dtype), rand(n, g, k * k, ho, wo, dtype=dtype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}C{}H{}W{}K{}s{}p{}d{}g{}".format(*c))
def test_reference_matches_naive_loop(case):
    x, w = make_inputs(case)
    _, _, _, _, k, s, p, d, g = case
    out = involution_reference(x, w, k, s, p, d, g)
    expected = naive_involution(x, w, k, s, p, d, g)
    assert out.shape == expected.shape and out.dtype == torch.float64
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)


def test_reference_float32_matches_naive_loop():
    case = CASES[2]
    x, w = make_inputs(case, torch.float32)
    out = involution_reference(x, w, *case[4:])
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), naive_involution(x.double(), w.double(), *case[4:]), atol=1e-5, rtol=1e-5)


def test_output_size_formula():
    assert involution_output_size(56, 7, 1, 3, 1) == 56
    assert involution_output_size(56, 7, 2, 3, 1) == 28
    assert involution_output_size(10, 3, 3, 0, 2) == 2   # (10 - 4 - 1) // 3 + 1
    assert involution_output_size(4, 5, 1, 0, 1) == 0    # kernel larger than input


@pytest.mark.parametrize("case", [(1, 4, 5, 6, 3, 2, 1, 1, 2), (1, 2, 7, 6, 5, 3, 2, 1, 2),
                                  (1, 3, 4, 5, 2, 1, 0, 2, 3)],
                         ids=["K3s2g2", "K5s3", "K2d2g3"])
def test_reference_gradcheck_float64(case):
    x, w = make_inputs(case)
    x.requires_grad_(True)
    w.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: involution_reference(a, b, *case[4:]), (x, w), eps=1e-6, atol=1e-7)


def test_weight_views_are_equivalent():
    case = CASES[2]
    x, w = make_inputs(case)
    n, g, kk, ho, wo = w.shape
    k = case[4]
    base = involution_reference(x, w, *case[4:])
    torch.testing.assert_close(involution_reference(x, w.reshape(n, g * kk, ho, wo), *case[4:]), base)
    torch.testing.assert_close(involution_reference(x, w.reshape(n, g, k, k, ho, wo), *case[4:]), base)


def test_half_inputs_give_half_output_close_to_float():
    case = CASES[7]
    x, w = make_inputs(case, torch.float32)
    out16 = involution_reference(x.half(), w.half(), *case[4:])
    assert out16.dtype == torch.float16
    ref = naive_involution(x.half().double(), w.half().double(), *case[4:])
    assert (out16.double() - ref).abs().max().item() <= 1e-2 * ref.abs().max().item()


def test_dispatch_on_cpu_is_the_reference():
    case = CASES[1]
    x, w = make_inputs(case)
    torch.testing.assert_close(involution(x, w, *case[4:]), naive_involution(x, w, *case[4:]), atol=1e-12, rtol=0)


@pytest.mark.parametrize("args,message", [
    (dict(groups=3), "divisible by groups"),
    (dict(w_shape=(1, 2, 9, 5, 5)), "w must have shape"),
    (dict(kernel_size=9), "too small"),
    (dict(w_dtype=torch.float32), "one floating dtype"),
    (dict(stride=0), "stride must be an int >= 1"),
    (dict(padding=-1), "padding must be an int >= 0"),
])
def test_bad_arguments_raise_clear_errors(args, message):
    x = rand(1, 4, 6, 6)
    k, s, p, g = args.get("kernel_size", 3), args.get("stride", 1), args.get("padding", 1), args.get("groups", 2)
    w_shape = args.get("w_shape", (1, 2, 9, 6, 6))
    w = rand(*w_shape).to(args.get("w_dtype", torch.float64))
    with pytest.raises(ValueError, match=message):
        involution_reference(x, w, k, s, p, 1, g)


# ---------------------------------------------------------------------------------------- module

def module_by_hand(m: Involution, x):
    """The official RedNet forward written out with torch.nn.functional (eval-mode BN)."""
    src = F.avg_pool2d(x, m.stride, m.stride) if m.stride > 1 else x
    bn = m.conv1.bn
    r = F.conv2d(src, m.conv1.conv.weight)
    r = (r - bn.running_mean[:, None, None]) / torch.sqrt(bn.running_var[:, None, None] + bn.eps)
    r = torch.relu(r * bn.weight[:, None, None] + bn.bias[:, None, None])
    kernels = F.conv2d(r, m.conv2.conv.weight, m.conv2.conv.bias)
    n, _, h, w = kernels.shape
    kernels = kernels.view(n, m.groups, m.kernel_size * m.kernel_size, h, w)
    return naive_involution(x, kernels, m.kernel_size, m.stride, (m.kernel_size - 1) // 2, 1, m.groups)


@pytest.mark.parametrize("stride", [1, 2])
def test_involution_module_matches_hand_written_forward(stride):
    torch.manual_seed(1)
    m = Involution(32, kernel_size=3, stride=stride, group_channels=8).double().eval()
    with torch.no_grad():  # non-trivial BN statistics
        m.conv1.bn.running_mean.uniform_(-0.5, 0.5)
        m.conv1.bn.running_var.uniform_(0.5, 2.0)
        m.conv1.bn.weight.uniform_(0.5, 1.5)
        m.conv1.bn.bias.uniform_(-0.5, 0.5)
    x = rand(2, 32, 8, 8)
    with torch.no_grad():
        y = m(x)
        expected = module_by_hand(m, x)
    assert y.shape == (2, 32, 8 // stride, 8 // stride)
    torch.testing.assert_close(y, expected, atol=1e-10, rtol=1e-10)


def test_involution_module_official_layout_and_state_dict_names():
    m = Involution(64, kernel_size=7, stride=1)
    assert (m.groups, m.padding) == (4, 3)
    assert m.conv1.conv.weight.shape == (16, 64, 1, 1) and m.conv1.conv.bias is None
    assert m.conv2.conv.weight.shape == (7 * 7 * 4, 16, 1, 1) and m.conv2.conv.bias.shape == (196,)
    assert set(m.state_dict()) == {
        "conv1.conv.weight", "conv1.bn.weight", "conv1.bn.bias", "conv1.bn.running_mean", "conv1.bn.running_var",
        "conv1.bn.num_batches_tracked", "conv2.conv.weight", "conv2.conv.bias"}


def test_involution_module_is_trainable():
    m = Involution(16, kernel_size=3, group_channels=4).double()
    x = rand(2, 16, 5, 5).requires_grad_(True)
    m(x).square().sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert m.conv2.conv.weight.grad.abs().sum() > 0


def test_involution_module_rejects_bad_configuration():
    with pytest.raises(ValueError, match="group_channels"):
        Involution(24, group_channels=16)
    with pytest.raises(ValueError, match="expected input"):
        Involution(16, kernel_size=3)(rand(1, 8, 5, 5).float())

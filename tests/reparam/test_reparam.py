"""Tests for trtbuild.reparam: Conv+BN folding and RepVGG block fusion, checked against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trtbuild.models.pytorch import randomize_bn_
from trtbuild.models.pytorch.repvgg import RepVGGBlock
from trtbuild.reparam import bn_params, bn_to_scale_shift, fold_conv_bn, fuse_repvgg_block, fuse_repvgg_module


def _bn_tuple(bn: nn.modules.batchnorm._BatchNorm):
    return (bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps)


# ---------------------------------------------------------------- hand-computed values


def test_fold_conv_bn_hand_computed():
    # scale = 3 / sqrt(3 + 1) = 1.5 ; w' = 2 * 1.5 = 3 ; b' = 0.5 + (1 - 1) * 1.5 = 0.5
    w, b = fold_conv_bn(np.full((1, 1, 1, 1), 2.0), np.array([1.0]), [3.0], [0.5], [1.0], [3.0], 1.0)
    assert w.dtype == np.float32 and b.dtype == np.float32
    assert w.shape == (1, 1, 1, 1) and w[0, 0, 0, 0] == pytest.approx(3.0)
    assert b[0] == pytest.approx(0.5)
    # without conv bias: b' = 0.5 - 1 * 1.5 = -1
    _, b = fold_conv_bn(np.full((1, 1, 1, 1), 2.0), None, [3.0], [0.5], [1.0], [3.0], 1.0)
    assert b[0] == pytest.approx(-1.0)


def test_bn_to_scale_shift_hand_computed():
    # channel 0: scale = 2 / sqrt(0.25) = 4, shift = 1 - 0.5 * 4 = -1
    # channel 1: scale = 1 / sqrt(4) = 0.5, shift = 0 - (-2) * 0.5 = 1
    scale, shift = bn_to_scale_shift([2.0, 1.0], [1.0, 0.0], [0.5, -2.0], [0.25, 4.0], 0.0)
    assert scale.dtype == np.float32 and shift.dtype == np.float32
    np.testing.assert_allclose(scale, [4.0, 0.5])
    np.testing.assert_allclose(shift, [-1.0, 1.0])


def test_bn_to_scale_shift_matches_batchnorm_eval():
    bn = randomize_bn_(nn.BatchNorm2d(7), seed=3).eval()
    x = torch.randn(2, 7, 3, 3, generator=torch.Generator().manual_seed(0))
    scale, shift = bn_to_scale_shift(*_bn_tuple(bn))
    ours = x * torch.from_numpy(scale)[None, :, None, None] + torch.from_numpy(shift)[None, :, None, None]
    with torch.no_grad():
        torch.testing.assert_close(ours, bn(x), rtol=1e-5, atol=1e-6)


def test_fold_accepts_torch_and_numpy_alike():
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(4, 3, 3, 3, generator=gen)
    bn = randomize_bn_(nn.BatchNorm2d(4), seed=1)
    wt, bt = fold_conv_bn(w, None, *_bn_tuple(bn))
    wn, bn_ = fold_conv_bn(w.numpy(), None, *(t.detach().numpy() if torch.is_tensor(t) else t for t in _bn_tuple(bn)))
    np.testing.assert_array_equal(wt, wn)
    np.testing.assert_array_equal(bt, bn_)


# ---------------------------------------------------------------- fold vs conv -> bn


_CONVS = {
    1: (nn.Conv1d, nn.BatchNorm1d, (2, 6, 11)),
    2: (nn.Conv2d, nn.BatchNorm2d, (2, 6, 9, 8)),
    3: (nn.Conv3d, nn.BatchNorm3d, (2, 6, 5, 6, 4)),
}


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("conv_bias", [True, False])
@pytest.mark.parametrize("groups", [1, 2])
def test_fold_matches_conv_then_bn(dims, conv_bias, groups):
    conv_cls, bn_cls, shape = _CONVS[dims]
    torch.manual_seed(10 * dims + groups)
    conv = conv_cls(6, 8, kernel_size=3, padding=1, stride=1, bias=conv_bias, groups=groups).eval()
    bn = randomize_bn_(bn_cls(8, eps=1e-3), seed=dims).eval()
    x = torch.randn(*shape)
    w, b = fold_conv_bn(conv.weight, conv.bias, *_bn_tuple(bn))
    fused = conv_cls(6, 8, kernel_size=3, padding=1, bias=True, groups=groups).eval()
    with torch.no_grad():
        fused.weight.copy_(torch.from_numpy(w))
        fused.bias.copy_(torch.from_numpy(b))
        expected = bn(conv(x))
        got = fused(x)
    assert not torch.allclose(expected, conv(x).detach(), atol=1e-2)  # BN really does something
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_fold_linear_weight():
    torch.manual_seed(0)
    lin = nn.Linear(5, 4).eval()
    bn = randomize_bn_(nn.BatchNorm1d(4), seed=2).eval()
    x = torch.randn(3, 5)
    w, b = fold_conv_bn(lin.weight, lin.bias, *_bn_tuple(bn))
    with torch.no_grad():
        torch.testing.assert_close(x @ torch.from_numpy(w).T + torch.from_numpy(b), bn(lin(x)), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- error messages


def test_fold_rejects_bad_shapes_naming_the_tensor():
    w = np.ones((4, 3, 3, 3))
    good = dict(gamma=np.ones(4), beta=np.zeros(4), mean=np.zeros(4), var=np.ones(4), eps=1e-5)
    with pytest.raises(ValueError, match=r"conv1\.weight.*rank >= 2"):
        fold_conv_bn(np.ones(4), None, **good, name="conv1")
    with pytest.raises(ValueError, match=r"conv1\.bias.*4 channels"):
        fold_conv_bn(w, np.ones(5), **good, name="conv1")
    bad = dict(good, gamma=np.ones(5), beta=np.zeros(5), mean=np.zeros(5), var=np.ones(5))
    with pytest.raises(ValueError, match=r"conv1\.bn.*5 channels.*4 output channels"):
        fold_conv_bn(w, None, **bad, name="conv1")
    with pytest.raises(ValueError, match=r"conv1\.bn\.var.*4 channels"):
        fold_conv_bn(w, None, **dict(good, var=np.ones(3)), name="conv1")
    with pytest.raises(ValueError, match=r"conv1\.bn\.mean.*1-D"):
        fold_conv_bn(w, None, **dict(good, mean=np.zeros((4, 1))), name="conv1")
    with pytest.raises(ValueError, match=r"conv1\.bn\.var.*var \+ eps must be > 0"):
        fold_conv_bn(w, None, **dict(good, var=-np.ones(4)), name="conv1")
    with pytest.raises(ValueError, match=r"conv1\.bn\.eps"):
        fold_conv_bn(w, None, **dict(good, eps=-1.0), name="conv1")
    with pytest.raises(ValueError, match=r"conv1\.weight.*NaN"):
        fold_conv_bn(np.full((4, 3, 3, 3), np.nan), None, **good, name="conv1")


def test_bn_params_forms_agree_and_reject_missing_keys():
    bn = randomize_bn_(nn.BatchNorm2d(3), seed=4)
    as_tuple = bn_to_scale_shift(*bn_params(_bn_tuple(bn)))
    as_module = bn_to_scale_shift(*bn_params(bn))
    as_dict = bn_to_scale_shift(
        *bn_params(dict(weight=bn.weight, bias=bn.bias, running_mean=bn.running_mean, running_var=bn.running_var,
                        eps=bn.eps))
    )
    for a, b in zip(as_tuple, as_module):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(as_tuple, as_dict):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(KeyError, match=r"idbn\.bn.*'var'"):
        bn_params(dict(gamma=1, beta=0, mean=0, eps=1e-5), "idbn.bn")
    with pytest.raises(ValueError, match="gamma, beta, mean, var, eps"):
        bn_params((1, 2, 3), "x")


# ---------------------------------------------------------------- RepVGG fusion


def _fused_forward(block: RepVGGBlock, x: torch.Tensor, w: np.ndarray, b: np.ndarray) -> torch.Tensor:
    y = F.conv2d(x, torch.from_numpy(w), torch.from_numpy(b), stride=block.stride, padding=1, groups=block.groups)
    return F.relu(y)


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize(
    "in_ch,out_ch,stride,has_identity",
    [(8, 8, 1, True), (8, 8, 2, False), (8, 16, 1, False), (8, 16, 2, False)],
)
def test_fuse_repvgg_block_matches_unfused(groups, in_ch, out_ch, stride, has_identity):
    torch.manual_seed(groups * 100 + in_ch + out_ch + stride)
    block = RepVGGBlock(in_ch, out_ch, stride=stride, groups=groups)
    randomize_bn_(block, seed=groups + stride).eval()
    assert (block.rbr_identity is not None) == has_identity
    x = torch.randn(2, in_ch, 9, 10)
    w, b = fuse_repvgg_module(block)
    assert w.shape == (out_ch, in_ch // groups, 3, 3) and b.shape == (out_ch,)
    with torch.no_grad():
        expected = block(x)
        got = _fused_forward(block, x, w, b)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_identity_branch_alone_is_identity(groups):
    """Zero dense kernel, trivial BNs, identity only: the fused conv must return its input."""
    c = 8
    trivial = (np.ones(c), np.zeros(c), np.zeros(c), np.ones(c), 0.0)
    w, b = fuse_repvgg_block(np.zeros((c, c // groups, 3, 3)), trivial, None, None, trivial, c, groups)
    x = torch.randn(1, c, 5, 5)
    y = F.conv2d(x, torch.from_numpy(w), torch.from_numpy(b), padding=1, groups=groups)
    torch.testing.assert_close(y, x, rtol=0, atol=0)
    # the single 1 of each output channel i sits at [i, i % (c // groups), 1, 1]
    nz = np.argwhere(w != 0)
    expected = np.array([[i, i % (c // groups), 1, 1] for i in range(c)])
    np.testing.assert_array_equal(nz, expected)


def test_fuse_without_1x1_branch_matches_manual():
    torch.manual_seed(7)
    c = 6
    dense = nn.Conv2d(c, c, 3, padding=1, bias=False)
    dbn = randomize_bn_(nn.BatchNorm2d(c), seed=8).eval()
    ibn = randomize_bn_(nn.BatchNorm2d(c), seed=9).eval()
    x = torch.randn(1, c, 7, 7)
    w, b = fuse_repvgg_block(dense.weight, dbn, None, None, ibn, c, 1)
    with torch.no_grad():
        expected = dbn(dense(x)) + ibn(x)
    got = F.conv2d(x, torch.from_numpy(w), torch.from_numpy(b), padding=1)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_fuse_module_on_deploy_block_returns_its_conv():
    block = RepVGGBlock(4, 4, deploy=True)
    w, b = fuse_repvgg_module(block)
    np.testing.assert_array_equal(w, block.rbr_reparam.weight.detach().numpy())
    np.testing.assert_array_equal(b, block.rbr_reparam.bias.detach().numpy())


def test_fuse_rejects_bad_inputs_naming_the_tensor():
    c = 8
    bn = (np.ones(c), np.zeros(c), np.zeros(c), np.ones(c), 1e-5)
    bn16 = (np.ones(16), np.zeros(16), np.zeros(16), np.ones(16), 1e-5)
    with pytest.raises(ValueError, match=r"rbr_dense\.weight.*input channels"):
        fuse_repvgg_block(np.zeros((c, c, 3, 3)), bn, None, None, None, c, 2)
    with pytest.raises(ValueError, match=r"rbr_dense\.weight.*odd K"):
        fuse_repvgg_block(np.zeros((c, c, 2, 2)), bn, None, None, None, c, 1)
    with pytest.raises(ValueError, match=r"rbr_1x1\.weight.*expected shape"):
        fuse_repvgg_block(np.zeros((c, c, 3, 3)), bn, np.zeros((c, c, 3, 3)), bn, None, c, 1)
    with pytest.raises(ValueError, match=r"rbr_1x1.*both"):
        fuse_repvgg_block(np.zeros((c, c, 3, 3)), bn, np.zeros((c, c, 1, 1)), None, None, c, 1)
    with pytest.raises(ValueError, match=r"rbr_identity.*16 != 8"):
        fuse_repvgg_block(np.zeros((16, c, 3, 3)), bn16, None, None, bn, c, 1)
    with pytest.raises(ValueError, match=r"rbr_dense\.bn.*8 channels but rbr_dense\.weight has 16"):
        fuse_repvgg_block(np.zeros((16, c, 3, 3)), bn, None, None, None, c, 1)
    with pytest.raises(ValueError, match=r"groups.*not divisible"):
        fuse_repvgg_block(np.zeros((c, 2, 3, 3)), bn, None, None, None, c, 3)
    with pytest.raises(AttributeError, match="not a RepVGG block"):
        fuse_repvgg_module(nn.Conv2d(3, 3, 3))


def test_fuse_module_on_a_bias_free_deploy_conv_gives_zero_bias_per_output_channel():
    """A deploy-form conv without bias (in 4, out 6): the bias is 6 zeros, float32, and the pair reproduces it."""
    block = nn.Module()
    block.rbr_reparam = nn.Conv2d(4, 6, 3, padding=1, bias=False)
    w, b = fuse_repvgg_module(block)
    assert b.dtype == np.float32 and b.shape == (6,) and not b.any()
    x = torch.randn(1, 4, 5, 5)
    torch.testing.assert_close(F.conv2d(x, torch.from_numpy(w), torch.from_numpy(b), padding=1),
                               block.rbr_reparam(x).detach(), rtol=0, atol=0)


def test_fuse_module_without_1x1_or_identity_attributes_matches_the_dense_branch():
    """A block that lacks rbr_1x1 and rbr_identity altogether (not merely None): only the dense branch."""
    torch.manual_seed(3)
    block = nn.Module()
    block.rbr_dense = nn.Module()
    block.rbr_dense.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
    block.rbr_dense.bn = randomize_bn_(nn.BatchNorm2d(4), seed=4).eval()
    w, b = fuse_repvgg_module(block)
    x = torch.randn(1, 4, 6, 6)
    with torch.no_grad():
        expected = block.rbr_dense.bn(block.rbr_dense.conv(x))
    torch.testing.assert_close(F.conv2d(x, torch.from_numpy(w), torch.from_numpy(b), padding=1), expected,
                               rtol=1e-5, atol=1e-5)


def test_fuse_module_refuses_a_block_whose_dense_branch_lacks_conv_or_bn():
    for missing in ("conv", "bn"):
        block = nn.Module()
        block.rbr_dense = nn.Module()
        setattr(block.rbr_dense, "bn" if missing == "conv" else "conv", nn.Identity())
        with pytest.raises(AttributeError, match=r"^Module: not a RepVGG block \(expected rbr_dense\.conv and "
                                                 r"rbr_dense\.bn\)$"):
            fuse_repvgg_module(block)

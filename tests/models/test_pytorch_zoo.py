"""Tests for the PyTorch model zoo definitions (trtbuild.models.pytorch)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from trtbuild.models.pytorch import (
    L2Norm,
    alexnet,
    randomize_bn_,
    rename_vgg_keys,
    repvgg_a0,
    repvgg_model_convert,
    resnet18,
    resnet50,
    vgg16_refinedet,
    vgg16_ssd,
)
from trtbuild.models.pytorch.repvgg import G4_MAP

SMALL_REPVGG = dict(width_multiplier=(0.125, 0.125, 0.125, 0.25), num_classes=10)


def _n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- L2Norm


def test_l2norm_hand_computed():
    # pixel 0: (3, 4) -> norm 5 ; pixel 1: (0, -2) -> norm 2 ; pixel 2: (0, 0) -> 0 (eps avoids NaN)
    x = torch.tensor([[[[3.0, 0.0, 0.0]], [[4.0, -2.0, 0.0]]]])  # [1, 2, 1, 3]
    norm = L2Norm(2, scale=20.0)
    assert norm.weight.tolist() == [20.0, 20.0]
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([2.0, 0.5]))
        y = norm(x)
    expected = torch.tensor([[[[1.2, 0.0, 0.0]], [[0.4, -0.5, 0.0]]]])
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-7)
    assert list(norm.state_dict()) == ["weight"]


def test_l2norm_eps_is_added_after_sqrt():
    x = torch.full((1, 1, 1, 1), 1e-3, dtype=torch.float64)
    y = L2Norm(1, 1.0, eps=1e-3).double()(x)
    # 1e-3 / (sqrt(1e-6) + 1e-3) = 0.5 ; (eps inside the sqrt would give ~0.0316)
    assert y.item() == pytest.approx(0.5)


def test_l2norm_rejects_wrong_channels():
    with pytest.raises(ValueError, match=r"L2Norm.*\[N, 4, H, W\]"):
        L2Norm(4, 1.0)(torch.zeros(1, 3, 2, 2))


# ---------------------------------------------------------------- seeding and BN randomization


def test_seeded_construction_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a = resnet18(num_classes=5, width=8, seed=1)
    assert torch.equal(torch.rand(3), expected_next)
    b = resnet18(num_classes=5, width=8, seed=1)
    c = resnet18(num_classes=5, width=8, seed=2)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert not torch.equal(a.conv1.weight, c.conv1.weight)


def test_randomize_bn_is_seeded_and_in_range():
    m1 = randomize_bn_(resnet18(width=8, num_classes=3), seed=5)
    m2 = randomize_bn_(resnet18(width=8, num_classes=3), seed=5)
    m3 = randomize_bn_(resnet18(width=8, num_classes=3), seed=6)
    assert torch.equal(m1.bn1.running_var, m2.bn1.running_var)
    assert not torch.equal(m1.bn1.running_var, m3.bn1.running_var)
    for bn in (m for m in m1.modules() if isinstance(m, nn.BatchNorm2d)):
        assert bn.running_var.min() >= 0.5 and bn.running_var.max() <= 2.0
        assert bn.weight.min() >= 0.5 and bn.weight.max() <= 1.5
        assert bn.running_mean.abs().max() > 0 and bn.bias.abs().max() > 0


# ---------------------------------------------------------------- AlexNet


def test_alexnet_original_small_forward_and_names():
    m = alexnet(num_classes=10, width=0.25, hidden=64, groups=2).eval()
    sd = m.state_dict()
    assert sd["features.0.weight"].shape == (24, 3, 11, 11)  # 96 * 0.25
    assert sd["features.4.weight"].shape == (64, 12, 5, 5)  # 256 * 0.25, groups 2 -> 24 / 2 inputs
    assert sd["features.8.weight"].shape == (96, 64, 3, 3)  # conv3 is not grouped
    assert sd["features.10.weight"].shape == (96, 48, 3, 3)  # conv4 grouped
    assert sd["features.12.weight"].shape == (64, 48, 3, 3)  # conv5 grouped
    assert sd["classifier.1.weight"].shape == (64, 64 * 6 * 6)
    assert sd["classifier.6.weight"].shape == (10, 64)
    assert isinstance(m.features[2], nn.LocalResponseNorm) and isinstance(m.features[6], nn.LocalResponseNorm)
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        feats = m.features(x)
        out = m(x)
    # 224 -conv1-> 55 -pool-> 27 -conv2-> 27 -pool-> 13 -conv3..5-> 13 -pool-> 6
    assert feats.shape == (2, 64, 6, 6)
    assert out.shape == (2, 10)


def test_alexnet_lrn_matches_hand_formula():
    lrn = alexnet(width=0.1, hidden=8).features[2]
    x = torch.arange(1.0, 8.0).reshape(1, 7, 1, 1) * 10
    y = lrn(x)
    # channel 3: window 1..5, b = a / (k + alpha / size * sum a^2) ** beta  (PyTorch/Caffe convention)
    window = sum((10.0 * c) ** 2 for c in range(2, 7))
    expected = 40.0 / (2.0 + 1e-4 / 5 * window) ** 0.75
    assert y[0, 3, 0, 0].item() == pytest.approx(expected, rel=1e-6)


def test_alexnet_torchvision_variant_names_and_param_count():
    m = alexnet(variant="torchvision")
    sd = m.state_dict()
    expected_shapes = {
        "features.0.weight": (64, 3, 11, 11),
        "features.3.weight": (192, 64, 5, 5),
        "features.6.weight": (384, 192, 3, 3),
        "features.8.weight": (256, 384, 3, 3),
        "features.10.weight": (256, 256, 3, 3),
        "classifier.1.weight": (4096, 9216),
        "classifier.4.weight": (4096, 4096),
        "classifier.6.weight": (1000, 4096),
    }
    for key, shape in expected_shapes.items():
        assert tuple(sd[key].shape) == shape, key
    assert len(sd) == 16
    assert _n_params(m) == 61_100_840  # torchvision alexnet


def test_alexnet_rejects_bad_options():
    with pytest.raises(ValueError, match="variant"):
        alexnet(variant="caffe")
    with pytest.raises(ValueError, match="groups"):
        alexnet(variant="torchvision", groups=2)


# ---------------------------------------------------------------- VGG16 backbones

SSD_CONV_INDICES = [0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33]


def test_vgg16_ssd_small_shapes_names_and_wiring():
    m = vgg16_ssd(width_divisor=8).eval()
    sd = m.state_dict()
    conv_keys = sorted(int(k.split(".")[1]) for k in sd if k.startswith("features.") and k.endswith(".weight"))
    assert conv_keys == SSD_CONV_INDICES
    assert sd["features.21.weight"].shape == (64, 64, 3, 3)  # conv4_3
    assert sd["features.31.weight"].shape == (128, 64, 3, 3)  # conv6
    assert sd["features.33.weight"].shape == (128, 128, 1, 1)  # conv7
    assert m.features[31].dilation == (6, 6) and m.features[31].padding == (6, 6)
    assert m.features[30].kernel_size == 3 and m.features[30].stride == 1
    assert torch.equal(sd["L2Norm.weight"], torch.full((64,), 20.0))
    x = torch.randn(1, 3, 300, 300)
    with torch.no_grad():
        conv4_3, conv7 = m(x)
        relu4_3 = m.features[:23](x)
    # 300 -> 150 -> 75 -> 38 (ceil) ; 38 -> 19 ; pool5 is stride 1
    assert conv4_3.shape == (1, 64, 38, 38)
    assert conv7.shape == (1, 128, 19, 19)
    hand = relu4_3 / (relu4_3.pow(2).sum(1, keepdim=True).sqrt() + 1e-10) * 20.0
    torch.testing.assert_close(conv4_3, hand)


def test_vgg16_refinedet_small_shapes_and_names():
    m = vgg16_refinedet(width_divisor=8).eval()
    sd = m.state_dict()
    assert torch.equal(sd["conv4_3_L2Norm.weight"], torch.full((64,), 10.0))
    assert torch.equal(sd["conv5_3_L2Norm.weight"], torch.full((64,), 8.0))
    assert m.features[31].dilation == (3, 3) and m.features[31].padding == (3, 3)
    assert m.features[30].kernel_size == 2 and m.features[30].stride == 2
    x = torch.randn(1, 3, 320, 320)
    with torch.no_grad():
        c4, c5, fc7 = m(x)
        relu5_3 = m.features[:30](x)
    assert c4.shape == (1, 64, 40, 40)
    assert c5.shape == (1, 64, 20, 20)
    assert fc7.shape == (1, 128, 10, 10)
    torch.testing.assert_close(c5, relu5_3 / (relu5_3.pow(2).sum(1, keepdim=True).sqrt() + 1e-10) * 8.0)


def test_vgg16_full_width_channels_and_ssd_checkpoint_rename():
    m = vgg16_ssd()
    sd = m.state_dict()
    assert sd["features.0.weight"].shape == (64, 3, 3, 3)
    assert sd["features.28.weight"].shape == (512, 512, 3, 3)  # conv5_3
    assert sd["features.31.weight"].shape == (1024, 512, 3, 3)
    assert sd["features.33.weight"].shape == (1024, 1024, 1, 1)
    ssd_style = {"vgg." + k[len("features."):]: v for k, v in sd.items() if k.startswith("features.")}
    ssd_style["L2Norm.weight"] = torch.full((512,), 7.0)
    fresh = vgg16_ssd(seed=99)
    fresh.load_state_dict(rename_vgg_keys(ssd_style), strict=True)
    assert torch.equal(fresh.features[21].weight, m.features[21].weight)
    assert fresh.L2Norm.weight[0].item() == 7.0


def test_vgg16_rejects_bad_divisor():
    with pytest.raises(ValueError, match="width_divisor"):
        vgg16_ssd(width_divisor=3)


# ---------------------------------------------------------------- ResNet


def test_resnet18_names_and_param_count():
    m = resnet18()
    sd = m.state_dict()
    assert sd["conv1.weight"].shape == (64, 3, 7, 7)
    assert sd["layer1.0.conv1.weight"].shape == (64, 64, 3, 3)
    assert "layer1.0.downsample.0.weight" not in sd
    assert sd["layer2.0.downsample.0.weight"].shape == (128, 64, 1, 1)
    assert "layer2.0.downsample.1.running_var" in sd
    assert "layer4.1.bn2.num_batches_tracked" in sd
    assert sd["fc.weight"].shape == (1000, 512)
    assert _n_params(m) == 11_689_512  # torchvision resnet18


def test_resnet50_names_stride_and_param_count():
    m = resnet50()
    sd = m.state_dict()
    assert sd["layer1.0.downsample.0.weight"].shape == (256, 64, 1, 1)
    assert sd["layer3.5.conv3.weight"].shape == (1024, 256, 1, 1)
    assert sd["fc.weight"].shape == (1000, 2048)
    assert m.layer2[0].conv1.stride == (1, 1) and m.layer2[0].conv2.stride == (2, 2)  # v1.5
    assert m.layer2[0].downsample[0].stride == (2, 2)
    assert _n_params(m) == 25_557_032  # torchvision resnet50


@pytest.mark.parametrize("ctor,fc_in", [(resnet18, 64), (resnet50, 256)])
def test_resnet_small_forward(ctor, fc_in):
    m = randomize_bn_(ctor(num_classes=10, width=8), seed=1).eval()
    assert m.fc.in_features == fc_in
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = m(x)
        feat = m.layer4(m.layer3(m.layer2(m.layer1(m.maxpool(m.relu(m.bn1(m.conv1(x))))))))
    assert feat.shape == (2, fc_in, 2, 2)  # 64 / 32
    assert out.shape == (2, 10) and torch.isfinite(out).all()


# ---------------------------------------------------------------- RepVGG


def test_repvgg_a0_names_and_shapes():
    m = repvgg_a0()
    sd = m.state_dict()
    assert sd["stage0.rbr_dense.conv.weight"].shape == (48, 3, 3, 3)
    assert sd["stage0.rbr_1x1.conv.weight"].shape == (48, 3, 1, 1)
    assert "stage0.rbr_dense.bn.running_mean" in sd and "stage0.rbr_1x1.bn.weight" in sd
    assert not any(k.startswith("stage0.rbr_identity") for k in sd)  # stride 2
    assert not any(k.startswith("stage1.0.rbr_identity") for k in sd)  # stride 2
    assert sd["stage1.1.rbr_identity.running_var"].shape == (48,)
    assert sd["stage3.13.rbr_dense.conv.weight"].shape == (192, 192, 3, 3)
    assert sd["stage4.0.rbr_dense.conv.weight"].shape == (1280, 192, 3, 3)
    assert sd["linear.weight"].shape == (1000, 1280)
    assert [len(s) for s in (m.stage1, m.stage2, m.stage3, m.stage4)] == [2, 4, 14, 1]
    # RepVGG paper, table: A0 has 8.30M parameters once re-parameterized
    assert round(_n_params(repvgg_model_convert(m)) / 1e6, 1) == 8.3


def test_repvgg_groups_map_applies_to_the_right_layers():
    m = repvgg_a0(override_groups_map=G4_MAP, **SMALL_REPVGG)
    # layer 1 = stage1.0 (dense), layer 2 = stage1.1 (groupwise), layer 3 = stage2.0 (dense)
    assert m.stage1[0].rbr_dense.conv.groups == 1
    assert m.stage1[1].rbr_dense.conv.groups == 4 and m.stage1[1].rbr_1x1.conv.groups == 4
    assert m.stage1[1].rbr_dense.conv.weight.shape == (8, 2, 3, 3)
    assert m.stage2[0].rbr_dense.conv.groups == 1


@pytest.mark.parametrize("groups_map", [None, G4_MAP], ids=["dense", "g4"])
def test_repvgg_deploy_matches_training_form(groups_map):
    m = repvgg_a0(override_groups_map=groups_map, **SMALL_REPVGG)
    randomize_bn_(m, seed=3).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        expected = m(x)
        deployed = repvgg_model_convert(m)
        got = deployed(x)
    assert list(deployed.state_dict())[:2] == ["stage0.rbr_reparam.weight", "stage0.rbr_reparam.bias"]
    assert not any("rbr_dense" in k or "rbr_identity" in k for k in deployed.state_dict())
    assert "stage0.rbr_dense.conv.weight" in m.state_dict()  # convert copies, original kept
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # the fused weights load into a model built directly in deploy form
    direct = repvgg_a0(override_groups_map=groups_map, deploy=True, seed=7, **SMALL_REPVGG).eval()
    direct.load_state_dict(deployed.state_dict(), strict=True)
    with torch.no_grad():
        torch.testing.assert_close(direct(x), got, rtol=0, atol=0)


def test_repvgg_a0_full_width_deploy_matches():
    m = randomize_bn_(repvgg_a0(), seed=11).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        expected = m(x)
        got = m.switch_to_deploy()(x)
    scale = max(1.0, expected.abs().max().item())
    assert (got - expected).abs().max().item() <= 1e-5 * scale


def test_repvgg_training_state_dict_round_trips():
    a = randomize_bn_(repvgg_a0(**SMALL_REPVGG), seed=1).eval()
    b = repvgg_a0(seed=5, **SMALL_REPVGG).eval()
    b.load_state_dict(a.state_dict(), strict=True)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))
    assert math.isclose(a.stage1[1].rbr_identity.running_var.sum().item(),
                        b.stage1[1].rbr_identity.running_var.sum().item())

"""RedNet (Li et al., CVPR 2021): a ResNet whose bottleneck 3x3 convs are involutions.

Follows the official d-li14/involution mmcls backbone (``mmcls/models/backbones/rednet.py``):

- stem: ConvModule(3 -> stem/2, 3x3, stride 2) -> involution(stem/2, K=3) -> BN -> ReLU ->
  ConvModule(stem/2 -> stem, 3x3), then MaxPool(3, 2, 1);
- four stages of Bottlenecks (expansion 4, "pytorch" style: the stride sits on the involution),
  the first block of a stage downsampling with a strided 1x1 conv + BN;
- global average pool and a linear classifier (mmcls GlobalAveragePooling neck + LinearClsHead).

Involutions are :class:`trtbuild.ops.involution.Involution` (reduce 1x1 conv + BN + ReLU, span 1x1
conv giving K*K*G kernels per pixel, the op), K = 7 in the blocks and 3 in the stem.

State dict (mmcv ConvModule names; the official checkpoints' ``backbone.`` / ``head.`` prefixes
dropped)::

    stem.0.conv.weight  stem.0.bn.*               (3x3 conv + BN, ReLU "stem.0.activate")
    stem.1.conv1.conv.weight  stem.1.conv1.bn.*  stem.1.conv2.conv.{weight,bias}   (involution)
    stem.2.*  (BN)   stem.4.conv.weight  stem.4.bn.*
    layerL.B.conv1.weight  layerL.B.bn1.*                        (1x1 reduce)
    layerL.B.conv2.conv1.conv.weight  .conv2.conv1.bn.*  .conv2.conv2.conv.{weight,bias}  (involution)
    layerL.B.bn2.*  layerL.B.conv3.weight  layerL.B.bn3.*
    layerL.0.downsample.0.weight (1x1, stride)  layerL.0.downsample.1.* (BN)
    fc.weight  fc.bias

Init (drawn under ``seed``): every conv weight kaiming-normal (fan_out, relu) as mmcls'
``kaiming_init``; the span convs keep PyTorch's default uniform bias (mmcls zeroes it) so that the
bias matters in parity checks; BN weight 1 / bias 0 (use ``randomize_bn_`` for statistics); fc
PyTorch default.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from trtbuild.ops.involution import Involution

from .common import seeded
from .resnet import Bottleneck

__all__ = ["ConvModule", "RedNetBottleneck", "RedNet", "rednet", "damp_residual_branches_", "calibrate_bn_",
           "REDNET_DEPTHS", "STEM_KERNEL", "BLOCK_KERNEL"]

#: depth -> blocks per stage (official arch_settings).
REDNET_DEPTHS = {26: (1, 2, 4, 1), 38: (2, 3, 5, 2), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
#: Involution kernel sizes of the official architecture.
STEM_KERNEL, BLOCK_KERNEL = 3, 7


class ConvModule(nn.Module):
    """Conv (no bias) + BN + ReLU with mmcv ConvModule's submodule names (conv, bn, activate)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.activate = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activate(self.bn(self.conv(x)))


class RedNetBottleneck(nn.Module):
    """conv1 1x1-bn1-relu, conv2 = Involution(K=7, stride)-bn2-relu, conv3 1x1-bn3, + identity, relu."""

    expansion = 4

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1, downsample: nn.Module | None = None,
                 group_channels: int = 16):
        super().__init__()
        mid = out_channels // self.expansion
        self.conv1 = nn.Conv2d(in_channels, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = Involution(mid, BLOCK_KERNEL, stride, group_channels=group_channels)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    forward = Bottleneck.forward  # the same residual wiring; only conv2 (an involution) differs


class RedNet(nn.Module):
    """RedNet classifier.

    Args:
        blocks: bottlenecks per stage, e.g. ``(1, 2, 4, 1)`` for RedNet-26.
        num_classes: size of ``fc``.
        stem_channels: stem output channels (the stem involution runs on half of them).
        base_channels: stage-1 bottleneck width; stage widths are ``base * [1, 2, 4, 8]``, stage
            outputs 4x that.
        group_channels: channels sharing one involution kernel (16 officially); must divide
            ``stem_channels // 2`` and every bottleneck width.
    """

    def __init__(self, blocks: Sequence[int] = REDNET_DEPTHS[26], num_classes: int = 1000, stem_channels: int = 64,
                 base_channels: int = 64, group_channels: int = 16):
        super().__init__()
        if len(blocks) != 4 or any(int(n) < 1 for n in blocks):
            raise ValueError(f"RedNet: blocks must be 4 positive counts, got {list(blocks)}")
        half = stem_channels // 2
        if half < 1 or half % group_channels or base_channels % group_channels:
            raise ValueError(f"RedNet: group_channels={group_channels} must divide stem_channels // 2 ({half}) and "
                             f"base_channels ({base_channels})")
        self.stem = nn.Sequential(
            ConvModule(3, half, 3, stride=2, padding=1),
            Involution(half, STEM_KERNEL, 1, group_channels=group_channels),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
            ConvModule(half, stem_channels, 3, stride=1, padding=1),
        )
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_ch, out_ch = stem_channels, base_channels * RedNetBottleneck.expansion
        for stage, n in enumerate(blocks, start=1):
            stride = 1 if stage == 1 else 2
            downsample = None
            if stride != 1 or in_ch != out_ch:
                downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))
            layers = [RedNetBottleneck(in_ch, out_ch, stride, downsample, group_channels)]
            layers += [RedNetBottleneck(out_ch, out_ch, 1, None, group_channels) for _ in range(1, int(n))]
            self.add_module(f"layer{stage}", nn.Sequential(*layers))
            in_ch, out_ch = out_ch, out_ch * 2
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_ch, num_classes)

        for _, m in self.named_modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.stem(x))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def rednet(depth: int = 26, num_classes: int = 1000, stem_channels: int = 64, base_channels: int = 64,
           group_channels: int = 16, seed: int | None = 0) -> RedNet:
    """RedNet-``depth`` (26, 38, 50, 101 or 152), weights drawn under ``seed`` (see module docstring).

    Input H and W must be multiples of 32 (strided involutions need even extents).
    """
    if depth not in REDNET_DEPTHS:
        raise ValueError(f"rednet: depth must be one of {sorted(REDNET_DEPTHS)}, got {depth}")
    with seeded(seed):
        return RedNet(REDNET_DEPTHS[depth], num_classes, stem_channels, base_channels, group_channels)


@torch.no_grad()
def calibrate_bn_(model: nn.Module, input_shape: Sequence[int], seed: int = 0, batches: int = 2,
                  value_range: tuple[float, float] = (-1.0, 1.0)) -> nn.Module:
    """Set every BatchNorm's running mean/var to the statistics of uniform random inputs, in place.

    An involution's output is roughly quadratic in its input (its kernels are computed from that
    input), so with random weights and *random* BN statistics the activations of a RedNet blow up
    (measured: 1e6 at the small model's logits, inf/NaN at full size). With statistics measured on
    data, every BN normalizes as in a trained network. Runs ``batches`` train-mode forwards on
    inputs of ``input_shape`` (N, C, H, W) drawn uniformly from ``value_range`` with a generator
    seeded by ``seed`` (global RNG untouched); BN affine parameters (gamma/beta) are kept. Returns
    ``model`` in eval mode.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in bns]
    gen = torch.Generator().manual_seed(int(seed))
    lo, hi = value_range
    try:
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(batches):
            model(torch.rand(tuple(input_shape), generator=gen) * (hi - lo) + lo)
    finally:
        for m, momentum in zip(bns, momenta):
            m.momentum = momentum
        model.eval()
    return model


@torch.no_grad()
def damp_residual_branches_(model: nn.Module, factor: float = 0.25) -> nn.Module:
    """Multiply the last BN (``bn3``) gamma and beta of every bottleneck by ``factor``, in place.

    The official RedNet zero-initializes these (``zero_init_residual``); trained networks keep them
    small. With the U(0.5, 1.5) gammas of ``randomize_bn_`` and calibrated statistics, a random
    RedNet is chaotic: measured, fp16 rounding alone moves its logits by 1.3 % to 6 % of their
    largest value (seeds 0-2, small and full); with ``factor`` 0.25 by 0.06 % to 0.11 %.
    Returns ``model``.
    """
    for m in model.modules():
        if isinstance(m, RedNetBottleneck):
            m.bn3.weight.mul_(factor)
            m.bn3.bias.mul_(factor)
    return model

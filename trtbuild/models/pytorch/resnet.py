"""ResNet-18 / ResNet-50 (v1.5: stride on the 3x3 conv), torchvision layout and names.

State dict (torchvision-compatible)::

    conv1.weight  bn1.{weight,bias,running_mean,running_var,num_batches_tracked}
    layerL.B.conv1 / bn1 / conv2 / bn2 [/ conv3 / bn3]   (L = 1..4, B = block index)
    layerL.0.downsample.0 (1x1 conv, stride)  layerL.0.downsample.1 (BN)
    fc.weight  fc.bias
"""

from __future__ import annotations

from typing import Sequence, Type

import torch
from torch import nn

from .common import seeded

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet50"]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """3x3 conv, padding 1, no bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 conv, no bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """conv3x3-bn-relu-conv3x3-bn (+ identity or downsample), relu."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """conv1x1-bn-relu-conv3x3(stride)-bn-relu-conv1x1-bn (+ identity or downsample), relu."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision-style ResNet.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: blocks per stage, e.g. ``[2, 2, 2, 2]``.
        num_classes: size of ``fc``.
        width: base channels (64 in torchvision); stage widths are ``width * [1, 2, 4, 8]``.
    """

    def __init__(
        self,
        block: Type[BasicBlock] | Type[Bottleneck],
        layers: Sequence[int],
        num_classes: int = 1000,
        width: int = 64,
    ) -> None:
        super().__init__()
        if len(layers) != 4 or any(n < 1 for n in layers):
            raise ValueError(f"ResNet: layers must be 4 positive block counts, got {list(layers)}")
        if width < 1:
            raise ValueError(f"ResNet: width must be >= 1, got {width}")
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet18(num_classes: int = 1000, width: int = 64, seed: int | None = 0) -> ResNet:
    """ResNet-18 (BasicBlock, [2, 2, 2, 2]), torchvision init drawn under ``seed``."""
    with seeded(seed):
        return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, width)


def resnet50(num_classes: int = 1000, width: int = 64, seed: int | None = 0) -> ResNet:
    """ResNet-50 (Bottleneck v1.5, [3, 4, 6, 3]), torchvision init drawn under ``seed``."""
    with seeded(seed):
        return ResNet(Bottleneck, [3, 4, 6, 3], num_classes, width)

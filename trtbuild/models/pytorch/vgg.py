"""VGG16 backbones for SSD and RefineDet (the ``vgg`` base of ssd.pytorch / RefineDet.PyTorch).

The layers live in one ``nn.Sequential`` named ``features`` whose indices are the same as
ssd.pytorch's ``vgg.N`` (use :func:`rename_vgg_keys` to load such checkpoints)::

    0 conv1_1  2 conv1_2  4 pool1            5 conv2_1  7 conv2_2  9 pool2
    10 conv3_1 12 conv3_2 14 conv3_3 16 pool3 (2x2 s2, ceil_mode)
    17 conv4_1 19 conv4_2 21 conv4_3 (22 = relu4_3)  23 pool4
    24 conv5_1 26 conv5_2 28 conv5_3 (29 = relu5_3)
    30 pool5   31 conv6  33 conv7 (34 = relu7)

(every conv is 3x3 pad 1 and followed by an in-place ReLU at the next index.)
SSD:       pool5 = MaxPool 3x3 s1 p1, conv6 = 3x3 dilation 6 pad 6, 1024 channels.
RefineDet: pool5 = MaxPool 2x2 s2,    conv6 = 3x3 dilation 3 pad 3, 1024 channels.
conv7 = 1x1, 1024 channels, in both.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import seeded
from .l2norm import L2Norm

__all__ = [
    "vgg16_base",
    "VGG16SSD",
    "VGG16RefineDet",
    "vgg16_ssd",
    "vgg16_refinedet",
    "rename_vgg_keys",
    "CONV4_3_RELU",
    "CONV5_3_RELU",
]

CONV4_3_RELU = 22  # index of relu4_3 in ``features``
CONV5_3_RELU = 29  # index of relu5_3 in ``features``

_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "C", 512, 512, 512, "M", 512, 512, 512]


def _div(channels: int, width_divisor: int) -> int:
    if width_divisor < 1 or channels % width_divisor != 0:
        raise ValueError(f"VGG16: width_divisor must be a positive divisor of {channels}, got {width_divisor}")
    return channels // width_divisor


def vgg16_base(
    variant: str = "ssd", in_channels: int = 3, width_divisor: int = 1, conv6_7: bool = True
) -> list[nn.Module]:
    """Layer list of the VGG16 detection base (see module docstring for indices).

    Args:
        variant: ``"ssd"`` or ``"refinedet"`` (selects pool5 and conv6's dilation).
        in_channels: input image channels.
        width_divisor: divides every channel count (1 = full VGG16; e.g. 8 for small tests).
        conv6_7: append pool5, conv6, relu6, conv7, relu7 (indices 30..34).
    """
    if variant not in ("ssd", "refinedet"):
        raise ValueError(f"VGG16: variant must be 'ssd' or 'refinedet', got {variant!r}")
    layers: list[nn.Module] = []
    c_in = in_channels
    for v in _CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        elif v == "C":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2, ceil_mode=True))
        else:
            c_out = _div(int(v), width_divisor)
            layers += [nn.Conv2d(c_in, c_out, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            c_in = c_out
    if conv6_7:
        c6 = _div(1024, width_divisor)
        if variant == "ssd":
            pool5 = nn.MaxPool2d(kernel_size=3, stride=1, padding=1)
            conv6 = nn.Conv2d(c_in, c6, kernel_size=3, padding=6, dilation=6)
        else:
            pool5 = nn.MaxPool2d(kernel_size=2, stride=2, padding=0)
            conv6 = nn.Conv2d(c_in, c6, kernel_size=3, padding=3, dilation=3)
        conv7 = nn.Conv2d(c6, c6, kernel_size=1)
        layers += [pool5, conv6, nn.ReLU(inplace=True), conv7, nn.ReLU(inplace=True)]
    return layers


class VGG16SSD(nn.Module):
    """SSD's VGG16 base, heads-free. ``forward(x) -> (conv4_3 L2Norm'd (scale 20), conv7)``.

    State dict: ``features.N.weight/bias`` and ``L2Norm.weight`` (the ssd.pytorch name).
    """

    def __init__(self, width_divisor: int = 1, l2norm_scale: float = 20.0) -> None:
        super().__init__()
        self.features = nn.Sequential(*vgg16_base("ssd", 3, width_divisor))
        self.L2Norm = L2Norm(_div(512, width_divisor), l2norm_scale)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for k in range(CONV4_3_RELU + 1):
            x = self.features[k](x)
        conv4_3 = self.L2Norm(x)
        for k in range(CONV4_3_RELU + 1, len(self.features)):
            x = self.features[k](x)
        return conv4_3, x


class VGG16RefineDet(nn.Module):
    """RefineDet's VGG16 base, heads-free.

    ``forward(x) -> (conv4_3 L2Norm'd (scale 10), conv5_3 L2Norm'd (scale 8), fc7/conv7)``.
    State dict: ``features.N.*``, ``conv4_3_L2Norm.weight``, ``conv5_3_L2Norm.weight``
    (the RefineDet.PyTorch names).
    """

    def __init__(self, width_divisor: int = 1, scale4_3: float = 10.0, scale5_3: float = 8.0) -> None:
        super().__init__()
        self.features = nn.Sequential(*vgg16_base("refinedet", 3, width_divisor))
        c = _div(512, width_divisor)
        self.conv4_3_L2Norm = L2Norm(c, scale4_3)
        self.conv5_3_L2Norm = L2Norm(c, scale5_3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        outs = []
        for k in range(CONV5_3_RELU + 1):
            x = self.features[k](x)
            if k == CONV4_3_RELU:
                outs.append(self.conv4_3_L2Norm(x))
            elif k == CONV5_3_RELU:
                outs.append(self.conv5_3_L2Norm(x))
        for k in range(CONV5_3_RELU + 1, len(self.features)):
            x = self.features[k](x)
        return outs[0], outs[1], x


def vgg16_ssd(width_divisor: int = 1, seed: int | None = 0) -> VGG16SSD:
    """Build a :class:`VGG16SSD` with PyTorch-default init drawn under ``seed``."""
    with seeded(seed):
        return VGG16SSD(width_divisor)


def vgg16_refinedet(width_divisor: int = 1, seed: int | None = 0) -> VGG16RefineDet:
    """Build a :class:`VGG16RefineDet` with PyTorch-default init drawn under ``seed``."""
    with seeded(seed):
        return VGG16RefineDet(width_divisor)


def rename_vgg_keys(state_dict: dict, prefix: str = "vgg.") -> dict:
    """Map ssd.pytorch / RefineDet.PyTorch keys ``vgg.N.*`` to ``features.N.*`` (other keys kept).

    Keys of heads (``extras``, ``loc``, ``conf``, ``arm_*``, ...) are returned unchanged; filter
    them out before ``load_state_dict(strict=True)`` on a heads-free backbone.
    """
    return {("features." + k[len(prefix):] if k.startswith(prefix) else k): v for k, v in state_dict.items()}

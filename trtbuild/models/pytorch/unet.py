"""UNet (Ronneberger et al.) in the layout of the widely used milesial/Pytorch-UNet, with options.

State dict::

    inc.double_conv.{0,3}.weight (3x3 convs, no bias)  inc.double_conv.{1,4}.* (norms)
    downK.maxpool_conv.1.double_conv...                 (K = 1..depth; maxpool_conv.0 is a 2x2 max pool)
    upK.up.{weight,bias}  (upsample="transposed" only)  upK.conv.double_conv...
    outc.conv.{weight,bias}                             (1x1 conv to the classes)

Options: ``norm`` "batch" (BatchNorm2d, default) or "group" (GroupNorm of ``groups`` groups; the
state dict then holds no running statistics); ``upsample`` "bilinear" (x2, ``align_corners`` False by
default; the deepest Down halves its width so each skip concat doubles it, as in milesial's factor 2)
or "transposed" (ConvTranspose2d k2 s2 halving the channels). Each Up concatenates
``[skip, upsampled]`` along channels. H and W must be multiples of 2**depth (no padding of odd sizes).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import seeded

__all__ = ["UNet", "unet", "NORMS", "UPSAMPLES"]

NORMS = ("batch", "group")
UPSAMPLES = ("bilinear", "transposed")


def _norm(kind: str, c: int, groups: int) -> nn.Module:
    return nn.BatchNorm2d(c) if kind == "batch" else nn.GroupNorm(groups, c)


class DoubleConv(nn.Module):
    """(3x3 conv, norm, ReLU) twice; ``mid`` channels in between (default ``out``)."""

    def __init__(self, c_in: int, c_out: int, mid: int | None = None, norm: str = "batch", groups: int = 8) -> None:
        super().__init__()
        mid = mid or c_out
        self.double_conv = nn.Sequential(
            nn.Conv2d(c_in, mid, 3, padding=1, bias=False), _norm(norm, mid, groups), nn.ReLU(inplace=True),
            nn.Conv2d(mid, c_out, 3, padding=1, bias=False), _norm(norm, c_out, groups), nn.ReLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.double_conv(x)


class Down(nn.Module):
    """2x2 max pool, then DoubleConv."""

    def __init__(self, c_in: int, c_out: int, norm: str, groups: int) -> None:
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(c_in, c_out, norm=norm, groups=groups))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upsample x2 (bilinear, or a transposed conv to half the channels), concat the skip first, DoubleConv."""

    def __init__(self, c_in: int, c_out: int, upsample: str, norm: str, groups: int, align_corners: bool) -> None:
        super().__init__()
        self.upsample, self.align_corners = upsample, align_corners
        if upsample == "bilinear":
            self.conv = DoubleConv(c_in, c_out, c_in // 2, norm, groups)
        else:
            self.up = nn.ConvTranspose2d(c_in, c_in // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(c_in, c_out, norm=norm, groups=groups)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        if self.upsample == "bilinear":
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=self.align_corners)
        else:
            x = self.up(x)
        return self.conv(torch.cat([skip, x], dim=1))


class OutConv(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class UNet(nn.Module):
    """UNet: ``inc``, ``down1..down{depth}``, ``up1..up{depth}``, ``outc``; widths base * 2**k.

    Args:
        in_channels, classes: input channels and output logits per pixel.
        base: width of the first level (64 in the paper). depth: number of 2x down/up steps.
        norm, groups: "batch" or "group" (GroupNorm with ``groups`` groups; must divide every width).
        upsample, align_corners: "bilinear" (with align_corners) or "transposed".
    """

    def __init__(self, in_channels: int = 3, classes: int = 2, base: int = 64, depth: int = 4, norm: str = "batch",
                 groups: int = 8, upsample: str = "bilinear", align_corners: bool = False) -> None:
        super().__init__()
        if norm not in NORMS or upsample not in UPSAMPLES:
            raise ValueError(f"UNet: norm must be one of {NORMS} and upsample one of {UPSAMPLES}, got {norm!r}, "
                             f"{upsample!r}")
        if depth < 1 or base < 1:
            raise ValueError(f"UNet: depth and base must be >= 1, got depth={depth}, base={base}")
        self.depth = depth
        factor = 2 if upsample == "bilinear" else 1
        widths = [base * 2 ** k for k in range(depth + 1)]
        self.inc = DoubleConv(in_channels, base, norm=norm, groups=groups)
        for k in range(1, depth + 1):
            last = k == depth
            setattr(self, f"down{k}", Down(widths[k - 1], widths[k] // (factor if last else 1), norm, groups))
        for k in range(1, depth + 1):
            c_in = widths[depth - k + 1]
            c_out = widths[depth - k] // (factor if k < depth else 1)
            setattr(self, f"up{k}", Up(c_in, c_out, upsample, norm, groups, align_corners))
        self.outc = OutConv(base, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        step = 2 ** self.depth
        if x.shape[2] % step or x.shape[3] % step:
            raise ValueError(f"UNet: input H and W must be multiples of 2**depth = {step}, got {tuple(x.shape)}")
        skips = [self.inc(x)]
        for k in range(1, self.depth + 1):
            skips.append(getattr(self, f"down{k}")(skips[-1]))
        y = skips.pop()
        for k in range(1, self.depth + 1):
            y = getattr(self, f"up{k}")(y, skips.pop())
        return self.outc(y)


def unet(classes: int = 2, base: int = 64, depth: int = 4, norm: str = "batch", groups: int = 8,
         upsample: str = "bilinear", align_corners: bool = False, in_channels: int = 3,
         seed: int | None = 0) -> UNet:
    """A UNet with PyTorch's default init drawn under ``seed`` (see :class:`UNet` for the arguments)."""
    with seeded(seed):
        model = UNet(in_channels, classes, base, depth, norm, groups, upsample, align_corners)
    if norm == "group":  # non-trivial affine parameters, so the per-channel scale and shift are checked
        gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, nn.GroupNorm):
                    m.weight.copy_(torch.rand(m.num_channels, generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(m.num_channels, generator=gen) * 0.2)
    return model

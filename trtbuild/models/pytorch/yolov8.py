"""YOLOv8 detection model with Ultralytics' module tree, so its state dict loads Ultralytics' weights.

Written from the architecture Ultralytics publishes (``ultralytics/cfg/models/v8/yolov8.yaml`` and its
Conv, C2f, Bottleneck, SPPF, DFL and Detect modules); no Ultralytics code or package is needed. The
modules sit in ``model`` (an ``nn.Sequential`` whose forward is not used: layers 11, 14, 17 and 20
concatenate an earlier layer's output, and 22 reads three), so the keys are Ultralytics' own::

    model.0.conv.weight  model.0.bn.{weight,bias,running_mean,running_var,num_batches_tracked}
    model.2.cv1.conv.weight ... model.2.m.0.cv1.conv.weight ...   (C2f)
    model.9.cv1 / cv2  (SPPF)      model.22.cv2.I.{0,1}.conv / bn, model.22.cv2.I.2.{weight,bias}
    model.22.cv3.I...  (classes)   model.22.dfl.conv.weight [1, 16, 1, 1] = arange(16)

Scale n: width 0.25, depth 0.33, max_channels 1024 (widths 16/32/64/128/256, C2f repeats 1/2/2/1 in
the backbone and 1 in the neck). BatchNorm eps is 1e-3 and momentum 0.03, the values Ultralytics'
``initialize_weights`` gives every BatchNorm (state dicts do not store them).

The forward returns what Ultralytics exports in export mode: one ``(N, 4 + classes, anchors)``
tensor, boxes decoded with DFL (softmax over the ``reg_max`` bins, then their expectation) around
the anchor points (cell centres) at strides 8, 16, 32, then sigmoid class scores. Ultralytics
decodes to centre-size boxes (cx, cy, w, h); ``boxes="xyxy"`` gives corners instead.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .common import seeded

__all__ = ["YOLOv8", "yolov8n", "make_anchors", "dist2bbox", "YOLOV8_STRIDES", "BN_EPS"]

#: strides of the three detection levels (P3, P4, P5)
YOLOV8_STRIDES = (8, 16, 32)
BN_EPS, BN_MOMENTUM = 1e-3, 0.03
BOX_FORMATS = ("xywh", "xyxy")


class Conv(nn.Module):
    """Conv2d (no bias, 'same' padding k // 2) -> BatchNorm2d -> SiLU."""

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1, g: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    """Two 3x3 Convs, plus the input when ``shortcut`` and the widths agree."""

    def __init__(self, c1: int, c2: int, shortcut: bool = True) -> None:
        super().__init__()
        self.cv1 = Conv(c1, c2, 3)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    """cv1 to 2c channels, split in two halves; each Bottleneck feeds on the last piece; cv2 of them all."""

    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = False) -> None:
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    """cv1 to c1 / 2, three chained k x k stride-1 max pools, cv2 of the four maps concatenated."""

    def __init__(self, c1: int, c2: int, k: int = 5) -> None:
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(self.m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class Concat(nn.Module):
    """torch.cat of a list along channels (a module so that the layer index keeps its place)."""

    def forward(self, xs: list) -> torch.Tensor:
        return torch.cat(xs, 1)


class DFL(nn.Module):
    """Distribution focal loss integral: softmax over ``c1`` bins, then a fixed 1x1 conv with weights 0..c1-1."""

    def __init__(self, c1: int = 16) -> None:
        super().__init__()
        self.c1 = c1
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        with torch.no_grad():
            self.conv.weight.copy_(torch.arange(c1, dtype=torch.float).view(1, c1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(shapes, strides, offset: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """((A, 2) anchor points (x, y) in grid cells, (A, 1) strides) for feature maps of ``shapes``
    [(h, w), ...], row-major per level: the cell centres when ``offset`` is 0.5."""
    points, stride_col = [], []
    for (h, w), s in zip(shapes, strides):
        sy, sx = torch.meshgrid(torch.arange(h, dtype=torch.float) + offset,
                                torch.arange(w, dtype=torch.float) + offset, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_col.append(torch.full((h * w, 1), float(s)))
    return torch.cat(points), torch.cat(stride_col)


def dist2bbox(distance: torch.Tensor, anchors: torch.Tensor, xywh: bool = True, dim: int = 1) -> torch.Tensor:
    """Distances (left, top, right, bottom) from the anchor points to boxes: (cx, cy, w, h) or (x1, y1, x2, y2)."""
    lt, rb = distance.chunk(2, dim)
    x1y1, x2y2 = anchors - lt, anchors + rb
    if xywh:
        return torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), dim)
    return torch.cat((x1y1, x2y2), dim)


class Detect(nn.Module):
    """Decoupled head: per level a box branch (cv2: Conv, Conv, Conv2d to 4 * reg_max) and a class
    branch (cv3: Conv, Conv, Conv2d to nc), then DFL and the anchor-free decode."""

    def __init__(self, nc: int, ch: tuple, reg_max: int = 16, strides=YOLOV8_STRIDES, boxes: str = "xywh") -> None:
        super().__init__()
        if boxes not in BOX_FORMATS:
            raise ValueError(f"Detect: boxes={boxes!r} is not one of {BOX_FORMATS}")
        self.nc, self.nl, self.reg_max, self.boxes = nc, len(ch), reg_max, boxes
        self.level_strides = tuple(strides)
        c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1))
                                 for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
        self.dfl = DFL(reg_max)

    def forward(self, xs: list) -> torch.Tensor:
        n = xs[0].shape[0]
        box = torch.cat([self.cv2[i](x).view(n, 4 * self.reg_max, -1) for i, x in enumerate(xs)], 2)
        cls = torch.cat([self.cv3[i](x).view(n, self.nc, -1) for i, x in enumerate(xs)], 2)
        anchors, strides = make_anchors([tuple(x.shape[2:]) for x in xs], self.level_strides)
        anchors, strides = anchors.to(box.dtype).t(), strides.to(box.dtype).t()
        dbox = dist2bbox(self.dfl(box), anchors.unsqueeze(0), xywh=self.boxes == "xywh", dim=1) * strides
        return torch.cat((dbox, cls.sigmoid()), 1)


def _ch(c: int, width: float, max_channels: int) -> int:
    """Ultralytics' channel rule: min(c, max_channels) * width, rounded up to a multiple of 8."""
    return int(math.ceil(min(c, max_channels) * width / 8) * 8)


def _n(n: int, depth: float) -> int:
    return max(round(n * depth), 1) if n > 1 else n


class YOLOv8(nn.Module):
    """yolov8.yaml at one scale: ``model.0`` .. ``model.22`` (the indices Ultralytics' keys use).

    The layer table is (from, module): from -1 is the previous layer; the neck's Concats also read
    layers 6, 4, 12 and 9, and Detect reads 15, 18 and 21 (P3, P4, P5).
    """

    FROM = (-1,) * 11 + ((-1, 6), -1, -1, (-1, 4), -1, -1, (-1, 12), -1, -1, (-1, 9), -1, (15, 18, 21))

    def __init__(self, nc: int = 80, width: float = 0.25, depth: float = 0.33, max_channels: int = 1024,
                 boxes: str = "xywh") -> None:
        super().__init__()
        c = {k: _ch(k, width, max_channels) for k in (64, 128, 256, 512, 1024)}
        layers = [
            Conv(3, c[64], 3, 2), Conv(c[64], c[128], 3, 2), C2f(c[128], c[128], _n(3, depth), True),
            Conv(c[128], c[256], 3, 2), C2f(c[256], c[256], _n(6, depth), True),
            Conv(c[256], c[512], 3, 2), C2f(c[512], c[512], _n(6, depth), True),
            Conv(c[512], c[1024], 3, 2), C2f(c[1024], c[1024], _n(3, depth), True), SPPF(c[1024], c[1024], 5),
            nn.Upsample(scale_factor=2, mode="nearest"), Concat(), C2f(c[1024] + c[512], c[512], _n(3, depth)),
            nn.Upsample(scale_factor=2, mode="nearest"), Concat(), C2f(c[512] + c[256], c[256], _n(3, depth)),
            Conv(c[256], c[256], 3, 2), Concat(), C2f(c[256] + c[512], c[512], _n(3, depth)),
            Conv(c[512], c[512], 3, 2), Concat(), C2f(c[512] + c[1024], c[1024], _n(3, depth)),
            Detect(nc, (c[256], c[512], c[1024]), boxes=boxes),
        ]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[2] % 32 or x.shape[3] % 32:
            raise ValueError(f"YOLOv8: input H and W must be multiples of 32 (the largest stride), got "
                             f"{tuple(x.shape)}")
        outs = []
        for m, f in zip(self.model, self.FROM):
            if f != -1:
                x = [outs[j] if j != -1 else x for j in f]
            x = m(x)
            outs.append(x)
        return x


def yolov8n(nc: int = 80, boxes: str = "xywh", seed: int | None = 0) -> YOLOv8:
    """YOLOv8n (width 0.25, depth 0.33, max_channels 1024), PyTorch default init drawn under ``seed``."""
    with seeded(seed):
        return YOLOv8(nc, 0.25, 0.33, 1024, boxes)

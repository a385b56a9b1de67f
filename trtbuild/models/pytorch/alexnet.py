"""AlexNet, in its original form (with LRN) or the torchvision form.

State-dict names follow torchvision (``features.N``, ``classifier.N``):

original (``variant="original"``, Krizhevsky et al. 2012, channel counts 96/256/384/384/256)::

    features.0  conv1 11x11 s4 p2     features.1 ReLU  features.2 LRN  features.3 MaxPool 3 s2
    features.4  conv2 5x5 p2 (groups) features.5 ReLU  features.6 LRN  features.7 MaxPool 3 s2
    features.8  conv3 3x3 p1          features.9 ReLU
    features.10 conv4 3x3 p1 (groups) features.11 ReLU
    features.12 conv5 3x3 p1 (groups) features.13 ReLU features.14 MaxPool 3 s2
    avgpool AdaptiveAvgPool2d(6)
    classifier.0 Dropout  classifier.1 Linear  classifier.2 ReLU
    classifier.3 Dropout  classifier.4 Linear  classifier.5 ReLU  classifier.6 Linear

torchvision (``variant="torchvision"``, channel counts 64/192/384/256/256, no LRN) uses
torchvision's exact indices (convs at features.0/3/6/8/10), so torchvision checkpoints load.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import seeded

__all__ = ["AlexNet", "alexnet", "LRN_SIZE", "LRN_ALPHA", "LRN_BETA", "LRN_K"]

# Original AlexNet LRN hyper-parameters. PyTorch's LocalResponseNorm divides alpha by size:
# b = a / (k + alpha/size * sum_{window} a^2) ** beta.
LRN_SIZE, LRN_ALPHA, LRN_BETA, LRN_K = 5, 1e-4, 0.75, 2.0

_ORIGINAL_CHANNELS = (96, 256, 384, 384, 256)
_TORCHVISION_CHANNELS = (64, 192, 384, 256, 256)


def _scaled(channels: int, width: float, groups: int) -> int:
    """Scale a channel count by ``width``, rounded to a positive multiple of ``groups``."""
    c = max(groups, int(round(channels * width)))
    return max(groups, (c // groups) * groups)


class AlexNet(nn.Module):
    """AlexNet classifier.

    Args:
        num_classes: size of the last Linear layer.
        variant: ``"original"`` (LRN, 96-256-384-384-256) or ``"torchvision"``.
        width: multiplier on every conv channel count (for small test models).
        hidden: width of the two hidden Linear layers (4096 in the paper).
        groups: groups of conv2, conv4 and conv5 (2 in the paper; default 1), original only.
        dropout: dropout probability of the classifier.
    """

    def __init__(
        self,
        num_classes: int = 1000,
        variant: str = "original",
        width: float = 1.0,
        hidden: int = 4096,
        groups: int = 1,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if variant not in ("original", "torchvision"):
            raise ValueError(f"AlexNet: variant must be 'original' or 'torchvision', got {variant!r}")
        if width <= 0:
            raise ValueError(f"AlexNet: width must be > 0, got {width}")
        if groups < 1:
            raise ValueError(f"AlexNet: groups must be >= 1, got {groups}")
        if variant == "torchvision" and groups != 1:
            raise ValueError("AlexNet: groups != 1 is only supported with variant='original'")
        self.variant = variant
        base = _ORIGINAL_CHANNELS if variant == "original" else _TORCHVISION_CHANNELS
        c1, c2, c3, c4, c5 = (_scaled(c, width, groups) for c in base)
        self.out_channels = c5

        if variant == "original":
            self.features = nn.Sequential(
                nn.Conv2d(3, c1, kernel_size=11, stride=4, padding=2),
                nn.ReLU(inplace=True),
                nn.LocalResponseNorm(LRN_SIZE, alpha=LRN_ALPHA, beta=LRN_BETA, k=LRN_K),
                nn.MaxPool2d(kernel_size=3, stride=2),
                nn.Conv2d(c1, c2, kernel_size=5, padding=2, groups=groups),
                nn.ReLU(inplace=True),
                nn.LocalResponseNorm(LRN_SIZE, alpha=LRN_ALPHA, beta=LRN_BETA, k=LRN_K),
                nn.MaxPool2d(kernel_size=3, stride=2),
                nn.Conv2d(c2, c3, kernel_size=3, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(c3, c4, kernel_size=3, padding=1, groups=groups),
                nn.ReLU(inplace=True),
                nn.Conv2d(c4, c5, kernel_size=3, padding=1, groups=groups),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2),
            )
        else:
            self.features = nn.Sequential(
                nn.Conv2d(3, c1, kernel_size=11, stride=4, padding=2),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2),
                nn.Conv2d(c1, c2, kernel_size=5, padding=2),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2),
                nn.Conv2d(c2, c3, kernel_size=3, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(c3, c4, kernel_size=3, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(c4, c5, kernel_size=3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2),
            )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(c5 * 6 * 6, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def alexnet(
    num_classes: int = 1000,
    variant: str = "original",
    width: float = 1.0,
    hidden: int = 4096,
    groups: int = 1,
    dropout: float = 0.5,
    seed: int | None = 0,
) -> AlexNet:
    """Build an :class:`AlexNet` with PyTorch-default init drawn under ``seed`` (deterministic)."""
    with seeded(seed):
        return AlexNet(num_classes, variant, width, hidden, groups, dropout)

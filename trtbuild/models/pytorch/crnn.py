"""CRNN text recognizer (Shi, Bai and Yao, "An End-to-End Trainable Neural Network for Image-based Sequence
Recognition", 2015), small: a conv feature extractor, a bidirectional LSTM over the width, a linear classifier.

The conv part (``cnn``, an nn.Sequential of Conv2d 3x3 / BatchNorm2d / ReLU / MaxPool2d blocks) collapses a
32-pixel-high grayscale line to height 1 (pools 2x2, 2x2, 2x1, 4x1), keeping W / 4 columns as the time steps;
``rnn`` is a 2-layer bidirectional nn.LSTM (batch_first) over those steps and ``fc`` maps each step to the
classes (blank + 10 digits + 26 letters by default). The forward returns the per-step log-probabilities
(N, T, classes) and the greedy CTC path, their argmax (N, T) as int32 (collapsing repeats and removing blanks is
left to the caller: the path is what a network can output with fixed shapes).
"""

from __future__ import annotations

import torch
from torch import nn

from .common import seeded

__all__ = ["CRNN", "crnn", "CRNN_POOLS"]

#: (kernel = stride) of each block's max pooling: height 32 -> 16 -> 8 -> 4 -> 1, width W -> W / 4
CRNN_POOLS = ((2, 2), (2, 2), (2, 1), (4, 1))


class CRNN(nn.Module):
    """``cnn`` (4 conv blocks: modules cnn.{4i} conv, cnn.{4i+1} bn, cnn.{4i+2} relu, cnn.{4i+3} pool), ``rnn``
    (nn.LSTM, 2 layers, bidirectional, batch_first), ``fc`` (nn.Linear to the classes)."""

    def __init__(self, classes: int = 37, channels=(32, 64, 128, 128), hidden: int = 128, layers: int = 2) -> None:
        super().__init__()
        blocks, c_in = [], 1
        for c, pool in zip(channels, CRNN_POOLS):
            blocks += [nn.Conv2d(c_in, c, 3, 1, 1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(pool, pool)]
            c_in = c
        self.cnn = nn.Sequential(*blocks)
        self.rnn = nn.LSTM(c_in, hidden, layers, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.shape[2] != 32 or x.shape[3] % 4:
            raise ValueError(f"CRNN: input height must be 32 and width a multiple of 4, got {tuple(x.shape)}")
        f = self.cnn(x).squeeze(2).permute(0, 2, 1)  # (N, C, 1, T) -> (N, T, C)
        y, _ = self.rnn(f)
        log_probs = self.fc(y).log_softmax(-1)
        return log_probs, log_probs.argmax(-1).to(torch.int32)


def crnn(classes: int = 37, seed: int | None = 0, **kwargs) -> CRNN:
    """CRNN with PyTorch's default init drawn under ``seed``."""
    with seeded(seed):
        return CRNN(classes, **kwargs)

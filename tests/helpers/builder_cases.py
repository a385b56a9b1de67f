"""Case tables of the layer-builder tests, shared with the tests that build the same cases elsewhere
(TensorRT-RTX in tests/layers/test_builders_on_rtx.py, onnxruntime in tests/onnx_export/), so every
backend is judged on the same shapes."""

from __future__ import annotations

import torch
from torch import nn

from trtbuild.models.pytorch import RepVGGBlock, randomize_bn_
from trtbuild.weights import WeightMap

POOL_CASES = [  # (input HxW, kernel, stride, padding, ceil_mode)
    ((9, 9), 3, 2, 0, False), ((9, 9), 3, 2, 1, False), ((21, 21), 2, 2, 0, True), ((75, 75), 2, 2, 0, True),
    ((5, 5), 2, 2, 1, True),  # ceil_mode: PyTorch drops the last window (it starts in the right padding)
    ((6, 6), 3, 2, 1, True), ((10, 10), 3, 1, 1, False), ((5, 8), (2, 3), 2, 1, True),  # mixed drop/keep
    ((7, 7), 3, 2, 1, True), ((8, 8), 3, 3, 1, True),
]

BATCHNORM_CASES = [((4, 6), nn.BatchNorm1d), ((3, 6, 5), nn.BatchNorm1d), ((2, 6, 4, 5), nn.BatchNorm2d),
                   ((2, 6, 3, 4, 2), nn.BatchNorm3d)]

LRN_SHAPES = [(2, 7, 5), (2, 9, 3, 4), (1, 6, 2, 3, 4)]  # 3-D, 4-D, 5-D

#: (input shape, groups) of the group-norm export tests
GROUP_SHAPES = [((2, 6, 7), 3), ((2, 6, 4, 5), 2), ((2, 6, 3, 4, 2), 6), ((2, 6, 4, 5), 1), ((3, 12, 2, 2), 4),
                ((4, 6), 2)]

REPVGG_CASES = [  # (in, out, stride, groups)
    (8, 8, 1, 1), (8, 16, 2, 1), (8, 8, 1, 4), (8, 16, 2, 2), (6, 6, 2, 1), (4, 8, 1, 1),
]


def make_repvgg_block(c_in, c_out, stride, groups, seed=0):
    torch.manual_seed(seed)
    block = RepVGGBlock(c_in, c_out, stride=stride, groups=groups)
    return randomize_bn_(block, seed).eval()


def repvgg_weights(block):
    """A WeightMap with the block's state dict under the prefix 'blk'."""
    return WeightMap.from_state_dict({f"blk.{k}": v for k, v in block.state_dict().items()})


# -- dynamic batch and spatial dims -------------------------------------------------------------
C = 6

#: dynamic input shape -> the two shapes it runs at (batch and every dynamic spatial dim change)
DYNAMIC_SHAPES = {
    (-1, C, -1, -1): [(1, C, 5, 7), (3, C, 8, 3)],
    (-1, C, -1): [(1, C, 9), (2, C, 4)],
    (-1, C, -1, -1, -1): [(1, C, 3, 5, 4), (2, C, 2, 3, 6)],
    (2, C, -1, 5): [(2, C, 3, 5), (2, C, 7, 5)],  # one dynamic spatial dim: the flatten routes
    (2, C, 3, -1, 5): [(2, C, 3, 2, 5), (2, C, 3, 4, 5)],
}

#: (impl, window size) of the dynamic-shape LRN tests
DYNAMIC_LRN_CASES = [("native", 3), ("native", 5), ("composed", 3), ("composed", 4), ("auto", 5), ("auto", 17)]

#: leading dims dynamic; the normalized (trailing) dims must be known (gamma/beta have that shape)
DYNAMIC_LAYER_SHAPES = {
    ((-1, -1, C), (C,)): [(1, 5, C), (3, 2, C)],
    ((-1, -1, 4, 5), (4, 5)): [(1, 3, 4, 5), (2, 6, 4, 5)],
    ((-1, C, 4, 5), (C, 4, 5)): [(1, C, 4, 5), (3, C, 4, 5)],
}

"""Tiny networks shared by the engine, parity and CLI tests.

`TinyNet` is a PyTorch module (conv3x3 -> ReLU -> conv1x1); `tiny_define(module)` adds the same
network with TensorRT's API (works on the reference and on real TensorRT), naming the tensors
"conv1", "relu1", "conv2" and returning {"y": conv2}.
"""

from __future__ import annotations

import numpy as np
import torch

from trtbuild.backend import trt_of

TINY_SHAPE = (1, 3, 8, 8)
TINY_LAYER_MAP = {"conv1": "conv1", "relu1": "relu", "conv2": "conv2"}


class TinyNet(torch.nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(4, 2, 1)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.rand(p.shape, generator=gen) * 2 - 1)
        self.eval()

    def forward(self, x):
        return self.conv2(self.relu(self.conv1(x)))


def _np(t: torch.Tensor, like_dtype) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy().astype(like_dtype))


def tiny_define(module: TinyNet, corrupt_conv2: bool = False):
    """define(network, x) adding `module` as TensorRT layers. corrupt_conv2 perturbs conv2's
    weights (a deliberate bug for layerwise tests)."""

    def define(network, x):
        trt = trt_of(network)
        wdt = np.float16 if x.dtype == trt.DataType.HALF else np.float32
        c1 = network.add_convolution_nd(x, 4, (3, 3), trt.Weights(_np(module.conv1.weight, wdt)),
                                        trt.Weights(_np(module.conv1.bias, wdt)))
        c1.padding_nd = (1, 1)
        c1.name = "conv1"
        h = c1.get_output(0)
        h.name = "conv1"
        r = network.add_activation(h, trt.ActivationType.RELU)
        r.name = "relu1"
        h = r.get_output(0)
        h.name = "relu1"
        w2 = module.conv2.weight.detach().cpu().clone()
        if corrupt_conv2:
            w2[0] += 0.5
        c2 = network.add_convolution_nd(h, 2, (1, 1), trt.Weights(_np(w2, wdt)),
                                        trt.Weights(_np(module.conv2.bias, wdt)))
        c2.name = "conv2"
        y = c2.get_output(0)
        y.name = "conv2"
        return {"y": y}

    return define

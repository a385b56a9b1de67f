"""Test networks for `trtbuild debug precision`: six 3x3 convolutions and one SSD L2Norm built with
tensorrtx's plain composition (trtbuild.layers.l2norm strategy="naive"), placed after conv`NORM_AT`.
The conv before the norm has its weights scaled up so that its outputs' RMS is ~100: the sum of
squares over 16 channels then exceeds 65504 and overflows in fp16 (the norm's output becomes 0),
while every conv alone is fine in fp16. The planted fp16-sensitive module is "norm".

    EARLY (norm after conv1), LATE (norm after conv5), WRONG (the builder adds 1 to conv6's output:
    no precision can fix it), PLAIN (no norm: fp16 passes as it is), UNPLANNED (the norm after conv3
    built without trtbuild.layers.planned: no candidate of the search, fp32 passes).
"""

from __future__ import annotations

import torch
from torch import nn

from trtbuild.layers.basic import add
from trtbuild.layers.common import constant
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.planned import planned, planned_conv
from trtbuild.models.pytorch.l2norm import L2Norm
from trtbuild.models.registry import ModelSpec

CHANNELS = 16
CONVS = 6
LEVEL = 100.0  # RMS the conv feeding the norm is scaled to (on a seeded probe input)


class Net(nn.Module):
    def __init__(self, norm_at: int | None):
        super().__init__()
        self.norm_at = norm_at
        for i in range(1, CONVS + 1):
            setattr(self, f"conv{i}", nn.Conv2d(3 if i == 1 else CHANNELS, CHANNELS, 3, padding=1))
        if norm_at is not None:
            self.norm = L2Norm(CHANNELS, 2.0)
            with torch.no_grad():  # scale the conv feeding the norm so that its outputs' RMS is LEVEL
                probe = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0)) * 2 - 1
                for i in range(1, norm_at + 1):
                    probe = getattr(self, f"conv{i}")(probe)
                gain = LEVEL / float(probe.pow(2).mean().sqrt())
                feeding = getattr(self, f"conv{norm_at}")
                feeding.weight.mul_(gain)
                feeding.bias.mul_(gain)

    def forward(self, x):
        for i in range(1, CONVS + 1):
            x = getattr(self, f"conv{i}")(x)
            if i == self.norm_at:
                x = self.norm(x)
        return x


def _factory(norm_at):
    def make(seed=0, small=False):
        torch.manual_seed(seed)
        return Net(norm_at).eval()
    return make


def _builder(norm_at, wrong=False, unplanned=False):
    def build(network, wm, x, quant=None):
        for i in range(1, CONVS + 1):
            name = f"conv{i}"
            c_in = 3 if i == 1 else CHANNELS
            x = planned_conv(network, x, wm.get(f"{name}.weight", (CHANNELS, c_in, 3, 3)), wm.get(f"{name}.bias"),
                             name, quant, padding=1)
            if i == norm_at:
                weight = wm.get("norm.weight", (CHANNELS,))
                if unplanned:
                    x = l2norm(network, x, weight, "norm", strategy="naive")
                else:
                    x = planned(network, x, "norm", quant,
                                lambda t, n, w=weight: l2norm(network, t, w, n, strategy="naive"), "norm")
        if wrong:
            one = constant(network, torch.ones(1, 1, 1, 1).numpy(), x, "one")
            x = add(network, x, one, "wrong")
        return {"out": x}
    return build


def _spec(name, norm_at, wrong=False, unplanned=False):
    return ModelSpec(name=name, description="debug precision test net", torch_factory=_factory(norm_at),
                     build_network=_builder(norm_at, wrong, unplanned), input_shape=lambda small=False: (1, 3, 8, 8),
                     output_names=["out"])


EARLY = _spec("prec_early", 1)
LATE = _spec("prec_late", 5)
WRONG = _spec("prec_wrong", 3, wrong=True)
PLAIN = _spec("prec_plain", None)
UNPLANNED = _spec("prec_unplanned", 3, unplanned=True)

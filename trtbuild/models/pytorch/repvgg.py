"""RepVGG (Ding et al. 2021) in training form, with re-parameterization to the deploy form.

Names follow the official DingXiaoH/RepVGG ``repvgg.py``, so its checkpoints load::

    training form:  stage0.rbr_dense.conv.weight   stage0.rbr_dense.bn.{weight,bias,running_*}
                    stage0.rbr_1x1.conv.weight     stage0.rbr_1x1.bn.*
                    stageS.B.rbr_identity.*        (BN; only when in == out and stride == 1)
                    linear.weight  linear.bias     (gap = global average pool, no params)
    deploy form:    stage0.rbr_reparam.{weight,bias}, stageS.B.rbr_reparam.{weight,bias}, linear.*

Each block computes ``relu(bn(conv3x3(x)) + bn(conv1x1(x)) + bn(x))``; the deploy form is
``relu(conv3x3(x) + b)`` with weights from :func:`trtbuild.reparam.fuse_repvgg_module`.
"""

from __future__ import annotations

import copy
from typing import Mapping, Sequence

import torch
from torch import nn

from ...reparam import fuse_repvgg_module
from .common import seeded

__all__ = [
    "RepVGGBlock",
    "RepVGG",
    "repvgg_a0",
    "repvgg_model_convert",
    "A0_NUM_BLOCKS",
    "A0_WIDTH_MULTIPLIER",
    "OPTIONAL_GROUPWISE_LAYERS",
    "G2_MAP",
    "G4_MAP",
]

A0_NUM_BLOCKS = (2, 4, 14, 1)
A0_WIDTH_MULTIPLIER = (0.75, 0.75, 0.75, 2.5)
# Layer indices (stage0 = 0, then counting blocks across stages) that the official
# "-g2" / "-g4" variants make groupwise.
OPTIONAL_GROUPWISE_LAYERS = tuple(range(2, 27, 2))
G2_MAP = {layer: 2 for layer in OPTIONAL_GROUPWISE_LAYERS}
G4_MAP = {layer: 4 for layer in OPTIONAL_GROUPWISE_LAYERS}


def conv_bn(in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, groups: int = 1):
    """``Sequential(conv=Conv2d(bias=False), bn=BatchNorm2d)`` as in the official repo."""
    result = nn.Sequential()
    result.add_module(
        "conv",
        nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, groups=groups, bias=False),
    )
    result.add_module("bn", nn.BatchNorm2d(out_channels))
    return result


class RepVGGBlock(nn.Module):
    """One RepVGG block (3x3 kernel, padding 1). ``deploy=True`` builds the fused form directly."""

    def __init__(
        self, in_channels: int, out_channels: int, stride: int = 1, groups: int = 1, deploy: bool = False
    ) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"RepVGGBlock: groups={groups} must divide in_channels={in_channels} and out_channels={out_channels}"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.stride, self.groups = stride, groups
        self.deploy = deploy
        self.nonlinearity = nn.ReLU()
        if deploy:
            self.rbr_reparam = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, groups=groups,
                                         bias=True)
        else:
            self.rbr_identity = nn.BatchNorm2d(in_channels) if out_channels == in_channels and stride == 1 else None
            self.rbr_dense = conv_bn(in_channels, out_channels, 3, stride, 1, groups)
            self.rbr_1x1 = conv_bn(in_channels, out_channels, 1, stride, 0, groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.deploy:
            return self.nonlinearity(self.rbr_reparam(x))
        out = self.rbr_dense(x) + self.rbr_1x1(x)
        if self.rbr_identity is not None:
            out = out + self.rbr_identity(x)
        return self.nonlinearity(out)

    @torch.no_grad()
    def switch_to_deploy(self) -> None:
        """Replace the three branches by one fused 3x3 conv with bias (no-op if already deployed)."""
        if self.deploy:
            return
        w, b = fuse_repvgg_module(self)
        ref = self.rbr_dense.conv.weight
        self.rbr_reparam = nn.Conv2d(
            self.in_channels, self.out_channels, 3, stride=self.stride, padding=1, groups=self.groups, bias=True
        ).to(device=ref.device, dtype=ref.dtype)
        self.rbr_reparam.weight.copy_(torch.from_numpy(w))
        self.rbr_reparam.bias.copy_(torch.from_numpy(b))
        del self.rbr_dense
        del self.rbr_1x1
        del self.rbr_identity
        self.deploy = True


class RepVGG(nn.Module):
    """RepVGG classifier (official layout).

    Args:
        num_blocks: blocks in stages 1..4 (A0: ``[2, 4, 14, 1]``).
        num_classes: size of ``linear``.
        width_multiplier: per-stage multipliers of 64/128/256/512 (A0: ``[0.75, 0.75, 0.75, 2.5]``);
            use small values (e.g. ``[0.125, 0.125, 0.125, 0.25]``) for tiny test models.
        override_groups_map: ``{layer_index: groups}`` (layer 0 is stage0, then blocks are numbered
            consecutively across stages); e.g. :data:`G4_MAP`.
        deploy: build the fused (inference) form directly.
    """

    def __init__(
        self,
        num_blocks: Sequence[int] = A0_NUM_BLOCKS,
        num_classes: int = 1000,
        width_multiplier: Sequence[float] = A0_WIDTH_MULTIPLIER,
        override_groups_map: Mapping[int, int] | None = None,
        deploy: bool = False,
    ) -> None:
        super().__init__()
        if len(num_blocks) != 4 or len(width_multiplier) != 4:
            raise ValueError(
                f"RepVGG: num_blocks and width_multiplier need 4 entries, got {list(num_blocks)} and "
                f"{list(width_multiplier)}"
            )
        self.deploy = deploy
        self.override_groups_map = dict(override_groups_map or {})
        if 0 in self.override_groups_map:
            raise ValueError("RepVGG: override_groups_map must not contain layer 0 (stage0 takes 3 input channels)")
        self.in_planes = min(64, int(64 * width_multiplier[0]))
        if self.in_planes < 1:
            raise ValueError(f"RepVGG: width_multiplier[0]={width_multiplier[0]} gives no channels")
        self.stage0 = RepVGGBlock(3, self.in_planes, stride=2, deploy=deploy)
        self.cur_layer_idx = 1
        self.stage1 = self._make_stage(int(64 * width_multiplier[0]), num_blocks[0], stride=2)
        self.stage2 = self._make_stage(int(128 * width_multiplier[1]), num_blocks[1], stride=2)
        self.stage3 = self._make_stage(int(256 * width_multiplier[2]), num_blocks[2], stride=2)
        self.stage4 = self._make_stage(int(512 * width_multiplier[3]), num_blocks[3], stride=2)
        self.gap = nn.AdaptiveAvgPool2d(output_size=1)
        self.linear = nn.Linear(int(512 * width_multiplier[3]), num_classes)

    def _make_stage(self, planes: int, num_blocks: int, stride: int) -> nn.Sequential:
        blocks = []
        for s in [stride] + [1] * (num_blocks - 1):
            groups = self.override_groups_map.get(self.cur_layer_idx, 1)
            blocks.append(RepVGGBlock(self.in_planes, planes, stride=s, groups=groups, deploy=self.deploy))
            self.in_planes = planes
            self.cur_layer_idx += 1
        return nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.stage0(x)
        out = self.stage4(self.stage3(self.stage2(self.stage1(out))))
        out = self.gap(out)
        return self.linear(torch.flatten(out, 1))

    def switch_to_deploy(self) -> "RepVGG":
        """Fuse every block in place (see :meth:`RepVGGBlock.switch_to_deploy`); returns self."""
        for module in self.modules():
            if isinstance(module, RepVGGBlock):
                module.switch_to_deploy()
        self.deploy = True
        return self


def repvgg_model_convert(model: RepVGG) -> RepVGG:
    """Return a fused deep copy of ``model``; the training-form ``model`` is left unchanged."""
    return copy.deepcopy(model).switch_to_deploy()


def repvgg_a0(
    num_classes: int = 1000,
    width_multiplier: Sequence[float] = A0_WIDTH_MULTIPLIER,
    override_groups_map: Mapping[int, int] | None = None,
    deploy: bool = False,
    num_blocks: Sequence[int] = A0_NUM_BLOCKS,
    seed: int | None = 0,
) -> RepVGG:
    """RepVGG-A0 (``[2, 4, 14, 1]``, ``[0.75, 0.75, 0.75, 2.5]``) with PyTorch-default init under ``seed``."""
    with seeded(seed):
        return RepVGG(num_blocks, num_classes, width_multiplier, override_groups_map, deploy)

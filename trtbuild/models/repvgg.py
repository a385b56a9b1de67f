"""RepVGG-A0 network builder: a TRAINING-form checkpoint fused at build time.

Reads the official DingXiaoH/RepVGG names (see trtbuild.models.pytorch.repvgg) from a WeightMap;
each block's three branches (3x3 conv+BN, 1x1 conv+BN, identity BN) are fused with
trtbuild.reparam.fuse_repvgg_block into ONE 3x3 convolution + ReLU (trtbuild.layers.repvgg).
Deploy-form checkpoints (``rbr_reparam``) load too. Stage and block counts, widths and groups
come from the weights.

Layer / tensor names (deploy-form module names)::

    stage0.rbr_reparam  stage0.nonlinearity
    stageS.B.rbr_reparam  stageS.B.nonlinearity   (S = 1..4)
    gap  linear/flatten linear/weight linear/matmul linear/bias  linear (output renamed "logits")

Sizes: full = RepVGG-A0 at 224x224, 1000 classes; small = width multipliers
(0.125, 0.125, 0.125, 0.25) (stage widths 8/8/16/32/128), 10 classes, 64x64. Both have
A0's block counts (2, 4, 14, 1).
"""

from __future__ import annotations

import re

from trtbuild.layers.basic import global_avg_pool, read_linear
from trtbuild.layers.common import BuilderError
from trtbuild.layers.planned import planned_linear
from trtbuild.layers.repvgg import repvgg_block, repvgg_block_unfused
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch.repvgg import A0_NUM_BLOCKS

from .registry import ModelSpec, register

__all__ = ["build_repvgg", "repvgg_layer_map"]

SMALL_WIDTH = (0.125, 0.125, 0.125, 0.25)
SMALL_CLASSES, SMALL_SIZE, FULL_SIZE = 10, 64, 224
OUTPUT = "logits"


def _stage_blocks(wm, stage: int) -> int:
    ids = {int(m.group(1)) for k in wm.keys()
           if (m := re.match(rf"stage{stage}\.(\d+)\.(rbr_dense\.conv|rbr_reparam)\.weight$", k))}
    if not ids or ids != set(range(len(ids))):
        raise BuilderError(f"repvgg: stage{stage} blocks missing or not numbered 0..n-1 (found {sorted(ids)}) "
                           f"in {wm.source}")
    return len(ids)


def _block(network, x, wm, prefix: str, stride: int, fused: bool, quant=None):
    """One block; groups are inferred from the weight sizes."""
    if not fused:
        return repvgg_block_unfused(network, x, wm, prefix, stride, None, prefix)
    return repvgg_block(network, x, wm, prefix, stride, None, f"{prefix}.rbr_reparam",
                        relu_name=f"{prefix}.nonlinearity", quant=quant)


def build_repvgg(network, wm, x, fused: bool = True, quant=None) -> dict:
    """Add a RepVGG classifier read from ``wm`` (training or deploy form). Returns ``{"logits": ITensor}``.

    ``fused=False`` keeps every block in training form (three branches, BatchNorm layers, adds;
    trtbuild.layers.repvgg.repvgg_block_unfused, layers named ``<block>/...``) for benchmarks;
    it needs a training-form checkpoint. quant: a trtbuild.quant.QuantPlan (each fused block's conv
    and the classifier quantized or kept; trtbuild.layers.planned) or None; fused blocks only.
    """
    if quant is not None and not fused:
        raise BuilderError("repvgg: a quantization plan needs fused=True (the unfused form is for benchmarks)")
    y = _block(network, x, wm, "stage0", 2, fused, quant)
    for stage in range(1, 5):
        for b in range(_stage_blocks(wm, stage)):
            y = _block(network, y, wm, f"stage{stage}.{b}", 2 if b == 0 else 1, fused, quant)
    y = global_avg_pool(network, y, "gap")
    logits = planned_linear(network, y, *read_linear(wm, "linear"), "linear", quant,
                            weight_keys=("linear.weight", "linear.bias"))
    logits.name = OUTPUT
    return {OUTPUT: logits}


def repvgg_layer_map(blocks=A0_NUM_BLOCKS) -> dict[str, str]:
    """Network tensor -> torch module (single call per forward) with the same output."""
    m = {"stage0.nonlinearity": "stage0.nonlinearity"}
    for stage, n in enumerate(blocks, start=1):
        for b in range(n):
            m[f"stage{stage}.{b}.nonlinearity"] = f"stage{stage}.{b}.nonlinearity"
    m["gap"] = "gap"
    m[OUTPUT] = "linear"
    return m


def _factory(seed: int = 0, small: bool = False):
    kw = dict(width_multiplier=SMALL_WIDTH, num_classes=SMALL_CLASSES) if small else {}
    return tm.randomize_bn_(tm.repvgg_a0(seed=seed, **kw), seed).eval()


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


register(ModelSpec(
    name="repvgg_a0",
    description="RepVGG-A0 from a training-form checkpoint, re-parameterized at build time (one 3x3 conv per block)",
    torch_factory=_factory,
    build_network=build_repvgg,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    layer_map=repvgg_layer_map(),
    notes=f"full: 1x3x{FULL_SIZE}x{FULL_SIZE}, 1000 classes; small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, width "
          f"multipliers {SMALL_WIDTH}, {SMALL_CLASSES} classes",
))

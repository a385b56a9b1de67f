"""ResNet-18 / ResNet-50 network builders (tensorrtx style), BatchNorm folded into the convs.

Reads torchvision state-dict names (see trtbuild.models.pytorch.resnet) from a WeightMap. Block
type (Basic vs Bottleneck), block counts, widths and classes come from the weights. Each conv+BN
pair is ONE convolution layer named after the conv (``layer1.0.conv1``); its output equals the BN
module's output (``layer1.0.bn1``), which is what :data:`ModelSpec.layer_map` records.

Layer / tensor names::

    conv1 (conv1+bn1)  relu  maxpool
    layerL.B.conv1  layerL.B.conv1/relu  layerL.B.conv2  [layerL.B.conv2/relu  layerL.B.conv3]
    layerL.B.downsample (downsample.0+.1)  layerL.B.add  layerL.B (final ReLU = block output)
    avgpool  fc/flatten fc/weight fc/matmul fc/bias  fc (output tensor renamed "logits")

Sizes: full = torchvision's architecture at 224x224 (1000 classes); small = width 8 (stage
widths 8/16/32/64), 10 classes, 64x64 input. Block counts are the same in both.
"""

from __future__ import annotations

import re

from trtbuild.layers.basic import global_avg_pool, max_pool, read_linear, relu
from trtbuild.layers.common import BuilderError
from trtbuild.layers.planned import planned_add, planned_conv_bn, planned_linear
from trtbuild.models import pytorch as tm

from .registry import ModelSpec, register

__all__ = ["build_resnet", "resnet_layer_map", "RESNET18_BLOCKS", "RESNET50_BLOCKS"]

RESNET18_BLOCKS = (2, 2, 2, 2)
RESNET50_BLOCKS = (3, 4, 6, 3)
SMALL_WIDTH, SMALL_CLASSES, SMALL_SIZE, FULL_SIZE = 8, 10, 64, 224
OUTPUT = "logits"


def _block_counts(wm) -> list[int]:
    counts = []
    for stage in range(1, 5):
        ids = {int(m.group(1)) for k in wm.keys() if (m := re.match(rf"layer{stage}\.(\d+)\.conv1\.weight$", k))}
        if not ids or ids != set(range(len(ids))):
            raise BuilderError(f"resnet: weights for layer{stage} blocks are missing or not numbered 0..n-1 "
                               f"(found block ids {sorted(ids)}) in {wm.source}")
        counts.append(len(ids))
    return counts


def _block(network, x, wm, p: str, stride: int, bottleneck: bool, quant=None):
    """One Basic/Bottleneck block; returns the post-ReLU output named ``p``."""
    identity = x
    if wm.has(f"{p}.downsample.0.weight"):
        identity = planned_conv_bn(network, x, wm, f"{p}.downsample.0", f"{p}.downsample.1", f"{p}.downsample",
                                   quant, stride=stride, kernel=1)
    elif stride != 1:
        raise BuilderError(f"resnet: block {p} has stride {stride} but no downsample weights")

    def cbr(x, i, kernel, stride=1, padding=0):
        y = planned_conv_bn(network, x, wm, f"{p}.conv{i}", f"{p}.bn{i}", f"{p}.conv{i}", quant, stride=stride,
                            padding=padding, kernel=kernel)
        return relu(network, y, f"{p}.conv{i}/relu")

    if bottleneck:
        y = cbr(cbr(x, 1, 1), 2, 3, stride, 1)
        y = planned_conv_bn(network, y, wm, f"{p}.conv3", f"{p}.bn3", f"{p}.conv3", quant, kernel=1)
    else:
        y = cbr(x, 1, 3, stride, 1)
        y = planned_conv_bn(network, y, wm, f"{p}.conv2", f"{p}.bn2", f"{p}.conv2", quant, padding=1, kernel=3)
    return relu(network, planned_add(network, y, identity, f"{p}.add", quant), p)


def build_resnet(network, wm, x, quant=None) -> dict:
    """Add a torchvision ResNet (any depth built from Basic or Bottleneck blocks) read from ``wm``.

    quant: a trtbuild.quant.QuantPlan (int8/fp8 Q/DQ or kept layers, trtbuild.layers.planned) or None.
    Returns ``{"logits": ITensor}`` (not marked as an output).
    """
    bottleneck = wm.has("layer1.0.conv3.weight")
    counts = _block_counts(wm)
    y = planned_conv_bn(network, x, wm, "conv1", "bn1", "conv1", quant, stride=2, padding=3, kernel=7)
    y = relu(network, y, "relu")
    y = max_pool(network, y, 3, 2, 1, "maxpool")
    for stage, n in enumerate(counts, start=1):
        for b in range(n):
            y = _block(network, y, wm, f"layer{stage}.{b}", 2 if stage > 1 and b == 0 else 1, bottleneck, quant)
    y = global_avg_pool(network, y, "avgpool")
    logits = planned_linear(network, y, *read_linear(wm, "fc"), "fc", quant, weight_keys=("fc.weight", "fc.bias"))
    logits.name = OUTPUT
    return {OUTPUT: logits}


def resnet_layer_map(blocks, bottleneck: bool) -> dict[str, str]:
    """Network tensor -> torch module whose (single-call) forward output equals it."""
    m = {"conv1": "bn1", "relu": "relu", "maxpool": "maxpool"}
    for stage, n in enumerate(blocks, start=1):
        for b in range(n):
            p = f"layer{stage}.{b}"
            m[f"{p}.conv1"] = f"{p}.bn1"
            m[f"{p}.conv2"] = f"{p}.bn2"
            if bottleneck:
                m[f"{p}.conv3"] = f"{p}.bn3"
            if b == 0 and (stage > 1 or bottleneck):
                m[f"{p}.downsample"] = f"{p}.downsample"
            m[p] = p
    m["avgpool"] = "avgpool"
    m[OUTPUT] = "fc"
    return m


def _factory(make):
    def factory(seed: int = 0, small: bool = False):
        kw = dict(num_classes=SMALL_CLASSES, width=SMALL_WIDTH) if small else {}
        model = make(seed=seed, **kw)
        return tm.randomize_bn_(model, seed).eval()
    return factory


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


for _name, _make, _blocks, _bottleneck in (("resnet18", tm.resnet18, RESNET18_BLOCKS, False),
                                           ("resnet50", tm.resnet50, RESNET50_BLOCKS, True)):
    register(ModelSpec(
        name=_name,
        description=f"{_name.replace('resnet', 'ResNet-')} (torchvision layout), BatchNorm folded into the convs",
        torch_factory=_factory(_make),
        build_network=build_resnet,
        input_shape=_input_shape,
        output_names=[OUTPUT],
        layer_map=resnet_layer_map(_blocks, _bottleneck),
        notes=f"full: 1x3x{FULL_SIZE}x{FULL_SIZE}, width 64, 1000 classes; small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, "
              f"width {SMALL_WIDTH}, {SMALL_CLASSES} classes",
    ))

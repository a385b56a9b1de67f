"""RedNet network builder: ResNet-style bottlenecks whose 3x3 conv is an involution, run by the
"Involution" IPluginV3 plugin (trtbuild::Involution v1) or composed of native layers
(``involution_impl``: "auto" = the plugin where it is available, composed otherwise, e.g. on
TensorRT-RTX, which has no plugins; see :func:`trtbuild.layers.involution.involution`).

Reads the state-dict names of :mod:`trtbuild.models.pytorch.rednet` from a WeightMap. Block counts,
widths, involution group counts and classes come from the weights (shaped or flat .wts storage);
involution kernel sizes are the architecture's (3 in the stem, 7 in the blocks). Convs followed by
BN are ONE convolution layer named after the conv, whose output equals the BN module's output; the
BN after each involution is a scale layer (an involution's per-pixel kernels keep it from folding).

Layer / tensor names (``I`` = an involution module prefix: ``stem.1`` or ``layerL.B.conv2``)::

    stem.0.conv (conv+bn)  stem.0 (ReLU)
    I.avgpool (stride > 1)  I.conv1.conv (reduce conv+bn)  I.conv1 (ReLU)  I.conv2 (span conv)
    I (plugin; or, composed, layers I/... whose last one is I)
    stem.2 (BN, layer stem.2/scale)  stem.3 (ReLU)  stem.4.conv  stem.4  maxpool
    layerL.B.conv1 (conv1+bn1)  layerL.B.conv1/relu  layerL.B.conv2.* (involution)  layerL.B.bn2
    layerL.B.bn2/relu  layerL.B.conv3 (conv3+bn3)  layerL.B.downsample  layerL.B.add  layerL.B (ReLU)
    avgpool  fc/flatten fc/weight fc/matmul fc/bias  fc (output tensor renamed "logits")

Sizes: full = RedNet-26 (stem 64, widths 64..512, group_channels 16, 1000 classes) at 224x224;
small = stem 16, widths 8..64, group_channels 4, 10 classes at 64x64. Same block counts.
"""

from __future__ import annotations

import re


from trtbuild.backend import capabilities, product_name, trt_of
from trtbuild.layers.basic import global_avg_pool, max_pool, read_linear, relu
from trtbuild.layers.batchnorm import batchnorm
from trtbuild.layers.common import BuilderError
from trtbuild.layers.involution import IMPLS, involution_block, load_plugin_library, resolve_impl
from trtbuild.layers.planned import planned, planned_add, planned_conv_bn, planned_linear
from trtbuild.layers.weight_names import bn_sources, name_new_weights
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch import rednet as trn

from .registry import ModelSpec, register

__all__ = ["build_rednet", "involution_module", "rednet_layer_map", "involution_layer_map", "BN_EPS"]

REDNET26_BLOCKS = trn.REDNET_DEPTHS[26]
SMALL = dict(num_classes=10, stem_channels=16, base_channels=8, group_channels=4)
SMALL_SIZE, FULL_SIZE = 64, 224
OUTPUT = "logits"
BN_EPS = 1e-5


def _bn(network, x, wm, prefix: str, name: str):
    """Eval-mode BatchNorm ``prefix`` as a scale layer; output tensor ``name``."""
    c = int(x.shape[1])
    p = [wm.get(f"{prefix}.{k}", (c,)) for k in ("weight", "bias", "running_mean", "running_var")]
    first = network.num_layers
    y = batchnorm(network, x, *p, BN_EPS, name)
    name_new_weights(network, first, "SCALE", bn_sources(prefix, BN_EPS, c))  # its scale and shift, refittable
    return y


def involution_module(network, x, wm, prefix: str, kernel_size: int, stride: int = 1, impl: str = "auto",
                      quant=None):
    """The involution module ``prefix`` (plugin or composed, ``impl``); layers named after the torch
    submodules (see :func:`trtbuild.layers.involution.involution_block`). Never quantized (its
    per-pixel kernels are data); ``--keep`` can move it to another float type (quant)."""
    return planned(network, x, prefix, quant, lambda t, n: involution_block(
        network, t, wm, prefix, n, kernel_size, stride, bn_eps=BN_EPS, impl=impl), prefix)


def _block_counts(wm) -> list[int]:
    counts = []
    for stage in range(1, 5):
        ids = {int(m.group(1)) for k in wm.keys() if (m := re.match(rf"layer{stage}\.(\d+)\.conv1\.weight$", k))}
        if not ids or ids != set(range(len(ids))):
            raise BuilderError(f"rednet: weights for layer{stage} blocks are missing or not numbered 0..n-1 "
                               f"(found block ids {sorted(ids)}) in {wm.source}")
        counts.append(len(ids))
    return counts


def _bottleneck(network, x, wm, p: str, stride: int, impl: str, quant=None):
    """One RedNet bottleneck; returns the post-ReLU output named ``p``."""
    identity = x
    if wm.has(f"{p}.downsample.0.weight"):
        identity = planned_conv_bn(network, x, wm, f"{p}.downsample.0", f"{p}.downsample.1", f"{p}.downsample",
                                   quant, stride=stride, kernel=1, eps=BN_EPS)
    elif stride != 1:
        raise BuilderError(f"rednet: block {p} has stride {stride} but no downsample weights")
    y = relu(network, planned_conv_bn(network, x, wm, f"{p}.conv1", f"{p}.bn1", f"{p}.conv1", quant, kernel=1,
                                      eps=BN_EPS), f"{p}.conv1/relu")
    y = involution_module(network, y, wm, f"{p}.conv2", trn.BLOCK_KERNEL, stride, impl, quant)
    y = relu(network, _bn(network, y, wm, f"{p}.bn2", f"{p}.bn2"), f"{p}.bn2/relu")
    y = planned_conv_bn(network, y, wm, f"{p}.conv3", f"{p}.bn3", f"{p}.conv3", quant, kernel=1, eps=BN_EPS)
    return relu(network, planned_add(network, y, identity, f"{p}.add", quant), p)


def build_rednet(network, wm, x, involution_impl: str = "auto", quant=None) -> dict:
    """Add a RedNet (:mod:`trtbuild.models.pytorch.rednet`, any depth) read from ``wm``.

    involution_impl: "auto" | "plugin" | "composed", decided once for the whole network
    (:func:`trtbuild.layers.involution.resolve_impl`; "auto" tries the default plugin library on real
    TensorRT and is composed on TensorRT-RTX or where no library loads). With the plugin, loads it
    first (:func:`load_plugin_library`: the reference twin, or the compiled library on real TensorRT)
    and needs FLOAT or HALF; composed also runs in BF16. "plugin" on TensorRT-RTX raises BuilderError
    before any layer is added. Input H and W must be multiples of 32. Returns ``{"logits": ITensor}``
    (not marked as an output). quant: a trtbuild.quant.QuantPlan (Q/DQ on the stem and bottleneck
    convs, the classifier and the residual adds; involutions stay in the network's float type) or None.
    """
    trt = trt_of(network)
    if involution_impl not in IMPLS:
        raise BuilderError(f"rednet: involution_impl={involution_impl!r} is not one of {', '.join(map(repr, IMPLS))}")
    if involution_impl == "plugin" and not capabilities(trt).has_plugins:
        raise BuilderError(f"rednet: {product_name(trt)} supports no plugins, so involution_impl='plugin' cannot be "
                           "built; use involution_impl='composed' (or 'auto')")
    impl = resolve_impl(trt, involution_impl, "rednet", load=True)
    if impl == "plugin" and involution_impl == "auto" and x.dtype not in (trt.DataType.FLOAT, trt.DataType.HALF):
        impl = "composed"  # the plugin runs in FLOAT/HALF only; auto takes the composition for BF16
    if impl == "plugin":
        load_plugin_library(trt)
        if x.dtype not in (trt.DataType.FLOAT, trt.DataType.HALF):
            raise BuilderError(f"rednet: input '{x.name}' is {getattr(x.dtype, 'name', x.dtype)}; the Involution "
                               "plugin runs in FLOAT or HALF only (use fp32 or fp16, or involution_impl='composed')")
    h, w = (int(d) for d in x.shape[2:])
    if h % 32 or w % 32:
        raise BuilderError(f"rednet: input '{x.name}' {tuple(int(d) for d in x.shape)} needs H and W divisible by 32 "
                           "(strided involutions need even extents)")
    counts = _block_counts(wm)
    y = relu(network, planned_conv_bn(network, x, wm, "stem.0.conv", "stem.0.bn", "stem.0.conv", quant, stride=2,
                                      padding=1, kernel=3, eps=BN_EPS), "stem.0")
    y = involution_module(network, y, wm, "stem.1", trn.STEM_KERNEL, impl=impl, quant=quant)
    y = relu(network, _bn(network, y, wm, "stem.2", "stem.2"), "stem.3")
    y = relu(network, planned_conv_bn(network, y, wm, "stem.4.conv", "stem.4.bn", "stem.4.conv", quant, padding=1,
                                      kernel=3, eps=BN_EPS), "stem.4")
    y = max_pool(network, y, 3, 2, 1, "maxpool")
    for stage, n in enumerate(counts, start=1):
        for b in range(n):
            y = _bottleneck(network, y, wm, f"layer{stage}.{b}", 2 if stage > 1 and b == 0 else 1, impl, quant)
    y = global_avg_pool(network, y, "avgpool")
    logits = planned_linear(network, y, *read_linear(wm, "fc"), "fc", quant)
    logits.name = OUTPUT
    return {OUTPUT: logits}


def involution_layer_map(prefix: str, stride: int) -> dict[str, str]:
    """Network tensor -> torch module for one involution module."""
    m = {f"{prefix}.conv1.conv": f"{prefix}.conv1.bn", f"{prefix}.conv1": f"{prefix}.conv1",
         f"{prefix}.conv2": f"{prefix}.conv2", prefix: prefix}
    if stride > 1:
        m[f"{prefix}.avgpool"] = f"{prefix}.avgpool"
    return m


def rednet_layer_map(blocks) -> dict[str, str]:
    """Network tensor -> torch module whose (single-call) forward output equals it."""
    m = {"stem.0.conv": "stem.0.bn", "stem.0": "stem.0", **involution_layer_map("stem.1", 1), "stem.2": "stem.2",
         "stem.4.conv": "stem.4.bn", "stem.4": "stem.4", "maxpool": "maxpool"}
    for stage, n in enumerate(blocks, start=1):
        for b in range(n):
            p = f"layer{stage}.{b}"
            stride = 2 if stage > 1 and b == 0 else 1
            m[f"{p}.conv1"] = f"{p}.bn1"
            m.update(involution_layer_map(f"{p}.conv2", stride))
            m[f"{p}.bn2"] = f"{p}.bn2"
            m[f"{p}.conv3"] = f"{p}.bn3"
            if b == 0:
                m[f"{p}.downsample"] = f"{p}.downsample"
            m[p] = p
    m["avgpool"] = "avgpool"
    m[OUTPUT] = "fc"
    return m


def _factory(seed: int = 0, small: bool = False):
    """RedNet-26 (small: the tiny config) with BN gamma/beta randomized, running statistics
    measured on uniform inputs (:func:`trtbuild.models.pytorch.rednet.calibrate_bn_`), then the
    residual branches damped (:func:`trtbuild.models.pytorch.rednet.damp_residual_branches_`)."""
    model = trn.rednet(26, seed=seed, **(SMALL if small else {}))
    tm.randomize_bn_(model, seed)
    batch = 16 if small else 2
    trn.calibrate_bn_(model, (batch,) + _input_shape(small)[1:], seed=seed)
    return trn.damp_residual_branches_(model)


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


register(ModelSpec(
    name="rednet",
    description="RedNet-26 (involution bottlenecks, official RedNet layout) with the Involution plugin or composed",
    torch_factory=_factory,
    build_network=build_rednet,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    layer_map=rednet_layer_map(REDNET26_BLOCKS),
    uses_plugins=True,
    options={"involution_impl": IMPLS},
    notes=f"full: 1x3x{FULL_SIZE}x{FULL_SIZE}, stem 64, widths 64..512, group_channels 16, 1000 classes; "
          f"small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, stem 16, widths 8..64, group_channels 4, 10 classes. "
          "BN running statistics are measured on uniform inputs (random ones make involution nets blow up); "
          "bn3 gamma/beta scaled by 0.25 (a random RedNet is chaotic otherwise: fp16 error 1-6 %).",
))

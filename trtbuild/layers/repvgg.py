"""RepVGG block builders: fused at build time (one 3x3 conv + ReLU) or unfused (three branches).

Both read the official training-form names under ``prefix`` from a WeightMap::

    <prefix>.rbr_dense.conv.weight  <prefix>.rbr_dense.bn.{weight,bias,running_mean,running_var}
    <prefix>.rbr_1x1.conv.weight    <prefix>.rbr_1x1.bn.*
    <prefix>.rbr_identity.*         (BatchNorm; present only when in == out and stride == 1)

:func:`repvgg_block` also accepts a deploy-form block (``<prefix>.rbr_reparam.{weight,bias}``).
"""

from __future__ import annotations

import numpy as np

from trtbuild.reparam import fuse_repvgg_block

from .basic import add, conv, read_conv_weight, relu
from .common import BuilderError
from .planned import planned_conv
from .weight_names import copy_source, name_new_weights, repvgg_sources

__all__ = ["repvgg_block", "repvgg_block_unfused", "read_repvgg_bn"]

_BN_KEYS = ("weight", "bias", "running_mean", "running_var")


def read_repvgg_bn(wm, prefix: str, channels: int, eps: float = 1e-5) -> tuple:
    """``(gamma, beta, mean, var, eps)`` of the BatchNorm ``<prefix>.{weight,bias,running_mean,running_var}``."""
    return tuple(wm.get(f"{prefix}.{k}", (channels,)) for k in _BN_KEYS) + (eps,)


def _groups(x, inferred: int, groups: int | None, key: str, name: str) -> int:
    if groups is not None and groups != inferred:
        raise BuilderError(f"layer '{name}': input '{x.name}' has {int(x.shape[1])} channels, so {key} implies "
                           f"groups={inferred}, but groups={groups} was given")
    return inferred


def _branches(x, wm, prefix: str, stride: int, groups: int | None, name: str):
    """Read and check the training-form weights (flat .wts storage works too);
    returns (dense_w, dense_bn, one_w, one_bn, identity_bn, groups)."""
    in_ch = int(x.shape[1])
    key = f"{prefix}.rbr_dense.conv.weight"
    out_ch = int(np.prod(wm.shape_of(f"{prefix}.rbr_dense.bn.weight")))
    dense_w, inferred = read_conv_weight(wm, key, out_ch, in_ch, 3)
    groups = _groups(x, inferred, groups, key, name)
    dense_bn = read_repvgg_bn(wm, f"{prefix}.rbr_dense.bn", out_ch)
    one_w = one_bn = None
    if wm.has(f"{prefix}.rbr_1x1.conv.weight"):
        one_w = wm.get(f"{prefix}.rbr_1x1.conv.weight", (out_ch, dense_w.shape[1], 1, 1))
        one_bn = read_repvgg_bn(wm, f"{prefix}.rbr_1x1.bn", out_ch)
    has_identity = wm.has(f"{prefix}.rbr_identity.running_mean")
    if has_identity and (out_ch != in_ch or stride != 1):
        raise BuilderError(f"layer '{name}': {prefix}.rbr_identity exists but the block maps {in_ch} -> {out_ch} "
                           f"channels with stride {stride}; an identity branch needs in == out and stride 1")
    identity_bn = read_repvgg_bn(wm, f"{prefix}.rbr_identity", in_ch) if has_identity else None
    return dense_w, dense_bn, one_w, one_bn, identity_bn, groups


def repvgg_block(network, x, wm, prefix: str, stride: int, groups: int | None, name: str,
                 relu_name: str | None = None, quant=None):
    """A RepVGG block as ONE 3x3 convolution (``name``, pad 1) + ReLU (``relu_name``, default ``name/relu``).

    Training-form weights under ``prefix`` are fused with trtbuild.reparam.fuse_repvgg_block
    (float64); a deploy-form block (``rbr_reparam``) is used as is. ``groups=None`` infers the
    group count from the weight size (a given value is checked against it). Returns the ReLU output.
    quant: a trtbuild.quant.QuantPlan (trtbuild.layers.planned) for the PyTorch module whose input is
    the block's: ``<prefix>.rbr_dense.conv`` (training form) or ``<prefix>.rbr_reparam``; the fused
    weights are quantized per output channel with their own amax.
    """
    module = f"{prefix}.rbr_reparam"
    if wm.has(f"{prefix}.rbr_reparam.weight"):
        b = wm.get(f"{prefix}.rbr_reparam.bias").reshape(-1)
        key = f"{prefix}.rbr_reparam.weight"
        w, inferred = read_conv_weight(wm, key, b.size, int(x.shape[1]), 3)
        groups = _groups(x, inferred, groups, key, name)
        sources = {"kernel": copy_source(key, w.shape), "bias": copy_source(f"{prefix}.rbr_reparam.bias")}
    else:
        dense_w, dense_bn, one_w, one_bn, identity_bn, groups = _branches(x, wm, prefix, stride, groups, name)
        w, b = fuse_repvgg_block(dense_w, dense_bn, one_w, one_bn, identity_bn,
                                 in_channels=int(x.shape[1]), groups=groups)
        module = f"{prefix}.rbr_dense.conv"
        sources = repvgg_sources(prefix, dense_w.shape, one_w is not None, identity_bn is not None, groups)
    first = network.num_layers
    y = planned_conv(network, x, w, b, name, quant, module, stride=stride, padding=1, groups=groups)
    name_new_weights(network, first, "CONVOLUTION", sources)
    return relu(network, y, relu_name or f"{name}/relu")


def repvgg_block_unfused(network, x, wm, prefix: str, stride: int, groups: int | None, name: str):
    """A training-form RepVGG block, layer for layer: 3x3 conv and 1x1 conv (no bias), a BatchNorm
    scale layer after each and on the identity branch, two adds and a ReLU.

    Layers: ``name/dense``, ``name/dense_bn``, ``name/1x1``, ``name/1x1_bn``, ``name/identity_bn``,
    ``name/add``, ``name/add_identity``, ``name/relu``. BatchNorms use trtbuild.layers.batchnorm (not
    folded), so the network has the structure the re-parameterization removes.
    """
    from .batchnorm import batchnorm

    dense_w, dense_bn, one_w, one_bn, identity_bn, groups = _branches(x, wm, prefix, stride, groups, name)
    y = conv(network, x, dense_w, None, f"{name}/dense", stride=stride, padding=1, groups=groups)
    y = batchnorm(network, y, *dense_bn, name=f"{name}/dense_bn")
    if one_w is not None:
        z = conv(network, x, one_w, None, f"{name}/1x1", stride=stride, padding=0, groups=groups)
        z = batchnorm(network, z, *one_bn, name=f"{name}/1x1_bn")
        y = add(network, y, z, f"{name}/add")
    if identity_bn is not None:
        i = batchnorm(network, x, *identity_bn, name=f"{name}/identity_bn")
        y = add(network, y, i, f"{name}/add_identity")
    return relu(network, y, f"{name}/relu")


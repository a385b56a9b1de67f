"""Weights named after the PyTorch state_dict keys they come from, so that an engine can be refit from a state_dict.

A refitter finds weights by the name INetworkDefinition.set_weights_name gave them (every backend has it: TensorRT
10/11, TensorRT-RTX and the reference). Builders that know which state_dict keys a layer's weights come from name
them here, and record how each named weight is computed from its keys in a WeightSource: a copy (reshaped, cast)
of one key, or a Conv+BatchNorm fold of the conv's and the BN's keys, which a refit must fold again.

Names: a weight that is one key's values takes that key ("fc.weight"); a folded conv kernel takes the conv's
weight key ("layer1.0.conv1.weight") and the folded bias the BN's bias key ("layer1.0.bn1.bias"), as the values
that refit changes most directly, and both list every key they are computed from.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from trtbuild.backend import trt_of

#: how a named weight is computed from its keys
COPY, CONV_BN_WEIGHT, CONV_BN_BIAS = "copy", "conv_bn_weight", "conv_bn_bias"


@dataclass(frozen=True)
class WeightSource:
    """Where the values of a named network weight come from.

    ``keys``: the state_dict keys they are computed from (for a fold: the conv's weight and, where it has one,
    bias, then the BN's weight, bias, running_mean and running_var); ``fold``: COPY (``keys[0]`` reshaped and cast
    to the network's type) or CONV_BN_WEIGHT / CONV_BN_BIAS (trtbuild.reparam.fold_conv_bn with ``eps``)."""

    name: str
    keys: tuple[str, ...]
    fold: str = COPY
    eps: float | None = None


_SOURCES: dict[int, dict[str, WeightSource]] = {}


def weight_sources(network) -> dict[str, WeightSource]:
    """{weights name: WeightSource} of every weight the builders named in `network` (empty if none)."""
    return dict(_SOURCES.get(id(network), {}))


def _record(network, source: WeightSource) -> None:
    key = id(network)
    if key not in _SOURCES:
        _SOURCES[key] = {}
        try:
            weakref.finalize(network, _SOURCES.pop, key, None)
        except TypeError:  # no weakref support: keep the records for the life of the process
            pass
    _SOURCES[key][source.name] = source


def name_new_weights(network, first_layer: int, layer_type: str, sources: dict[str, WeightSource]) -> None:
    """Name the weights of the layers added since layer index `first_layer`: for the layer(s) of `layer_type`
    (a LayerType name: "CONVOLUTION", "CONSTANT"), `sources` maps an attribute ("kernel", "bias") or, for
    constants, the end of the layer's name ("/weight", "/bias") to its WeightSource.

    Weights a layer does not hold (a quantized convolution reads its kernel from a tensor) are left unnamed, and
    so are weights the backend refuses to name (its logger says why); only the named ones are recorded."""
    trt = trt_of(network)
    ltype = getattr(trt.LayerType, layer_type)
    cls = {"CONVOLUTION": trt.IConvolutionLayer, "CONSTANT": trt.IConstantLayer}[layer_type]
    for index in range(first_layer, network.num_layers):
        layer = network.get_layer(index)
        if layer.type != ltype:
            continue
        layer.__class__ = cls
        if layer_type == "CONSTANT":
            matches = [(s, layer.weights) for end, s in sources.items() if layer.name.endswith(end)]
        else:
            matches = [(s, getattr(layer, attr)) for attr, s in sources.items()]
        for source, w in matches:
            if w is not None and w.size and network.set_weights_name(w, source.name):
                _record(network, source)


def conv_bn_sources(wm, conv_prefix: str, bn_prefix: str, eps: float) -> dict[str, WeightSource]:
    """The sources of a convolution with a BatchNorm folded in (trtbuild.layers.basic.read_conv_bn's keys)."""
    keys = (f"{conv_prefix}.weight", *((f"{conv_prefix}.bias",) if wm.has(f"{conv_prefix}.bias") else ()),
            *(f"{bn_prefix}.{k}" for k in ("weight", "bias", "running_mean", "running_var")))
    return {"kernel": WeightSource(f"{conv_prefix}.weight", keys, CONV_BN_WEIGHT, eps),
            "bias": WeightSource(f"{bn_prefix}.bias", keys, CONV_BN_BIAS, eps)}


def linear_sources(weight_key: str, bias_key: str | None) -> dict[str, WeightSource]:
    """The sources of trtbuild.layers.basic.linear's constants (``name/weight``, ``name/bias``)."""
    out = {"/weight": WeightSource(weight_key, (weight_key,))}
    if bias_key is not None:
        out["/bias"] = WeightSource(bias_key, (bias_key,))
    return out


def source_values(source: WeightSource, state) -> np.ndarray:
    """The float32 values of a named weight computed from `state` (a state_dict or {key: array}) as the build
    computed them: what a Refitter is given to refit the weight from another state_dict of the same model.
    A missing key is a KeyError naming it and the weight."""
    missing = [k for k in source.keys if k not in state]
    if missing:
        raise KeyError(f"weights '{source.name}' are computed from {list(source.keys)}, but the state_dict has no "
                       f"{missing}")
    arrays = [np.asarray(_numpy(state[k]), dtype=np.float64) for k in source.keys]
    if source.fold == COPY:
        return arrays[0].astype(np.float32)
    from trtbuild.reparam import fold_conv_bn

    conv = arrays[:-4]
    w, b = fold_conv_bn(conv[0], conv[1] if len(conv) > 1 else None, *arrays[-4:], source.eps, name=source.name)
    return w if source.fold == CONV_BN_WEIGHT else b


def _numpy(value):
    return value.detach().cpu().numpy() if hasattr(value, "detach") else value

"""Weights named after the PyTorch state_dict keys they come from, so that an engine can be refit from a state_dict.

A refitter finds weights by the name INetworkDefinition.set_weights_name gave them (every backend has it: TensorRT
10/11, TensorRT-RTX and the reference). Each named weight is recorded with how it is computed from its keys in a
WeightSource: a copy (reshaped, cast) of one key, a Conv+BatchNorm fold of the conv's and the BN's keys, a
standalone BatchNorm as a scale layer's scale and shift, or a fused RepVGG block, which a refit computes again.

Two ways weights get names:
- every weight that holds a key's values unchanged (a conv kernel, a linear weight, a LayerNorm gamma, a position
  embedding: whatever a builder read whole with WeightMap.get and handed to a layer, reshaped or cast) is named
  after the key generically, once the network is defined (:func:`name_tracked_weights`; the values are followed
  by memory identity, trtbuild.weights.provenance), in any network function built with trtbuild.layers;
- builders that compute weights from keys (folds) name them explicitly (:func:`name_new_weights` with
  :func:`conv_bn_sources`, :func:`bn_sources`, :func:`repvgg_sources`, :func:`slice_source`); computed arrays are
  never tracked, so explicit names keep priority.

Names: a weight that is one key's values takes that key ("fc.weight"); a folded conv kernel takes the conv's
weight key ("layer1.0.conv1.weight") and the folded bias the BN's bias key ("layer1.0.bn1.bias"), as the values
that refit changes most directly, and both list every key they are computed from; rows of a key take the key and
the rows ("attn.in_proj_weight[0:64]", nn.MultiheadAttention's query projection). Weights computed from keys that
no builder names (a transpose, ``w * 2``...) stay baked: :func:`baked_keys` lists every key the network
definition read (trtbuild.weights.provenance.Journal) that no name covers, RefitRecord records them, and a refit
that changes them is refused.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from trtbuild.backend import trt_of
from trtbuild.weights.provenance import Journal, journal

from .common import network_store, tracked_keys

from .weight_source import (  # noqa: F401 - the public names of the records, importable from here as before
    BN_SCALE, BN_SHIFT, CONV_BN_BIAS, CONV_BN_WEIGHT, COPY, FOLDS, REPVGG_BIAS, REPVGG_WEIGHT, SLICE, SUM, _BN_KEYS,
    WeightSource, source_values)

_SOURCES: dict[int, dict[str, WeightSource]] = {}


def weight_sources(network) -> dict[str, WeightSource]:
    """{weights name: WeightSource} of every weight the builders named in `network` (empty if none), the
    weights that hold a state_dict key's values unchanged included (:func:`name_tracked_weights` runs first)."""
    name_tracked_weights(network)
    return dict(_SOURCES.get(id(network), {}))


def _record(network, source: WeightSource, memory=None) -> None:
    network_store(_SOURCES, network, dict)[source.name] = source
    network_store(_MEMORY, network, dict)[source.name] = memory


#: network id -> {weights name: the memory it names, (address, count, type), or None where Python cannot see it}
_MEMORY: dict[int, dict] = {}


def _memory(w) -> tuple | None:
    """(address, count, type) of the weights a layer holds (a trt.Weights, or the numpy array TensorRT's constant
    layers return); None where Python cannot see them (BF16 weights)."""
    try:
        arr = w if isinstance(w, np.ndarray) else w.numpy()
        return int(arr.__array_interface__["data"][0]), int(arr.size), str(arr.dtype)
    except (AttributeError, TypeError, ValueError, KeyError):
        return None


#: network id -> the Journal of its definition; the keys of explicit names that were taken already (baked)
_JOURNALS: dict[int, Journal] = {}
_UNCOVERED: dict[int, set] = {}


@contextmanager
def definition_journal(network):
    """Note every WeightMap read made inside the block as a read of `network`'s definition (trtbuild.engine.
    define opens it around the whole definition): :func:`name_tracked_weights` then counts this definition's
    reads only, and :func:`baked_keys` lists every key it read that no name covers."""
    with journal() as current:
        network_store(_JOURNALS, network, lambda: current)
        _JOURNALS[id(network)] = current
        yield current


def journal_of(network) -> Journal | None:
    """The Journal of `network`'s definition (None: defined outside :func:`definition_journal`)."""
    return _JOURNALS.get(id(network))


def name_new_weights(network, first_layer: int, layer_type: str, sources: dict[str, WeightSource]) -> None:
    """Name the weights of the layers added since layer index `first_layer`: for the layer(s) of `layer_type`
    (a LayerType name: "CONVOLUTION", "DECONVOLUTION", "SCALE", "CONSTANT"), `sources` maps an attribute
    ("kernel", "bias"; "scale", "shift") or, for constants, the end of the layer's name ("/weight", "/bias") to
    its WeightSource.

    Weights a layer does not hold (a quantized convolution reads its kernel from a tensor) are left unnamed, and
    so are weights the backend refuses to name (its logger says why); only the named ones are recorded. A name
    this network already gave other weights (the same block built twice: its computed weights are new memory
    each time) is not given again, as TensorRT refuses it: its keys are baked (:func:`baked_keys`). The same
    memory again (one array used by two layers) has its name already: TensorRT names every use of it."""
    trt = trt_of(network)
    ltype = getattr(trt.LayerType, layer_type)
    cls = {"CONVOLUTION": trt.IConvolutionLayer, "DECONVOLUTION": trt.IDeconvolutionLayer,
           "SCALE": trt.IScaleLayer, "CONSTANT": trt.IConstantLayer}[layer_type]
    for index in range(first_layer, network.num_layers):
        layer = network.get_layer(index)
        if layer.type != ltype:
            continue
        layer.__class__ = cls
        if layer_type == "CONSTANT":
            matches = [(s, layer.weights) for end, s in sources.items() if layer.name.endswith(end)]
        else:
            matches = [(s, getattr(layer, attr)) for attr, s in sources.items()]
        taken = _MEMORY.get(id(network), {})
        for source, w in matches:
            if w is None or not w.size:
                continue
            if source.name in taken:
                memory = _memory(w)
                if memory is None or taken[source.name] != memory:
                    network_store(_UNCOVERED, network, set).update(source.keys)
            elif network.set_weights_name(w, source.name):
                _record(network, source, _memory(w))



#: network id -> the tracked keys name_tracked_weights has decided on (named or left baked); those left baked
_DECIDED: dict[int, set] = {}
_LEFT: dict[int, set] = {}


def name_tracked_weights(network) -> list[str]:
    """Name after its state_dict key every weight of `network` that holds a key's values unchanged (the whole
    tensor a builder read with WeightMap.get, reshaped or converted to the layer's type: trtbuild.weights.
    provenance and trtbuild.layers.common.weights), recording each as a COPY of the key; returns the keys named.
    Runs once the network is defined (trtbuild.engine.define) and from :func:`weight_sources`; a key is decided
    once, so call it after the last layer (later uses of a named key share its memory and so its name).

    TensorRT names memory (every use of the same values pointer, count and type takes the name), so a key is
    named only where its name covers all its uses, and is left baked (no refit can change it) where
    - it was read more often than used whole: some read went into a computed weight (``w * 2``, a slice, a
      transpose, a fold nobody named), which a refit of the named use alone would leave stale. The count cannot
      see one read that is both used whole and computed from (``w`` for one layer and ``w * 2`` from the same
      array for another): such a builder must name its computed weight with an explicit WeightSource. The reads
      counted are those of this network's definition (:func:`definition_journal`) and those made outside any
      definition (before build_plan: they may have gone into this network); a network defined without a
      journal counts every read and use of the key's stored tensor, over every network defined from it;
    - its uses hold different memory (the key in two float types in one network, or from two WeightMaps).
    A key that a named fold also reads (a Conv+BN kernel is named after the conv's weight key) and whose values
    are used whole names that use ``<key>/copy`` (explicit names keep priority); its reads beyond the whole uses
    are taken to be the fold's, so such a key must not also go into an unnamed computed weight. Keys left
    unnamed are baked (:func:`unnamed_tracked_keys`), also where a named fold reads them."""
    tracked = tracked_keys(network)
    if not tracked:
        return []
    trt = trt_of(network)
    decided = network_store(_DECIDED, network, set)
    sources = _SOURCES.get(id(network), {})
    named = []
    left = network_store(_LEFT, network, set)
    folded = {k for s in sources.values() if s.fold != COPY for k in s.keys}
    book = journal_of(network)
    for key, t in tracked.items():
        if key in decided:
            continue
        decided.add(key)
        name = key
        if key in sources and sources[key].keys == (key,) and sources[key].fold == COPY:
            continue  # an explicit name of these very values (planned_linear's weight_keys)
        if key in sources:
            name = f"{key}/copy"
        if book is None:
            reads, uses = t.origin.reads, t.origin.uses
        else:
            reads, uses = book.reads.get(key, 0) + t.origin.loose_reads, t.uses
        if t.mixed or len(t.held) != 1 or (uses < reads and key not in folded):
            left.add(key)
            continue
        (held,) = t.held.values()
        w = held if isinstance(held, trt.Weights) else trt.Weights(held)
        if network.set_weights_name(w, name):
            _record(network, WeightSource(name, (key,), COPY, shapes=(t.shape,)), _memory(w))
            named.append(key)
        else:
            left.add(key)
    return named


def unnamed_tracked_keys(network) -> dict[str, np.ndarray | None]:
    """{key: its stored values (None once its WeightMap is gone)} of the keys whose values `network`'s layers
    hold unchanged but that :func:`name_tracked_weights` left unnamed: baked, even where a named fold also reads
    them (RefitRecord lists them, so a refit changing them is refused instead of leaving these uses stale)."""
    name_tracked_weights(network)
    tracked = tracked_keys(network)
    return {k: tracked[k].origin.values() for k in sorted(_LEFT.get(id(network), ()))}


#: network id -> {key: its stored values or None}: keys baked whatever names cover them (trtbuild.engine.
#: refit_verify found a weight computed from them that no name covers, or a name that does not hold its source)
_FORCED: dict[int, dict] = {}


def bake(network, keys: dict) -> None:
    """Bake `keys` ({key: stored values or None}) into `network` whatever names cover them."""
    forced = network_store(_FORCED, network, dict)
    for k, v in keys.items():
        if forced.get(k) is None:
            forced[k] = v


def unname(network, name: str) -> None:
    """Forget the named weight `name` (its weights' name is cleared by the caller) and bake its keys."""
    source = _SOURCES.get(id(network), {}).pop(name, None)
    _MEMORY.get(id(network), {}).pop(name, None)
    if source is not None:
        book = journal_of(network)
        bake(network, {k: None if book is None else book.values(k) for k in source.keys})


def loose_keys(network) -> dict[str, np.ndarray | None]:
    """{key: stored values} of the keys of the WeightMaps `network`'s definition read that were read outside
    any network definition (before build_plan, say): their values may be in this network's weights without
    this definition reading them, so they are baked unless name_tracked_weights named them (it counts those
    reads too, and leaves baked a key read more often than used whole)."""
    book = journal_of(network)
    if book is None:
        return {}
    tracked = _DECIDED.get(id(network), set()) - _LEFT.get(id(network), set())
    out = {}
    for wm in book.maps.values():
        for key in wm.read_loose():
            if key not in tracked and key in wm._store:
                out[key] = wm._store[key]
    return out


def baked_keys(network) -> dict[str, np.ndarray | None]:
    """{key: its stored values (None where they are not known)} of every key whose values are in `network` but
    that no name covers, so that a refit cannot change them: the keys its definition read (the Journal) that no
    named weight is computed from, the keys its layers hold unchanged without a name (:func:`unnamed_tracked_keys`),
    the keys of explicit names given once already, the keys read before the definition (:func:`loose_keys`) and
    those trtbuild.engine.refit_verify baked (:func:`bake`). A network defined without a journal has only the
    unnamed tracked keys and the explicit names given twice."""
    unnamed = unnamed_tracked_keys(network)
    uncovered = _UNCOVERED.get(id(network), set())
    named = {k for s in _SOURCES.get(id(network), {}).values() for k in s.keys} - set(unnamed) - uncovered
    book = journal_of(network)
    baked = dict(unnamed)
    for key in (*(book.reads if book is not None else ()), *uncovered):
        if key not in named and baked.get(key) is None:
            baked[key] = book.values(key) if book is not None else None
    for key, value in {**loose_keys(network), **_FORCED.get(id(network), {})}.items():
        if baked.get(key) is None:
            baked[key] = value if value is not None or book is None else book.values(key)
    return dict(sorted(baked.items()))


def bn_sources(prefix: str, eps: float, channels: int) -> dict[str, WeightSource]:
    """The sources of an eval-mode BatchNorm ``prefix`` folded into a CHANNEL scale layer (trtbuild.layers.
    batchnorm): its scale ``weight / sqrt(running_var + eps)`` is named after the BN's weight key, its shift
    ``bias - running_mean * scale`` after its bias key (trtbuild.reparam.bn_to_scale_shift)."""
    keys = tuple(f"{prefix}.{k}" for k in _BN_KEYS)
    shapes = ((int(channels),),) * 4
    return {"scale": WeightSource(f"{prefix}.weight", keys, BN_SCALE, eps, shapes),
            "shift": WeightSource(f"{prefix}.bias", keys, BN_SHIFT, eps, shapes)}


def conv_bn_sources(wm, conv_prefix: str, bn_prefix: str, eps: float,
                    kernel_shape=None) -> dict[str, WeightSource]:
    """The sources of a convolution with a BatchNorm folded in (trtbuild.layers.basic.read_conv_bn's keys);
    `kernel_shape`: the conv weight's shape (out, in/groups, kh, kw) as the builder read it."""
    has_bias = wm.has(f"{conv_prefix}.bias")
    keys = (f"{conv_prefix}.weight", *((f"{conv_prefix}.bias",) if has_bias else ()),
            *(f"{bn_prefix}.{k}" for k in _BN_KEYS))
    shapes = None
    if kernel_shape is not None:
        out = (int(kernel_shape[0]),)
        shapes = (tuple(int(d) for d in kernel_shape), *((out,) if has_bias else ()), *(out,) * 4)
    return {"kernel": WeightSource(f"{conv_prefix}.weight", keys, CONV_BN_WEIGHT, eps, shapes),
            "bias": WeightSource(f"{bn_prefix}.bias", keys, CONV_BN_BIAS, eps, shapes)}


def repvgg_sources(prefix: str, dense_shape, has_1x1: bool, has_identity: bool, groups: int,
                   eps: float = 1e-5) -> dict[str, WeightSource]:
    """The sources of a fused training-form RepVGG block (trtbuild.layers.repvgg): its kernel is named after
    the dense conv's weight key, its bias after the dense BN's bias key."""
    out, per_group = int(dense_shape[0]), int(dense_shape[1])
    parts = [(f"{prefix}.rbr_dense.conv.weight", tuple(int(d) for d in dense_shape)),
             *((f"{prefix}.rbr_dense.bn.{k}", (out,)) for k in _BN_KEYS)]
    if has_1x1:
        parts += [(f"{prefix}.rbr_1x1.conv.weight", (out, per_group, 1, 1)),
                  *((f"{prefix}.rbr_1x1.bn.{k}", (out,)) for k in _BN_KEYS)]
    if has_identity:
        parts += [(f"{prefix}.rbr_identity.{k}", (out,)) for k in _BN_KEYS]
    keys, shapes = tuple(k for k, _ in parts), tuple(s for _, s in parts)
    return {"kernel": WeightSource(f"{prefix}.rbr_dense.conv.weight", keys, REPVGG_WEIGHT, eps, shapes, groups),
            "bias": WeightSource(f"{prefix}.rbr_dense.bn.bias", keys, REPVGG_BIAS, eps, shapes, groups)}


def copy_source(key: str, shape=None) -> WeightSource:
    """The source of a weight that is `key`'s values unchanged (read with `shape`; None: as stored), named `key`."""
    return WeightSource(key, (key,), COPY, shapes=None if shape is None else (tuple(shape),))


def linear_sources(weight_key: str, bias_key: str | None) -> dict[str, WeightSource]:
    """The sources of trtbuild.layers.basic.linear's constants (``name/weight``, ``name/bias``)."""
    out = {"/weight": copy_source(weight_key)}
    if bias_key is not None:
        out["/bias"] = copy_source(bias_key)
    return out


def sum_source(keys: tuple[str, ...], size: int) -> WeightSource:
    """The source of a weight that is the sum of `keys` (each of `size` values, added in float64), named after
    the first: an LSTM's input-projection bias b_ih + b_hh (trtbuild.layers.recurrent)."""
    return WeightSource(keys[0], tuple(keys), SUM, shapes=((int(size),),) * len(keys))


def slice_source(key: str, start: int, stop: int, shape) -> WeightSource:
    """The source of rows ``start:stop`` of `key` (read with `shape`), named ``key[start:stop]``:
    nn.MultiheadAttention's query, key and value projections in ``in_proj_weight`` / ``in_proj_bias``."""
    return WeightSource(f"{key}[{int(start)}:{int(stop)}]", (key,), SLICE, shapes=(tuple(int(d) for d in shape),),
                        start=int(start), stop=int(stop))



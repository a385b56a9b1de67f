"""What a named weight is computed from (WeightSource: its state_dict keys and the fold), and computing it.

A leaf of trtbuild.layers.weight_names, which names the weights of a network: the records here are plain data
(they go into the sidecar's refit record), and source_values is what a refit calls to recompute a weight from a
new state_dict exactly as the build computed it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_BN_KEYS = ("weight", "bias", "running_mean", "running_var")

#: how a named weight is computed from its keys
COPY, CONV_BN_WEIGHT, CONV_BN_BIAS = "copy", "conv_bn_weight", "conv_bn_bias"
REPVGG_WEIGHT, REPVGG_BIAS = "repvgg_weight", "repvgg_bias"
BN_SCALE, BN_SHIFT, SUM, SLICE = "bn_scale", "bn_shift", "sum", "slice"
FOLDS = (COPY, CONV_BN_WEIGHT, CONV_BN_BIAS, REPVGG_WEIGHT, REPVGG_BIAS, BN_SCALE, BN_SHIFT, SUM, SLICE)


@dataclass(frozen=True)
class WeightSource:
    """Where the values of a named network weight come from.

    ``keys``: the state_dict keys they are computed from (for a fold: the conv's weight and, where it has one,
    bias, then the BN's weight, bias, running_mean and running_var); ``fold``: COPY (``keys[0]`` reshaped and cast
    to the network's type), CONV_BN_WEIGHT / CONV_BN_BIAS (trtbuild.reparam.fold_conv_bn with ``eps``),
    BN_SCALE / BN_SHIFT (a BatchNorm's weight, bias, running_mean and running_var as a scale layer's scale and
    shift, trtbuild.reparam.bn_to_scale_shift with ``eps``), SUM (the keys added in float64: an LSTM's
    b_ih + b_hh),
    REPVGG_WEIGHT / REPVGG_BIAS (trtbuild.reparam.fuse_repvgg_block of a training-form block: the dense conv and
    BN keys, then the 1x1 conv and BN keys and the identity BN keys where the block has them, with ``groups``) or
    SLICE (rows ``start:stop`` of ``keys[0]``, along its first axis as read with ``shapes[0]``).
    ``shapes``: the shape each key is read with (a fold needs them; .wts files store tensors flat), or None."""

    name: str
    keys: tuple[str, ...]
    fold: str = COPY
    eps: float | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    groups: int | None = None
    start: int | None = None
    stop: int | None = None

    def to_dict(self) -> dict:
        out = {"name": self.name, "keys": list(self.keys), "fold": self.fold}
        if self.eps is not None:
            out["eps"] = self.eps
        if self.shapes is not None:
            out["shapes"] = [list(s) for s in self.shapes]
        if self.groups is not None:
            out["groups"] = self.groups
        if self.fold == SLICE:
            out["start"], out["stop"] = self.start, self.stop
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "WeightSource":
        """The WeightSource of to_dict()'s JSON; ValueError (one sentence) if it is not one."""
        try:
            source = cls(str(data["name"]), tuple(str(k) for k in data["keys"]), str(data.get("fold", COPY)),
                         None if data.get("eps") is None else float(data["eps"]),
                         None if data.get("shapes") is None else tuple(tuple(int(d) for d in s)
                                                                       for s in data["shapes"]),
                         None if data.get("groups") is None else int(data["groups"]),
                         *(None if data.get(k) is None else int(data[k]) for k in ("start", "stop")))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{data!r} does not describe a named weight (name, keys, fold)") from None
        if source.fold not in FOLDS or (source.shapes is not None and len(source.shapes) != len(source.keys)):
            raise ValueError(f"named weight {source.name!r} has an unknown fold {source.fold!r} or shapes that do "
                             "not match its keys")
        if source.fold == SLICE and (len(source.keys) != 1 or source.start is None or source.stop is None
                                     or not 0 <= source.start < source.stop):
            raise ValueError(f"named weight {source.name!r} is a slice but does not give one key and rows "
                             "start < stop")
        return source


def source_values(source: WeightSource, state) -> np.ndarray:
    """The float32 values of a named weight computed from `state` (a state_dict or {key: array}) as the build
    computed them: what a Refitter is given to refit the weight from another state_dict of the same model.
    A missing key is a KeyError naming it and the weight."""
    missing = [k for k in source.keys if k not in state]
    if missing:
        raise KeyError(f"weights '{source.name}' are computed from {list(source.keys)}, but the state_dict has no "
                       f"{missing}")
    arrays = [np.asarray(_numpy(state[k]), dtype=np.float64) for k in source.keys]
    if source.shapes is not None:
        arrays = [_shaped(a, shape, key, source.name) for a, shape, key in zip(arrays, source.shapes, source.keys)]
    if source.fold == COPY:
        return arrays[0].astype(np.float32)
    if source.fold == SLICE:
        if source.stop > len(arrays[0]):
            raise ValueError(f"state_dict key '{source.keys[0]}' has {len(arrays[0])} rows, but engine weights "
                             f"'{source.name}' were built from its rows {source.start}:{source.stop}")
        return np.ascontiguousarray(arrays[0][source.start:source.stop]).astype(np.float32)
    if source.fold in (REPVGG_WEIGHT, REPVGG_BIAS):
        return _repvgg(source, arrays)
    if source.fold == SUM:
        return np.sum(arrays, axis=0).astype(np.float32)
    if source.fold in (BN_SCALE, BN_SHIFT):
        from trtbuild.reparam import bn_to_scale_shift

        scale, shift = bn_to_scale_shift(*arrays, source.eps, name=source.name)
        return scale if source.fold == BN_SCALE else shift
    from trtbuild.reparam import fold_conv_bn

    conv = arrays[:-4]
    w, b = fold_conv_bn(conv[0], conv[1] if len(conv) > 1 else None, *arrays[-4:], source.eps, name=source.name)
    return w if source.fold == CONV_BN_WEIGHT else b


def _shaped(array: np.ndarray, shape: tuple, key: str, name: str) -> np.ndarray:
    """`array` with the shape the build read `key` with; a ValueError in one sentence if it cannot have it
    (another element count, or another N-D shape: a flat .wts row of the right size is fine)."""
    shape = tuple(shape)
    if array.size != int(np.prod(shape)) or (array.ndim > 1 and array.shape != shape):
        raise ValueError(f"state_dict key '{key}' has shape {tuple(array.shape)}, but engine weights '{name}' were "
                         f"built from it with shape {shape}")
    return array.reshape(shape)


def _repvgg(source: WeightSource, arrays: list) -> np.ndarray:
    from trtbuild.reparam import fuse_repvgg_block

    by_key = dict(zip(source.keys, arrays))
    prefix = source.keys[0][: -len(".rbr_dense.conv.weight")]

    def bn(p):
        return tuple(by_key[f"{p}.{k}"] for k in _BN_KEYS) + (source.eps,) if f"{p}.weight" in by_key else None

    dense = by_key[f"{prefix}.rbr_dense.conv.weight"]
    one_w = by_key.get(f"{prefix}.rbr_1x1.conv.weight")
    groups = source.groups or 1
    one_bn = bn(f"{prefix}.rbr_1x1.bn") if one_w is not None else None
    w, b = fuse_repvgg_block(dense, bn(f"{prefix}.rbr_dense.bn"), one_w, one_bn, bn(f"{prefix}.rbr_identity"),
                             in_channels=dense.shape[1] * groups, groups=groups)
    return w if source.fold == REPVGG_WEIGHT else b


def _numpy(value):
    return value.detach().cpu().numpy() if hasattr(value, "detach") else value

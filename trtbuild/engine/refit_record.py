"""What the sidecar records of a refittable build (BuildInfo.refit), so that an engine file can be refit from
a state_dict long after it was built: the refit mode, whether the plan is weight-stripped, every named weight
with the state_dict keys it is computed from and how (trtbuild.layers.weight_names.WeightSource: a copy, a
Conv+BN fold, a BatchNorm scale/shift, a sum, a RepVGG fusion, a slice), and the keys the network definition read
into weights it did not name, or whose uses one name could not cover (weight_names.baked_keys) ("baked": those
values are part of the engine and no refit can change them; each is recorded with the sha256 of its values in their
stored type, so that a refit can tell new values from the build's without the build's weight file), whether the build
checked every name by defining the network again from perturbed weights (``verified``, trtbuild.engine.
refit_verify), and whether the definition read no WeightMap yet holds unnamed float weights (``untraced``: which
keys those hold is unknown, so a refit is refused). A weight-stripped build with baked keys (or untraced) is
refused: its plan could never be refit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trtbuild.layers.weight_names import WeightSource, baked_keys, journal_of, source_values, weight_sources

from .options import REFIT_FLAGS
from .serialize import sha256_bytes


@dataclass(frozen=True)
class RefitRecord:
    mode: str  # "identical" or "any" (BuildOptions.refit)
    stripped: bool
    weights: tuple[WeightSource, ...]
    baked: dict = field(default_factory=dict)  # {state_dict key: sha256 of its values in their stored type}
    #: mode "identical": {weights name: sha256 of the float32 values the build gave it}, so that a refit with
    #: other values is refused (TensorRT: "different weights during refits yield unpredictable behavior")
    built: dict = field(default_factory=dict)
    #: the build defined the network again from perturbed weights and checked every name (refit_verify)
    verified: bool = False
    #: the definition read no WeightMap and left float weights unnamed: which keys they hold is unknown
    untraced: bool = False

    @property
    def flag(self) -> str:
        """The BuilderFlag name of the mode."""
        return REFIT_FLAGS[self.mode]

    @classmethod
    def of_build(cls, options, network, weights=None) -> "RefitRecord | None":
        """The record of a build with BuildOptions `options` of `network` (read from WeightMap `weights`, or None
        for a plain network function); None when the build is not refittable. The baked keys are those the
        network's definition read that no name covers (trtbuild.layers.weight_names.baked_keys), whatever read
        them; a network defined without a journal falls back to the keys `weights` marks used."""
        if options.refit == "off":
            return None
        sources = tuple(weight_sources(network).values())
        values = baked_keys(network)
        if journal_of(network) is None and weights is not None:
            named = {k for s in sources for k in s.keys} - set(values)
            values = {**{k: weights.raw(k) for k in weights.used() if k not in named}, **values}
        baked = {k: stored_sha256(v) for k, v in sorted(values.items()) if v is not None}
        built = {}
        state = weights.stored_arrays() if weights is not None else getattr(journal_of(network), "stored", None)
        if options.refit == "identical" and state is not None:
            built = {s.name: values_sha256(source_values(s, state)) for s in sources
                     if all(k in state for k in s.keys)}
        from .refit_verify import slots, verified

        book = journal_of(network)
        untraced = (book is None or not book.maps) and any(
            s.name is None and s.dtype in ("FLOAT", "HALF", "BF16") for s in slots(network))
        record = cls(options.refit, bool(options.strip_weights), sources, baked, built, verified(network), untraced)
        if record.stripped and (baked or untraced):
            from .errors import BuildError

            what = (f"it bakes {', '.join(repr(k) for k in list(baked)[:3])}"
                    f"{f' (and {len(baked) - 3} more keys)' if len(baked) > 3 else ''} into weights no name covers"
                    if baked else "its definition read no WeightMap, so its unnamed weights cannot be refit")
            raise BuildError(f"network '{network.name}' cannot be built with --strip-weights: {what}, so the "
                             "stripped plan could never be refit; build it without --strip-weights")
        return record

    def to_dict(self) -> dict:
        return {"mode": self.mode, "stripped": self.stripped, "weights": [s.to_dict() for s in self.weights],
                "baked": dict(self.baked), **({"built": dict(self.built)} if self.built else {}),
                "verified": self.verified, **({"untraced": True} if self.untraced else {})}

    @classmethod
    def from_dict(cls, data, where: str = "the sidecar") -> "RefitRecord":
        """The record of BuildInfo.refit; ValueError naming `where` if it is not one."""
        try:
            mode, stripped = data["mode"], bool(data.get("stripped", False))
            weights = tuple(WeightSource.from_dict(w) for w in data["weights"])
            baked = {str(k): str(v) for k, v in dict(data.get("baked", {})).items()}
            built = {str(k): str(v) for k, v in dict(data.get("built", {})).items()}
            verified, untraced = bool(data.get("verified", False)), bool(data.get("untraced", False))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where} has a 'refit' record that trtbuild cannot read ({e})") from None
        if mode not in REFIT_FLAGS or mode == "off":
            raise ValueError(f"{where} names an unknown refit mode {mode!r}")
        return cls(mode, stripped, weights, baked, built, verified, untraced)


def values_sha256(value) -> str:
    """sha256 of a weight's values as contiguous float32 (whatever its shape: .wts files store them flat)."""
    value = value.detach().cpu().numpy() if hasattr(value, "detach") else value
    return sha256_bytes(np.ascontiguousarray(np.asarray(value, dtype=np.float32)))


def stored_sha256(value) -> str:
    """sha256 of a baked key's values in the type they are stored with (as a WeightMap converts them): a builder
    may use an int64 or float64 key's exact values, which float32 would round (an int64 step above 2**24). A
    float32 key hashes as :func:`values_sha256` does."""
    if not isinstance(value, np.ndarray):
        from trtbuild.weights.errors import WeightsError
        from trtbuild.weights.tensors import to_numpy

        try:
            value = to_numpy(value, "<baked key>", [], copy=False)
        except WeightsError:  # a list of numbers, say
            value = np.asarray(value)
    arr = np.ascontiguousarray(value)
    if arr.dtype == np.float32:
        return values_sha256(arr)
    return sha256_bytes(f"{arr.dtype.str}:".encode() + arr.tobytes())

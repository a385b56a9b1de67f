"""Refittable and weight-stripped reference plans: which weights a plan lets a Refitter replace, and how.

A layer entry of a refittable plan lists its refittable weight keys ("refittable"); the plan's "refit" field names
the builder's refit mode. Weights named with set_weights_name keep their names ("weight_names") whether or not
the plan is refittable, so that an inspector and a refitter see the names the network gave. A stripped weight
("stripped": its storage type and shape) has no array in the blob: the engine holds zeros in its place and refuses
to run until a Refitter has filled every stripped weight (TensorRT: a weight-stripped engine must be refit with
all its stripped weights before use).

Which weights are refittable (TensorRT's BuilderFlag documentation, and the reference's choices):
- REFIT and REFIT_IDENTICAL: every weight with a WeightsRole (a convolution's or deconvolution's kernel and bias,
  a scale's shift and scale, a constant's values). REFIT_IDENTICAL lets TensorRT assume the new weights equal the
  build weights; the reference computes with whatever weights it is given, and the Refitter logs a warning when
  they differ under REFIT_IDENTICAL;
- REFIT_INDIVIDUAL: only the weights marked with INetworkDefinition.mark_weights_refittable;
- STRIP_PLAN without a refit mode means REFIT_IDENTICAL; it strips every refittable weight;
- a scale's power has no role and is never refittable; nor, in the reference, are integer and boolean constants
  (indices and shapes, which shape inference reads when the network is built).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .enums import BuilderFlag, DataType, LayerType, SerializationFlag, WeightsRole
from .argtypes import api_types

#: (layer type, weight key) -> role (a scale's power has none)
ROLES = {("CONVOLUTION", "kernel"): WeightsRole.KERNEL, ("CONVOLUTION", "bias"): WeightsRole.BIAS,
         ("DECONVOLUTION", "kernel"): WeightsRole.KERNEL, ("DECONVOLUTION", "bias"): WeightsRole.BIAS,
         ("SCALE", "shift"): WeightsRole.SHIFT, ("SCALE", "scale"): WeightsRole.SCALE,
         ("CONSTANT", "weights"): WeightsRole.CONSTANT}

_NOT_REFITTABLE_TYPES = frozenset({DataType.INT32, DataType.INT64, DataType.BOOL, DataType.UINT8})


@dataclass(frozen=True)
class RefitSpec:
    """The refit settings of a build: the mode's flag name and whether refittable weights are stripped."""

    mode: str
    strip: bool

    @staticmethod
    def of(config) -> RefitSpec | None:
        """The spec a builder config asks for, or None for an engine that cannot be refit."""
        strip = config.get_flag(BuilderFlag.STRIP_PLAN)
        for flag in (BuilderFlag.REFIT_INDIVIDUAL, BuilderFlag.REFIT, BuilderFlag.REFIT_IDENTICAL):
            if config.get_flag(flag):
                return RefitSpec(flag.name, strip)
        return RefitSpec(BuilderFlag.REFIT_IDENTICAL.name, True) if strip else None

    def refittable(self, layer_type: LayerType, key: str, w, name: str | None, marked: set) -> bool:
        if (layer_type.name, key) not in ROLES or w.dtype in _NOT_REFITTABLE_TYPES:
            return False
        return name in marked if self.mode == BuilderFlag.REFIT_INDIVIDUAL.name else True


def plan_weight(entry: dict, key: str, w, name: str | None, spec: RefitSpec | None, marked: set) -> bool:
    """Record weight `key` of a layer entry's refit fields; True if its array goes into the blob."""
    if name is not None:
        entry.setdefault("weight_names", {})[key] = name
    if spec is None or not spec.refittable(LayerType[entry["type"]], key, w, name, marked):
        return True
    entry.setdefault("refittable", []).append(key)
    if spec.strip:
        entry.setdefault("stripped", {})[key] = {"shape": list(w._array.shape), "storage": w._array.dtype.str}
        return False
    return True


def with_placeholders(header: dict, arrays: dict) -> dict:
    """The plan's arrays, with zeros for its stripped weights (shape inference reads their size and type)."""
    out = dict(arrays)
    for entry in header["layers"]:
        for key, spec in entry.get("stripped", {}).items():
            out[entry["weights"][key]] = np.zeros(spec["shape"], dtype=np.dtype(spec["storage"]))
    return out


def stripped_slots(header: dict) -> set[tuple[int, str]]:
    """(layer index, weight key) of every stripped weight of a plan."""
    return {(k, key) for k, entry in enumerate(header["layers"]) for key in entry.get("stripped", {})}


def check_refit_header(header: dict, need) -> None:
    """The refit fields of a plan header refer to weights the layers have (need(ok, what) refuses)."""
    need(header.get("refit") in (None, *(f.name for f in (BuilderFlag.REFIT, BuilderFlag.REFIT_IDENTICAL,
                                                         BuilderFlag.REFIT_INDIVIDUAL))),
         f"'refit' is {header.get('refit')!r}, not a refit BuilderFlag's name")
    for k, entry in enumerate(header["layers"]):
        where = f"layers[{k}] ('{entry['name']}')"
        names, refit, stripped = (entry.get("weight_names", {}), entry.get("refittable", []),
                                  entry.get("stripped", {}))
        need(isinstance(names, dict) and all(isinstance(v, str) and key in entry["weights"]
                                             for key, v in names.items()),
             f"{where} 'weight_names' {names!r} does not name weights of the layer")
        need(isinstance(refit, list) and all(key in entry["weights"] for key in refit)
             and (not refit or "refit" in header),
             f"{where} 'refittable' {refit!r} does not list refittable weights of the layer")
        need(isinstance(stripped, dict)
             and all(key in refit and isinstance(s, dict) and isinstance(s.get("shape"), list)
                     and isinstance(s.get("storage"), str) for key, s in stripped.items()),
             f"{where} 'stripped' {stripped!r} does not describe refittable weights of the layer")


@api_types
class ISerializationConfig:
    """How ICudaEngine.serialize_with_config writes a plan. An engine's config starts with the flags it was built
    with: EXCLUDE_WEIGHTS for a weight-stripped engine, INCLUDE_REFIT for a refittable one, so that serialize()
    gives back the kind of plan the engine came from; clear EXCLUDE_WEIGHTS to write a refit stripped engine whole."""

    def __init__(self, flags: int = 0):
        self.flags = int(flags)

    def set_flag(self, flag: SerializationFlag) -> bool:
        self.flags |= 1 << int(SerializationFlag(flag))
        return True

    def clear_flag(self, flag: SerializationFlag) -> bool:
        self.flags &= ~(1 << int(SerializationFlag(flag)))
        return True

    def get_flag(self, flag: SerializationFlag) -> bool:
        return bool(self.flags >> int(SerializationFlag(flag)) & 1)


def serialized_header(header: dict, arrays: dict, config: ISerializationConfig,
                      unfilled: set) -> tuple[dict, set[str]]:
    """The header a serialization config asks for, and the blob references it leaves out; ValueError (one sentence)
    where the config asks for what the engine cannot give."""
    exclude, keep_refit = (config.get_flag(SerializationFlag.EXCLUDE_WEIGHTS),
                           config.get_flag(SerializationFlag.INCLUDE_REFIT))
    refittable = "refit" in header
    if exclude and refittable and not keep_refit:
        raise ValueError("SerializationFlag.EXCLUDE_WEIGHTS without INCLUDE_REFIT would write a plan that lacks "
                         "weights and cannot be refit to get them back: set INCLUDE_REFIT too")
    if unfilled and not exclude:
        raise ValueError(f"the engine is weight-stripped and {len(unfilled)} of its stripped weights were never "
                         "refit, so it has no values to write for them: refit them first, or keep "
                         "SerializationFlag.EXCLUDE_WEIGHTS set")
    out = {**header, "layers": []}
    if config.get_flag(SerializationFlag.EXCLUDE_LEAN_RUNTIME) and header.get("lean_runtime"):
        out["lean_runtime"] = False  # the plan is written without the lean runtime it was built with
    left_out: set[str] = set()
    for entry in header["layers"]:
        entry = {k: v for k, v in entry.items() if k != "stripped"}
        if refittable and exclude and entry.get("refittable"):
            entry["stripped"] = {}
            for key in entry["refittable"]:
                ref = entry["weights"][key]
                left_out.add(ref)
                entry["stripped"][key] = {"shape": list(arrays[ref].shape), "storage": arrays[ref].dtype.str}
        if refittable and not keep_refit:
            entry.pop("refittable", None)
        out["layers"].append(entry)
    if refittable and not keep_refit:
        out.pop("refit", None)
    return out, left_out

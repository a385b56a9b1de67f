"""Refitter of the reference backend: replaces the refittable weights of an engine (refit.py says which).

TensorRT's contract, mirrored: a call that is refused logs an error through the refitter's logger and returns
False (or null weights, or a prototype of count -1), never raises; set weights are held until refit_cuda_engine,
which fails while get_missing_weights() is not empty (the stripped weights of a weight-stripped engine that were
neither filled before nor set now); execution contexts of the engine stay valid and run with the new weights.
Weights are found by the name set_weights_name gave them, or by (layer name, WeightsRole) with the legacy calls;
unnamed weights are listed as "" by get_all_weights and get_missing_weights (TensorRT: "empty string for unnamed
weights").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .argtypes import api_types
from .core import ILogger, Weights
from .enums import BuilderFlag, DataType, TensorLocation, WeightsRole
from .graph import _weight_tensor
from .refit import ROLES
from .runtime import ICudaEngine


@dataclass(frozen=True)
class _Slot:
    """One refittable weight of one layer of the engine."""

    layer: int
    key: str
    layer_name: str
    role: WeightsRole
    name: str  # "" where the weights have no name
    dtype: DataType
    count: int


class _Prototype(Weights):
    """Weights with a type and a count but no values, as get_weights_prototype returns them (count -1: no such
    weights)."""

    def __init__(self, dtype: DataType, count: int):
        super().__init__(dtype)
        self._count = int(count)

    @property
    def size(self) -> int:
        return self._count


@api_types
class Refitter:
    def __init__(self, engine: ICudaEngine, logger: ILogger):
        self.logger = logger
        self.error_recorder = None
        self.max_threads = 1
        self.weights_validation = True
        self._engine = engine
        if not engine.refittable:
            message = ("Refitter: the engine is not refittable: build it with BuilderFlag.REFIT, REFIT_IDENTICAL, "
                       "REFIT_INDIVIDUAL or STRIP_PLAN (and serialize it with SerializationFlag.INCLUDE_REFIT)")
            logger.log(ILogger.ERROR, message)
            raise RuntimeError(message)
        self._slots: list[_Slot] = []
        for k, entry in enumerate(engine._header["layers"]):
            for key in entry.get("refittable", []):
                ref = entry["weights"][key]
                self._slots.append(_Slot(k, key, entry["name"], ROLES[(entry["type"], key)],
                                         entry.get("weight_names", {}).get(key, ""),
                                         DataType(entry.get("weight_types", {}).get(key, DataType.FLOAT)),
                                         int(engine._arrays[ref].size)))
        self._named: dict[str, Weights] = {}
        self._by_slot: dict[_Slot, Weights] = {}  # set with the legacy set_weights
        self._locations: dict[str, TensorLocation] = {}

    def _error(self, message: str) -> None:
        self.logger.log(ILogger.ERROR, message)

    def _slots_named(self, name) -> list[_Slot]:
        return [s for s in self._slots if name and s.name == name]

    def _check(self, what: str, slot: _Slot, weights: Weights) -> bool:
        if not isinstance(weights, Weights):
            weights = Weights(weights)
        if weights.size != slot.count:
            self._error(f"{what}: the new weights have {weights.size} values but the engine's have {slot.count} "
                        "(a refit cannot change a weight's count)")
            return False
        if weights.dtype != slot.dtype:
            self._error(f"{what}: the new weights are {weights.dtype.name} but the engine's are {slot.dtype.name} "
                        "(a refit cannot change a weight's type)")
            return False
        return True

    # -- named weights ------------------------------------------------------------------------
    def set_named_weights(self, name: str, weights: Weights, location: TensorLocation = TensorLocation.HOST) -> bool:
        """The reference reads Weights from host memory whatever `location` says (a Weights object holds its
        values); the location is only reported back by get_weights_location."""
        slots = self._slots_named(name)
        if not slots:
            self._error(f"IRefitter::setNamedWeights: no refittable weights are named '{name}'"
                        + ("" if name else " (the name is empty)"))
            return False
        if not isinstance(weights, Weights):
            weights = Weights(weights)
        if not self._check(f"IRefitter::setNamedWeights: weights '{name}'", slots[0], weights):
            return False
        self._named[name], self._locations[name] = weights, TensorLocation(location)
        return True

    def get_named_weights(self, weights_name: str) -> Weights:
        if weights_name not in self._named:
            self._error(f"IRefitter::getNamedWeights: weights '{weights_name}' were never set")
            return Weights()
        return self._named[weights_name]

    def get_weights_location(self, weights_name: str) -> TensorLocation:
        if weights_name not in self._named:
            self._error(f"IRefitter::getWeightsLocation: weights '{weights_name}' were never set")
            return TensorLocation.HOST
        return self._locations[weights_name]

    def unset_named_weights(self, weights_name: str) -> bool:
        if self._named.pop(weights_name, None) is None:
            return False
        self._locations.pop(weights_name, None)
        return True

    def get_weights_prototype(self, weights_name: str) -> Weights:
        slots = self._slots_named(weights_name)
        return _Prototype(slots[0].dtype, slots[0].count) if slots else _Prototype(DataType.FLOAT, -1)

    def get_all_weights(self) -> list[str]:
        return _names(self._slots)

    def _missing_slots(self) -> list[_Slot]:
        """Stripped weights that the engine still lacks and that nothing set now provides."""
        return [s for s in self._slots if (s.layer, s.key) in self._engine._unfilled
                and s.name not in self._named and s not in self._by_slot]

    def get_missing_weights(self) -> list[str]:
        return _names(self._missing_slots())

    # -- (layer name, role) ---------------------------------------------------------------------
    def set_weights(self, layer_name: str, role: WeightsRole, weights: Weights) -> bool:
        role = WeightsRole(role)
        of_layer = [s for s in self._slots if s.layer_name == layer_name]
        slot = next((s for s in of_layer if s.role == role), None)
        if slot is None:
            why = (f"layer '{layer_name}' has no refittable {role.name} weights (it has "
                   f"{[s.role.name for s in of_layer]})" if of_layer
                   else f"the engine has no layer named '{layer_name}' with refittable weights")
            self._error(f"IRefitter::setWeights: {why}")
            return False
        if not isinstance(weights, Weights):
            weights = Weights(weights)
        if not self._check(f"IRefitter::setWeights: layer '{layer_name}' {role.name}", slot, weights):
            return False
        self._by_slot[slot] = weights
        return True

    def get_all(self) -> tuple[list[str], list[WeightsRole]]:
        return [s.layer_name for s in self._slots], [s.role for s in self._slots]

    def get_missing(self) -> tuple[list[str], list[WeightsRole]]:
        missing = self._missing_slots()
        return [s.layer_name for s in missing], [s.role for s in missing]

    # -- refit ----------------------------------------------------------------------------------
    def refit_cuda_engine(self) -> bool:
        missing = self._missing_slots()
        if missing:
            self._error("IRefitter::refitCudaEngine: the engine cannot be refit while weights are missing: "
                        + ", ".join(f"'{s.name}'" if s.name else f"layer '{s.layer_name}' {s.role.name}"
                                    for s in missing))
            return False
        identical = self._engine._header.get("refit") == BuilderFlag.REFIT_IDENTICAL.name
        for slot in self._slots:
            weights = self._by_slot.get(slot, self._named.get(slot.name) if slot.name else None)
            if weights is not None:
                self._apply(slot, weights, identical)
        return True

    def refit_cuda_engine_async(self, stream_handle: int) -> bool:
        """The reference refits at once (nothing is enqueued), so the stream is not used."""
        return self.refit_cuda_engine()

    def release_refit_resources(self) -> bool:
        return True

    def _apply(self, slot: _Slot, weights: Weights, identical: bool) -> None:
        engine = self._engine
        entry = engine._header["layers"][slot.layer]
        ref = entry["weights"][slot.key]
        old = engine._arrays[ref]
        new = np.array(weights._array, copy=True).reshape(old.shape)
        if identical and (slot.layer, slot.key) not in engine._unfilled and not np.array_equal(new, old):
            self.logger.log(ILogger.WARNING, f"IRefitter::refitCudaEngine: weights "
                            f"'{slot.name or slot.layer_name}' differ from the build weights of an engine built "
                            "with BuilderFlag.REFIT_IDENTICAL, where TensorRT may give unpredictable results; the "
                            "reference computes with the new weights")
        engine._arrays[ref] = new
        engine._graph.layers[slot.layer][2][slot.key] = _weight_tensor(new, slot.dtype)
        engine._graph._device_weights.clear()
        engine._unfilled.discard((slot.layer, slot.key))
        engine._plan = None



def _names(slots: list[_Slot]) -> list[str]:
    """The names of weights, each once (weights that layers share have one name); "" for each unnamed one."""
    seen: set[str] = set()
    out = []
    for s in slots:
        if not s.name or s.name not in seen:
            seen.add(s.name)
            out.append(s.name)
    return out

"""Refit an engine from a state_dict: every weight the build named is recomputed from its state_dict keys as the
build computed it (a copy, a Conv+BN fold, a RepVGG fusion: the engine's RefitRecord says which) and handed to
TensorRT's IRefitter by name (set_named_weights, get_missing_weights, refit_cuda_engine).

    engine = load_engine("engines/resnet18.engine")
    refit_engine(engine, "new.safetensors")        # or engine.refit(model.state_dict())
    save_refit_engine(engine, "engines/resnet18-new.engine", weights_path="new.safetensors")

Everything is checked before TensorRT is called, so that a refused refit leaves the engine as it was: a key a
named weight needs and the new weights lack, a key whose shape is not the one the build read, and a key the build
baked into the engine (read into a weight it did not name) whose values differ from the build's; each refusal is
one sentence naming the key.

BuilderFlag.REFIT_IDENTICAL (`--refit`, the default) lets TensorRT assume the refit weights equal the build's
("different weights during refits yield unpredictable behavior"): such an engine is refit only with the values
it was built with (their sha256 is in the RefitRecord), which is what a weight-stripped plan needs; other values
are refused on every backend. Build with `--refit any` (BuilderFlag.REFIT) to refit with new weights.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .errors import EngineError
from .records import build_info_of
from .refit_record import RefitRecord, stored_sha256, values_sha256


class RefitError(EngineError, ValueError):
    """A refit that was refused (the weights do not fit the engine) or that TensorRT failed."""



def _called(engine) -> str:
    """How a refusal names `engine`: "engine NAME", or "the engine" for one left with the default name."""
    return "the engine" if engine.name in (None, "", "engine") else f"engine {engine.name}"

def state_of(weights) -> tuple[dict, str]:
    """({key: array or tensor}, where it came from) of a state_dict, a WeightMap or a weight file path
    (.safetensors, .pt/.pth, .wts)."""
    from trtbuild.weights import WeightMap

    if isinstance(weights, (str, os.PathLike)):
        weights = WeightMap.load(weights)
    if isinstance(weights, WeightMap):
        return weights.stored_arrays(), str(weights.source)
    if isinstance(weights, Mapping):
        return dict(weights), "the state_dict"
    raise RefitError(f"refit weights must be a state_dict, a WeightMap or a weight file path, got "
                     f"{type(weights).__name__}")


def refit_record(engine) -> RefitRecord:
    """The RefitRecord of an Engine (from its sidecar or plan info); RefitError if it was not built refittable."""
    info = build_info_of(engine.sidecar)
    data = info.refit if info is not None else None
    if not data:
        raise RefitError(f"{_called(engine)} was not built refittable (its sidecar has no refit record): rebuild "
                         "it with --refit (BuildOptions(refit='identical' or 'any'))")
    return RefitRecord.from_dict(data, f"the sidecar of {engine.name}")


def _typed_weights(trt, dtype, value: np.ndarray, name: str, keep: list):
    """trt.Weights of `value` in the engine weights' type (FLOAT, HALF, or BF16 bit patterns rounded to nearest
    even, as trtbuild.layers.common.trt_weights made them for the build); the arrays are appended to `keep`."""
    flat = value.reshape(-1)
    for kind, np_type in (("FLOAT", np.float32), ("HALF", np.float16)):
        if dtype == getattr(trt.DataType, kind):
            keep.append(np.ascontiguousarray(flat, dtype=np_type))
            return trt.Weights(keep[-1])
    if dtype == trt.DataType.BF16:
        import torch

        f32 = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32))
        keep.append(np.ascontiguousarray(f32.to(torch.bfloat16).view(torch.int16).numpy()))
        return trt.Weights(trt.DataType.BF16, keep[-1].ctypes.data, keep[-1].size)
    raise RefitError(f"engine weights '{name}' have type {getattr(dtype, 'name', dtype)}; trtbuild refits FLOAT, "
                     "HALF and BF16 weights only")


def refit_values(record: RefitRecord, state: Mapping, source: str = "the new weights") -> dict[str, np.ndarray]:
    """{weights name: float32 values} of every named weight of `record` computed from `state`, after checking
    that no key is missing, misshapen or a changed baked-in weight (RefitError, one sentence naming the key)."""
    from trtbuild.layers.weight_names import source_values

    needed: dict[str, str] = {}
    for s in record.weights:
        for k in s.keys:
            needed.setdefault(k, s.name)
    missing = [k for k in needed if k not in state]
    if missing:
        more = f" (and {len(missing) - 1} more keys)" if len(missing) > 1 else ""
        raise RefitError(f"'{missing[0]}'{more} is missing from {source}, and engine weights "
                         f"'{needed[missing[0]]}' are computed from it")
    for key, digest in record.baked.items():
        if key in state and stored_sha256(state[key]) != digest:
            raise RefitError(f"'{key}' in {source} differs from the build's, but the build baked it into the engine "
                             "(its values went into weights no name covers), so a refit cannot change it: rebuild "
                             "the engine")
    values = {}
    for s in record.weights:
        try:
            values[s.name] = source_values(s, state)
        except ValueError as e:
            raise RefitError(f"{e} ({source})") from None
        if s.name in record.built and values_sha256(values[s.name]) != record.built[s.name]:
            raise RefitError(f"engine weights '{s.name}' from {source} differ from the build's, but the engine was "
                             "built with --refit identical (BuilderFlag.REFIT_IDENTICAL), where TensorRT's results "
                             "with other weights are unpredictable: rebuild it with --refit any")
    return values


def refit_engine(engine, weights) -> None:
    """Refit `engine` (an Engine) in place with `weights` (state_dict, WeightMap or weight file path); its
    execution context then runs with them. RefitError (one sentence) if they do not fit or TensorRT refuses."""
    record = refit_record(engine)
    if not record.weights and record.baked:
        keys = sorted(record.baked)
        shown = ", ".join(repr(k) for k in keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        raise RefitError(f"{_called(engine)} names no weights: the build baked every key it read ({shown}) into "
                         "weights no name covers (a key read again for another use, or into a computed weight), so "
                         "nothing in it can be refit from a state_dict; read each key once and hand it whole to a "
                         "trtbuild.layers builder, then rebuild it")
    if not record.weights:
        raise RefitError(f"{_called(engine)} names no weights, so nothing in it can be refit from a state_dict; "
                         "build it from a WeightMap with trtbuild.layers builders, which name each weight after its "
                         "state_dict key")
    if record.untraced:
        raise RefitError(f"{_called(engine)} was defined without reading a WeightMap and holds unnamed weights, "
                         "so trtbuild cannot tell which state_dict keys they come from and a refit could leave them "
                         "stale; read its weights through a WeightMap (WeightMap.from_state_dict) and rebuild it")
    if not record.verified:
        raise RefitError(f"{_called(engine)} was built by a trtbuild that did not check its weight names by defining "
                         "the network again from other weights (its refit record is not 'verified'), so a refit could "
                         "leave some weights stale; rebuild it")
    state, source = state_of(weights)
    values = refit_values(record, state, source)
    trt, icuda = engine.trt, engine._engine
    if not icuda.refittable:
        raise RefitError(f"{_called(engine)} is not refittable, although its sidecar says it was built with "
                         f"--refit {record.mode}: rebuild it")
    logger = engine.logger
    logger.clear()
    refitter = trt.Refitter(icuda, logger)
    keep: list = []
    for name, value in values.items():
        proto = refitter.get_weights_prototype(name)
        if proto.size < 0:
            raise RefitError(f"{_called(engine)} has no refittable weights named '{name}' (its sidecar names them)")
        if value.size != proto.size:
            raise RefitError(f"engine weights '{name}' hold {proto.size} values, but {source} give {value.size}")
        if not refitter.set_named_weights(name, _typed_weights(trt, proto.dtype, value, name, keep)):
            raise RefitError(f"{engine.backend} refused weights '{name}': {logger.error_text()}")
    missing = [n or "(unnamed)" for n in refitter.get_missing_weights()]
    if missing:
        raise RefitError(f"{_called(engine)} still lacks weights {missing} that no state_dict key provides")
    if not refitter.refit_cuda_engine():
        raise RefitError(f"{engine.backend} failed to refit {engine.name}: {logger.error_text()}")
    engine._refit_keep = [values, keep]  # real TensorRT may read host weights until the refit is done
    if record.stripped:  # the engine has its weights now
        engine.sidecar = _sidecar_with(engine.sidecar, record)


def _sidecar_with(sidecar, record: RefitRecord):
    """The engine's sidecar or plan info after a refit: its weights are no longer stripped."""
    from dataclasses import replace as dc_replace

    from .records import BuildInfo
    from .sidecar import Sidecar

    refit = dc_replace(record, stripped=False).to_dict()
    if isinstance(sidecar, BuildInfo) or not hasattr(sidecar, "build"):
        return BuildInfo.of(sidecar).replace(refit=refit)
    side = Sidecar.of(sidecar)
    return side.replace(build=side.build.replace(refit=refit))


def refit_plan(engine):
    """The refit engine serialized whole (its weights included, still refittable: INCLUDE_REFIT)."""
    trt, icuda = engine.trt, engine._engine
    config = icuda.create_serialization_config()
    config.clear_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    config.set_flag(trt.SerializationFlag.INCLUDE_REFIT)
    plan = icuda.serialize_with_config(config)
    if plan is None:
        raise RefitError(f"{engine.backend} could not serialize the refit engine {engine.name}: "
                         f"{engine.logger.error_text()}")
    return plan


def save_refit_engine(engine, out, weights_path=None) -> Path:
    """Write the refit `engine` to `out` with its sidecar (both atomically, trtbuild.engine.serialize.save_engine):
    the weights file it was refit from (`weights_path`, hashed; None: refit from a state_dict in memory, no
    file) replaces the build's."""
    from .serialize import make_sidecar, save_engine, sha256_file
    from .sidecar import Sidecar

    info = build_info_of(engine.sidecar)
    side = Sidecar.of(engine.sidecar) if hasattr(engine.sidecar, "build") else make_sidecar(engine.trt, b"", info)
    weights = {"path": str(weights_path), "sha256": sha256_file(weights_path)} if weights_path is not None else None
    side = _sidecar_with(side, refit_record(engine)).replace(weights=weights)
    return save_engine(out, refit_plan(engine), side)

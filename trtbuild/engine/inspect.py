"""What the builder made of a network: an engine file's I/O, profiles, layers with their precision, weights and
refit names, sidecar, version and targets, as one typed EngineReport (`trtbuild inspect`).

    report = inspect_engine("engines/resnet18.engine")
    report.layers[0].precision        # ("HALF",): the DataType of the first layer's output

Each backend is read through the API TensorRT gives, so that the report means the same on all of them: the I/O
tensors and profiles from ICudaEngine, the refit names from a Refitter, the layers from the engine inspector
(trtbuild.engine.inspect_json reads both of TensorRT's JSON schemas). A reference plan also carries every layer's
type, output types and weight names whatever the ProfilingVerbosity, so its layers are read from the plan itself
(TensorRT's inspector gives only names under the default LAYER_NAMES_ONLY). An engine that cannot be deserialized
here (a TensorRT-RTX or TensorRT engine on a machine without a suitable GPU) is described from its sidecar and its
size alone, and the report says why (`loaded` False, `note`).

Nothing is written: the plan is read once, and the sidecar through `engine_sidecar` only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trtbuild import __version__
from trtbuild.backend import BackendError, backend_name, is_reference, load_trt

from .errors import EngineCompatibilityError, EngineFileError
from .inspect_json import IOTensor, LayerInfo, LayerWeight, ProfileRange, parse_engine_information
from .serialize import (check_engine_sha256, looks_like_reference_plan, looks_like_rtx_engine, read_file_aligned,
                        read_sidecar, sidecar_backend)

__all__ = ["EngineReport", "IOTensor", "LayerInfo", "LayerWeight", "ProfileRange", "WeightInfo", "engine_sidecar",
           "inspect_engine"]

TENSORRT_MAGIC = b"ftrt"  # the first bytes of a TensorRT engine (TensorRT-RTX's: "vtrt")
#: a reference layer's weight keys as TensorRT's inspector names them (trtbuild.reference.inspector)
_WEIGHT_KEYS = {"kernel": "Weights", "weights": "Weights", "bias": "Bias", "shift": "Shift", "scale": "Scale",
                "power": "Power"}
_PRODUCT = {"reference": "the reference backend", "tensorrt": "TensorRT", "tensorrt-rtx": "TensorRT-RTX"}


@dataclass(frozen=True)
class WeightInfo:
    """A weight of the engine: its name (set_weights_name; the name a refit uses), the layer and role holding it
    (empty where only a Refitter names it), whether a Refitter may replace it and whether the plan left it out."""

    name: str | None
    layer: str = ""
    key: str = ""
    refittable: bool = False
    stripped: bool = False


@dataclass(frozen=True)
class EngineReport:
    """An engine file described. Fields that a backend cannot tell are None (an empty tuple for `layers` means
    an engine with no layers; None means they could not be read)."""

    path: str
    backend: str  # "reference", "tensorrt" or "tensorrt-rtx"
    version: str  # TensorRT's or TensorRT-RTX's version; trtbuild's for the reference
    targets: tuple[str, ...]  # compute capabilities it runs on; ("any",) for the reference
    plan_bytes: int
    loaded: bool  # deserialized here (False: described from the sidecar and the file alone)
    note: str | None = None  # why it was not deserialized
    io: tuple[IOTensor, ...] = ()
    num_profiles: int | None = None
    num_layers: int | None = None
    layers: tuple[LayerInfo, ...] | None = None
    layer_source: str | None = None  # "plan" (reference), "inspector" or None
    profiling_verbosity: str | None = None
    weights: tuple[WeightInfo, ...] = ()
    refittable: bool | None = None
    stripped: bool | None = None
    device_memory_bytes: int | None = None
    sidecar: dict | None = field(default=None)
    #: version compatibility: None (not recorded), False, or True with `lean_runtime` (embedded: host code)
    version_compatible: bool | None = None
    lean_runtime: bool | None = None
    hardware_compat: str | None = None  # "none", "ampere+" or "same-cc"; None where not recorded

    def to_json(self) -> dict:
        """A JSON-ready dict (tuples become lists)."""
        return asdict(self)

    def precision_counts(self) -> dict[str, int]:
        """{DataType name: number of layers whose first output has it}; empty where layers are unknown."""
        counts: dict[str, int] = {}
        for layer in self.layers or ():
            if layer.precision:
                counts[layer.precision[0]] = counts.get(layer.precision[0], 0) + 1
        return counts


class InspectError(EngineFileError):
    """The path is not an engine that can be described: missing, empty, truncated or another kind of file."""


def engine_sidecar(engine_path: str | os.PathLike) -> dict | None:
    """The sidecar of an engine as a plain dict (None if it has none): the one place this module reads it."""
    side = read_sidecar(engine_path)
    return dict(side) if isinstance(side, Mapping) else side


def _kind(data, sidecar: dict | None, path: Path) -> str:
    if looks_like_reference_plan(data):
        return "reference"
    if looks_like_rtx_engine(data):
        return "tensorrt-rtx"
    if bytes(data[:len(TENSORRT_MAGIC)]) == TENSORRT_MAGIC:
        return "tensorrt"
    if sidecar is not None and sidecar_backend(sidecar) != "reference":
        return sidecar_backend(sidecar)
    raise InspectError(f"{path} is not an engine: it starts neither like a trtbuild reference plan nor like a "
                       "TensorRT or TensorRT-RTX engine")


def _read(path: Path) -> tuple[object, dict | None]:
    if not path.exists():
        raise InspectError(f"engine file {path} does not exist")
    if not path.is_file():
        raise InspectError(f"engine path {path} is not a file")
    sidecar = engine_sidecar(path)
    data = read_file_aligned(path)
    if data is None:
        raise InspectError(f"engine file {path} is empty, so it is not an engine")
    if sidecar is not None:
        check_engine_sha256(data, sidecar, f"engine file {path}", InspectError)
    return data, sidecar


def _targets(kind: str, sidecar: dict | None) -> tuple[str, ...]:
    if kind == "reference":
        return ("any",)
    side = sidecar or {}
    if kind == "tensorrt-rtx" and side.get("targets"):
        targets = [str(t) for t in side["targets"]]
        return tuple(str(side.get("compute_capability")) if t == "current" else t for t in targets)
    return (str(side["compute_capability"]),) if side.get("compute_capability") else ()


def _sidecar_io(sidecar: dict | None) -> tuple[IOTensor, ...]:
    """The I/O tensors and profiles a sidecar records (for an engine that cannot be deserialized here)."""
    side = sidecar or {}
    profiles = side.get("profiles") or ([side["profile"]] if side.get("profile") else [])
    out = []
    for kind, mode in (("inputs", "input"), ("outputs", "output")):
        for t in side.get(kind) or []:
            each = [prof.get(t.get("name")) for prof in profiles] if mode == "input" else []
            ranges = tuple(ProfileRange(tuple(p["min"]), tuple(p["opt"]), tuple(p["max"])) for p in each if p)
            out.append(IOTensor(t.get("name"), mode, tuple(t.get("shape") or ()) or None, t.get("dtype"),
                                profiles=ranges))
    return tuple(out)


def _engine_io(engine, trt) -> tuple[IOTensor, ...]:
    """I/O tensors through ICudaEngine (get_tensor_*; every profile's range of a dynamic input)."""
    out = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        shape = tuple(int(d) for d in engine.get_tensor_shape(name))
        shape_tensor = bool(engine.is_shape_inference_io(name))
        profiles = []
        if is_input and shape_tensor:
            for k in range(engine.num_optimization_profiles):
                values = engine.get_tensor_profile_values(k, name)
                if values:
                    profiles.append(ProfileRange(*(tuple(int(v) for v in vs) for vs in values)))
        elif is_input and any(d < 0 for d in shape):
            for k in range(engine.num_optimization_profiles):
                profiles.append(ProfileRange(*(tuple(int(d) for d in s)
                                               for s in engine.get_tensor_profile_shape(name, k))))
        describe = getattr(engine, "get_tensor_format_desc", None)
        dt = engine.get_tensor_dtype(name)
        out.append(IOTensor(name, "input" if is_input else "output", shape, getattr(dt, "name", str(dt)),
                            describe(name) if describe else None, tuple(profiles), shape_tensor))
    return tuple(out)


def _plan_layers(data) -> tuple[tuple[LayerInfo, ...], tuple[WeightInfo, ...], bool]:
    """(layers, weights, stripped) of a reference plan, from its header."""
    from trtbuild.reference.enums import DataType
    from trtbuild.reference.plan import plan_header

    header = plan_header(data)
    names = {t["id"]: t["name"] for t in header["inputs"]}
    for entry in header["layers"]:
        names.update((o["id"], o["name"]) for o in entry["outputs"])
    layers, weights, stripped = [], [], False
    for entry in header["layers"]:
        given = entry.get("weight_names", {})
        types = entry.get("weight_types", {})
        lw = []
        for key in entry["weights"]:
            name = given.get(key)
            role = _WEIGHT_KEYS.get(key, key)
            lw.append(LayerWeight(role, DataType(types.get(key, 0)).name, None, name))
            cut = key in entry.get("stripped", {})
            stripped |= cut
            weights.append(WeightInfo(name, entry["name"], role, key in entry.get("refittable", []), cut))
        precision = tuple(DataType(o["dtype"]).name for o in entry["outputs"])
        layers.append(LayerInfo(entry["name"], entry["type"], precision,
                                tuple(names.get(i, "") for i in entry["inputs"] if i != -1),
                                tuple(o["name"] for o in entry["outputs"]), tuple(lw)))
    return tuple(layers), tuple(weights), stripped


def _refit_weights(engine, trt, logger, layers) -> tuple[tuple[WeightInfo, ...], bool]:
    """Weights of a real engine: a Refitter's names (refittable ones; those it lacks are stripped), else the
    named weights the inspector shows."""
    if engine.refittable:
        refitter = trt.Refitter(engine, logger)
        missing = set(refitter.get_missing_weights())
        return tuple(WeightInfo(n, refittable=True, stripped=n in missing)
                     for n in refitter.get_all_weights()), bool(missing)
    return tuple(WeightInfo(w.name, layer.name, w.key) for layer in layers or () for w in layer.weights
                 if w.name), False


def inspector_layers(engine, trt, logger) -> tuple[tuple[LayerInfo, ...], tuple[WeightInfo, ...], bool]:
    """(layers, weights, stripped) of a deserialized engine through TensorRT's API alone: its engine inspector's
    JSON and, for a refittable engine, a Refitter. What a TensorRT or TensorRT-RTX engine is read with (the
    reference, which mirrors the API, answers the same calls)."""
    info = parse_engine_information(engine.create_engine_inspector().get_engine_information(
        trt.LayerInformationFormat.JSON))
    weights, stripped = _refit_weights(engine, trt, logger, info.layers)
    return info.layers, weights, stripped


def _compatibility(kind: str, data, sidecar: dict | None) -> dict:
    """version_compatible, lean_runtime and hardware_compat: a reference plan's header records them; for
    TensorRT and TensorRT-RTX engines (whose API tells neither flag) the sidecar does, if there is one."""
    from .compat import HARDWARE_COMPAT

    if kind == "reference":
        from trtbuild.reference.plan import plan_header

        header = plan_header(data)
        level = {0: "none", 1: "ampere+", 2: "same-cc"}.get(header.get("hardware_compatibility_level", 0))
        return dict(version_compatible=bool(header.get("version_compatible")),
                    lean_runtime=bool(header.get("lean_runtime")), hardware_compat=level)
    if sidecar is None:
        return {}
    vc = bool(sidecar.get("version_compatible"))
    hw = sidecar.get("hardware_compat", "none")
    return dict(version_compatible=vc, lean_runtime=vc and not sidecar.get("exclude_lean_runtime"),
                hardware_compat=hw if hw in HARDWARE_COMPAT else None)


def _open(trt, data, path: Path, sidecar: dict | None = None):
    """(logger, runtime, engine): the plan deserialized, without an execution context (a weight-stripped
    engine may refuse one until it is refit; the inspector needs none). A plan whose sidecar says it embeds
    the lean runtime is loaded with engine_host_code_allowed (compat.lean_runtime_embedded: its own sidecar)."""
    from .compat import lean_runtime_embedded
    from .interrupts import calling_tensorrt
    from .logging_bridge import make_logger

    logger = make_logger(trt)
    runtime = trt.Runtime(logger)
    if lean_runtime_embedded(sidecar):
        runtime.engine_host_code_allowed = True
    with calling_tensorrt(trt):
        engine = runtime.deserialize_cuda_engine(data if is_reference(trt) else bytes(data))
    if engine is None:
        raise InspectError(f"{path} could not be loaded by {backend_name(trt)}: {logger.error_text()}")
    return logger, runtime, engine


def inspect_engine(path: str | os.PathLike) -> EngineReport:
    """Describe the engine file at `path` (see the module docstring). Raises InspectError (one sentence) for a
    missing, empty, truncated or changed file or one that is not an engine; EngineFileError for a corrupt sidecar."""
    from .serialize import check_compatible

    path = Path(path)
    data, sidecar = _read(path)
    kind = _kind(data, sidecar, path)
    base = dict(path=str(path), backend=kind, plan_bytes=len(data), targets=_targets(kind, sidecar), sidecar=sidecar,
                **_compatibility(kind, data, sidecar))
    if kind == "reference":
        trt = load_trt("reference")
        version = __version__
    else:
        version = str((sidecar or {}).get("tensorrt_version", "unknown"))
        try:
            trt = load_trt(kind)
            if sidecar is not None:
                check_compatible(sidecar, trt, path)
        except (BackendError, EngineCompatibilityError) as e:
            return EngineReport(**base, version=version, loaded=False, io=_sidecar_io(sidecar),
                                note=f"{_PRODUCT[kind]} cannot deserialize it here: {e}")
        version = str(trt.__version__)
    logger, _runtime, engine = _open(trt, data, path, sidecar)
    io = _engine_io(engine, trt)
    common = dict(base, version=version, loaded=True, io=io, num_profiles=engine.num_optimization_profiles,
                  num_layers=engine.num_layers, refittable=bool(engine.refittable),
                  profiling_verbosity=getattr(engine.profiling_verbosity, "name", None),
                  device_memory_bytes=int(getattr(engine, "device_memory_size_v2", 0) or 0) if kind != "reference"
                  else None)
    if kind == "reference":
        layers, weights, stripped = _plan_layers(data)
        return EngineReport(**common, layers=layers, layer_source="plan", weights=weights, stripped=stripped)
    layers, weights, stripped = inspector_layers(engine, trt, logger)
    return EngineReport(**common, layers=layers, layer_source="inspector", weights=weights, stripped=stripped)

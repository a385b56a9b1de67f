"""Write engines atomically with a JSON sidecar; read them back with version/GPU/checksum checks.

    save_engine("engines/alexnet.engine", plan, sidecar)   # writes alexnet.engine + alexnet.engine.json
    plan, sidecar = read_engine_file("engines/alexnet.engine", trt)   # raises before TensorRT is called

The sidecar `<engine>.json` records the trtbuild and TensorRT versions ("reference" for the
reference backend), the GPU name and compute capability ("cpu" for the reference on CPU), the
precision, the I/O tensors, the optimization profile and the sha256 of the weights and engine.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
from pathlib import Path
from types import ModuleType

from trtbuild import __version__
from trtbuild.backend import backend_kind
from trtbuild.files.atomic import atomic_write_bytes as _atomic_write_bytes
from trtbuild.files.atomic import atomic_write_files, ensure_parent_dir
from trtbuild.files.outputs import ENGINE, SIDECAR, check_outputs

from .device import CPU, device_info
from .compat import later_version_may_load, lean_runtime_embedded, other_gpu_may_run
from .errors import EngineCompatibilityError, EngineFileError, EngineWriteError
from .records import BuildInfo, build_info_of
from .sidecar import SIDECAR_FORMAT, Sidecar  # noqa: F401 - SIDECAR_FORMAT: its old home

log = logging.getLogger("trtbuild.engine")

REFERENCE_MAGIC = b"TRTBREF"


def sidecar_path(engine_path: str | os.PathLike) -> Path:
    """`<engine>.json` next to the engine file."""
    p = Path(engine_path)
    return p.with_name(p.name + ".json")


def sha256_bytes(data) -> str:
    """Hex sha256 of bytes-like `data`."""
    return hashlib.sha256(memoryview(data)).hexdigest()


def check_engine_sha256(data, sidecar, what: str, error: type[Exception] = EngineFileError, advice: str = "") -> None:
    """Raise `error` in one sentence if the engine bytes `data` are not those its sidecar (a Sidecar or a
    dict) records as engine_sha256 (nothing to check without one): "<what> does not match the sha256 in its
    sidecar (<sizes>), so it was changed or truncated after the build<advice>". Every reader of an engine
    and its sidecar (loading, inspecting, the cache) checks with it, so they say it alike."""
    expected = sidecar.get("engine_sha256")
    if not expected or sha256_bytes(data) == expected:
        return
    size = sidecar.get("engine_bytes")
    how = (f"it has {len(data)} bytes, the sidecar says {size}" if size is not None and size != len(data)
           else "same size, different content")
    raise error(f"{what} does not match the sha256 in its sidecar ({how}), so it was changed or truncated after "
                f"the build{advice}")


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: str | os.PathLike, data) -> Path:
    """Replace `path` with `data` atomically (trtbuild.files.atomic: temp file + os.replace).
    Raises EngineWriteError (an EngineFileError and OSError) naming `path` if it cannot be written."""
    return _atomic_write_bytes(path, data, error=EngineWriteError)


def make_sidecar(trt: ModuleType, plan, info=None, weights_path: str | os.PathLike | None = None,
                 **extra) -> Sidecar:
    """The Sidecar of `plan` built with `trt`.

    `info` describes the build (default `plan.info`, the BuildInfo build_plan attached: precision,
    inputs, outputs, profile...; a dict is read as one). `weights_path`, if given, is hashed.
    `extra` keys are added (kept as keys the sidecar does not know, or replacing known ones).
    engine_sha256 / engine_bytes are filled in by save_engine, which hashes what it writes.
    """
    dev = device_info(trt)
    sidecar = Sidecar(
        trtbuild_version=__version__, backend=backend_kind(trt), tensorrt_version=str(trt.__version__),
        gpu=dev["gpu"],  # TensorRT-RTX: the machine that built it (engines run on any of `targets`)
        compute_capability=dev["compute_capability"],
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        build=BuildInfo.of(info if info is not None else getattr(plan, "info", None)),
        weights=None if weights_path is None else {"path": str(weights_path), "sha256": sha256_file(weights_path)},
        engine_bytes=len(plan))
    return Sidecar.from_dict({**sidecar.to_dict(), **extra}) if extra else sidecar


def _refuse_overwriting_the_weights(target: Path, sidecar: Sidecar) -> None:
    """EngineWriteError if the engine or its sidecar would be written over the weights it was built from."""
    weights = sidecar.weights_path
    if not weights or not Path(weights).exists():
        return
    for path in (target, sidecar_path(target)):
        if path.exists() and os.path.samefile(path, weights):
            raise EngineWriteError(f"{path} is the weight file the engine was built from, so it is not overwritten; "
                                   "choose another --out")


def save_engine(path: str | os.PathLike, plan, sidecar) -> Path:
    """Write `plan` to `path` and `sidecar` (a Sidecar, or a dict read as one) to `<path>.json`, both atomically.

    Missing parent directories are created. An existing file at `path` that is not an engine, or at
    `<path>.json` that is not an engine sidecar, is refused (trtbuild.files.outputs.check_outputs), as is the
    weight file named in the sidecar. Both files are completely written to temp files before either
    is renamed into place, so an error leaves an existing engine and sidecar untouched. engine_sha256/engine_bytes are
    recomputed from `plan`. Raises EngineWriteError naming the file that could not be written.
    """
    target = Path(path)
    sidecar = Sidecar.of(sidecar)
    _refuse_overwriting_the_weights(target, sidecar)
    check_outputs([("engine", target, ENGINE), ("its sidecar", sidecar_path(target), SIDECAR)], error=EngineWriteError)
    ensure_parent_dir(target, EngineWriteError)
    text = sidecar.replace(engine_sha256=sha256_bytes(plan), engine_bytes=len(plan)).to_json()
    atomic_write_files([(target, lambda tmp: tmp.write_bytes(memoryview(plan))),
                        (sidecar_path(target), lambda tmp: tmp.write_bytes(text.encode()))], error=EngineWriteError)
    return target


def read_sidecar(engine_path: str | os.PathLike) -> Sidecar | None:
    """The Sidecar of `engine_path`, or None if there is none. A corrupt sidecar, or one of a format
    this trtbuild does not read, is an EngineFileError naming it."""
    side = sidecar_path(engine_path)
    if not side.is_file():
        return None
    return Sidecar.from_json(side.read_bytes(), source=side)


#: layers that move, cast or hold values rather than compute in a precision
_NOT_COMPUTING = {"CAST", "CONSTANT", "QUANTIZE", "DEQUANTIZE", "SHUFFLE", "IDENTITY", "SLICE", "CONCATENATION",
                  "GATHER", "SHAPE", "ASSERTION"}
_FLOAT_PRECISION = {"FLOAT": "fp32", "HALF": "fp16", "BF16": "bf16"}


def reference_plan_precisions(plan) -> tuple[set[str], set[str]]:
    """What a reference plan computes in, read from its layers: (quantized precisions of its Q layers
    ({"int8"}, {"fp8"} or none), float precisions its computing layers output ("fp32"/"fp16"/"bf16"))."""
    from trtbuild.reference.enums import DataType
    from trtbuild.reference.plan import plan_header

    quantized, floats = set(), set()
    for layer in plan_header(plan).get("layers", []):
        for out in layer.get("outputs", []):
            name = DataType(out["dtype"]).name
            if layer["type"] == "QUANTIZE" and name in ("INT8", "FP8"):
                quantized.add(name.lower())
            elif layer["type"] not in _NOT_COMPUTING and name in _FLOAT_PRECISION:
                floats.add(_FLOAT_PRECISION[name])
    return quantized, floats


def check_sidecar_precision(sidecar, plan, engine_path) -> None:
    """Raise EngineFileError (one sentence) if the sidecar's precision contradicts what the reference
    plan `plan` computes in (its Q layers' type for int8/fp8, its layers' float types otherwise), so
    that editing the sidecar cannot loosen parity's tolerances: refused are a quantized precision
    whose Q layers the plan lacks and a float precision no computing layer outputs (a float precision
    on a plan with Q/DQ is accepted: a network function may place its own Q/DQ in an fp32 build, and
    fp32 tolerances are the strictest). Real TensorRT and TensorRT-RTX plans are opaque here: only
    their I/O types are checked (check_sidecar_matches_plan)."""
    precision = build_info_of(sidecar).precision
    if precision is None:
        return
    quantized, floats = reference_plan_precisions(plan)
    actual = (" and ".join(sorted(quantized)) if quantized else
              " and ".join(p for p in ("fp32", "fp16", "bf16") if p in floats) or "no float type")
    if precision in ("int8", "fp8"):
        wrong = precision not in quantized
    else:
        wrong = bool(floats) and precision not in floats
    if wrong:
        raise EngineFileError(f"engine {engine_path}'s sidecar says {precision} but its plan computes in {actual}; "
                              "rebuild the engine (parity tolerances follow the precision)")


def check_sidecar_matches_plan(sidecar, io: dict[str, tuple[list, str, bool]], compute_dtype: str | None,
                               engine_path, plan=None) -> None:
    """Raise EngineFileError (one sentence) if the sidecar describes other I/O tensors than the loaded
    plan has (`io`: {name: (shape, dtype name, is input)}), or a precision its I/O types contradict
    (`compute_dtype`: the DataType name of the sidecar's precision; None if unknown). float32-I/O
    engines (fp32_io, the default) take float32 inputs; native-I/O ones take the compute type (checked
    for registry models, whose inputs build_plan adds). `plan`: the plan bytes; a reference plan's
    layers are checked against the precision too (check_sidecar_precision); a real TensorRT or
    TensorRT-RTX plan cannot be read here, so only its I/O types are checked."""
    build = build_info_of(sidecar)
    for kind in ("inputs", "outputs"):
        described = {t.get("name"): t for t in getattr(build, kind) or []}
        actual = {n: v for n, v in io.items() if v[2] == (kind == "inputs")}
        if described and set(described) != set(actual):
            raise EngineFileError(f"the sidecar of {engine_path} lists {kind} {sorted(described)} but the engine has "
                                  f"{sorted(actual)}, so the sidecar belongs to another engine; rebuild it")
        for name, t in described.items():
            shape, dtype, _ = actual[name]
            if [int(d) for d in t.get("shape", shape)] != list(shape) or t.get("dtype", dtype) != dtype:
                raise EngineFileError(f"the sidecar of {engine_path} describes {kind[:-1]} '{name}' as "
                                      f"{t.get('shape')} {t.get('dtype')} but the engine has {list(shape)} {dtype}, so "
                                      "the sidecar belongs to another engine; rebuild it")
    precision = build.precision
    # a network that adds its own inputs (no model) chooses their types itself
    want = "FLOAT" if build.fp32_io or build.fp32_io is None else compute_dtype
    for name, (_, dtype, is_input) in io.items():
        if compute_dtype is None or precision is None or build.model is None:
            break
        if is_input and dtype in ("FLOAT", "HALF", "BF16") and dtype != want:
            raise EngineFileError(f"the sidecar of {engine_path} says the engine computes in {precision}"
                                  f"{' with float32 I/O' if want == 'FLOAT' else ''}, but its input '{name}' is "
                                  f"{dtype}, so the sidecar contradicts the plan; rebuild the engine")
    if plan is not None and looks_like_reference_plan(plan):
        check_sidecar_precision(sidecar, plan, engine_path)


def sidecar_backend(sidecar) -> str:
    """"reference", "tensorrt" or "tensorrt-rtx": which backend built the engine the sidecar describes
    (a sidecar without a backend is TensorRT's: the key came with TensorRT-RTX)."""
    side = Sidecar.of(sidecar)
    return "reference" if side.tensorrt_version == "reference" else side.backend or "tensorrt"


def _check_rtx_targets(sidecar: Sidecar, here: dict, engine_path) -> None:
    """A TensorRT-RTX engine runs on a GPU whose compute capability is one of its targets."""
    targets = [str(t) for t in sidecar.build.targets or []]
    if "current" in targets:  # built for the GPU of the build machine
        targets = [str(sidecar.compute_capability)]
    shown = ", ".join(targets) or "none recorded"
    if here["compute_capability"] == CPU:
        raise EngineCompatibilityError(f"{engine_path} is a TensorRT-RTX engine for GPUs of compute capability "
                                       f"{shown}, but no CUDA GPU is visible here, so it cannot run")
    if here["compute_capability"] not in targets:
        from .rtx import KNOWN_TARGETS

        cc = here["compute_capability"]
        advice = (f"rebuild it with --target sm{cc.replace('.', '')}" if cc in KNOWN_TARGETS else
                  f"TensorRT-RTX does not build for compute capability {cc} (it targets RTX-class GPUs, not "
                  "Hopper or data-centre parts): use --backend tensorrt on this GPU")
        raise EngineCompatibilityError(
            f"{engine_path} was built by TensorRT-RTX for compute capabilities {shown}, but this GPU is {here['gpu']} "
            f"with compute capability {cc}; {advice}")


def check_compatible(sidecar, trt: ModuleType, engine_path: str | os.PathLike = "engine",
                     current_device: dict | None = None) -> None:
    """Raise EngineCompatibilityError (one sentence) if the sidecar names another backend,
    TensorRT (or TensorRT-RTX) version or GPU architecture than `trt` and this machine (for
    TensorRT-RTX engines: a GPU outside the targets they were built for). Calls nothing in TensorRT.
    `sidecar`: a Sidecar (or a dict read as one)."""
    sidecar = Sidecar.of(sidecar)
    built_backend = sidecar_backend(sidecar)
    here_backend = backend_kind(trt)
    built_version = str(sidecar.tensorrt_version)
    product = {"tensorrt": "TensorRT", "tensorrt-rtx": "TensorRT-RTX"}
    if built_backend != here_backend:
        built = f"{product.get(built_backend, built_backend)} {built_version}" if built_backend != "reference" \
            else "the reference backend"
        raise EngineCompatibilityError(
            f"{engine_path} was built by {built} but is being loaded with the {here_backend} backend; "
            f"use --backend {built_backend} or rebuild it with `trtbuild build`")
    here_version = str(trt.__version__)
    if built_backend != "reference" and built_version != here_version and not (
            built_backend == "tensorrt" and later_version_may_load(sidecar, built_version, here_version, engine_path)):
        name = product[built_backend]
        raise EngineCompatibilityError(
            f"{engine_path} was built with {name} {built_version} but {name} {trt.__version__} is installed; "
            f"engines only load in the {name} version that built them (unless built with --version-compatible), "
            "so rebuild it with `trtbuild build`")
    if built_backend == "reference":
        return  # reference plans run on any device
    here = current_device if current_device is not None else device_info(trt)
    if built_backend == "tensorrt-rtx":
        _check_rtx_targets(sidecar, here, engine_path)
        return
    built_cc = str(sidecar.compute_capability)
    if here["compute_capability"] == CPU:
        raise EngineCompatibilityError(f"{engine_path} is a TensorRT engine for {sidecar.gpu} "
                                       f"(compute capability {built_cc}) but no CUDA GPU is visible here")
    if built_cc != here["compute_capability"] and not other_gpu_may_run(sidecar, built_cc, here, engine_path):
        raise EngineCompatibilityError(
            f"{engine_path} was built for compute capability {built_cc} ({sidecar.gpu}) but this GPU is "
            f"{here['gpu']} with compute capability {here['compute_capability']}; rebuild the engine on this GPU")


def read_file_aligned(path: Path):
    """The bytes of `path` in page-aligned memory of their own (an IHostMemory: bytes-like), read
    once, so that weights stored at aligned offsets of a plan can be used in place; None if empty."""
    from trtbuild.reference.host_memory import IHostMemory

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return None
        data = IHostMemory(-1, size)
        view, got = memoryview(data), 0
        while got < size:
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
        view.release()
    if got != size:  # pragma: no cover - the file shrank while it was read
        raise EngineFileError(f"engine file {path} changed while it was read ({got} of {size} bytes)")
    return data


def read_engine_file(path: str | os.PathLike, trt: ModuleType | None = None,
                     current_device: dict | None = None) -> tuple[bytes, Sidecar | None]:
    """Read an engine and its sidecar, checking compatibility (before reading) and the checksum.

    Returns (plan bytes, sidecar or None). Without a sidecar a warning is logged and only
    TensorRT's own checks apply. With `trt=None` compatibility is not checked.
    """
    path = Path(path)
    if not path.exists():
        raise EngineFileError(f"engine file {path} does not exist; build it with `trtbuild build`")
    if not path.is_file():
        raise EngineFileError(f"engine path {path} is not a file")
    sidecar = read_sidecar(path)
    if sidecar is None:
        log.warning("engine %s has no sidecar %s, so its TensorRT version, GPU and checksum cannot be checked",
                    path, sidecar_path(path).name)
    elif trt is not None:
        check_compatible(sidecar, trt, path, current_device)
    data = read_file_aligned(path)
    if data is None:
        raise EngineFileError(f"engine file {path} is empty")
    if sidecar is not None and not sidecar.engine_sha256 and lean_runtime_embedded(sidecar):
        raise EngineFileError(f"the sidecar of {path} says the engine embeds TensorRT's lean runtime (host code) but "
                              "records no engine_sha256, so trtbuild cannot tell that the engine is the one it vouches "
                              "for; rebuild it, or load the plan yourself with engine_host_code_allowed")
    if sidecar is not None and not sidecar.engine_sha256:
        log.warning("the sidecar of %s has no engine_sha256, so the engine's integrity cannot be checked", path)
    elif sidecar is not None:
        check_engine_sha256(data, sidecar, f"engine file {path}", advice="; rebuild it")
    if sidecar is not None and sidecar.engine_bytes is not None and sidecar.engine_bytes != len(data):
        raise EngineFileError(f"engine file {path} has {len(data)} bytes but its sidecar says "
                              f"{sidecar.engine_bytes!r}, so one of them was changed after the build; rebuild it")
    return data, sidecar


RTX_MAGIC = b"vtrt"  # the first bytes of every TensorRT-RTX 1.x engine seen (TensorRT's own start "ftrt")


def looks_like_rtx_engine(data) -> bool:
    """True if the bytes start like a TensorRT-RTX engine."""
    return bytes(data[:len(RTX_MAGIC)]) == RTX_MAGIC


def looks_like_reference_plan(data) -> bool:
    """True if the bytes start like a trtbuild reference plan."""
    return bytes(data[:len(REFERENCE_MAGIC)]) == REFERENCE_MAGIC

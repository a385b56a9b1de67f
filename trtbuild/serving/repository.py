"""Write a trtbuild engine into a Triton model repository, atomically.

    export_model("engines/resnet18-fp16.engine", "models", "resnet18")                  # Triton's TensorRT backend
    export_model("engines/resnet18-small-fp32.engine", "models", "r18", kind="python")  # Python backend + trtbuild

Layout (``DIR/<name>/``)::

    config.pbtxt                       # trtbuild.serving.config
    trtbuild.json                      # marks the directory as written by trtbuild (replaceable by it)
    libtrtbuild_involution_plugin.so   # plugin models on real TensorRT: the library the engine needs
    1/model.plan (+ model.plan.json)   # --kind tensorrt: the engine and its sidecar
    1/model.py, 1/model.engine (+ .json)   # --kind python: trtbuild.serving.python_model runs the engine

The model directory is assembled in a temporary directory beside it and renamed into place, so a
failure leaves no half-written model; an existing ``DIR/<name>`` is replaced only if trtbuild wrote it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trtbuild import __version__
from trtbuild.engine.serialize import read_engine_file, sidecar_backend, sidecar_path

from .config import ConfigError, config_text
from .python_model import ENGINE_FILE, model_py

MARKER = "trtbuild.json"
PLAN_FILE = "model.plan"
VERSION = "1"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class RepositoryError(ValueError):
    """The model cannot be written to the repository (one sentence); nothing was written."""


@dataclass
class ExportResult:
    path: Path                       # DIR/<name>
    kind: str
    config: str                      # the config.pbtxt text
    files: list[str] = field(default_factory=list)      # relative to path
    plugin_libraries: list[Path] = field(default_factory=list)   # copied into path
    replaced: bool = False


def check_kind(kind: str, backend: str, engine_path) -> None:
    """The refusals of --kind tensorrt: Triton's TensorRT backend loads TensorRT 10/11 plans only."""
    if kind != "tensorrt":
        return
    if backend == "reference":
        raise RepositoryError(f"{engine_path} is a trtbuild reference plan, and Triton's TensorRT backend cannot load "
                              "a trtbuild reference plan; use --kind python or build with --backend tensorrt")
    if backend == "tensorrt-rtx":
        raise RepositoryError(f"{engine_path} is a TensorRT-RTX engine, and Triton has no TensorRT-RTX backend (its "
                              "TensorRT backend loads TensorRT 10/11 plans only); use --kind python or build with "
                              "--backend tensorrt")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name or ""):
        raise RepositoryError(f"--name {name!r}: a Triton model name here is letters, digits, '_', '-' and '.', not "
                              "starting with '.' or '-' (it becomes the model's directory)")
    return name


def plugin_libraries(sidecar: dict, backend: str, given=(), engine_path="engine") -> list[Path]:
    """The plugin libraries to copy beside the model: `given` (--plugin-library), else those the
    sidecar records. None on the reference (its plugins are PyTorch twins) and TensorRT-RTX (none)."""
    plugins = sidecar.get("plugins") or []
    if backend != "tensorrt" or not (plugins or given):
        return []
    libraries = [Path(p) for p in given] or [Path(p["library"]) for p in plugins if p.get("library")]
    missing = [p["plugin"] for p in plugins if not p.get("library")] if not given else []
    if missing:
        raise RepositoryError(f"{engine_path} uses plugin {', '.join(missing)} but its sidecar records no library "
                              "for it; pass the library with --plugin-library")
    for lib in libraries:
        if not lib.is_file():
            raise RepositoryError(f"plugin library {lib} (needed by {engine_path}) does not exist; build it or pass "
                                  "its path with --plugin-library")
    return libraries


def instance_kind(backend: str) -> str:
    """KIND_GPU for engines that run on a GPU, KIND_CPU for a reference plan that runs on the CPU here."""
    if backend != "reference":
        return "KIND_GPU"
    from trtbuild.reference.runtime import device

    return "KIND_GPU" if device().type == "cuda" else "KIND_CPU"


def _check_target(target: Path, inputs: list[Path]) -> bool:
    """True if `target` exists (and may be replaced); RepositoryError if it must not be touched."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise RepositoryError(f"{target} exists and is not a model directory, so it is not replaced; choose another "
                              "--name or delete it")
    if not target.exists():
        return False
    if not (target / MARKER).is_file():
        raise RepositoryError(f"{target} exists and was not written by trtbuild export-triton (no {MARKER}), so it is "
                              "not replaced; choose another --name or delete it")
    for path in inputs:
        real = Path(os.path.realpath(path))
        if real == Path(os.path.realpath(target)) or Path(os.path.realpath(target)) in real.parents:
            raise RepositoryError(f"the input {path} lies inside {target}, which would be replaced; copy it elsewhere "
                                  "first or choose another --name")
    return True


def _write_version(version: Path, kind: str, data, sidecar: dict) -> list[str]:
    engine_name = PLAN_FILE if kind == "tensorrt" else ENGINE_FILE
    version.mkdir()
    (version / engine_name).write_bytes(memoryview(data))
    (version / f"{engine_name}.json").write_text(json.dumps(sidecar, indent=2) + "\n")
    files = [engine_name, f"{engine_name}.json"]
    if kind == "python":
        (version / "model.py").write_text(model_py())
        files.append("model.py")
    return [f"{VERSION}/{f}" for f in files]


def _install(staging: Path, target: Path, replace: bool) -> None:
    """Rename the finished `staging` directory to `target` (the old one moved aside, then deleted)."""
    if not replace:
        staging.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    old.rmdir()
    target.rename(old)
    try:
        staging.rename(target)
    except OSError:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def export_model(engine_path, repo, name: str, kind: str = "tensorrt", *, max_batch: int | None = None,
                 version_policy: str | None = None, warmup: bool = False, batching: str | None = None,
                 instances: int = 1, plugin_library=(), model: str | None = None, inputs=()) -> ExportResult:
    """Write `engine_path` (checked against its sidecar's sha256) as model `name` of repository
    `repo` (see the module docstring). `model`, if given, must be the model the sidecar names.
    batching (--kind python): "concatenate" or "per-request" (default: per-request for reference
    plans, whose responses are then bit-identical to direct runs; concatenate otherwise).
    instances: model instances per device (instance_group count). inputs: other files the caller
    reads (the model's net.py), which must not lie inside a model directory about to be replaced.
    Raises RepositoryError / ConfigError / EngineFileError in one sentence; nothing is written then."""
    engine_path, repo = Path(engine_path), Path(repo)
    check_name(name)
    data, sidecar = read_engine_file(engine_path, None)  # sha256 and size against the sidecar
    if sidecar is None:
        raise RepositoryError(f"{engine_path} has no sidecar {sidecar_path(engine_path).name}, so its tensors and "
                              "batch profile are unknown; rebuild it with `trtbuild build`")
    if model is not None and sidecar.get("model") not in (None, model):
        raise RepositoryError(f"{engine_path} was built for model '{sidecar['model']}' (its sidecar says so), not "
                              f"'{model}'; pass the engine of '{model}' or name '{sidecar['model']}'")
    backend = sidecar_backend(sidecar)
    check_kind(kind, backend, engine_path)
    libraries = plugin_libraries(sidecar, backend, plugin_library, engine_path)
    if batching is None:
        batching = "per-request" if backend == "reference" else "concatenate"
    text = config_text(sidecar, name, kind, max_batch=max_batch, version_policy=version_policy, warmup=warmup,
                       instance_kind="KIND_GPU" if kind == "tensorrt" else instance_kind(backend), instances=instances,
                       batching=batching)
    if repo.exists() and not repo.is_dir():
        raise RepositoryError(f"--repo {repo} exists and is not a directory")
    target = repo / name
    replace = _check_target(target, [engine_path, sidecar_path(engine_path), *libraries, *map(Path, inputs)])
    repo.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=repo))
    try:
        (staging / "config.pbtxt").write_text(text)
        files = ["config.pbtxt", *_write_version(staging / VERSION, kind, data, sidecar)]
        for lib in libraries:
            shutil.copy2(lib, staging / lib.name)
            files.append(lib.name)
        marker = {"written_by": "trtbuild export-triton", "trtbuild_version": __version__, "kind": kind,
                  "engine": str(engine_path), "engine_sha256": sidecar.get("engine_sha256"), "files": files}
        (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700
        _install(staging, target, replace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ExportResult(target, kind, text, files, [target / lib.name for lib in libraries], replace)


__all__ = ["MARKER", "ConfigError", "ExportResult", "RepositoryError", "export_model"]

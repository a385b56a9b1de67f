"""Write a trtbuild engine into a Triton model repository, atomically.

    export_model("engines/resnet18-fp16.engine", "models", "resnet18")                  # Triton's TensorRT backend
    export_model("engines/resnet18-small-fp32.engine", "models", "r18", kind="python")  # Python backend + trtbuild

Layout (``DIR/<name>/``)::

    config.pbtxt                       # trtbuild.serving.config
    trtbuild.json                      # marks the directory as written by trtbuild; lists the files it wrote
    libtrtbuild_involution_plugin.so   # plugin models on real TensorRT: the library the engine needs
    1/model.plan (+ model.plan.json)   # --kind tensorrt: the engine and its sidecar
    1/model.py, 1/model.engine (+ .json)   # --kind python: trtbuild.serving.python_model runs the engine

``version`` (default 1) names the version directory. The files are assembled in a temporary
directory beside the model and renamed into place. In an existing ``DIR/<name>`` (only one trtbuild
wrote: ``trtbuild.json``) only what this export writes is replaced (config.pbtxt, the version
directory, the plugin libraries, trtbuild.json; plugin libraries trtbuild wrote before are removed);
everything else (other versions, the user's files) is kept. It is refused if one of the replaced
entries holds a file trtbuild did not write. Each entry is renamed into place after the old one is
moved aside, and a failure moves the old ones back, so the old model is left intact.
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
from trtbuild.engine.records import build_info_of
from trtbuild.engine.serialize import read_engine_file, sidecar_backend, sidecar_path
from trtbuild.engine.sidecar import Sidecar

from .batch_dims import outputs_off_batch
from .config import ConfigError, config_text
from .model_options import ModelOptions
from .python_model import ENGINE_FILE, model_py

MARKER = "trtbuild.json"
PLAN_FILE = "model.plan"
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
    replaced: bool = False                                       # the version directory existed
    version: int = 1
    kept: list[str] = field(default_factory=list)                # entries of path left as they were


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


def plugin_libraries(sidecar, backend: str, given=(), engine_path="engine") -> list[Path]:
    """The plugin libraries to copy beside the model: `given` (--plugin-library), else those the
    sidecar records. None on the reference (its plugins are PyTorch twins) and TensorRT-RTX (none)."""
    plugins = build_info_of(sidecar).plugins or []
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


def _old_record(target: Path) -> dict | None:
    """trtbuild.json of an existing model directory `target` (None if there is none); RepositoryError
    if `target` must not be touched (not a directory, or not written by trtbuild)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise RepositoryError(f"{target} exists and is not a model directory, so it is not replaced; choose another "
                              "--name or delete it")
    if not target.exists():
        return None
    marker = target / MARKER
    if not marker.is_file():
        raise RepositoryError(f"{target} exists and was not written by trtbuild export-triton (no {MARKER}), so it is "
                              "not replaced; choose another --name or delete it")
    try:
        record = json.loads(marker.read_text())
        if not all(isinstance(f, str) for f in record["files"]):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise RepositoryError(f"{marker} does not list the files trtbuild wrote, so nothing in {target} is replaced; "
                              "choose another --name or delete the directory") from None
    return record


def _replaced_entries(target: Path, record: dict, version: str, new_top: list[str], kind: str) -> list[str]:
    """The entries of `target` this export moves aside: the version directory, config.pbtxt, trtbuild.json
    and the top-level files trtbuild wrote before or writes now. RepositoryError (nothing touched) if
    one of them holds something trtbuild did not write, or other versions were written with another kind."""
    written = set(record["files"]) | {MARKER}
    others = sorted({f.split("/")[0] for f in written if "/" in f} - {version})
    if others and record.get("kind") not in (None, kind):
        raise RepositoryError(f"{target} holds version {', '.join(others)} written with --kind {record['kind']}, and "
                              f"one config.pbtxt serves all versions; export with --kind {record['kind']} or choose "
                              "another --name")
    names = sorted({f for f in written if "/" not in f} | set(new_top) | {version})
    foreign = []
    for name in names:
        path = target / name
        if name == version and path.is_dir() and not path.is_symlink():
            foreign += [f"{version}/{p.relative_to(path)}" for p in sorted(path.rglob("*"))
                        if f"{version}/{p.relative_to(path)}" not in written]
        elif (path.exists() or path.is_symlink()) and (name not in written or name == version):
            foreign.append(name)
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise RepositoryError(f"{target} holds {', '.join(foreign[:3])}{more}, which trtbuild did not write, where "
                              f"export-triton writes version {version}; move them away or choose another --version "
                              "or --name")
    return [n for n in names if (target / n).exists() or (target / n).is_symlink()]


def _check_inputs(target: Path, replaced: list[str], inputs: list[Path]) -> None:
    """RepositoryError if an input file lies in an entry of `target` about to be replaced."""
    for path in inputs:
        real = Path(os.path.realpath(path))
        for name in replaced:
            entry = Path(os.path.realpath(target / name))
            if real == entry or entry in real.parents:
                raise RepositoryError(f"the input {path} lies inside {target / name}, which would be replaced; copy it "
                                      "elsewhere first or choose another --version or --name")


def _write_version(version: Path, kind: str, data, sidecar: Sidecar) -> list[str]:
    engine_name = PLAN_FILE if kind == "tensorrt" else ENGINE_FILE
    version.mkdir()
    (version / engine_name).write_bytes(memoryview(data))
    (version / f"{engine_name}.json").write_text(sidecar.to_json())
    files = [engine_name, f"{engine_name}.json"]
    if kind == "python":
        (version / "model.py").write_text(model_py())
        files.append("model.py")
    return [f"{version.name}/{f}" for f in files]


def _install(staging: Path, target: Path, replaced: list[str] | None) -> None:
    """Move the finished `staging` directory's entries into `target`. replaced None: `target` is new,
    `staging` is renamed to it. Else the `replaced` entries of `target` are moved aside one by one
    (trtbuild.json last) and deleted at the end; on a failure they are moved back."""
    if replaced is None:
        staging.rename(target)
        return
    backup = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    names = sorted(set(replaced) | {p.name for p in staging.iterdir()}, key=lambda n: (n == MARKER, n))
    steps = []  # [name, old moved aside, new placed]
    try:
        for name in names:
            step = [name, False, False]
            steps.append(step)
            if name in replaced:
                (target / name).rename(backup / name)
                step[1] = True
            if (staging / name).exists():
                (staging / name).rename(target / name)
                step[2] = True
    except BaseException:
        for name, moved, placed in reversed(steps):
            if placed:
                (target / name).rename(staging / name)
            if moved:
                (backup / name).rename(target / name)
        shutil.rmtree(backup, ignore_errors=True)
        raise
    shutil.rmtree(backup, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def export_model(engine_path, repo, name: str, kind: str = "tensorrt", *, max_batch: int | None = None,
                 version_policy: str | None = None, warmup: bool = False, batching: str | None = None,
                 instances: int = 1, plugin_library=(), model: str | None = None, inputs=(),
                 version: int = 1, options: ModelOptions | None = None) -> ExportResult:
    """Write `engine_path` (checked against its sidecar's sha256) as model `name` of repository
    `repo` (see the module docstring). `model`, if given, must be the model the sidecar names.
    batching (--kind python): "concatenate" or "per-request" (default: per-request for reference
    plans, whose responses are then bit-identical to direct runs; concatenate otherwise).
    instances: model instances per device (instance_group count). inputs: other files the caller
    reads (the model's net.py), which must not lie inside an entry about to be replaced.
    version: the version directory written (a positive integer; others in the directory are kept).
    options (--kind python): what model.py does around each engine run (threads, reject_nonfinite; default
    ModelOptions()).
    Raises RepositoryError / ConfigError / EngineFileError in one sentence; nothing is written then."""
    engine_path, repo = Path(engine_path), Path(repo)
    check_name(name)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RepositoryError(f"--version {version!r}: a Triton model version is a positive integer")
    version_dir = str(version)
    data, sidecar = read_engine_file(engine_path, None)  # sha256 and size against the sidecar
    if sidecar is None:
        raise RepositoryError(f"{engine_path} has no sidecar {sidecar_path(engine_path).name}, so its tensors and "
                              "batch profile are unknown; rebuild it with `trtbuild build`")
    built = sidecar.build.model
    if model is not None and built not in (None, model):
        raise RepositoryError(f"{engine_path} was built for model '{built}' (its sidecar says so), not "
                              f"'{model}'; pass the engine of '{model}' or name '{built}'")
    backend = sidecar_backend(sidecar)
    check_kind(kind, backend, engine_path)
    libraries = plugin_libraries(sidecar, backend, plugin_library, engine_path)
    if batching is None:
        batching = "per-request" if backend == "reference" else "concatenate"
    text = config_text(sidecar, name, kind, max_batch=max_batch, version_policy=version_policy, warmup=warmup,
                       instance_kind="KIND_GPU" if kind == "tensorrt" else instance_kind(backend), instances=instances,
                       batching=batching, options=options,
                       off_batch=outputs_off_batch(data, sidecar, str(engine_path)) or ())
    if repo.exists() and not repo.is_dir():
        raise RepositoryError(f"--repo {repo} exists and is not a directory")
    target = repo / name
    record = _old_record(target)
    new_top = ["config.pbtxt", MARKER, *(lib.name for lib in libraries)]
    replaced = None if record is None else _replaced_entries(target, record, version_dir, new_top, kind)
    if replaced:
        _check_inputs(target, replaced, [engine_path, sidecar_path(engine_path), *libraries, *map(Path, inputs)])
    kept = [] if record is None else sorted(p.name for p in target.iterdir() if p.name not in replaced)
    repo.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=repo))
    try:
        (staging / "config.pbtxt").write_text(text)
        files = ["config.pbtxt", *_write_version(staging / version_dir, kind, data, sidecar)]
        for lib in libraries:
            shutil.copy2(lib, staging / lib.name)
            files.append(lib.name)
        earlier = [f for f in (record or {}).get("files", []) if "/" in f and f.split("/")[0] != version_dir]
        marker = {"written_by": "trtbuild export-triton", "trtbuild_version": __version__, "kind": kind,
                  "engine": str(engine_path), "engine_sha256": sidecar.engine_sha256, "version": version,
                  "files": sorted(earlier) + files}
        (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700
        _install(staging, target, replaced)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ExportResult(target, kind, text, files, [target / lib.name for lib in libraries],
                        version_dir in (replaced or []), version, kept)


__all__ = ["MARKER", "ConfigError", "ExportResult", "RepositoryError", "export_model"]

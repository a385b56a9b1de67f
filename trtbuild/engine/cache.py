"""An engine cache keyed on content: skip a build when an engine with the same key was built before.

    cache = EngineCache("~/.cache/trtbuild", max_bytes=4 << 30)
    path = cache.get(key)                       # the cached engine (its sidecar next to it), or None
    cache.put(key, plan_bytes, sidecar)         # atomic; evicts the least recently used over max_bytes

The key (trtbuild.engine.cache_key.CacheKey) covers the network's structure, the weights' sha256, the
backend and its version, the targets or GPU, the build options and the trtbuild version. A stripped plan
(`--strip-weights`) is keyed on the weight file's sha256 too, not on the weight names alone
(CacheKey.of(weight_names=) can): the weights no builder could name are baked into the plan, so their values
belong in the key; a new weight file is a miss, never a wrong hit. An entry is two files, ``<digest>.engine``
and ``<digest>.engine.json`` (the engine's sidecar plus the key's parts), written with trtbuild.files.atomic
(temp file + os.replace).

Concurrency: every read or change of entries holds an exclusive ``fcntl.flock`` on ``DIR/.lock`` (short:
hashing one engine at most), so a reader never sees an engine next to another build's sidecar (two
builds of one key need not give the same bytes). :meth:`EngineCache.building` holds a per-key lock
around get-or-build-and-put, so a second process building the same key waits and then reuses the first
one's engine instead of building it again. Locks are POSIX advisory locks: a cache on a network file
system that lacks them is not protected.

Last use is the engine file's mtime, set on every hit and store; eviction removes the oldest entries
until the cache fits ``max_bytes`` (the entry just stored is kept even if it alone is larger). An entry
that fails its check (missing file, unreadable sidecar, size or sha256 other than the sidecar's) is a
miss: it is removed and a warning says so in one sentence; it is never returned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from trtbuild.files.atomic import atomic_write_files

from .build import build_spec_plan
from .cache_key import CacheKey
from .define import define_spec, quant_info
from .errors import EngineWriteError
from .model import load_model_weights
from .options import BuildOptions, ShapeProfile
from .rtx import targets_for_precision
from .serialize import (check_engine_sha256, make_sidecar, read_file_aligned, save_engine, sha256_bytes,
                        sha256_file)

log = logging.getLogger("trtbuild.engine.cache")

__all__ = ["CACHE_ENV", "CacheEntry", "CacheKey", "CachedModelBuild", "DEFAULT_MAX_BYTES", "EngineCache",
           "MAX_SIZE_ENV", "key_for_model_build", "key_options", "parse_size"]

CACHE_ENV = "TRTBUILD_CACHE"  #: the cache directory when --cache is not given
MAX_SIZE_ENV = "TRTBUILD_CACHE_MAX_SIZE"  #: the size limit ("4G", "500M", bytes) when not given in code
DEFAULT_MAX_BYTES = 4 << 30
_ENTRY = re.compile(r"^[0-9a-f]{64}\.engine$")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, what: str = "cache size") -> int:
    """"4G" / "500M" / "64K" / "1048576" -> bytes (binary units); ValueError in one sentence naming `what`
    otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"{what} {text!r}: expected a number of bytes with an optional K, M, G or T "
                         "(e.g. 4G or 500M)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


@dataclass(frozen=True)
class CacheEntry:
    """One cached engine, as `trtbuild cache ls` shows it."""

    digest: str
    model: str | None
    backend: str | None
    precision: str | None
    target: str | None
    bytes: int  #: engine + sidecar
    last_used: float  #: seconds since the epoch
    path: Path

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        d["last_used"] = datetime.datetime.fromtimestamp(self.last_used, datetime.timezone.utc).isoformat(
            timespec="seconds")
        return d


class EngineCache:
    """A directory of engines keyed by CacheKey digest (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike, max_bytes: int | None = None):
        self.dir = Path(directory).expanduser()
        if max_bytes is None:
            env = os.environ.get(MAX_SIZE_ENV)
            max_bytes = parse_size(env, MAX_SIZE_ENV) if env else DEFAULT_MAX_BYTES
        if max_bytes <= 0:
            raise ValueError(f"engine cache {self.dir}: the size limit must be positive, got {max_bytes} bytes")
        self.max_bytes = int(max_bytes)
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"engine cache {self.dir} is not a directory")

    # -- locking -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _flock(self, name: str):
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / name
        path.parent.mkdir(exist_ok=True)
        with open(path, "a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _locked(self):
        return self._flock(".lock")

    def building(self, key: CacheKey):
        """A context that holds `key`'s build lock: a second process entering it with the same key waits
        until the first leaves (after its put), then finds the entry."""
        return self._flock(f".locks/{key.digest}.lock")

    # -- entries -------------------------------------------------------------------------------------
    def _paths(self, digest: str) -> tuple[Path, Path]:
        return self.dir / f"{digest}.engine", self.dir / f"{digest}.engine.json"

    def _remove(self, digest: str) -> None:
        for p in self._paths(digest):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def _check(self, digest: str) -> tuple[object, dict]:
        """(engine bytes, sidecar) if the entry is complete and its engine matches its sidecar; ValueError
        naming what is wrong otherwise."""
        engine, side = self._paths(digest)
        if not side.is_file():
            raise ValueError("its sidecar is missing")
        try:
            sidecar = json.loads(side.read_text())
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"its sidecar is not readable JSON ({e})") from None
        if not isinstance(sidecar, dict) or not sidecar.get("engine_sha256"):
            raise ValueError("its sidecar records no engine_sha256")
        if not engine.is_file():
            raise ValueError("its engine file is missing")
        size = engine.stat().st_size
        if size != sidecar.get("engine_bytes"):
            raise ValueError(f"its engine has {size} bytes, its sidecar says {sidecar.get('engine_bytes')}")
        data = read_file_aligned(engine) if size else b""
        check_engine_sha256(data, sidecar, "its engine", ValueError)
        return data, sidecar

    def load(self, key: CacheKey) -> tuple[object, dict] | None:
        """(engine bytes, sidecar) of `key`, read and checked in one go and marked as just used; None on a
        miss. A corrupt entry is removed, reported by a warning, and is a miss."""
        if not self.dir.is_dir():
            return None
        engine, side = self._paths(key.digest)
        with self._locked():
            if not (engine.exists() or side.exists()):
                return None
            try:
                found = self._check(key.digest)
            except (ValueError, OSError) as e:
                log.warning("engine cache entry %s in %s is corrupt (%s), so it was removed and the engine is "
                            "built again", key.short, self.dir, e)
                self._remove(key.digest)
                return None
            with contextlib.suppress(OSError):
                os.utime(engine)
            return found

    def get(self, key: CacheKey) -> Path | None:
        """The cached engine of `key` (its sidecar at ``<path>.json``), checked and marked as just used; None
        on a miss (see load)."""
        return self._paths(key.digest)[0] if self.load(key) is not None else None

    def put(self, key: CacheKey, plan, sidecar: dict) -> Path:
        """Store `plan` (bytes-like) with `sidecar` (its engine_sha256/engine_bytes are recomputed, the key's
        parts added as "cache_key") atomically; evict least recently used entries over max_bytes. Returns
        the cached engine's path."""
        side = {**sidecar, "engine_sha256": sha256_bytes(plan), "engine_bytes": len(plan),
                "cache_key": {**asdict(key), "digest": key.digest}}
        text = (json.dumps(side, indent=2) + "\n").encode()
        engine, side_path = self._paths(key.digest)
        with self._locked():
            atomic_write_files([(engine, lambda tmp: tmp.write_bytes(memoryview(plan))),
                                (side_path, lambda tmp: tmp.write_bytes(text))], error=EngineWriteError)
            self._evict(keep=key.digest)
        return engine

    def _entries(self) -> list[CacheEntry]:
        """Every entry of the directory (the lock held by the caller)."""
        if not self.dir.is_dir():
            return []
        entries = []
        for engine in self.dir.iterdir():
            if not _ENTRY.match(engine.name):
                continue
            digest = engine.name[:-len(".engine")]
            side = self._paths(digest)[1]
            try:
                stat = engine.stat()
                size = stat.st_size + (side.stat().st_size if side.exists() else 0)
                info = json.loads(side.read_text()) if side.exists() else {}
            except (OSError, ValueError, UnicodeDecodeError):
                stat, size, info = engine.stat(), engine.stat().st_size, {}
            info = info if isinstance(info, dict) else {}
            key = info.get("cache_key") or {}
            entries.append(CacheEntry(digest, info.get("model"), info.get("backend"), info.get("precision"),
                                      key.get("target"), size, stat.st_mtime, engine))
        return sorted(entries, key=lambda e: e.last_used, reverse=True)

    def _evict(self, keep: str | None = None) -> list[str]:
        entries = self._entries()  # most recently used first
        total, removed = sum(e.bytes for e in entries), []
        for entry in reversed(entries):
            if total <= self.max_bytes:
                break
            if entry.digest == keep:
                continue
            self._remove(entry.digest)
            total -= entry.bytes
            removed.append(entry.digest)
            log.info("engine cache %s: evicted %s (%d bytes, least recently used) to stay under %d bytes",
                     self.dir, entry.digest[:16], entry.bytes, self.max_bytes)
        return removed

    def ls(self) -> list[CacheEntry]:
        """The entries, most recently used first."""
        with self._locked() if self.dir.is_dir() else contextlib.nullcontext():
            return self._entries()

    def clear(self) -> tuple[int, int]:
        """Remove every entry (and stray temp files); return (entries removed, bytes freed)."""
        if not self.dir.is_dir():
            return 0, 0
        with self._locked():
            entries = self._entries()
            for entry in entries:
                self._remove(entry.digest)
            for stray in self.dir.glob(".*.tmp"):  # left by a process killed mid-write
                with contextlib.suppress(OSError):
                    stray.unlink()
            return len(entries), sum(e.bytes for e in entries)


def cache_dir_from(option: str | None) -> str | None:
    """The cache directory: the --cache option, else $TRTBUILD_CACHE, else None (no cache)."""
    return option or os.environ.get(CACHE_ENV) or None


#: BuildOptions fields that do not change the engine, so are not in the key (quant enters as its record)
_NOT_IN_KEY = frozenset({"timing_cache", "progress", "quant"})


def key_options(spec, options: BuildOptions) -> dict:
    """The options part of a registry model's key: the model and the options it was bound with, and
    every BuildOptions field that changes the engine (not the timing cache or progress bars; the
    quantization plan as the record the sidecar keeps, without the calibration file's path)."""
    out = {"model": spec.name, "model_options": dict(getattr(spec, "chosen", None) or {})}
    out.update((f.name, getattr(options, f.name)) for f in dataclasses.fields(options) if f.name not in _NOT_IN_KEY)
    out["profiles"] = [{"kind": type(p).__name__, **dataclasses.asdict(p)} for p in options.profiles]
    quant = None
    if options.quant is not None:
        quant = quant_info(options.quant)
        (quant.get("calibration") or {}).pop("file", None)  # its sha256 stays: the path does not matter
    out["quant"] = quant
    return out


class CachedModelBuild:
    """A registry model's build through the cache: its network is defined once, on `trt`, hashed for
    the key and, on a miss, built as it is (not defined a second time).

        job = CachedModelBuild(trt, spec, "r18.wts", options)
        path, sidecar, hit = build_with_cache(cache, job.key, out, lambda: job.build_and_save(out), "r18.wts")
    """

    def __init__(self, trt, spec, weights_path, options: BuildOptions):
        self.trt, self.spec, self.weights_path, self.options = trt, spec, weights_path, options
        self.weights = load_model_weights(weights_path)
        self.defined = define_spec(spec, self.weights, options)(trt)
        self.key = CacheKey.of(self.defined.network, trt, weights_sha256=sha256_file(weights_path),
                               options=key_options(spec, options),
                               targets=targets_for_precision(options.precision, options.targets))

    def build(self):
        """The Plan of the network defined for the key (build_spec_plan with `defined`)."""
        return build_spec_plan(self.spec, self.weights, self.trt, self.options, defined=self.defined)

    def build_and_save(self, out) -> tuple[Path, object]:
        """Build, then write the engine and its sidecar to `out` atomically (as build_and_save does)."""
        plan = self.build()
        sidecar = make_sidecar(self.trt, plan, weights_path=self.weights_path)
        return save_engine(out, plan, sidecar), sidecar


def key_for_model_build(trt, spec, weights_path, *, options: BuildOptions | None = None, **kwargs) -> CacheKey:
    """The CacheKey of build_and_save(spec, weights_path, ..., trt, options) (or of its keyword arguments,
    build_plan's, as a shorthand: precision, small, batch, profile, ..., and compat, a
    trtbuild.engine.compat.Compatibility): the network is defined (not built) on `trt` and hashed, the
    weight file hashed. Options that do not change the engine (timing
    cache, progress) are not in the key. To build after a miss without defining the network again,
    use CachedModelBuild."""
    if options is not None and kwargs:
        raise ValueError(f"key_for_model_build: pass either options=BuildOptions(...) or keyword arguments "
                         f"({', '.join(sorted(kwargs))}), not both")
    if options is None:
        profile = kwargs.pop("profile", None)
        if isinstance(profile, list):  # several optimization profiles: a list of (min, opt, max) shapes
            kwargs["profiles"] = tuple(ShapeProfile(*p) for p in profile)
        else:
            kwargs["profile"] = profile
        compat = kwargs.pop("compat", None)
        if compat is not None:
            kwargs.update(dataclasses.asdict(compat))  # its fields are BuildOptions fields
        options = BuildOptions.from_kwargs(**kwargs)
    return CachedModelBuild(trt, spec, weights_path, options).key


def build_with_cache(cache: EngineCache, key: CacheKey, out, build, weights_path=None,
                     report=None) -> tuple[Path, dict, bool]:
    """(engine path, sidecar, hit?): on a hit, the cached engine and its sidecar are written to `out`
    (atomically, trtbuild.engine.serialize.save_engine) without building; on a miss ``build() -> (path,
    sidecar)`` runs and its engine is stored. The key's build lock is held throughout, so a concurrent
    build of the same key waits and then reuses this one. A store that fails (a full disk) is a warning:
    the engine at `out` is built and written either way. ``report(hit)``, if given, is called once the
    lookup is done (before a build starts)."""
    with cache.building(key):
        found = cache.load(key)
        if report is not None:
            report(found is not None)
        if found is not None:
            data, sidecar = found
            sidecar = {k: v for k, v in sidecar.items() if k != "cache_key"}
            if weights_path is not None and sidecar.get("weights"):
                sidecar["weights"] = {**sidecar["weights"], "path": str(weights_path)}  # same sha256, this path
            path = save_engine(out, data, sidecar)
            return path, {**sidecar, "engine_bytes": len(data)}, True
        path, sidecar = build()
        try:
            cache.put(key, Path(path).read_bytes(), sidecar)
        except OSError as e:
            log.warning("engine cache %s: the engine %s was built but not stored (%s)", cache.dir, path, e)
        return path, sidecar, False

"""Timing caches: load one into a builder config, refusing files that are not timing caches.

TensorRT reuses measured tactic timings across builds through a timing cache file. TensorRT-RTX
documents its timing cache as deprecated and unused (engines are tuned just in time on the GPU that
runs them; a runtime cache kept by the application replaces it), so there a warning says so and
the file is never read or written.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

from trtbuild.backend import backend_name, capabilities

from .errors import BuildError, TimingCacheError

log = logging.getLogger("trtbuild.engine")


def load_timing_cache(trt: ModuleType, config, path: Path | None, logger=None):
    """Attach the timing cache stored at `path` (a new one if the file is missing or empty).

    An existing file that TensorRT does not accept as a timing cache is refused with a
    TimingCacheError naming it, so a mistyped path (a weight file, an engine) is never
    overwritten. A real cache made by another device or TensorRT version is replaced (warning)."""
    if path is None:
        return None
    if not capabilities(trt).has_timing_cache:
        log.warning("timing cache %s not used: TensorRT-RTX documents its timing cache as deprecated and unused "
                    "(engines are tuned just in time on the GPU that runs them, and a runtime cache kept by the "
                    "application replaces it); the file is left untouched", path)
        return None
    if path.exists() and not path.is_file():
        raise TimingCacheError(f"timing cache {path} is not a file")
    if not path.parent.is_dir():
        raise TimingCacheError(f"timing cache {path}: directory {path.parent} does not exist")
    data = path.read_bytes() if path.exists() else b""
    cache, reason = None, "TensorRT returned no cache"
    if logger is not None:
        logger.clear()
    try:
        cache = config.create_timing_cache(data)
    except Exception as e:  # noqa: BLE001 - the reference raises; real TensorRT raises or logs and returns None
        reason = str(e)
    if data and logger is not None and logger.errors:
        cache, reason = None, logger.error_text()
    if cache is None:
        if data:
            raise TimingCacheError(
                f"timing cache {path} exists but is not a timing cache that {backend_name(trt)} can read ({reason}); "
                "refusing to overwrite it: pass another --timing-cache path or delete the file")
        raise BuildError(f"{backend_name(trt)} could not create an empty timing cache for {path} ({reason})")
    if not config.set_timing_cache(cache, False):
        log.warning("timing cache %s was made on another device or TensorRT version; starting a new one", path)
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
    log.info("timing cache %s: %s", path, f"loaded {len(data)} bytes" if data else "new")
    return cache

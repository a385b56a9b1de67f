"""The sidecar `<engine>.json`, typed: Sidecar = who built the engine (trtbuild, backend and
TensorRT version, GPU), the BuildInfo of the build, the weights it was built from and the
engine's sha256 and size.

    side = Sidecar.from_json(path.read_text(), source=path)   # EngineFileError in one sentence if not one
    side.build.precision, side.engine_sha256                    # attributes; side["precision"] still reads

The JSON is one flat object (the layout every trtbuild has written): the header keys, then the
BuildInfo's keys, then weights, engine_sha256, engine_bytes. `schema_version` is its "format" key;
a sidecar without one (written before it existed) is format 1, and a format this trtbuild does
not know is refused naming the file. The layout has not changed since format 1, so it is still 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from trtbuild import __version__

from .errors import EngineFileError
from .records import ALWAYS, BuildInfo, JsonRecord

SIDECAR_FORMAT = 1


@dataclass(frozen=True, eq=False)
class Sidecar(JsonRecord):
    """What is written next to an engine. `build` is the BuildInfo (plan.info) of its build; keys
    no trtbuild field knows are kept in `build.extra` (written back unchanged)."""

    schema_version: int | None = field(default=SIDECAR_FORMAT, metadata={"json": "format", "always": True})
    trtbuild_version: str | None = field(default=None, metadata=ALWAYS)
    backend: str | None = field(default=None, metadata=ALWAYS)
    tensorrt_version: str | None = field(default=None, metadata=ALWAYS)
    gpu: str | None = field(default=None, metadata=ALWAYS)  # TensorRT-RTX: the machine that built it
    compute_capability: str | None = field(default=None, metadata=ALWAYS)
    created: str | None = field(default=None, metadata=ALWAYS)
    build: BuildInfo = field(default_factory=BuildInfo)
    weights: dict | None = field(default=None, metadata=ALWAYS)  # {"path", "sha256"} of the weight file
    engine_sha256: str | None = field(default=None, metadata=ALWAYS)
    engine_bytes: int | None = field(default=None, metadata=ALWAYS)
    present: frozenset | None = field(default=None, repr=False)

    _NOT_KEYS = frozenset({"build", "present"})
    _HEAD = ("schema_version", "trtbuild_version", "backend", "tensorrt_version", "gpu", "compute_capability",
             "created")

    def to_dict(self) -> dict:
        """The JSON object: the header, the build's keys, then weights and the engine's checksum."""
        out = self._written()
        head = {k: out.pop(k) for k in list(out) if k in {"format", *self._HEAD}}
        return {**head, **self.build.to_dict(), **out}

    @classmethod
    def from_dict(cls, data: Mapping, source=None) -> "Sidecar":
        """The Sidecar of a JSON object (values as they are; unknown keys kept). Raises
        EngineFileError naming `source` (the file) if it is not a trtbuild sidecar or has a format
        this trtbuild does not read."""
        where = f"engine sidecar {source}" if source is not None else "the engine sidecar"
        if not isinstance(data, Mapping) or "tensorrt_version" not in data:
            raise EngineFileError(f"{where} lacks 'tensorrt_version', so it is not a trtbuild sidecar")
        version = data.get("format", SIDECAR_FORMAT)
        if version != SIDECAR_FORMAT or isinstance(version, bool):
            raise EngineFileError(f"{where} has format version {version!r} but trtbuild {__version__} reads format "
                                  f"{SIDECAR_FORMAT} only; rebuild the engine with this trtbuild")
        return cls._read(data)

    @classmethod
    def _read(cls, data: Mapping) -> "Sidecar":
        data = dict(data)
        known = {key: attr for attr, key, _ in cls._keys()}
        values = {known[k]: v for k, v in data.items() if k in known}
        build = BuildInfo.from_dict({k: v for k, v in data.items() if k not in known})
        return cls(**values, build=build, present=frozenset(k for k in data if k in known))

    @classmethod
    def from_json(cls, text: str | bytes, source=None) -> "Sidecar":
        """The Sidecar of JSON text; EngineFileError naming `source` if it is not valid JSON or not a sidecar."""
        try:
            data = json.loads(text.decode() if isinstance(text, (bytes, bytearray)) else text)
        except (ValueError, UnicodeDecodeError) as e:
            where = f"engine sidecar {source}" if source is not None else "the engine sidecar"
            raise EngineFileError(f"{where} is not valid JSON ({e}); rebuild the engine or delete the "
                                  "sidecar") from None
        return cls.from_dict(data, source)

    @classmethod
    def of(cls, sidecar) -> "Sidecar":
        """`sidecar` as a Sidecar: itself, or read from a dict (as users and older code pass them) or
        a plan's BuildInfo (its header fields then None). Unlike from_dict it checks nothing: a
        sidecar in memory is the caller's; files are checked when read (read_sidecar)."""
        if isinstance(sidecar, cls):
            return sidecar
        return cls._read(sidecar.to_dict() if isinstance(sidecar, JsonRecord) else sidecar or {})

    @property
    def weights_path(self) -> str | None:
        weights = self.weights if isinstance(self.weights, Mapping) else {}
        return weights.get("path")

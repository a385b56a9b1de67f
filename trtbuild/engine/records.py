"""Typed records of a build: NetworkInfo (what serialize_network built), BuildInfo (plan.info:
everything build_plan knows of the build) and the base they share with the sidecar.

Each is a frozen dataclass that reads like the dict it used to be (``info["precision"]``,
``info.get("targets")``, ``dict(info)``, equality with a dict), so that code written against the
dicts keeps working, while trtbuild itself reads attributes. The JSON layout is flat and is the
one the sidecar has always had: a record read from JSON gives back exactly the keys it was read
with (a key an older trtbuild did not write stays absent), keys it does not know included.

The values inside are typed too: the I/O tensors are TensorRecords (name, shape, dtype) and an
optimization profile is a ProfileInfo ({input: ShapeRange(min, opt, max)}), shapes tuples.

    info.inputs[0].shape            # (1, 3, 224, 224): the typed value
    info["inputs"][0]["shape"]      # [1, 3, 224, 224]: the Mapping view gives the JSON value

A JSON value of another form than the one trtbuild writes (a sidecar edited by hand) is kept as it
is, so that it is written back unchanged.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, ClassVar

ALWAYS = {"always": True}  # written even when None (the key has always been in the JSON)


def plain(value):
    """The JSON value of a typed one: records and profiles as dicts, tuples as lists."""
    if isinstance(value, (JsonRecord, ProfileInfo)):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def typed(read: Callable, always: bool = False) -> dict:
    """The metadata of a typed field: `read` makes its typed value from the JSON value (and returns a
    value of another form, or one typed already, as it is); `plain` writes it back. `always`: as ALWAYS."""
    return {"read": read, **(ALWAYS if always else {})}


def _read_shape(value):
    if isinstance(value, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        return tuple(value)
    return value


def _read_tensors(value):
    if isinstance(value, (list, tuple)) and all(isinstance(t, Mapping) for t in value):
        return tuple(TensorRecord.of(t) for t in value)
    return value


def _is_profile(value) -> bool:
    return isinstance(value, Mapping) and all(isinstance(r, Mapping) for r in value.values())


def _read_profile(value):
    return ProfileInfo.of(value) if _is_profile(value) else value


def _read_profiles(value):
    if isinstance(value, (list, tuple)) and all(_is_profile(p) for p in value):
        return tuple(ProfileInfo.of(p) for p in value)
    return value


class JsonRecord(Mapping):
    """Base of the records: a read-only Mapping view of to_dict(), and to_dict/from_dict/to_json.

    Subclasses are dataclasses whose fields are the JSON keys (``metadata={"json": key}`` renames
    one); a field with ``metadata=ALWAYS`` is written even when None, the others only when set. A
    field with ``metadata=typed(read)`` holds a typed value, made by `read` from the JSON value it is
    given (by from_dict or the constructor) and written back as JSON.
    `extra` holds keys the record does not know; `present` the keys of the JSON it was read from."""

    #: fields that are not JSON keys of their own
    _NOT_KEYS: ClassVar[frozenset] = frozenset({"extra", "present"})

    def __post_init__(self):
        for f in dataclasses.fields(self):
            read = f.metadata.get("read")
            if read is not None and getattr(self, f.name) is not None:
                object.__setattr__(self, f.name, read(getattr(self, f.name)))

    @classmethod
    def _keys(cls) -> list[tuple[str, str, bool]]:
        """(attribute, JSON key, always written) of every field, in JSON order."""
        return [(f.name, f.metadata.get("json", f.name), bool(f.metadata.get("always")))
                for f in dataclasses.fields(cls) if f.name not in cls._NOT_KEYS]

    def _written(self) -> dict:
        """{JSON key: value} of the fields this record writes: those it was read with, or else the set ones."""
        out = {}
        present = self.present
        typed_fields = {f.name for f in dataclasses.fields(self) if "read" in f.metadata}
        for attr, key, always in self._keys():
            value = getattr(self, attr)
            if key in present if present is not None else (value is not None or always):
                out[key] = plain(value) if attr in typed_fields else value
        return out

    def to_dict(self) -> dict:
        """The JSON object (typed values written as JSON; other lists and dicts inside are shared)."""
        out = self._written()
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping):
        """The record of a JSON object: known keys to fields (values as they are), others to `extra`."""
        data = dict(data)
        known = {key: attr for attr, key, _ in cls._keys()}
        values = {known[k]: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra, present=frozenset(data))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def replace(self, **changes):
        """A copy with `changes`; a record read from JSON then also has the keys it was given."""
        if self.present is not None:
            keys = {attr: key for attr, key, _ in self._keys()}
            changes["present"] = self.present | {keys[a] for a in changes if a in keys}
        return dataclasses.replace(self, **changes)

    # -- the Mapping view ------------------------------------------------------------------------
    def __getitem__(self, key):
        return self.to_dict()[key]

    def __iter__(self):
        return iter(self.to_dict())

    def __len__(self):
        return len(self.to_dict())

    def __eq__(self, other):
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def of(cls, value):
        """`value` as this record: itself, or read from a dict."""
        return value if isinstance(value, cls) else cls.from_dict(value)


@dataclass(frozen=True, eq=False)
class TensorRecord(JsonRecord):
    """An engine input or output as its build recorded it: name, shape (-1 where dynamic) and dtype
    (a TensorRT DataType name, "FLOAT"); JSON {"name", "shape", "dtype"}."""

    name: str | None = field(default=None, metadata=ALWAYS)
    shape: tuple[int, ...] | None = field(default=None, metadata=typed(_read_shape, always=True))
    dtype: str | None = field(default=None, metadata=ALWAYS)
    extra: dict = field(default_factory=dict, repr=False)
    present: frozenset | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class ShapeRange(JsonRecord):
    """The shapes an optimization profile gives one input (its values, for a shape-tensor input);
    JSON {"min", "opt", "max"}."""

    min: tuple[int, ...] | None = field(default=None, metadata=typed(_read_shape, always=True))
    opt: tuple[int, ...] | None = field(default=None, metadata=typed(_read_shape, always=True))
    max: tuple[int, ...] | None = field(default=None, metadata=typed(_read_shape, always=True))
    extra: dict = field(default_factory=dict, repr=False)
    present: frozenset | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class ProfileInfo(Mapping):
    """One optimization profile as its build recorded it: {input name: ShapeRange}, in input order;
    JSON {input: {"min", "opt", "max"}}. Reads like that dict (``profile["input"]["min"]`` is a
    list) and equals it."""

    ranges: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "ranges", {str(n): ShapeRange.of(r) for n, r in dict(self.ranges).items()})

    @classmethod
    def of(cls, value) -> "ProfileInfo":
        """`value` as a ProfileInfo: itself, or read from a dict."""
        return value if isinstance(value, cls) else cls(value)

    def to_dict(self) -> dict:
        return {n: r.to_dict() for n, r in self.ranges.items()}

    def __getitem__(self, name) -> ShapeRange:
        return self.ranges[name]

    def __iter__(self):
        return iter(self.ranges)

    def __len__(self):
        return len(self.ranges)

    def __eq__(self, other):
        if isinstance(other, Mapping):
            return self.to_dict() == {k: plain(v) for k, v in other.items()}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class NetworkInfo(JsonRecord):
    """What serialize_network records of the network it built: its name and I/O tensors
    (TensorRecords), the optimization profile (a ProfileInfo, or None), workspace, tf32, the
    builder's phases, the plugins used and, on TensorRT-RTX, the targets."""

    network: str | None = field(default=None, metadata=ALWAYS)
    inputs: tuple[TensorRecord, ...] | None = field(default=None, metadata=typed(_read_tensors, always=True))
    outputs: tuple[TensorRecord, ...] | None = field(default=None, metadata=typed(_read_tensors, always=True))
    profile: ProfileInfo | None = field(default=None, metadata=typed(_read_profile, always=True))
    workspace: int | None = field(default=None, metadata=ALWAYS)
    tf32: bool | None = field(default=None, metadata=ALWAYS)
    build_phases: list | None = field(default=None, metadata=ALWAYS)
    plugins: list | None = field(default=None, metadata=ALWAYS)
    targets: list | None = None
    #: every profile, where there are several (`profile` is the first)
    profiles: tuple[ProfileInfo, ...] | None = field(default=None, metadata=typed(_read_profiles))
    extra: dict = field(default_factory=dict, repr=False)
    present: frozenset | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class BuildInfo(JsonRecord):
    """plan.info of build_plan: the model (None for a plain network function), the options it was
    built with (precision, fp32_io, small, workspace, tf32, targets) and what came of them (the
    network's I/O, profile, plugins and build phases; the model's outputs, the extra outputs and
    debug tensors with the names they were marked under; the weights read and left unread; the
    quantization and the cross-check). It becomes the middle of the sidecar."""

    model: str | None = field(default=None, metadata=ALWAYS)
    network: str | None = field(default=None, metadata=ALWAYS)
    options: dict | None = None  # the options a ModelSpec was bound with (with_options)
    precision: str | None = field(default=None, metadata=ALWAYS)
    fp32_io: bool | None = field(default=None, metadata=ALWAYS)
    small: bool | None = field(default=None, metadata=ALWAYS)  # None for a network function
    inputs: tuple[TensorRecord, ...] | None = field(default=None, metadata=typed(_read_tensors, always=True))
    outputs: tuple[TensorRecord, ...] | None = field(default=None, metadata=typed(_read_tensors, always=True))
    profile: ProfileInfo | None = field(default=None, metadata=typed(_read_profile, always=True))
    plugins: list | None = field(default=None, metadata=ALWAYS)
    workspace: int | None = field(default=None, metadata=ALWAYS)
    tf32: bool | None = field(default=None, metadata=ALWAYS)
    model_outputs: list | None = field(default=None, metadata=ALWAYS)
    extra_outputs: dict | None = field(default=None, metadata=ALWAYS)
    build_phases: list | None = field(default=None, metadata=ALWAYS)
    debug_tensors: dict | None = None
    debug_unfused: bool | None = None
    targets: list | None = None
    cross_check: dict | None = None
    weight_tensors: int | None = None
    unused_weights: list | None = None
    quantization: dict | None = None
    refit: dict | None = None  # trtbuild.engine.refit_record.RefitRecord.to_dict() of a refittable build
    #: every optimization profile, where there are several (`profile`: the first)
    profiles: tuple[ProfileInfo, ...] | None = field(default=None, metadata=typed(_read_profiles))
    version_compatible: bool | None = None  # True for a version-compatible build (absent otherwise)
    exclude_lean_runtime: bool | None = None  # with version_compatible: True if the lean runtime was left out
    hardware_compat: str | None = None  # "ampere+" / "same-cc" (absent for "none")
    extra: dict = field(default_factory=dict, repr=False)
    present: frozenset | None = field(default=None, repr=False)

    @property
    def all_profiles(self) -> list[ProfileInfo]:
        """Every optimization profile (a ProfileInfo: {input: ShapeRange}), in index order: `profiles`
        where there are several, else [`profile`] (a sidecar written before several existed), else []."""
        if self.profiles:
            return list(self.profiles)
        return [self.profile] if self.profile else []

    @classmethod
    def of(cls, info) -> "BuildInfo":
        """`info` as a BuildInfo: itself, or read from another record or a dict (None: empty)."""
        if isinstance(info, cls):
            return info
        return cls.from_dict(info.to_dict() if isinstance(info, JsonRecord) else dict(info or {}))

    @classmethod
    def assemble(cls, options, built: NetworkInfo, defined, *, spec=None, cross_check=None,
                 weights_usage=None, quantization=None, refit=None) -> "BuildInfo":
        """The one place plan.info is put together, from typed parts: the BuildOptions, the
        NetworkInfo of the serialized network, the DefinedNetwork (model, outputs, extra outputs,
        debug tensors), the ModelSpec (None for a network function), the CrossCheckResult, the
        (count, unused names) of the weights, the quantization record and the RefitRecord (or None)."""
        return cls(
            model=defined.model_name, network=built.network,
            options=dict(spec.chosen) if getattr(spec, "chosen", None) else None,
            precision=options.precision, fp32_io=bool(options.fp32_io),
            small=bool(options.small) if spec is not None else None,
            inputs=built.inputs, outputs=built.outputs, profile=built.profile, plugins=built.plugins,
            workspace=options.workspace, tf32=bool(options.tf32), model_outputs=defined.model_outputs,
            extra_outputs={n: t.name for n, t in defined.extra.items()}, build_phases=built.build_phases,
            debug_tensors={n: t.name for n, t in defined.debug.items()} if defined.debug else None,
            debug_unfused=True if options.debug_unfused else None,
            targets=built.targets,
            cross_check=cross_check.to_dict() if cross_check is not None else None,
            weight_tensors=weights_usage[0] if weights_usage is not None else None,
            unused_weights=weights_usage[1] if weights_usage is not None else None,
            quantization=quantization, refit=refit.to_dict() if refit is not None else None,
            profiles=built.profiles, **options.compat.record())

    def with_network(self, built) -> "BuildInfo":
        """This build's description for another engine of the same network (the TensorRT-RTX
        engine of a cross-check): its own I/O, plugins, build phases and targets."""
        built = built if isinstance(built, NetworkInfo) else NetworkInfo.from_dict(dict(built))
        return self.replace(inputs=built.inputs, outputs=built.outputs, plugins=built.plugins,
                            build_phases=built.build_phases, targets=built.targets)


def build_info_of(record) -> BuildInfo | None:
    """The BuildInfo in what an Engine carries as `.sidecar` (a Sidecar, a plan's BuildInfo or
    NetworkInfo, or a dict of either); None for None."""
    if record is None:
        return None
    build = getattr(record, "build", None)
    if isinstance(build, BuildInfo):
        return build
    return BuildInfo.of(record)

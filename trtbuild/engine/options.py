"""What an engine build is asked to do, as one frozen value: BuildOptions.

    options = BuildOptions(precision="fp16", profiles=(BatchProfile(1, 4, 8),), timing_cache="trt.cache")
    plan = build_spec_plan(spec, weights, trt, options)

build_plan's keyword arguments are a shorthand for these fields (BuildOptions.from_kwargs maps
them); a BuildOptions is checked once, when it is made, so that every entry point (build_plan,
build_model, check_model_parity, the CLI) refuses a bad option with the same sentence before any
network is defined.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from .compat import Compatibility, check_compat

#: precision -> the float type the network computes in. int8/fp8: explicit quantization (Q/DQ from a
#: trtbuild.quant.QuantPlan around convolutions, matmuls and residual adds); every other layer stays FLOAT
PRECISIONS = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16", "int8": "FLOAT", "fp8": "FLOAT"}
QUANTIZED = ("int8", "fp8")
Precision = Literal["fp32", "fp16", "bf16", "int8", "fp8"]
#: refit mode -> the BuilderFlag a refittable build sets ("off": none)
REFIT_FLAGS = {"off": None, "identical": "REFIT_IDENTICAL", "any": "REFIT"}
RefitMode = Literal["off", "identical", "any"]


def check_precision(precision: str) -> str:
    """Return the precision if it is one of fp32/fp16/bf16/int8/fp8, else raise ValueError."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not supported; choose one of {', '.join(PRECISIONS)}")
    return precision


def check_batch(batch) -> tuple[int, int, int] | None:
    """Validate a (min, opt, max) batch profile; None means a static batch."""
    if batch is None:
        return None
    try:
        mn, opt, mx = (int(b) for b in batch)
    except (TypeError, ValueError):
        raise ValueError(f"batch must be (min, opt, max) integers, got {batch!r}") from None
    if not 1 <= mn <= opt <= mx:
        raise ValueError(f"batch profile needs 1 <= min <= opt <= max, got min={mn}, opt={opt}, max={mx}")
    return mn, opt, mx


def check_profile(profile, input_shape=None, batch=None) -> tuple[tuple, tuple, tuple] | None:
    """Validate an input profile ``(min shape, opt shape, max shape)`` (each batch first, e.g. (1, 3, 64, 64)),
    None for a static input: one rank, every dim >= 1 and min <= opt <= max; it excludes `batch` (say the
    batch range in the shapes) and, given `input_shape`, must have its rank. Raises ValueError in one sentence."""
    if profile is None:
        return None
    try:
        mn, opt, mx = (tuple(int(d) for d in shape) for shape in profile)
    except (TypeError, ValueError):
        raise ValueError(f"profile must be (min, opt, max) shapes of integers, got {profile!r}") from None
    if batch is not None:
        raise ValueError("pass either batch or profile, not both (a profile's shapes give the batch range too)")
    rank = len(input_shape) if input_shape is not None else len(mn)
    if not len(mn) == len(opt) == len(mx) == rank:
        raise ValueError(f"profile shapes {mn}, {opt}, {mx} must all have the input's rank {rank}")
    if not all(1 <= a <= b <= c for a, b, c in zip(mn, opt, mx)):
        raise ValueError(f"profile needs 1 <= min <= opt <= max in every dim, got min {mn}, opt {opt}, max {mx}")
    return mn, opt, mx


def profile_input_shape(profile) -> tuple:
    """The input shape a profile declares: -1 where min and max differ, the common size elsewhere."""
    mn, _, mx = profile
    return tuple(a if a == c else -1 for a, c in zip(mn, mx))


@dataclass(frozen=True)
class BatchProfile:
    """An optimization profile in which only the batch dimension of every input is dynamic
    (declared -1), between `min` and `max`, tuned for `opt`."""

    min: int
    opt: int
    max: int

    def __post_init__(self):
        mn, opt, mx = check_batch((self.min, self.opt, self.max))
        object.__setattr__(self, "min", mn), object.__setattr__(self, "opt", opt), object.__setattr__(self, "max", mx)

    def as_tuple(self) -> tuple[int, int, int]:
        return self.min, self.opt, self.max


@dataclass(frozen=True)
class ShapeProfile:
    """An optimization profile of the model input as three whole shapes, batch first: dims whose
    min and max differ are dynamic (e.g. H and W of a fully convolutional model)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def __post_init__(self):
        mn, opt, mx = check_profile((self.min, self.opt, self.max))
        object.__setattr__(self, "min", mn), object.__setattr__(self, "opt", opt), object.__setattr__(self, "max", mx)

    def as_tuple(self) -> tuple[tuple, tuple, tuple]:
        return self.min, self.opt, self.max

    def input_shape(self) -> tuple:
        """The shape the input is declared with: -1 where min and max differ."""
        return profile_input_shape(self.as_tuple())


Profile = Union[BatchProfile, ShapeProfile]


def check_profiles_agree(profiles) -> None:
    """Several optimization profiles of one input: all BatchProfile or all ShapeProfile, shapes of
    one rank (TensorRT needs every profile to give shapes for the same inputs, and the input is
    declared once for all of them). Raises ValueError in one sentence."""
    if len(profiles) < 2:
        return
    kinds = {type(p).__name__ for p in profiles}
    if len(kinds) > 1:
        raise ValueError("optimization profiles must all be batch ranges (BatchProfile, --batch) or all input "
                         f"shapes (ShapeProfile, --profile), got {', '.join(type(p).__name__ for p in profiles)}")
    ranks = [len(p.min) for p in profiles if isinstance(p, ShapeProfile)]
    if len(set(ranks)) > 1:
        raise ValueError(f"optimization profiles must all have the input's rank, got ranks {ranks} "
                         f"(profiles {', '.join(_show_profile(p) for p in profiles)})")


def format_range(lo, hi) -> str:
    """A range of shapes or sizes as `--profile` writes it, so that a message shows what the user can
    type: (1, 3, 224, 224), (8, 3, 224, 224) -> "1x3x224x224..8x3x224x224"; 1, 8 -> "1..8"."""
    def one(shape) -> str:
        return "x".join(str(int(d)) for d in shape) if isinstance(shape, (tuple, list)) else str(shape)
    return f"{one(lo)}..{one(hi)}"


def _show_profile(profile) -> str:
    return format_range(profile.min, profile.max)


def envelope(profiles) -> tuple[tuple, tuple, tuple] | None:
    """(smallest min, first opt, largest max) of several ShapeProfiles: the input is declared from
    it (-1 in every dim any profile lets vary, or in which the profiles differ); None for none."""
    if not profiles:
        return None
    mn = tuple(min(d) for d in zip(*(p.min for p in profiles)))
    mx = tuple(max(d) for d in zip(*(p.max for p in profiles)))
    return mn, profiles[0].opt, mx


def _tuple_of_names(value, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ValueError(f"{what} must be a list of tensor names, not the string {value!r}")
    try:
        names = tuple(value)
    except TypeError:
        raise ValueError(f"{what} must be a list of tensor names, got {value!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"{what} must be tensor names (strings), got {list(names)!r}")
    return names


@dataclass(frozen=True)
class BuildOptions:
    """Every option of an engine build (build_plan's keyword arguments, typed); see build_plan for
    what each one does. Checked when made: a bad value is a ValueError in one sentence.

    profiles: a tuple of optimization profiles (BatchProfile or ShapeProfile); empty for a static
    input. Several profiles are all of one kind and rank; each is added to the builder config, in
    order (profile index k is the k-th). refit: "off", "identical" (BuilderFlag.REFIT_IDENTICAL, what
    TensorRT 11 recommends: plain REFIT may drop a GEMM bias) or "any" (BuilderFlag.REFIT); True means
    "identical". strip_weights: a weight-stripped plan (BuilderFlag.STRIP_PLAN), refit "identical"
    unless "any" is asked for. version_compatible (BuilderFlag.VERSION_COMPATIBLE), exclude_lean_runtime
    (EXCLUDE_LEAN_RUNTIME, only with version_compatible) and hardware_compat ("none", "ampere+",
    "same-cc": IBuilderConfig.hardware_compatibility_level): see trtbuild.engine.compat."""

    precision: Precision = "fp32"
    fp32_io: bool = True
    input_name: str | None = None
    input_shape: tuple[int, ...] | None = None
    small: bool = False
    network_name: str | None = None
    profiles: tuple[Profile, ...] = ()
    workspace: int | None = None
    tf32: bool = False
    timing_cache: Path | None = None
    progress: bool | None = True
    targets: tuple[str, ...] | None = None
    cross_check: bool = False
    extra_outputs: tuple[str, ...] = ()
    debug_tensors: tuple[str, ...] = ()
    debug_unfused: bool = False
    quant: Any = None  # a trtbuild.quant.QuantPlan (typed loosely: the quant package builds on the engine)
    refit: RefitMode = "off"
    strip_weights: bool = False
    version_compatible: bool = False
    exclude_lean_runtime: bool = False
    hardware_compat: str = "none"

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        check_precision(self.precision)
        for name in ("fp32_io", "small", "tf32", "cross_check", "debug_unfused", "strip_weights"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"build option {name} must be True or False, got {getattr(self, name)!r}")
        if self.progress is not None and not isinstance(self.progress, bool):
            raise ValueError(f"build option progress must be True, False or None, got {self.progress!r}")
        if isinstance(self.refit, bool):  # refit=True: the mode TensorRT recommends
            put("refit", "identical" if self.refit else "off")
        if self.refit not in REFIT_FLAGS:
            modes = ", ".join(map(repr, REFIT_FLAGS))
            raise ValueError(f"build option refit must be one of {modes} (or True / False), got {self.refit!r}")
        if self.strip_weights and self.refit == "off":  # a stripped plan is refit to get its weights
            put("refit", "identical")
        if self.input_shape is not None:
            try:
                put("input_shape", tuple(int(d) for d in self.input_shape))
            except (TypeError, ValueError):
                raise ValueError(f"input_shape must be a shape of integers, got {self.input_shape!r}") from None
        if isinstance(self.profiles, (BatchProfile, ShapeProfile)):
            put("profiles", (self.profiles,))
        put("profiles", tuple(self.profiles))
        wrong = [p for p in self.profiles if not isinstance(p, (BatchProfile, ShapeProfile))]
        if wrong:
            raise ValueError(f"profiles must be BatchProfile or ShapeProfile objects, got {wrong[0]!r}")
        check_profiles_agree(self.profiles)
        if self.input_shape is not None:
            for shape in self.shape_profiles:
                check_profile(shape.as_tuple(), self.input_shape)
        if self.workspace is not None:
            if isinstance(self.workspace, bool) or not isinstance(self.workspace, numbers.Integral) \
                    or self.workspace < 0:
                raise ValueError(f"workspace must be a number of bytes (an integer >= 0), got {self.workspace!r}")
            put("workspace", int(self.workspace))
        if self.timing_cache is not None:
            if not isinstance(self.timing_cache, (str, os.PathLike)):
                raise ValueError(f"timing_cache must be a file path, got {self.timing_cache!r}")
            put("timing_cache", Path(self.timing_cache))
        if self.targets is not None:
            from .rtx import parse_targets

            put("targets", parse_targets(self.targets))
        put("extra_outputs", _tuple_of_names(self.extra_outputs, "extra_outputs"))
        put("debug_tensors", _tuple_of_names(self.debug_tensors, "debug_tensors"))
        if self.quant is not None and not hasattr(self.quant, "precision"):
            raise ValueError(f"quant must be a trtbuild.quant.QuantPlan, got {type(self.quant).__name__}")
        check_compat(self.version_compatible, self.exclude_lean_runtime, self.hardware_compat)

    @property
    def compat(self) -> Compatibility:
        """The version and hardware compatibility asked for, as one value (trtbuild.engine.compat)."""
        return Compatibility(self.version_compatible, self.exclude_lean_runtime, self.hardware_compat)

    @property
    def batch(self) -> tuple[int, int, int] | None:
        """(min, opt, max) of a BatchProfile, None otherwise."""
        return next((p.as_tuple() for p in self.profiles if isinstance(p, BatchProfile)), None)

    @property
    def shape_profile(self) -> ShapeProfile | None:
        return next((p for p in self.profiles if isinstance(p, ShapeProfile)), None)

    @property
    def batches(self) -> tuple[tuple[int, int, int], ...]:
        """(min, opt, max) of every BatchProfile, in profile order."""
        return tuple(p.as_tuple() for p in self.profiles if isinstance(p, BatchProfile))

    @property
    def shape_profiles(self) -> tuple[ShapeProfile, ...]:
        return tuple(p for p in self.profiles if isinstance(p, ShapeProfile))

    @property
    def quantized(self) -> bool:
        return self.precision in QUANTIZED

    @classmethod
    def from_kwargs(cls, *, batch=None, profile=None, profiles=None, **kwargs) -> "BuildOptions":
        """The options build_plan's keyword arguments name: `batch` (min, opt, max) becomes a
        BatchProfile and `profile` (min, opt, max shapes) a ShapeProfile; `profiles` is the field
        itself (several profiles), instead of either. The others are fields. Unknown names are a
        TypeError, as for any function."""
        names = {f.name for f in dataclasses.fields(cls)} - {"profiles"}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"build_plan() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        if batch is not None and profile is not None:
            check_profile(profile, None, batch)  # its one sentence: pass either batch or profile
        if profiles is not None:
            if batch is not None or profile is not None:
                raise ValueError("pass profiles instead of batch or profile, not with them")
            return cls(profiles=profiles, **kwargs)
        profiles = ((BatchProfile(*check_batch(batch)),) if batch is not None else
                    (ShapeProfile(*check_profile(profile)),) if profile is not None else ())
        return cls(profiles=profiles, **kwargs)

    def replace(self, **changes) -> "BuildOptions":
        """A copy with `changes` (checked again)."""
        return dataclasses.replace(self, **changes)

"""Version- and hardware-compatible builds: what BuildOptions' version_compatible, exclude_lean_runtime
and hardware_compat ask of each backend's builder, and the one decision they carry to load time.

    compat = Compatibility(version_compatible=True, hardware_compat="ampere+")
    compat.apply(trt, config)                     # before build_serialized_network
    runtime.engine_host_code_allowed = lean_runtime_embedded(sidecar)

TensorRT 10/11: version_compatible sets BuilderFlag.VERSION_COMPATIBLE (the plan loads on later
TensorRT versions of the same major, 10 -> 11 too; it embeds a copy of the lean runtime unless
EXCLUDE_LEAN_RUNTIME is set), hardware_compat sets IBuilderConfig.hardware_compatibility_level
("ampere+": AMPERE_PLUS, any Ampere or newer GPU; "same-cc": SAME_COMPUTE_CAPABILITY, any GPU of the
building GPU's compute capability). Both may cost speed (fewer tactics); TensorRT refuses what the
building GPU cannot do (AMPERE_PLUS needs an Ampere or newer GPU to build on).

A plan with the lean runtime embedded carries host code that TensorRT runs in the loading process, so
TensorRT loads it only when the runtime's engine_host_code_allowed is True. That is a trust decision:
trtbuild makes it only for an engine whose own sidecar (written by trtbuild when it built the engine)
says it was built that way, and never for other plans.

TensorRT-RTX refuses both options here (one sentence each, before any build): NVIDIA documents its
engines as tied to the TensorRT-RTX release that built them (no version compatibility), its builder
fails a VERSION_COMPATIBLE build without EXCLUDE_LEAN_RUNTIME ("Unable to load library:
libnvinfer_lean.so.1": it ships no lean runtime), and it ignores hardware_compatibility_level (it logs
"setHardwareCompatibilityLevel() is unsupported in TensorRT-RTX"); its portability is the --target list.
The reference records both and applies TensorRT's load rules (trtbuild/reference/builder.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from trtbuild.backend import is_rtx

#: --hardware-compat value -> the HardwareCompatibilityLevel member it sets
HARDWARE_COMPAT = {"none": "NONE", "ampere+": "AMPERE_PLUS", "same-cc": "SAME_COMPUTE_CAPABILITY"}


class CompatibilityError(ValueError):
    """A compatibility option the backend cannot honour, or a bad combination (one sentence)."""


def check_compat(version_compatible, exclude_lean_runtime, hardware_compat) -> None:
    """Raise CompatibilityError (one sentence) for a value that is not an option's, or EXCLUDE_LEAN_RUNTIME
    without VERSION_COMPATIBLE (TensorRT refuses that flag alone)."""
    for name, value in (("version_compatible", version_compatible), ("exclude_lean_runtime", exclude_lean_runtime)):
        if not isinstance(value, bool):
            raise CompatibilityError(f"build option {name} must be True or False, got {value!r}")
    if exclude_lean_runtime and not version_compatible:
        raise CompatibilityError("exclude_lean_runtime (--exclude-lean-runtime) applies only to a version-compatible "
                                 "build: add version_compatible=True (--version-compatible)")
    if hardware_compat not in HARDWARE_COMPAT:
        raise CompatibilityError(f"hardware_compat (--hardware-compat) must be one of {', '.join(HARDWARE_COMPAT)}, "
                                 f"got {hardware_compat!r}")


@dataclass(frozen=True)
class Compatibility:
    """The compatibility a build asks for (BuildOptions.compat); the defaults ask for none."""

    version_compatible: bool = False
    exclude_lean_runtime: bool = False
    hardware_compat: str = "none"

    def __post_init__(self):
        check_compat(self.version_compatible, self.exclude_lean_runtime, self.hardware_compat)

    @property
    def requested(self) -> bool:
        return self.version_compatible or self.hardware_compat != "none"

    @property
    def lean_runtime_embedded(self) -> bool:
        """True when the plan carries the lean runtime (host code: see the module docstring)."""
        return self.version_compatible and not self.exclude_lean_runtime

    def check_backend(self, trt: ModuleType) -> None:
        """CompatibilityError (one sentence) where the backend cannot honour what is asked (TensorRT-RTX)."""
        if not is_rtx(trt):
            return
        if self.version_compatible:
            raise CompatibilityError(
                "--version-compatible does not apply to TensorRT-RTX: NVIDIA documents its engines as loadable only "
                "by the TensorRT-RTX release that built them, and its builder ships no lean runtime to embed; "
                "rebuild the engine for each TensorRT-RTX release, or build with --backend tensorrt")
        if self.hardware_compat != "none":
            raise CompatibilityError(
                f"--hardware-compat {self.hardware_compat} does not apply to TensorRT-RTX (its builder ignores "
                "hardware_compatibility_level); choose the GPUs its engine runs on with --target instead "
                "(default sm86,sm89,sm120)")

    def apply(self, trt: ModuleType, config) -> None:
        """Set the flags and the hardware compatibility level on a builder config (after check_backend).
        VERSION_COMPATIBLE is set before EXCLUDE_LEAN_RUNTIME: TensorRT refuses the latter alone."""
        self.check_backend(trt)
        if self.version_compatible:
            config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
        if self.exclude_lean_runtime:
            config.set_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)
        if self.hardware_compat != "none":
            config.hardware_compatibility_level = getattr(trt.HardwareCompatibilityLevel,
                                                          HARDWARE_COMPAT[self.hardware_compat])

    def record(self) -> dict:
        """The sidecar's keys for a build that asked for compatibility ({} for none: older sidecars stay alike)."""
        out = {}
        if self.version_compatible:
            out.update(version_compatible=True, exclude_lean_runtime=self.exclude_lean_runtime)
        if self.hardware_compat != "none":
            out["hardware_compat"] = self.hardware_compat
        return out


def lean_runtime_embedded(record) -> bool:
    """Whether the build a sidecar / BuildInfo (or dict of either) describes embedded the lean runtime:
    version-compatible without EXCLUDE_LEAN_RUNTIME. False for None and for a record that does not say."""
    if record is None:
        return False
    from .records import build_info_of

    info = build_info_of(record)
    return info.version_compatible is True and info.exclude_lean_runtime is not True


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in str(text).split(".") if p.isdigit())


#: (built major, loading major) pairs TensorRT supports for version-compatible engines across major versions
#: (TensorRT 11.4's support matrix, "Engine Portability": "No other combination across major versions")
_CROSS_MAJOR = {((10,), (11,)), ((8,), (10,))}


def later_version_may_load(record, built: str, here: str, engine_path) -> bool:
    """Whether a TensorRT engine built with version `built` loads with TensorRT `here` (they differ) by its
    version compatibility, as its sidecar / BuildInfo `record` says: True for a version-compatible engine with the
    lean runtime embedded and a later TensorRT of the same major version, or 11 for a 10 engine (TensorRT's
    support matrix); False for an engine that is not version-compatible (the caller refuses it).
    EngineCompatibilityError (one sentence) for a version-compatible one that still cannot load: an older
    TensorRT (compatibility is forward only), another major version than those, or the lean runtime excluded
    (TensorRT then needs the building version's lean runtime loaded with Runtime.load_runtime, which trtbuild
    does not do)."""
    from .errors import EngineCompatibilityError
    from .records import build_info_of

    info = build_info_of(record)
    if info is None or info.version_compatible is not True:
        return False
    if _version(here) < _version(built):
        raise EngineCompatibilityError(
            f"{engine_path} is a version-compatible engine of TensorRT {built}, which loads on that version and later "
            f"ones only, but TensorRT {here} is installed; rebuild it with `trtbuild build`")
    majors = (_version(built)[:1], _version(here)[:1])
    if majors[0] != majors[1] and majors not in _CROSS_MAJOR:
        raise EngineCompatibilityError(
            f"{engine_path} is a version-compatible engine of TensorRT {built}, but TensorRT documents such engines "
            f"across major versions only from 10 to 11 (and 8 to 10), not to TensorRT {here}; rebuild it with "
            "`trtbuild build`")
    if info.exclude_lean_runtime:
        raise EngineCompatibilityError(
            f"{engine_path} is a version-compatible engine of TensorRT {built} built without its lean runtime "
            f"(--exclude-lean-runtime), so TensorRT {here} needs that version's lean runtime loaded "
            "(Runtime.load_runtime), which trtbuild does not do; rebuild it without --exclude-lean-runtime")
    return True


def other_gpu_may_run(record, built_cc: str, here: dict, engine_path) -> bool:
    """Whether a TensorRT engine built on a GPU of compute capability `built_cc` runs on the GPU `here`
    ({"gpu", "compute_capability"}, another compute capability) by its hardware compatibility: True for
    "ampere+" on an Ampere or newer GPU; False for "none" and "same-cc" (the caller refuses it);
    EngineCompatibilityError (one sentence) for "ampere+" on an older GPU."""
    from .errors import EngineCompatibilityError
    from .records import build_info_of

    info = build_info_of(record)
    if info is None or info.hardware_compat != "ampere+":
        return False
    if _version(here["compute_capability"]) < (8, 0):
        raise EngineCompatibilityError(
            f"{engine_path} was built hardware-compatible with Ampere and newer GPUs (--hardware-compat ampere+), "
            f"but this GPU is {here['gpu']} with compute capability {here['compute_capability']}; rebuild it on "
            "this GPU")
    return True

"""TensorRT-RTX specifics: target compute capabilities, and what it does not have.

TensorRT-RTX (`tensorrt_rtx`) builds "ahead of time" without a GPU once the target compute
capabilities are set on the builder config; its engines are specialised "just in time" on the GPU
that runs them. NVIDIA's support matrix: engines are by default portable across compute
capabilities 8.6, 8.9 and 12.0 (Ampere, Ada and Blackwell RTX GPUs); 7.5 (Turing) must be asked for
on its own; Hopper (9.0) and data-centre parts are not targets. The timing cache is deprecated and
unused there (a runtime cache, kept by the application at run time, replaces it), and there are no
plugins.

    targets = parse_targets("sm86,sm89,sm120")      # ("8.6", "8.9", "12.0")
    set_targets(trt, config, targets)               # before build_serialized_network
"""

from __future__ import annotations

from types import ModuleType
from typing import Iterable

#: NVIDIA's documented default portable set for TensorRT-RTX engines.
DEFAULT_TARGETS = ("8.6", "8.9", "12.0")
#: TensorRT-RTX compiles FP8 for sm89 and newer only: the default targets of an fp8 build
FP8_TARGETS = ("8.9", "12.0")
#: The ComputeCapability members of TensorRT-RTX 1.7 that name one architecture, as "major.minor".
KNOWN_TARGETS = ("7.5", "8.0", "8.6", "8.9", "12.0", "12.1")


class TargetError(ValueError):
    """A target compute capability list that TensorRT-RTX cannot build for (one sentence)."""


def normalize_target(text: str) -> str:
    """"sm86" / "SM_86" / "8.6" / "86" -> "8.6"; "sm120" / "12.0" -> "12.0"; "current" -> "current"."""
    t = str(text).strip().lower().replace("_", "")
    if t == "current":
        return t
    t = t[2:] if t.startswith("sm") else t
    if "." in t:
        major, _, minor = t.partition(".")
    elif t.isdigit() and len(t) >= 2:
        major, minor = t[:-1], t[-1]
    else:
        major = minor = ""
    if not (major.isdigit() and minor.isdigit()):
        raise TargetError(f"target {text!r} is not a compute capability; write it as sm86 or 8.6")
    cc = f"{int(major)}.{int(minor)}"
    if cc not in KNOWN_TARGETS:
        hint = " (Hopper/data-centre GPUs are not TensorRT-RTX targets: use the tensorrt backend there)" \
            if cc in ("9.0", "10.0", "10.3", "11.0") else ""
        raise TargetError(f"target {text!r} (compute capability {cc}) is not one TensorRT-RTX builds for; "
                          f"choose from {', '.join('sm' + k.replace('.', '') for k in KNOWN_TARGETS)} or current{hint}")
    return cc


def parse_targets(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """A comma-separated list (or iterable) of targets -> normalized, de-duplicated tuple.
    None or "" gives DEFAULT_TARGETS. "current" must stand alone (TensorRT-RTX's rule)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return DEFAULT_TARGETS
    items = text.split(",") if isinstance(text, str) else list(text)
    targets = tuple(dict.fromkeys(normalize_target(t) for t in items if str(t).strip()))
    if not targets:
        return DEFAULT_TARGETS
    if "current" in targets and len(targets) > 1:
        raise TargetError(f"targets {','.join(targets)}: 'current' (the GPU of this machine) must be the only target")
    return targets


def _member(trt: ModuleType, cc: str):
    return getattr(trt.ComputeCapability, "CURRENT" if cc == "current" else "SM" + cc.replace(".", ""))


def set_targets(trt: ModuleType, config, targets: Iterable[str] | None = None) -> tuple[str, ...]:
    """Set the target compute capabilities of a TensorRT-RTX builder config; return them."""
    targets = parse_targets(targets if targets is None or isinstance(targets, str) else tuple(targets))
    config.num_compute_capabilities = len(targets)
    for i, cc in enumerate(targets):
        if not config.set_compute_capability(_member(trt, cc), i):
            raise TargetError(f"TensorRT-RTX {trt.__version__} refused target compute capability {cc}")
    return targets


def target_list(targets: Iterable[str]) -> str:
    """("8.6", "12.0") -> "sm86,sm120" (how the CLI and reports print them)."""
    return ",".join(t if t == "current" else "sm" + t.replace(".", "") for t in targets)


def can_run_here(trt: ModuleType, targets: Iterable[str] | None = None) -> tuple[bool, str]:
    """(True, "") if this machine has a GPU that TensorRT-RTX engines built for `targets` run on,
    else (False, the reason in a few words)."""
    from .device import CPU, device_info

    here = device_info(trt)
    if here["compute_capability"] == CPU:
        return False, "no CUDA GPU is visible"
    wanted = parse_targets(targets if targets is None or isinstance(targets, str) else tuple(targets))
    if "current" in wanted or here["compute_capability"] in wanted:
        return True, ""
    return False, (f"this GPU ({here['gpu']}, compute capability {here['compute_capability']}) is not one of the "
                   f"targets {target_list(wanted)}")


def targets_for_precision(precision: str, targets=None):
    """The TensorRT-RTX targets of a `precision` build: FP8_TARGETS for fp8 when none are given
    (TensorRT-RTX cannot compile FP8 for sm86), `targets` otherwise; ValueError for fp8 with a
    target below sm89."""
    if precision != "fp8":
        return targets
    if targets is None:
        return FP8_TARGETS
    old = [t for t in parse_targets(targets) if t != "current" and float(t) < 8.9]
    if old:
        raise ValueError(f"--precision fp8: TensorRT-RTX compiles FP8 for sm89 and newer only, not for "
                         f"{target_list(old)}; choose targets among sm89, sm120")
    return targets

"""Registry models -> engines: default paths, seeded weight export, build + save in one call.

    trt, line = select_backend("auto")       # line: "backend: reference — TensorRT is not available (...)"
    plan = build_model("alexnet", "weights/alexnet.wts", trt, precision="fp16", batch=(1, 2, 4))
    plan = build_model("alexnet", "weights/alexnet.wts", trt, options=BuildOptions(precision="fp16"))
"""

from __future__ import annotations

import inspect
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

from trtbuild.backend import BackendError, is_reference, is_rtx, load_trt, requested_backend
from trtbuild.files.atomic import ensure_parent_dir
from trtbuild.models import registry as model_registry
from trtbuild.quant import QuantPlan
from trtbuild.weights.errors import WeightsWriteError

from .build import Plan, build_spec_plan
from .device import device_info
from .options import BuildOptions
from .serialize import make_sidecar, save_engine
from .sidecar import Sidecar

log = logging.getLogger("trtbuild.engine")

WEIGHTS_DIR = Path("weights")
ENGINES_DIR = Path("engines")
#: Format of automatically exported weights (tensorrtx's text format; safetensors also works).
DEFAULT_WEIGHTS_EXT = ".wts"


def get_spec(name: str):
    """The ModelSpec called `name`; ValueError listing the known names otherwise."""
    try:
        return model_registry.get(name)
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(model_registry.names())}") from None


def select_backend(choice: str | None = None) -> tuple[ModuleType, str]:
    """(trt module, first output line saying which backend runs and why)."""
    trt = load_trt(choice)
    if is_rtx(trt):
        from .rtx import can_run_here

        dev = device_info(trt)
        runs, why = can_run_here(trt)
        where = (f"on {dev['gpu']} (compute capability {dev['compute_capability']})" if runs else
                 f"{why}, so its engines are built here ahead of time but cannot run here")
        return trt, (f"backend: tensorrt-rtx {trt.__version__} (NVIDIA TensorRT for RTX, not TensorRT 10/11) — "
                     f"{where}")
    if not is_reference(trt):
        dev = device_info(trt)
        return trt, (f"backend: tensorrt {trt.__version__} on {dev['gpu']} "
                     f"(compute capability {dev['compute_capability']})")
    if requested_backend(choice) == "reference":
        return trt, ("backend: reference (PyTorch) — chosen with --backend reference or TRTBUILD_BACKEND; "
                     "TensorRT is not used")
    try:
        load_trt("tensorrt")
        reason = "unknown reason"
    except BackendError as e:
        reason = str(e).split("; ")[0]  # the cause, without the advice
    return trt, f"backend: reference (PyTorch) — TensorRT is not available ({reason})"


def _suffix(small: bool) -> str:
    return "-small" if small else ""


def default_weights_path(model: str, small: bool = False, ext: str | None = None) -> Path:
    """weights/<model>[-small].wts (or another extension)."""
    return WEIGHTS_DIR / f"{model}{_suffix(small)}{ext or DEFAULT_WEIGHTS_EXT}"


def default_engine_path(model: str, precision: str = "fp32", small: bool = False, backend: str | None = None) -> Path:
    """engines/<model>[-small]-<precision>[-rtx].engine: `backend` "tensorrt-rtx" adds "-rtx", so that a
    TensorRT-RTX engine never replaces the reference or TensorRT engine built with the same options."""
    rtx = "-rtx" if backend == "tensorrt-rtx" else ""
    return ENGINES_DIR / f"{model}{_suffix(small)}-{precision}{rtx}.engine"


def export_seeded_weights(model: str, path: str | os.PathLike, seed: int = 0, small: bool = False):
    """Write the seeded registry model's weights to `path` (atomic); return the torch module."""
    from trtbuild.weights import export_weights

    module = model_registry.get_torch_model(model, seed=seed, small=small)
    ensure_parent_dir(path, WeightsWriteError)
    report = export_weights(module, path)
    log.info("%s", report.summary())
    return module


def ensure_weights(model: str, path: str | os.PathLike | None, seed: int = 0, small: bool = False,
                   ext: str | None = None) -> tuple[Path, bool]:
    """(weights path, exported?): use `path` if given (it must exist), else the default path,
    exporting the seeded model's weights there first if the file is missing."""
    if path is not None:
        return Path(path), False  # a missing explicit file surfaces as WeightsError naming it
    target = default_weights_path(model, small, ext)
    if target.is_file():
        return target, False
    export_seeded_weights(model, target, seed, small)
    return target, True


def load_model_weights(weights):
    """A WeightMap from a path or WeightMap (missing files raise WeightsError). Flat tensors, as
    tensorrtx .wts files store them, are fine: the builders pass every weight's shape."""
    from trtbuild.weights import WeightMap

    return weights if isinstance(weights, WeightMap) else WeightMap.load(weights)


@dataclass
class _FilePlan(QuantPlan):
    """A QuantPlan that remembers the calibration file it came from ({"file", "sha256"}), for the sidecar."""

    calibration_file: dict = field(default_factory=dict)


def quant_plan(model, precision: str, calibration=None, keep=(), small: bool = False, module=None, weights=None):
    """The trtbuild.quant.QuantPlan of registry model `model` (name or ModelSpec) for `precision`,
    or None when there is nothing to plan (no int8/fp8, no keep).

    calibration: a calibration file (checked against the model with load_calibration: made for
    another model, size or network is refused in one sentence; its path and sha256 are recorded in
    the sidecar), or a trtbuild.quant.Calibration; required for int8/fp8 and refused otherwise.
    keep: ``["fp32:conv4_3_norm,layer4.*", "fp16:..."]`` (--keep) or (pattern, precision) pairs:
    PyTorch module names or globs kept out of quantization (or out of fp16) with casts.
    module: the model's PyTorch module, if at hand (else built from the spec to check the file).
    weights: the weights the network is built with, to refuse a calibration file made with other
    weights (trtbuild.quant.calibfile.check_weights): a weight file or WeightMap, or an int, the seed
    of the PyTorch model's own weights; None with no `module` leaves the weights unchecked."""
    from trtbuild.quant import load_calibration, parse_keep
    from trtbuild.quant.calibfile import check_calibration_path, check_weights
    from trtbuild.quant.calibrate import weights_sha256
    from trtbuild.quant.plan import QUANTIZED_PRECISIONS
    from trtbuild.weights import WeightMap

    from .serialize import sha256_file

    spec = get_spec(model) if isinstance(model, str) else model
    quantized = precision in QUANTIZED_PRECISIONS
    if not quantized and calibration is not None:
        raise ValueError(f"--calibration applies to --precision int8 or fp8 only, not {precision}")
    keep = [k for k in keep if isinstance(k, tuple)] + parse_keep([k for k in keep if not isinstance(k, tuple)])
    if not quantized and not keep:
        return None
    if "quant" not in inspect.signature(spec.build_network).parameters:  # before its PyTorch model is needed
        given = f"--calibration {calibration}" if isinstance(calibration, (str, os.PathLike)) else \
            ("--keep" if keep else f"--precision {precision}")
        raise ValueError(f"model '{spec.name}': its network function takes no quant= parameter, so {given} cannot "
                         "reach its layers: accept quant= and build the layers with trtbuild.layers.planned "
                         "(planned_conv, planned_conv_bn, planned_linear, planned_add, planned), or place your own "
                         "Q/DQ with trtbuild.layers.quantize and build it in fp32 without --calibration")
    source = {}
    if isinstance(calibration, (str, os.PathLike)):
        check_calibration_path(calibration)
        source = {"file": str(calibration), "sha256": sha256_file(calibration)}
        path, actual, weights_name = calibration, None, None
        if module is None and weights is not None:
            module = spec.torch_factory(weights if isinstance(weights, int) else 0, small)
        calibration = load_calibration(path, spec, small=small, module=module)
        if weights is not None and not isinstance(weights, int):
            weights_name = None if isinstance(weights, WeightMap) else str(weights)
            actual = weights_sha256(module, load_model_weights(weights))
        elif module is not None:
            actual = weights_sha256(module)
        if module is not None:
            check_weights(path, calibration, actual, weights_name)
    modules = None
    if calibration is None:  # fp16/bf16 with --keep: the module names come from the PyTorch model
        modules = [n for n, _ in (module or spec.torch_factory(0, small)).named_modules() if n]
    return replace(_FilePlan.build(calibration, precision, keep, modules=modules), calibration_file=source)


def build_model(model, weights, trt: ModuleType, precision: str | None = None, *,
                options: BuildOptions | None = None, **kwargs) -> Plan:
    """Build the registry model `model` (name or ModelSpec) with weights (path or WeightMap).

    options: a BuildOptions; or, as a shorthand, `precision` (default fp32) and build_plan's keyword
    arguments (small, batch, profile, workspace, timing_cache, progress, fp32_io, extra_outputs, tf32,
    targets (TensorRT-RTX only), cross_check, debug_tensors, debug_unfused, quant: a QuantPlan, see
    :func:`quant_plan`, required for precision int8/fp8), not both."""
    spec = get_spec(model) if isinstance(model, str) else model
    if options is not None and (kwargs or precision is not None):
        given = ", ".join((["precision"] if precision is not None else []) + sorted(kwargs))
        raise ValueError(f"build_model: pass either options=BuildOptions(...) or {given}, not both")
    if options is None:
        options = BuildOptions.from_kwargs(precision="fp32" if precision is None else precision, **kwargs)
    return build_spec_plan(spec, load_model_weights(weights), trt, options)


def build_and_save(model, weights_path, out_path, trt: ModuleType, precision: str | None = None,
                   **kw) -> tuple[Path, Sidecar]:
    """Build `model` (name or ModelSpec) and write the engine and its sidecar atomically; return (path, sidecar).
    precision and `kw` (options=BuildOptions(...), or build_plan's keyword arguments): as in build_model.

    If the build fails nothing on disk is touched."""
    plan = build_model(model, weights_path, trt, precision, **kw)
    sidecar = make_sidecar(trt, plan, weights_path=weights_path)
    return save_engine(out_path, plan, sidecar), sidecar  # creates missing directories

"""``trtbuild build``: build a registry model into an engine file plus its JSON sidecar.

    trtbuild build alexnet                                  # weights/alexnet.wts (exported if missing)
    trtbuild build resnet50 --weights r50.wts --precision fp16 --batch 1,8,32 --timing-cache trt.cache
    trtbuild build resnet18 --backend tensorrt-rtx --target sm86,sm89,sm120   # no GPU needed
    trtbuild build resnet18 --cross-check          # also build with the reference and TensorRT-RTX and compare
    trtbuild build resnet18 --precision int8 --calibration calib.json --keep fp32:layer4.*   # explicit Q/DQ

Precision comes from the input type (strongly typed network). The engine keeps float32 input
and output tensors unless --native-io is given (then fp16/bf16 engines take and return
half/bfloat16 tensors). The engine is written atomically: a failed build leaves existing files alone.
"""

from __future__ import annotations

import argparse
import time

from trtbuild._moved import moved_attributes

from .options import (ENGINE_OUT_HELP, add_backend_options, add_model_command, add_output_files,
                      add_progress_option)

MIB = 1 << 20


def parse_batch(text: str | None):
    """"MIN,OPT,MAX" -> (min, opt, max); "N" -> (N, N, N); None -> None (static batch 1)."""
    if text is None:
        return None
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        raise ValueError(f"--batch {text!r}: expected MIN,OPT,MAX integers (e.g. 1,4,8)") from None
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3:
        raise ValueError(f"--batch {text!r}: expected 1 or 3 comma-separated integers (MIN,OPT,MAX)")
    from trtbuild.engine import check_batch

    return check_batch(parts)


def parse_profiles(texts, input_name: str | None = None) -> list:
    """Every --profile (the option repeats: one optimization profile each), parsed by parse_profile."""
    if texts is None:
        return []
    return [parse_profile(t, input_name) for t in ([texts] if isinstance(texts, str) else texts)]


def parse_profile(text: str | None, input_name: str | None = None):
    """"MINxSHAPE,OPT,MAX" shapes such as "1x3x64x64,1x3x128x128,1x3x256x256" -> three shape tuples
    (batch first); None -> None. Dims that differ between min and max become dynamic (-1).
    "MIN..MAX" is the same with OPT = MAX (TensorRT tunes its kernels for OPT; the largest shape is
    the one whose speed matters most), and an "INPUT:" prefix names the input (checked against
    `input_name`), e.g. input:1x3x224x224..8x3x224x224."""
    if text is None:
        return None
    original = text
    name, sep, rest = text.rpartition(":")
    if sep:
        if input_name is not None and name.strip() != input_name:
            raise ValueError(f"--profile {original!r} names input '{name.strip()}', but the model's input is "
                             f"'{input_name}'")
        text = rest
    if ".." in text and "," not in text:
        lo, _, hi = text.partition("..")
        text = f"{lo},{hi},{hi}"
    parts = text.split(",")
    try:
        shapes = [tuple(int(d) for d in part.strip().lower().split("x")) for part in parts]
    except ValueError:
        raise ValueError(f"--profile {text!r}: expected MIN,OPT,MAX shapes with dims separated by 'x' "
                         "(e.g. 1x3x64x64,1x3x128x128,1x3x256x256)") from None
    if len(shapes) != 3:
        raise ValueError(f"--profile {text!r}: expected 3 comma-separated shapes (MIN,OPT,MAX), got {len(shapes)}")
    from trtbuild.engine.options import check_profile

    return check_profile(shapes)


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def weights_usage_line(info, verbose: bool = False, shown: int = 5) -> str:
    """"weights: 2 of 122 tensors unused: a, b" / "weights: all 122 tensors used", from a Sidecar,
    a BuildInfo or a parity report's meta ("weight_tensors", "unused_weights"); all names with
    `verbose`, else the first `shown`."""
    from trtbuild.engine.records import BuildInfo, build_info_of

    if isinstance(info, BuildInfo) or hasattr(info, "build"):
        record = build_info_of(info)
        unused, total = record.unused_weights, record.weight_tensors
    else:
        unused, total = info.get("unused_weights"), info.get("weight_tensors")
    if unused is None or total is None:
        return "weights: which tensors the builder read is not recorded (engine built by an older trtbuild)"
    if not unused:
        return f"weights: all {total} tensors used"
    names = unused if verbose or len(unused) <= shown else unused[:shown] + [f"… ({len(unused) - shown} "
                                                                             "more; -v lists all)"]
    return f"weights: {len(unused)} of {total} tensors unused (no builder read them): {', '.join(names)}"


def parse_options(items) -> dict:
    """["key=value", ...] -> {key: value}; ValueError naming a malformed item."""
    options = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--option {item!r}: expected KEY=VALUE, e.g. involution_impl=composed")
        options[key.strip()] = value.strip()
    return options


def check_target_option(trt, target: str | None, cross_check: bool = False):
    """The parsed --target (None when not given): TensorRT-RTX's targets, for --backend tensorrt-rtx
    or for the TensorRT-RTX side of --cross-check; a ValueError in one sentence otherwise."""
    if target is None:
        return None
    from trtbuild.backend import is_rtx
    from trtbuild.engine.rtx import parse_targets

    if not (is_rtx(trt) or cross_check):
        raise ValueError(f"--target {target}: only TensorRT-RTX builds for chosen GPUs (--backend tensorrt-rtx, or "
                         "the TensorRT-RTX side of --cross-check); other backends build for the GPU they run on")
    return parse_targets(target)


def resolve_cli_model(args):
    """The ModelSpec args.model names (registry name, file or module; see trtbuild.models.user)."""
    from trtbuild.models.user import resolve_model

    return resolve_model(args.model, input=getattr(args, "input", None), torch=getattr(args, "torch", None),
                         outputs=getattr(args, "output", None))


def backend_and_model(args):
    """(trt, spec): the backend chosen by --backend, whose line is printed first, and the model
    named by args.model (registry name, file or module)."""
    from trtbuild.engine import select_backend

    trt, line = select_backend(args.backend)
    print(line, flush=True)
    return trt, resolve_cli_model(args).with_options(**parse_options(getattr(args, "option", None)))


def quantization_line(info: dict) -> str:
    """One line from a sidecar's "quantization" record."""
    calib = info.get("calibration") or {}
    parts = [info["precision"]]
    if "quantized_layers" in info and info["precision"] in ("int8", "fp8"):
        parts.append(f"{len(info['quantized_layers'])} convolutions/matmuls and {len(info['quantized_adds'])} "
                     "residual adds quantized")
    if calib:
        parts.append(f"calibration {calib.get('file', '(in memory)')} (method {calib['method'].get('name')}"
                     + (f", sha256 {calib['sha256'][:12]}…" if calib.get("sha256") else "") + ")")
    parts.append(f"kept: {' '.join(info['keep']) or 'none'}")
    return "; ".join(parts)


def quant_from_args(args, spec, precision: str, weights=None):
    """The QuantPlan of --precision/--calibration/--keep (None when there is nothing to plan), the
    calibration file checked against the model and the weights (`weights`: the file, WeightMap or
    seed of the PyTorch model's weights used; default: --weights, else the seed 0 model's)."""
    from trtbuild.engine import quant_plan

    weights = weights if weights is not None else (args.weights if args.weights is not None else 0)
    return quant_plan(spec, precision, args.calibration, args.keep, small=args.small, weights=weights)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``build``."""
    p = add_model_command(subparsers, "build", "build a model into an engine file (+ JSON sidecar)", __doc__,
                          seed_help="seed of the PyTorch model when exporting weights (default 0)")
    add_backend_options(p, rtx=True)
    add_output_files(p, out=ENGINE_OUT_HELP)
    p.add_argument("--batch", default=None, metavar="MIN,OPT,MAX",
                   help="dynamic batch optimization profile (input declared with batch -1); default static batch 1")
    p.add_argument("--profile", default=None, action="append", metavar="MIN,OPT,MAX",
                   help="optimization profile of the input as three shapes, batch first, e.g. "
                        "1x3x64x64,1x3x128x128,1x3x256x256 (or [INPUT:]MIN..MAX, OPT = MAX): dims that differ are "
                        "dynamic (H and W of a fully convolutional model such as unet); repeat it for several "
                        "profiles (profile k is the k-th); instead of --batch")
    p.add_argument("--workspace", type=int, default=None, metavar="MiB", help="workspace memory-pool limit in MiB")
    p.add_argument("--timing-cache", default=None, metavar="PATH",
                   help="timing cache file, loaded if present and updated after the build")
    p.add_argument("--native-io", action="store_true",
                   help="fp16/bf16 engines take and return fp16/bf16 tensors (default: float32 I/O with casts inside)")
    p.add_argument("--tf32", action="store_true", help="allow TF32 for float32 math on real TensorRT (default off)")
    p.add_argument("--refit", nargs="?", const="identical", default="off", choices=("identical", "any"),
                   metavar="identical|any",
                   help="build a refittable engine (trtbuild refit): 'identical' (the default: REFIT_IDENTICAL, which "
                        "TensorRT 11 recommends) or 'any' (REFIT); weights are named after the state_dict keys")
    p.add_argument("--strip-weights", action="store_true",
                   help="write a weight-stripped plan (STRIP_PLAN): it runs only once refit with the weights "
                        "(trtbuild refit); implies --refit identical unless --refit any is given")
    add_compat_options(p)
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="engine cache: reuse the engine of an earlier build with the same network, weights, backend, "
                        "targets or GPU and options instead of building (default: $TRTBUILD_CACHE; none if unset)")
    add_progress_option(p)
    p.set_defaults(func=run)
    return p


def add_compat_options(p) -> None:
    """The "compatibility" group: version- and hardware-compatible builds (trtbuild.engine.compat)."""
    from trtbuild.engine.compat import HARDWARE_COMPAT

    g = p.add_argument_group("compatibility")
    g.add_argument("--version-compatible", action="store_true",
                   help="build a version-compatible engine (BuilderFlag.VERSION_COMPATIBLE): later TensorRT versions "
                        "load it; it embeds the lean runtime, host code that loads only where the plan is trusted "
                        "(trtbuild trusts its own sidecar); not for TensorRT-RTX")
    g.add_argument("--exclude-lean-runtime", action="store_true",
                   help="with --version-compatible: leave the lean runtime out of the plan (EXCLUDE_LEAN_RUNTIME; "
                        "the loading side supplies it)")
    g.add_argument("--hardware-compat", default="none", choices=tuple(HARDWARE_COMPAT),
                   help="GPUs the engine must run on besides the building one: none (default), ampere+ (Ampere and "
                        "newer), same-cc (same compute capability); TensorRT's hardware_compatibility_level, not for "
                        "TensorRT-RTX (use --target)")


def run(args) -> int:
    """Build and save; print the backend first, then what was written."""
    from trtbuild.backend import backend_kind
    from trtbuild.engine import default_engine_path, default_weights_path, ensure_weights
    from trtbuild.files.outputs import TIMING_CACHE

    from ._outputs import check_paths, engine_outputs

    from trtbuild.engine.options import BatchProfile, BuildOptions, ShapeProfile
    from trtbuild.engine.sidecar import Sidecar

    trt, spec = backend_and_model(args)
    precision = args.precision or "fp32"
    batch = parse_batch(args.batch)
    shape_profiles = parse_profiles(args.profile, spec.input_name)
    if shape_profiles and batch is not None:
        raise ValueError("--profile and --batch exclude each other: give the batch range in the --profile shapes")
    profiles = (BatchProfile(*batch),) if batch is not None else tuple(ShapeProfile(*p) for p in shape_profiles)
    targets = check_target_option(trt, args.target, args.cross_check)  # before anything is written
    from trtbuild.engine.compat import Compatibility

    Compatibility(args.version_compatible, args.exclude_lean_runtime, args.hardware_compat).check_backend(trt)
    out = args.out or default_engine_path(spec.name, precision, args.small, backend=backend_kind(trt))
    default_weights = default_weights_path(spec.name, args.small)
    check_paths(args, [*engine_outputs("--out", out), ("--timing-cache", args.timing_cache, TIMING_CACHE)],
                [("--weights", args.weights or default_weights), ("--calibration", args.calibration)])
    quant = quant_from_args(args, spec, precision,  # before anything is written; the weights ensure_weights picks
                            args.weights or (default_weights if default_weights.is_file() else args.seed))
    weights, exported = ensure_weights(spec.name, args.weights, args.seed, args.small)
    print(f"weights: {weights}" + (f" (exported from the seeded PyTorch model, seed {args.seed})" if exported else ""),
          flush=True)
    start = time.perf_counter()
    workspace = args.workspace * MIB if args.workspace is not None else None
    options = BuildOptions(
        precision=precision, small=args.small, profiles=profiles, workspace=workspace, timing_cache=args.timing_cache,
        progress=False if args.no_progress else None, fp32_io=not args.native_io, tf32=args.tf32,
        targets=targets, cross_check=args.cross_check, quant=quant, refit=args.refit, strip_weights=args.strip_weights,
        version_compatible=args.version_compatible, exclude_lean_runtime=args.exclude_lean_runtime,
        hardware_compat=args.hardware_compat)
    path, sidecar, hit = cached_build(args.cache, trt, spec, weights, out, options)
    sidecar = Sidecar.of(sidecar)  # a cache hit gives the stored sidecar as a dict
    build = sidecar.build
    elapsed = time.perf_counter() - start
    print(f"{'reused' if hit else 'built'} {spec.name}{' (small)' if args.small else ''} [{precision}]"
          f"{' from the cache' if hit else ''} in {elapsed:.1f} s: "
          f"{path} ({human_bytes(sidecar.engine_bytes)}) + sidecar {path}.json")
    for kind in ("inputs", "outputs"):
        print(f"{kind}: " + ", ".join(f"{t.name} {list(t.shape)} {t.dtype}" for t in getattr(build, kind)))
    print(weights_usage_line(build, getattr(args, "verbose", False)))
    if build.quantization:
        print(f"quantization: {quantization_line(build.quantization)}")
    several = len(build.all_profiles) > 1
    for k, each in enumerate(build.all_profiles):
        for name, r in each.items():
            print(f"profile {f'{k} ' if several else ''}{name}: min {list(r.min)} opt {list(r.opt)} max {list(r.max)}")
    if build.targets:
        from trtbuild.engine.rtx import target_list

        print(f"targets: {target_list(build.targets)} (TensorRT-RTX engine: runs on GPUs of these compute "
              "capabilities, specialised just in time on first use)")
    if build.refit:
        refit = build.refit
        print(f"refit: {refit['mode']}{', weights stripped' if refit['stripped'] else ''}; "
              f"{len(refit['weights'])} named weights, {len(refit['baked'])} state_dict keys baked in")
    if build.version_compatible or build.hardware_compat:
        lean = "" if not build.version_compatible else ", lean runtime excluded" if build.exclude_lean_runtime else \
            ", lean runtime embedded (loaded with engine_host_code_allowed, from this sidecar)"
        print(f"compat: {'version-compatible' if build.version_compatible else 'not version-compatible'}{lean}; "
              f"hardware compatibility {build.hardware_compat or 'none'}")
    if args.timing_cache:
        used = "not used: TensorRT-RTX has no timing cache" if build.targets else args.timing_cache
        used = "not used: the engine came from the cache" if hit else used
        print(f"timing cache: {used}")
    if build.cross_check:
        from trtbuild.engine.cross_check import CrossCheckResult

        print(CrossCheckResult(**build.cross_check).summary())
    return 0


def cached_build(option, trt, spec, weights, out, options):
    """(path, sidecar, hit?) of building `spec` with `options` into `out`: directly without a cache (no
    --cache, no $TRTBUILD_CACHE), else through trtbuild.engine.cache, the network defined once for both
    the key and the build, printing "cache hit: <digest>" or "cache miss: <digest>" first."""
    from trtbuild.engine import build_and_save
    from trtbuild.engine.cache import CachedModelBuild, EngineCache, build_with_cache, cache_dir_from

    directory = cache_dir_from(option)
    if directory is None:
        return (*build_and_save(spec, weights, out, trt, options=options), False)
    cache = EngineCache(directory)
    job = CachedModelBuild(trt, spec, weights, options)
    return build_with_cache(cache, job.key, out, lambda: job.build_and_save(out), weights, report=lambda hit: print(
        f"cache {'hit' if hit else 'miss'}: {job.key.short} ({cache.dir})", flush=True))


#: the option helpers that moved to trtbuild.cli.options
__getattr__ = moved_attributes(__name__, "trtbuild.cli.options", [
    "MODEL_HELP", "add_model_command", "add_user_model_options", "parse_range"])

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
import math
import time

from trtbuild.cli import add_backend_option

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


def parse_range(text: str | None):
    """"LO,HI" -> (lo, hi); None -> None."""
    if text is None:
        return None
    try:
        lo, hi = (float(p) for p in text.split(","))
    except ValueError:
        raise ValueError(f"--range {text!r}: expected LO,HI such as -1,1") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"--range {text!r}: LO and HI must be finite numbers")
    if not lo < hi:
        raise ValueError(f"--range {text!r}: LO must be smaller than HI")
    return lo, hi


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def weights_usage_line(info: dict, verbose: bool = False, shown: int = 5) -> str:
    """"weights: 2 of 122 tensors unused: a, b" / "weights: all 122 tensors used", from a sidecar or
    plan info ("weight_tensors", "unused_weights"); all names with `verbose`, else the first `shown`."""
    unused, total = info.get("unused_weights"), info.get("weight_tensors")
    if unused is None or total is None:
        return "weights: which tensors the builder read is not recorded (engine built by an older trtbuild)"
    if not unused:
        return f"weights: all {total} tensors used"
    names = unused if verbose or len(unused) <= shown else unused[:shown] + [f"… ({len(unused) - shown} more; -v lists all)"]
    return f"weights: {len(unused)} of {total} tensors unused (no builder read them): {', '.join(names)}"


def add_common_model_options(p: argparse.ArgumentParser, quantized: bool = False) -> None:
    """Options shared by build, parity and demo; `quantized` (build, parity): int8/fp8, --calibration, --keep."""
    p.add_argument("--weights", default=None,
                   help="weight file (.wts/.safetensors/.pt); default weights/<model>[-small].wts, "
                        "exported from the seeded PyTorch model if missing")
    p.add_argument("--small", action="store_true", help="the small variant of the model (fast tests)")
    p.add_argument("--precision", choices=("fp32", "fp16", "bf16") + (("int8", "fp8") if quantized else ()),
                   default=None,
                   help="type the network computes in (default fp32); set by the input type, never by builder flags"
                        + ("; int8/fp8: explicit quantization (Q/DQ) from --calibration, other layers fp32"
                           if quantized else ""))
    if quantized:
        p.add_argument("--calibration", default=None, metavar="CALIB.json",
                       help="calibration file of this model (`trtbuild calibrate`); required for --precision "
                            "int8/fp8 and refused otherwise")
        p.add_argument("--keep", action="append", default=[], metavar="fp32|fp16:MODULES",
                       help="repeatable: PyTorch module names or globs kept out of quantization (int8/fp8) or out "
                            "of fp16/bf16, with casts, e.g. --keep fp32:conv4_3_norm,layer4.* --keep fp16:fc")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a build option of the model (see `trtbuild models`), e.g. --option involution_impl=composed")
    add_backend_option(p)


def parse_options(items) -> dict:
    """["key=value", ...] -> {key: value}; ValueError naming a malformed item."""
    options = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--option {item!r}: expected KEY=VALUE, e.g. involution_impl=composed")
        options[key.strip()] = value.strip()
    return options


def add_rtx_options(p: argparse.ArgumentParser) -> None:
    """--target (TensorRT-RTX's target GPUs) and --cross-check, shared by build and parity."""
    p.add_argument("--target", default=None, metavar="SM,...",
                   help="--backend tensorrt-rtx only: compute capabilities the engine is built for, e.g. "
                        "sm86,sm89,sm120 (default: NVIDIA's portable set sm86,sm89,sm120; 'current' = this GPU)")
    p.add_argument("--cross-check", action="store_true",
                   help="also build the network with the reference and TensorRT-RTX and fail unless they agree on "
                        "acceptance and every tensor's name, shape and dtype")


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


def add_model_command(subparsers, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand taking a registry model name plus the common model options (build, parity)."""
    p = subparsers.add_parser(name, help=help, description=description,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help=MODEL_HELP)
    add_common_model_options(p, quantized=True)
    add_user_model_options(p)
    return p


MODEL_HELP = ("model: a name (see `trtbuild models`), a file net.py[:NAME] or package.module:NAME naming a ModelSpec "
              "or a network function (network, weights, input) -> {name: ITensor}")


def add_user_model_options(p: argparse.ArgumentParser) -> None:
    """What a ModelSpec would carry, for a plain network function given as MODEL."""
    p.add_argument("--input", default=None, metavar="NAME:SHAPE",
                   help="network function only: input name and shape, batch first, e.g. input:1x3x224x224")
    p.add_argument("--torch", default=None, metavar="FILE.py:FACTORY",
                   help="network function only: factory returning the PyTorch nn.Module (FILE.py:NAME or "
                        "module:NAME), for exporting seeded weights and for parity")
    p.add_argument("--output", action="append", default=None, metavar="NAME",
                   help="network function only (repeatable): output names in the order of the torch forward's "
                        "outputs (default: the keys the function returns)")


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
    p = add_model_command(subparsers, "build", "build a model into an engine file (+ JSON sidecar)", __doc__)
    p.add_argument("--out", default=None, help="engine path (default engines/<model>[-small]-<precision>.engine)")
    p.add_argument("--batch", default=None, metavar="MIN,OPT,MAX",
                   help="dynamic batch optimization profile (input declared with batch -1); default static batch 1")
    p.add_argument("--workspace", type=int, default=None, metavar="MiB", help="workspace memory-pool limit in MiB")
    p.add_argument("--timing-cache", default=None, metavar="PATH",
                   help="timing cache file, loaded if present and updated after the build")
    p.add_argument("--seed", type=int, default=0, help="seed of the PyTorch model when exporting weights (default 0)")
    p.add_argument("--native-io", action="store_true",
                   help="fp16/bf16 engines take and return fp16/bf16 tensors (default: float32 I/O with casts inside)")
    p.add_argument("--tf32", action="store_true", help="allow TF32 for float32 math on real TensorRT (default off)")
    add_rtx_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Build and save; print the backend first, then what was written."""
    from trtbuild.engine import build_and_save, default_engine_path, default_weights_path, ensure_weights
    from trtbuild.files.outputs import TIMING_CACHE

    from ._outputs import check_paths, engine_outputs

    trt, spec = backend_and_model(args)
    precision = args.precision or "fp32"
    batch = parse_batch(args.batch)
    targets = check_target_option(trt, args.target, args.cross_check)  # before anything is written
    out = args.out or default_engine_path(spec.name, precision, args.small)
    check_paths(args, [*engine_outputs("--out", out), ("--timing-cache", args.timing_cache, TIMING_CACHE)],
                [("--weights", args.weights or default_weights_path(spec.name, args.small)),
                 ("--calibration", args.calibration)])
    default_weights = default_weights_path(spec.name, args.small)
    quant = quant_from_args(args, spec, precision,  # before anything is written; the weights ensure_weights picks
                            args.weights or (default_weights if default_weights.is_file() else args.seed))
    weights, exported = ensure_weights(spec.name, args.weights, args.seed, args.small)
    print(f"weights: {weights}" + (f" (exported from the seeded PyTorch model, seed {args.seed})" if exported else ""),
          flush=True)
    start = time.perf_counter()
    path, sidecar = build_and_save(
        spec, weights, out, trt, precision, small=args.small, batch=batch,
        workspace=args.workspace * MIB if args.workspace is not None else None, timing_cache=args.timing_cache,
        progress=False if args.no_progress else None, fp32_io=not args.native_io, tf32=args.tf32,
        targets=targets, cross_check=args.cross_check, quant=quant)
    elapsed = time.perf_counter() - start
    print(f"built {spec.name}{' (small)' if args.small else ''} [{precision}] in {elapsed:.1f} s: "
          f"{path} ({human_bytes(sidecar['engine_bytes'])}) + sidecar {path}.json")
    for kind in ("inputs", "outputs"):
        print(f"{kind}: " + ", ".join(f"{t['name']} {t['shape']} {t['dtype']}" for t in sidecar[kind]))
    print(weights_usage_line(sidecar, getattr(args, "verbose", False)))
    if sidecar.get("quantization"):
        print(f"quantization: {quantization_line(sidecar['quantization'])}")
    if sidecar.get("profile"):
        for name, prof in sidecar["profile"].items():
            print(f"profile {name}: min {prof['min']} opt {prof['opt']} max {prof['max']}")
    if sidecar.get("targets"):
        from trtbuild.engine.rtx import target_list

        print(f"targets: {target_list(sidecar['targets'])} (TensorRT-RTX engine: runs on GPUs of these compute "
              "capabilities, specialised just in time on first use)")
    if args.timing_cache:
        used = "not used: TensorRT-RTX has no timing cache" if sidecar.get("targets") else args.timing_cache
        print(f"timing cache: {used}")
    if sidecar.get("cross_check"):
        from trtbuild.engine.cross_check import CrossCheckResult

        print(CrossCheckResult(**sidecar["cross_check"]).summary())
    return 0

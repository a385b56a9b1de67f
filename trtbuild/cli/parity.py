"""``trtbuild parity``: compare an engine with PyTorch (or the reference with onnxruntime).

    trtbuild parity alexnet                          # build in memory, compare with PyTorch
    trtbuild parity alexnet --engine engines/alexnet-fp32.engine --json parity.json --html parity.html
    trtbuild parity resnet50 --small --precision fp16 --layerwise      # per-layer errors, first jump
    trtbuild parity resnet18 --small --range=-3,3 --distribution normal --seed 1
    trtbuild parity resnet18 --small --against onnxruntime
    trtbuild parity resnet18 --small --backend tensorrt-rtx   # no RTX GPU: real engine built, numbers from the reference

An element fails only if |actual - expected| > atol AND > rtol * |expected|. Default tolerances
depend on the precision; the default atol is relative to each tensor's largest |expected|, an
explicit --atol is absolute. NaN or Inf in an engine output fails it, even where PyTorch has NaN
or Inf too, unless --allow-nonfinite. Exit code 0 if every output passes, 1 otherwise.

A range starting with a negative number is written with "=" (--range=-1,1), since argparse
reads a separate "-1,1" as an option. With --engine, --precision and --batch default to the
engine's; given explicitly they must match it (and the model and --small must match its sidecar).

With --backend tensorrt-rtx on a machine whose GPU (if any) cannot run TensorRT-RTX engines, the
real engine is still built (and cross-checked against the reference), but the numbers come from
the reference backend's build of the same network: the first line and the report say so.
"""  # noqa: E501 - --help prints this verbatim (RawDescriptionHelpFormatter): one example command a line

from __future__ import annotations

import argparse

from trtbuild._moved import moved_attributes

from .build import (backend_and_model, check_target_option, quant_from_args, quantization_line, resolve_cli_model,
                    weights_usage_line)
from .options import (add_backend_options, add_input_options, add_model_command, add_output_files,
                      add_tolerance_options, positive_int)

DEFAULT_DISTRIBUTION = "uniform"
DEFAULT_SCALE = 1e4


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``parity``."""
    p = add_model_command(subparsers, "parity", "compare an engine's outputs with PyTorch (layerwise optional)",
                          __doc__)
    add_backend_options(p, rtx=True)
    inputs = add_input_options(p, distribution_help="uniform in [LO,HI] (default); normal (mean (LO+HI)/2, std "
                                                    "(HI-LO)/2); large (uniform x --scale)",
                               scale_help=f"magnitude factor (> 0) of --distribution large (default {DEFAULT_SCALE:g})")
    inputs.add_argument("--batch", type=positive_int, default=None,
                        help="batch size of the inputs (default: --input's batch for a network function, else 1, or "
                             "the --engine's own batch)")
    tolerances = add_tolerance_options(p, atol_help="absolute tolerance (finite, >= 0)",
                                       rtol_help="relative tolerance (finite, >= 0)")
    tolerances.add_argument("--allow-nonfinite", action="store_true",
                            help="let NaN/Inf engine outputs pass where PyTorch has the same (by default they fail)")
    add_output_files(p, json="write the report as JSON", html="write an HTML report with error histograms",
                     png='write the report as PNG (needs matplotlib: pip install "trtbuild[report]")')
    p.add_argument("--engine", default=None, help="engine file to check (default: build one in memory)")
    p.add_argument("--layerwise", action="store_true",
                   help="also compare every tensor of the model's layer_map with the PyTorch module outputs "
                        "(--against onnxruntime always compares every layer)")
    p.add_argument("--layerwise-via", choices=("debug", "unfused", "outputs"), default="debug",
                   help="how --layerwise reads the layer tensors: debug (default) marks them as debug tensors "
                        "(mark_debug) read by an IDebugListener, so the engine checked has only the model outputs, "
                        "like the deployed one; unfused marks the unfused tensors instead "
                        "(mark_unfused_tensors_as_debug_tensors: fusions untouched, tensors fused away are listed); "
                        "outputs marks them as extra engine outputs (blocks fusions on TensorRT)")
    p.add_argument("--against", choices=("pytorch", "onnxruntime"), default="pytorch",
                   help="pytorch (default) or onnxruntime (layerwise, reference backend vs the ONNX export)")
    p.set_defaults(func=run)
    return p


def write_outputs(report, args) -> None:
    """Write --json / --html / --png files requested on the command line."""
    if args.json:
        report.to_json(args.json)
        print(f"wrote {args.json}")
    if args.html:
        report.to_html(args.html)
        print(f"wrote {args.html}")
    if args.png:
        if not report.to_png(args.png):
            from trtbuild.parity.report import PNG_REQUIREMENT

            raise RuntimeError(f"cannot write {args.png}: {PNG_REQUIREMENT}")
        print(f"wrote {args.png}")


def check_report_paths(args) -> None:
    """Refuse --json/--html/--png paths that name an input (--engine, its sidecar, --weights), each
    other or an existing file of another kind, before the comparison runs."""
    from trtbuild.files.outputs import HTML, PARITY_REPORT, PNG

    from ._outputs import check_paths, engine_inputs

    check_paths(args, [("--json", args.json, PARITY_REPORT), ("--html", args.html, HTML), ("--png", args.png, PNG)],
                [*engine_inputs("--engine", args.engine), ("--weights", args.weights)])


#: parity options that only apply to the PyTorch comparison: (attribute, flag).
_PYTORCH_ONLY = (("engine", "--engine"), ("range", "--range"), ("distribution", "--distribution"),
                 ("scale", "--scale"), ("batch", "--batch"), ("json", "--json"), ("html", "--html"),
                 ("png", "--png"))


def check_onnxruntime_options(args) -> None:
    """Raise ValueError naming the options given that --against onnxruntime cannot honour."""
    given = [flag for attr, flag in _PYTORCH_ONLY if getattr(args, attr, None) is not None]
    if getattr(args, "allow_nonfinite", False):
        given.append("--allow-nonfinite")
    if getattr(args, "backend", None) == "tensorrt":
        given.append("--backend tensorrt")
    if given:
        raise ValueError(f"--against onnxruntime runs the reference backend and onnxruntime on the ONNX export, layer "
                         f"by layer, with seeded inputs in the model's value range and batch 1; it cannot honour "
                         f"{', '.join(given)} (drop them, or compare against pytorch)")


def _against_onnxruntime(args, spec) -> int:
    try:
        from trtbuild.onnx_export import format_rows, layerwise_against_onnxruntime
    except ImportError as e:
        raise RuntimeError(f"--against onnxruntime needs trtbuild.onnx_export and onnxruntime ({e})") from None
    precision = args.precision or "fp32"
    rows = layerwise_against_onnxruntime(spec.name, weights=args.weights, precision=precision, small=args.small,
                                         seed=args.seed)
    print(format_rows(rows))
    from trtbuild.parity import default_tolerances

    d_atol, d_rtol = default_tolerances(precision)
    atol = d_atol if args.atol is None else args.atol  # absolute here: the rows carry no |expected| scale
    rtol = d_rtol if args.rtol is None else args.rtol
    checked = [r for r in rows if r["tensor"] in spec.output_names]
    if not checked:
        raise RuntimeError(f"the onnxruntime comparison returned no row for the outputs {spec.output_names}")
    # conservative: with only max errors per tensor, a pass needs max_abs <= atol or max_rel <= rtol
    failing = [r["tensor"] for r in checked if not (r["max_abs_err"] <= atol or r["max_rel_err"] <= rtol)]
    print(f"result: {'FAIL (outputs ' + ', '.join(failing) + ')' if failing else 'PASS'} "
          f"(onnxruntime vs the reference backend, {len(rows)} tensors compared, outputs checked with "
          f"atol={atol:g} (absolute) or rtol={rtol:g})")
    return 1 if failing else 0


def run(args) -> int:
    """Run the comparison, print the table, write files; 0 if parity holds."""
    from trtbuild.parity import check_model_parity
    from trtbuild.parity.report import PNG_REQUIREMENT, png_available

    check_report_paths(args)
    if args.against == "onnxruntime":
        check_onnxruntime_options(args)
        print("backend: reference (PyTorch) — compared with onnxruntime running the ONNX export of the same network")
        return _against_onnxruntime(args, resolve_cli_model(args))
    if args.png and not png_available():  # fail before the comparison, not after it
        raise RuntimeError(f"cannot write {args.png}: {PNG_REQUIREMENT}; or use --html, whose charts need nothing")
    if args.scale is not None and args.distribution != "large":
        raise ValueError("--scale only applies with --distribution large")
    trt, spec = backend_and_model(args)
    if args.engine is not None and not spec.output_names:  # a network function without --output: the engine's
        from trtbuild.engine import read_sidecar

        side = read_sidecar(args.engine)
        spec.output_names.extend(t.name for t in (side.build.outputs if side is not None else None) or [])
    targets = check_target_option(trt, args.target, args.cross_check)
    if args.engine is not None and (args.cross_check or args.target):
        raise ValueError("--cross-check and --target apply to an engine built in memory; a saved engine was built "
                         "already (omit --engine, or use `trtbuild build --cross-check`)")
    trt, stand_in, cross_check = _rtx_stand_in(args, trt, targets)
    quant = None
    if args.engine is None:
        quant = quant_from_args(args, spec, args.precision or "fp32")
    elif args.calibration or args.keep:
        raise ValueError(f"--calibration and --keep apply to an engine built in memory; {args.engine} records its "
                         "own quantization in its sidecar (omit them, or omit --engine)")
    batch, batch_source = engine_batch(args)
    if args.engine is not None and not args.layerwise and (count := _profile_count(args.engine)) > 1:
        for k in range(count):  # the files each profile writes, refused like the ones named, before any work
            check_report_paths(_for_profile(args, k))
        return _each_profile(args, spec, trt, batch)
    report = check_model_parity(spec, trt, weights=args.weights, engine=args.engine, precision=args.precision,
                                small=args.small, parity=parity_options(args), batch=batch, batch_source=batch_source,
                                targets=targets, cross_check=cross_check, quant=quant)
    if stand_in:
        report.meta.update(stand_in)
    if report.meta.get("cross_check"):
        from trtbuild.engine.cross_check import CrossCheckResult

        print(CrossCheckResult(**report.meta["cross_check"]).summary(), flush=True)
    if report.meta.get("weights"):
        print(f"pytorch model weights: {report.meta['weights']}")
    if report.meta.get("quantization"):
        source = " (from the sidecar)" if args.engine is not None else ""
        print(f"quantization{source}: {quantization_line(report.meta['quantization'])}")
    print(weights_usage_line(report.meta, getattr(args, "verbose", False)))
    for name, count in (report.meta.get("nonfinite_inputs") or {}).items():
        print(f"inputs: {count} values of '{name}' are NaN/Inf in the engine's input type (the range times --scale "
              "does not fit it)")
    print(report.to_table())
    write_outputs(report, args)
    return 0 if report.passed else 1


def _profile_count(engine_path) -> int:
    from trtbuild.engine import read_sidecar

    side = read_sidecar(engine_path)
    return len(side.build.all_profiles) if side is not None else 1


def _each_profile(args, spec, trt, batch) -> int:
    """Parity of an engine with several optimization profiles: a table per profile (at its opt
    shapes, or --batch in the profiles that take it); --json/--html/--png get one file per profile,
    named <stem>.profile<k><suffix>. Exit status 0 only if every profile passes."""
    from trtbuild.parity import check_model_parity_profiles

    reports = check_model_parity_profiles(spec, trt, engine=args.engine, precision=args.precision, small=args.small,
                                          parity=parity_options(args), batch=batch, weights=args.weights)
    if reports and reports[0].meta.get("weights"):
        print(f"pytorch model weights: {reports[0].meta['weights']}")
    for report in reports:
        k = report.meta["profile"]
        print(f"optimization profile {k}: {'PASS' if report.passed else 'FAIL'}")
        print(report.to_table())
        write_outputs(report, _for_profile(args, k))
    return 0 if all(r.passed for r in reports) else 1


def _for_profile(args, k: int):
    """A copy of `args` whose --json/--html/--png name profile k's files: <stem>.profile<k><suffix>."""
    import copy
    from pathlib import Path

    each = copy.copy(args)
    for option in ("json", "html", "png"):
        path = getattr(args, option)
        if path:
            setattr(each, option, str(Path(path).with_name(f"{Path(path).stem}.profile{k}{Path(path).suffix}")))
    return each


def parity_options(args):
    """The ParityOptions of --seed, --range, --distribution, --scale, --atol, --rtol, --allow-nonfinite,
    --layerwise and --layerwise-via."""
    from trtbuild.parity.options import ParityOptions

    return ParityOptions(seed=args.seed, value_range=args.range, distribution=args.distribution or DEFAULT_DISTRIBUTION,
                         large_scale=DEFAULT_SCALE if args.scale is None else args.scale, atol=args.atol,
                         rtol=args.rtol, allow_nonfinite=args.allow_nonfinite, layerwise=args.layerwise,
                         layerwise_via=LAYERWISE_VIA_OPTION[args.layerwise_via])


def engine_batch(args) -> tuple[int | None, str]:
    """(the batch to check, what asked for it): --batch; else, with --engine, the batch --input gives
    a network function, so that a dynamic-batch engine runs it (and an engine that cannot take it is
    refused naming --input); else None (an engine built in memory takes --input's batch itself)."""
    if args.batch is not None or args.engine is None or args.input is None:
        return args.batch, "--batch"
    from trtbuild.models.user import parse_input

    return parse_input(args.input)[1][0], f"--input {args.input}"


#: --layerwise-via value -> check_model_parity's layerwise_via
LAYERWISE_VIA_OPTION = {"debug": "debug tensors", "unfused": "unfused debug tensors", "outputs": "outputs"}


def _rtx_stand_in(args, trt, targets):
    """(trt to take the numbers from, meta to add to the report, cross_check).

    On TensorRT-RTX where no GPU can run its engines: the numbers come from the reference backend,
    built with the cross-check, which builds the real TensorRT-RTX engine from the very same network
    (weights, batch, extra outputs) and requires it to agree. The first lines say so. Elsewhere:
    (trt, None, --cross-check)."""
    from trtbuild.backend import is_rtx, load_trt
    from trtbuild.engine.rtx import can_run_here

    if not is_rtx(trt):
        return trt, None, args.cross_check
    runs, why = can_run_here(trt, targets)
    if runs:
        return trt, None, args.cross_check
    if args.engine is not None:
        raise ValueError(f"--engine {args.engine}: TensorRT-RTX engines cannot run here ({why}); build and check one "
                         "in memory by leaving out --engine, or run this on a GPU among its targets")
    print(f"parity: {why}, so TensorRT-RTX engines cannot run here; the real TensorRT-RTX engine is "
          "built from the same network and cross-checked, and the NUMBERS BELOW COME FROM THE REFERENCE "
          "BACKEND's build", flush=True)
    return load_trt("reference"), {
        "backend": f"reference (standing in: the TensorRT-RTX {trt.__version__} engine was built, not run)"}, True


#: the argparse types that moved to trtbuild.cli.options
__getattr__ = moved_attributes(__name__, "trtbuild.cli.options", [
    "number_type", "positive_float", "range_type", "tolerance"])

"""``trtbuild debug precision``: find the PyTorch modules that must stay fp32 for parity to pass.

    trtbuild debug precision vgg16_ssd --small --precision fp16
    trtbuild debug precision net.py:SPEC --precision int8 --calibration calib.json --json search.json
    trtbuild debug precision resnet18 --small --precision fp8 --calibration calib.json --max-builds 12

Candidates are the modules the model's builder consults the plan about (what --keep can keep), in
network order. Parity runs with nothing kept, then with every candidate kept, then bisects (the
shortest passing prefix, then the shortest passing suffix of it) and prunes each remaining module
whose removal still passes. Each trial builds the same network with the same weights, calibration
and inputs; only the modules kept in fp32 (with casts) differ. Tolerances, inputs and seeds are
parity's. Prints each trial, then the set as a --keep option for `trtbuild build`. Exit code 0 when
a passing set was found (or none is needed), 1 when even keeping every candidate fails.
"""

from __future__ import annotations

import argparse

from .build import backend_and_model
from .options import (add_backend_options, add_input_options, add_model_argument, add_model_options, add_output_files,
                      add_precision_options, add_tolerance_options, add_user_model_options, apply_conventions,
                      positive_int)
from .parity import DEFAULT_DISTRIBUTION, DEFAULT_SCALE

#: kept sets longer than this are shown as "first, second, …, last (N modules)"
SHOWN = 4


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``debug`` and its ``precision`` subcommand."""
    p = subparsers.add_parser("debug", help="debugging searches: `debug precision` finds the layers to keep fp32",
                              description="Debugging searches built on parity.")
    sub = p.add_subparsers(dest="debug_command", metavar="SEARCH", required=True)
    q = sub.add_parser("precision", help="find the PyTorch modules that must stay fp32 for parity to pass",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_argument(q)
    add_model_options(q, weights_help="weight file (default: the seeded PyTorch model's weights)",
                      small_help="the small variant of the model", option_help="a build option of the model")
    add_precision_options(q, ("fp16", "bf16", "int8", "fp8"), required=True,
                          help="the precision to debug (int8/fp8 need --calibration)",
                          calibration_help="calibration file of this model (`trtbuild calibrate`); required for "
                                           "int8/fp8")
    add_user_model_options(q)
    add_backend_options(q)
    add_input_options(q, distribution_help="input distribution, as in `trtbuild parity`",
                      scale_help="magnitude factor of --distribution large")
    add_tolerance_options(q, atol_help="absolute tolerance (default: parity's)",
                          rtol_help="relative tolerance (default: parity's)")
    add_output_files(q, json="write the search (every trial) as JSON")
    q.add_argument("--max-builds", type=positive_int, default=64, metavar="N",
                   help="stop after N parity builds (>= 2) with the smallest passing set found (default 64)")
    q.set_defaults(func=run)
    apply_conventions(sub)
    return p


def kept_text(kept) -> str:
    """The kept modules, shortened when there are many."""
    if not kept:
        return "nothing"
    if len(kept) <= SHOWN:
        return ", ".join(kept)
    return f"{kept[0]}, {kept[1]}, …, {kept[-1]} ({len(kept)} modules)"


def _refuse_rtx_without_gpu(trt) -> None:
    from trtbuild.backend import is_rtx
    from trtbuild.engine.rtx import can_run_here

    if is_rtx(trt):
        runs, why = can_run_here(trt)
        if not runs:
            raise ValueError(f"debug precision runs every trial's engine, and TensorRT-RTX engines cannot run here "
                             f"({why}); use --backend reference, or run this on a GPU TensorRT-RTX supports")


def run(args) -> int:
    """Run the search, print each trial and the result, write --json."""
    from trtbuild.debug import search_precision
    from trtbuild.debug.precision import describe
    from trtbuild.files.outputs import JSON
    from trtbuild.parity.options import ParityOptions

    from ._outputs import check_paths

    check_paths(args, [("--json", args.json, JSON)], [("--weights", args.weights),
                                                       ("--calibration", args.calibration)])
    if args.scale is not None and args.distribution != "large":
        raise ValueError("--scale only applies with --distribution large")
    trt, spec = backend_and_model(args)
    _refuse_rtx_without_gpu(trt)

    def show(number, trial):
        kept = "nothing" if not trial.kept else kept_text(list(trial.kept))
        print(f"trial {number}: kept {kept} -> {describe(trial.report)}", flush=True)

    print(f"debug precision: {spec.name}{' (small)' if args.small else ''} in {args.precision}, keeping modules in "
          f"fp32 (at most {args.max_builds} builds)", flush=True)
    parity = ParityOptions(seed=args.seed, value_range=args.range,
                           distribution=args.distribution or DEFAULT_DISTRIBUTION,
                           large_scale=DEFAULT_SCALE if args.scale is None else args.scale, atol=args.atol,
                           rtol=args.rtol)
    result = search_precision(spec, trt, args.precision, calibration=args.calibration, weights=args.weights,
                              small=args.small, parity=parity, max_builds=args.max_builds, on_trial=show)
    print(f"candidates ({len(result.candidates)}, network order): {', '.join(result.candidates)}")
    print(f"before (nothing kept): {describe(result.before)}")
    if result.kept:
        print(f"after (kept in fp32: {kept_text(result.kept)}): {describe(result.after)}")
    print(result.summary())
    if result.keep_option:
        print(f"for trtbuild build: --keep {result.keep_option}")
    if args.json:
        result.to_json(args.json)
        print(f"wrote {args.json}")
    return 0

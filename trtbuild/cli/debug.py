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

from .build import MODEL_HELP, add_user_model_options, backend_and_model
from .parity import (
    DEFAULT_DISTRIBUTION,
    DEFAULT_SCALE,
    positive_float,
    positive_int,
    range_type,
    tolerance,
)

#: kept sets longer than this are shown as "first, second, …, last (N modules)"
SHOWN = 4


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``debug`` and its ``precision`` subcommand."""
    from . import add_backend_option
    from ._conventions import apply_conventions

    p = subparsers.add_parser("debug", help="debugging searches: `debug precision` finds the layers to keep fp32",
                              description="Debugging searches built on parity.")
    sub = p.add_subparsers(dest="debug_command", metavar="SEARCH", required=True)
    q = sub.add_parser("precision", help="find the PyTorch modules that must stay fp32 for parity to pass",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("model", help=MODEL_HELP)
    q.add_argument("--precision", required=True, choices=("fp16", "bf16", "int8", "fp8"),
                   help="the precision to debug (int8/fp8 need --calibration)")
    q.add_argument("--calibration", default=None, metavar="CALIB.json",
                   help="calibration file of this model (`trtbuild calibrate`); required for int8/fp8")
    q.add_argument("--weights", default=None, help="weight file (default: the seeded PyTorch model's weights)")
    q.add_argument("--small", action="store_true", help="the small variant of the model")
    q.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a build option of the model")
    q.add_argument("--atol", type=tolerance, default=None, help="absolute tolerance (default: parity's)")
    q.add_argument("--rtol", type=tolerance, default=None, help="relative tolerance (default: parity's)")
    q.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    q.add_argument("--range", type=range_type, default=None, metavar="LO,HI",
                   help="input value range (default: the model's); write --range=-1,1 when LO is negative")
    q.add_argument("--distribution", choices=("uniform", "normal", "large"), default=None,
                   help="input distribution, as in `trtbuild parity`")
    q.add_argument("--scale", type=positive_float, default=None, help="magnitude factor of --distribution large")
    q.add_argument("--max-builds", type=positive_int, default=64, metavar="N",
                   help="stop after N parity builds (>= 2) with the smallest passing set found (default 64)")
    q.add_argument("--json", default=None, metavar="PATH", help="write the search (every trial) as JSON")
    add_user_model_options(q)
    add_backend_option(q)
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
    result = search_precision(spec, trt, args.precision, calibration=args.calibration, weights=args.weights,
                              small=args.small, seed=args.seed, value_range=args.range,
                              distribution=args.distribution or DEFAULT_DISTRIBUTION,
                              large_scale=DEFAULT_SCALE if args.scale is None else args.scale, atol=args.atol,
                              rtol=args.rtol, max_builds=args.max_builds, on_trial=show)
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

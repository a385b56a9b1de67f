"""``trtbuild parity``: compare an engine with PyTorch (or the reference with onnxruntime).

    trtbuild parity alexnet                          # build in memory, compare with PyTorch
    trtbuild parity alexnet --engine engines/alexnet-fp32.engine --json parity.json --html parity.html
    trtbuild parity resnet50 --small --precision fp16 --layerwise      # per-layer errors, first jump
    trtbuild parity resnet18 --small --range -3,3 --distribution normal --seed 1
    trtbuild parity resnet18 --small --against onnxruntime

An element fails only if |actual - expected| > atol AND > rtol * |expected|. Default tolerances
depend on the precision; the default atol is relative to each tensor's largest |expected|, an
explicit --atol is absolute. Exit code 0 if every output passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re

from .build import add_model_command, backend_and_model, parse_range


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``parity``."""
    p = add_model_command(subparsers, "parity", "compare an engine's outputs with PyTorch (layerwise optional)",
                          __doc__)
    p.add_argument("--engine", default=None, help="engine file to check (default: build one in memory)")
    p.add_argument("--layerwise", action="store_true",
                   help="also compare every tensor of the model's layer_map with the PyTorch module outputs")
    p.add_argument("--range", default=None, metavar="LO,HI", help="input value range (default: the model's)")
    p.add_argument("--distribution", choices=("uniform", "normal", "large"), default="uniform",
                   help="uniform in [LO,HI]; normal (mean (LO+HI)/2, std (HI-LO)/2); large (uniform x --scale)")
    p.add_argument("--scale", type=float, default=1e4, help="magnitude factor of --distribution large")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--batch", type=int, default=1, help="batch size of the inputs (default 1)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance")
    p.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON")
    p.add_argument("--html", default=None, metavar="PATH", help="write an HTML report with error histograms")
    p.add_argument("--png", default=None, metavar="PATH", help="write error histograms as PNG (needs matplotlib)")
    p.add_argument("--against", choices=("pytorch", "onnxruntime"), default="pytorch",
                   help="pytorch (default) or onnxruntime (layerwise, reference backend vs the ONNX export)")
    p.set_defaults(func=run)
    allow_negative_ranges(p)
    return p


def allow_negative_ranges(parser: argparse.ArgumentParser) -> None:
    """Let `--range -1,1` parse (argparse would take "-1,1" for an option): treat any
    "-<digits, dots, commas, exponents>" word as a value, as it does for plain negative numbers."""
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(r"^-\d[\d.,eE+-]*$|^-\.\d[\d.,eE+-]*$")


def write_outputs(report, args) -> None:
    """Write --json / --html / --png files requested on the command line."""
    if args.json:
        report.to_json(args.json)
        print(f"wrote {args.json}")
    if args.html:
        report.to_html(args.html)
        print(f"wrote {args.html}")
    if args.png:
        print(f"wrote {args.png}" if report.to_png(args.png) else f"not writing {args.png}: matplotlib is not installed")


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
    from trtbuild.engine import get_spec
    from trtbuild.parity import check_model_parity

    if args.against == "onnxruntime":
        from trtbuild.backend import load_trt

        load_trt("reference")
        print("backend: reference (PyTorch) — compared with onnxruntime running the ONNX export of the same network")
        return _against_onnxruntime(args, get_spec(args.model))
    trt, spec = backend_and_model(args)
    if args.batch < 1:
        raise ValueError(f"--batch must be >= 1, got {args.batch}")
    report = check_model_parity(spec.name, trt, weights=args.weights, engine=args.engine, precision=args.precision,
                                small=args.small, seed=args.seed, value_range=parse_range(args.range),
                                distribution=args.distribution, large_scale=args.scale, batch=args.batch,
                                atol=args.atol, rtol=args.rtol, layerwise=args.layerwise)
    print(report.to_table())
    write_outputs(report, args)
    return 0 if report.passed else 1

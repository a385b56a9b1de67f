"""``trtbuild export-weights``: dump a registry model's weights, or convert a weight file.

    trtbuild export-weights --model resnet50 --out weights/resnet50.wts [--seed 0]
    trtbuild export-weights --checkpoint model.pth --out model.wts
    trtbuild export-weights --checkpoint model.wts --out model.bin --format safetensors
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trtbuild.models import registry
from trtbuild.weights import FORMATS, WeightsError, convert_weights, export_weights
from trtbuild.weights.atomic import ensure_parent_dir

NAME = "export-weights"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export-weights`` sub-command on an argparse ``subparsers`` object."""
    parser = subparsers.add_parser(
        NAME,
        help="write a model's weights (or convert a weight file) to .wts, .safetensors or .pt",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="model name from trtbuild.models.registry")
    source.add_argument("--checkpoint", type=Path,
                        help="existing weight file (.wts, .safetensors, .pt/.pth) to convert")
    parser.add_argument("--out", type=Path, required=True,
                        help="output file; its extension picks the format unless --format is given "
                             "(missing parent directories are created)")
    parser.add_argument("--small", action="store_true",
                        help="with --model: the small variant (the one `build/parity --small` use)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed for the model's random initialisation (with --model; default 0)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="output format (default: from the --out extension)")
    parser.add_argument("--allow-nonfinite", action="store_true",
                        help="accept NaN/Inf values instead of failing")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute the command; print a summary and notes. Returns 0 on success, 1 or 2 on errors."""
    try:
        check_weights_paths(args)
        if args.checkpoint is not None:
            if args.seed is not None or args.small:
                return _fail("--seed and --small only apply with --model", code=2)
            ensure_parent_dir(args.out)
            report = convert_weights(args.checkpoint, args.out, args.format,
                                     allow_nonfinite=args.allow_nonfinite)
        else:
            try:
                model = registry.get_torch_model(args.model, 0 if args.seed is None else args.seed, small=args.small)
            except (KeyError, ValueError) as exc:
                return _fail(f"cannot build model {args.model!r}: {exc}")
            ensure_parent_dir(args.out)
            report = export_weights(model, args.out, args.format,
                                    allow_nonfinite=args.allow_nonfinite)
    except (WeightsError, OSError) as exc:
        return _fail(str(exc))
    print(report.summary())
    for note in report.notes:
        print(f"note: {note}")
    return 0


def check_weights_paths(args) -> None:
    """Refuse an --out that names the --checkpoint or an existing file other than a weight file of
    the format to be written (raises OutputPathError, an OSError)."""
    from trtbuild.weights.formats import format_for_path
    from trtbuild.weights.outputs import PT, SAFETENSORS, WTS

    from ._outputs import check_paths

    kind = {"wts": WTS, "safetensors": SAFETENSORS, "pt": PT}[format_for_path(args.out, args.format)]
    check_paths(args, [("--out", args.out, kind)], [("--checkpoint", args.checkpoint)])


def _fail(message: str, code: int = 1) -> int:
    print(f"trtbuild {NAME}: error: {message}", file=sys.stderr)
    return code

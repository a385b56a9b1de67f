"""``trtbuild export-weights``: dump a model's weights, or convert a weight file.

    trtbuild export-weights resnet50 --out weights/resnet50.wts [--seed 0]    # or --model resnet50
    trtbuild export-weights net.py:make_model -o weights/net.wts              # your factory -> nn.Module
    trtbuild export-weights mypkg.nets:make_model --checkpoint ckpt.pt -o net.wts   # trained weights loaded in
    trtbuild export-weights --checkpoint model.pth --out model.wts
    trtbuild export-weights --checkpoint model.wts --out model.bin --format safetensors

MODEL is a registered model name, or FILE.py:NAME / package.module:NAME naming a factory returning
an nn.Module (called without arguments under torch.manual_seed(--seed)) or a ModelSpec. With MODEL,
--checkpoint (a state_dict: .pt/.pth, .wts, .safetensors) is loaded into the module first; every
tensor must fit the module (missing, extra or mis-shaped tensors are refused).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trtbuild.files.atomic import ensure_parent_dir
from trtbuild.models import registry
from trtbuild.weights import FORMATS, WeightsError, convert_weights, export_weights
from trtbuild.weights.errors import WeightsWriteError

from .options import add_model_options, add_output_files

NAME = "export-weights"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export-weights`` sub-command on an argparse ``subparsers`` object."""
    parser = subparsers.add_parser(
        NAME,
        help="write a model's weights (or convert a weight file) to .wts, .safetensors or .pt",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", nargs="?", default=None, metavar="MODEL",
                        help="model name, or FILE.py:FACTORY / package.module:FACTORY returning an nn.Module")
    parser.add_argument("--checkpoint", type=Path,
                        help="weight file (.wts, .safetensors, .pt/.pth): with MODEL, loaded into it; alone, "
                             "converted to --out")
    model = add_model_options(parser, weights_help=None, option_help=None,
                              small_help="with --model: the small variant (the one `build/parity --small` use)",
                              seed_help="seed for the model's random initialisation (with --model; default 0)",
                              seed_default=None)
    model.add_argument("--model", help="model name (same as MODEL)")
    add_output_files(parser, out="output file; its extension picks the format unless --format is given "
                                 "(missing parent directories are created)", out_type=Path, out_required=True)
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="output format (default: from the --out extension)")
    parser.add_argument("--allow-nonfinite", action="store_true",
                        help="accept NaN/Inf values instead of failing")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute the command; print a summary and notes. Returns 0 on success, 1 or 2 on errors."""
    if args.source is not None and args.model is not None:
        return _fail(f"give the model once: MODEL ({args.source}) or --model ({args.model})", code=2)
    source = args.source if args.source is not None else args.model
    if source is None and args.checkpoint is None:
        return _fail("give a model (a name, FILE.py:FACTORY or module:FACTORY) or --checkpoint FILE", code=2)
    try:
        check_weights_paths(args)
        if source is None:
            if args.seed is not None or args.small:
                return _fail("--seed and --small only apply with --model", code=2)
            ensure_parent_dir(args.out, WeightsWriteError)
            report = convert_weights(args.checkpoint, args.out, args.format,
                                     allow_nonfinite=args.allow_nonfinite)
        else:
            try:
                model = _torch_model(source, 0 if args.seed is None else args.seed, args.small)
            except (KeyError, ValueError) as exc:
                return _fail(f"cannot build model {source!r}: {exc}")
            if args.checkpoint is not None:
                _load_checkpoint(model, args.checkpoint, source)
            ensure_parent_dir(args.out, WeightsWriteError)
            report = export_weights(model, args.out, args.format,
                                    allow_nonfinite=args.allow_nonfinite)
    except (WeightsError, OSError, ValueError) as exc:
        return _fail(str(exc))
    if source is not None and args.checkpoint is not None:
        print(f"loaded {args.checkpoint} into {source}")
    print(report.summary())
    for note in report.notes:
        print(f"note: {note}")
    return 0


def _torch_model(source: str, seed: int, small: bool):
    """The nn.Module of a registry model or of a user factory / ModelSpec reference (eval mode)."""
    from trtbuild.models.user import is_user_reference, load_object, module_factory

    if not is_user_reference(source):
        return registry.get_torch_model(source, seed, small=small)
    obj, where, _ = load_object(source)
    return module_factory(obj, where, option="MODEL")(seed, small)


def _load_checkpoint(model, path: Path, source: str) -> None:
    """Load the state_dict in `path` into `model`; ValueError if a tensor is missing, extra or mis-shaped."""
    from trtbuild.parity import load_weights_into
    from trtbuild.weights import WeightMap

    wm = WeightMap.load(path)
    state = model.state_dict()
    extra = [k for k in wm.keys() if k not in state]
    if extra:
        raise ValueError(f"checkpoint {path} has {len(extra)} tensors that {source} lacks, e.g. {extra[:5]} "
                         "(is it the checkpoint of another model?)")
    load_weights_into(model, wm)


def check_weights_paths(args) -> None:
    """Refuse an --out that names the --checkpoint or an existing file other than a weight file of
    the format to be written (raises OutputPathError, an OSError)."""
    from trtbuild.weights.formats import format_for_path
    from trtbuild.files.outputs import PT, SAFETENSORS, WTS

    from ._outputs import check_paths

    kind = {"wts": WTS, "safetensors": SAFETENSORS, "pt": PT}[format_for_path(args.out, args.format)]
    check_paths(args, [("--out", args.out, kind)], [("--checkpoint", args.checkpoint)])


def _fail(message: str, code: int = 1) -> int:
    print(f"trtbuild {NAME}: error: {message}", file=sys.stderr)
    return code

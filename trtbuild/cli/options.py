"""The options that several trtbuild commands share, each set added as one argument group, and the
conventions every command follows; the commands add only what is theirs.

    p = subparsers.add_parser("build", ...)
    add_model_argument(p)
    add_model_options(p, seed_help="seed of the PyTorch model when exporting weights (default 0)")
    add_precision_options(p, QUANTIZED_PRECISIONS)
    add_backend_options(p, rtx=True)

A shared option has one flag, type and default everywhere; its help text may say what it means for
the command (--seed seeds the model in build, the inputs in parity), so the functions take the
help of such options as arguments. The groups make ``--help`` read by topic: model, precision,
network function, backend, inputs, tolerances, output files.

Conventions, applied to every command by :func:`apply_conventions` (make_parser calls it):

* ``-o`` is the short form of ``--out``;
* ``-v``/``--verbose`` is accepted after the subcommand too (``trtbuild build alexnet -v``);
* an empty value (``--out ""``, ``--weights ""``, an empty MODEL...) is refused by argparse in one
  sentence naming the option, before anything runs (an empty path names no file).
"""

from __future__ import annotations

import argparse
import math

from trtbuild.backend import CHOICES

__all__ = [
    "MODEL_HELP", "PRECISIONS", "QUANTIZED_PRECISIONS", "add_backend_options", "add_input_options",
    "add_model_argument", "add_model_command", "add_model_options", "add_output_files", "add_precision_options",
    "add_progress_option", "add_tolerance_options", "add_user_model_options", "apply_conventions", "number_type",
    "parse_range", "positive_float", "positive_int", "range_type", "tolerance",
]

MODEL_HELP = ("model: a name (see `trtbuild models`), a file net.py[:NAME] or package.module:NAME naming a ModelSpec "
              "or a network function (network, weights, input) -> {name: ITensor}")
WEIGHTS_HELP = ("weight file (.wts/.safetensors/.pt); default weights/<model>[-small].wts, exported from the seeded "
                "PyTorch model if missing")
SMALL_HELP = "the small variant of the model (fast tests)"
OPTION_HELP = "a build option of the model (see `trtbuild models`), e.g. --option involution_impl=composed"
PRECISIONS = ("fp32", "fp16", "bf16")
QUANTIZED_PRECISIONS = PRECISIONS + ("int8", "fp8")
PRECISION_HELP = "type the network computes in (default fp32); set by the input type, never by builder flags"
QUANTIZED_PRECISION_HELP = (PRECISION_HELP
                            + "; int8/fp8: explicit quantization (Q/DQ) from --calibration, other layers fp32")
CALIBRATION_HELP = ("calibration file of this model (`trtbuild calibrate`); required for --precision int8/fp8 and "
                    "refused otherwise")
KEEP_HELP = ("repeatable: PyTorch module names or globs kept out of quantization (int8/fp8) or out of fp16/bf16, "
             "with casts, e.g. --keep fp32:conv4_3_norm,layer4.* --keep fp16:fc")
BACKEND_HELP = ("reference (PyTorch), tensorrt (TensorRT 10/11), tensorrt-rtx (NVIDIA TensorRT for RTX; builds "
                "without a GPU), or auto (default: tensorrt where it can run, else reference; or env TRTBUILD_BACKEND)")
DISTRIBUTIONS = ("uniform", "normal", "large")
RANGE_HELP = "input value range (default: the model's); write --range=-1,1 when LO is negative"
ENGINE_OUT_HELP = ("engine path (default engines/<model>[-small]-<precision>.engine, "
                   "engines/<model>[-small]-<precision>-rtx.engine with --backend tensorrt-rtx)")


# ------------------------------------------------------------------------------------ argparse types


def number_type(cast, accept, rule: str, expected: str = "a number"):
    """An argparse type: `cast(text)` (else "expected <expected>, got 'text'"), then `accept(value)`
    (else "<rule>, got <value>"). The CLI's bounded numbers (--scale, --batch, --percentile, ports)."""
    def parse(text: str):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text}")
        return value

    return parse


#: argparse type of --scale: a finite float > 0.
positive_float = number_type(float, lambda v: 0 < v < float("inf"), "must be a positive finite number")
#: argparse type of --batch and other counts: an integer >= 1.
positive_int = number_type(int, lambda v: v >= 1, "must be >= 1", "an integer")
non_negative_int = number_type(int, lambda v: v >= 0, "must be >= 0", "an integer")


def tolerance(text: str) -> float:
    """argparse type of --atol / --rtol: a finite float >= 0."""
    from trtbuild.parity.compare import check_tolerance

    try:
        return check_tolerance("the tolerance", text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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


def range_type(text: str) -> tuple[float, float]:
    """argparse type of --range: "LO,HI" -> (lo, hi) with lo < hi."""
    try:
        return parse_range(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# ---------------------------------------------------------------------------------- argument groups


def add_model_argument(p: argparse.ArgumentParser, help: str = MODEL_HELP) -> None:  # noqa: A002 - argparse's keyword
    """The MODEL positional: a registry name, a file or a module (trtbuild.models.user)."""
    p.add_argument("model", help=help)


def add_model_options(p: argparse.ArgumentParser, *, weights_help: str | None = WEIGHTS_HELP, weights_type=None,
                      small_help: str | None = SMALL_HELP, option_help: str | None = OPTION_HELP,
                      seed_help: str | None = None, seed_default: int | None = 0):
    """Group "model": --weights, --small, --option and --seed, each only where its help is given."""
    g = p.add_argument_group("model")
    if weights_help is not None:
        g.add_argument("--weights", type=weights_type, default=None, help=weights_help)
    if small_help is not None:
        g.add_argument("--small", action="store_true", help=small_help)
    if option_help is not None:
        g.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help=option_help)
    if seed_help is not None:
        g.add_argument("--seed", type=int, default=seed_default, help=seed_help)
    return g


def add_precision_options(p: argparse.ArgumentParser, choices=PRECISIONS, *,
                          help: str | None = None,  # noqa: A002 - argparse's keyword
                          default: str | None = None, required: bool = False,
                          calibration_help: str | None = None, keep_help: str | None = None):
    """Group "precision": --precision (help defaults to build's for `choices`), --calibration and
    --keep where their help is given."""
    default_help = QUANTIZED_PRECISION_HELP if "int8" in choices else PRECISION_HELP
    g = p.add_argument_group("precision")
    g.add_argument("--precision", choices=choices, default=default, required=required,
                   help=default_help if help is None else help)
    if calibration_help is not None:
        g.add_argument("--calibration", default=None, metavar="CALIB.json", help=calibration_help)
    if keep_help is not None:
        g.add_argument("--keep", action="append", default=[], metavar="fp32|fp16:MODULES", help=keep_help)
    return g


def add_user_model_options(p: argparse.ArgumentParser):
    """Group "network function": what a ModelSpec would carry, for a plain network function given as MODEL."""
    g = p.add_argument_group("network function", "when MODEL names a network function instead of a ModelSpec")
    g.add_argument("--input", default=None, metavar="NAME:SHAPE",
                   help="network function only: input name and shape, batch first, e.g. input:1x3x224x224")
    g.add_argument("--torch", default=None, metavar="FILE.py:FACTORY",
                   help="network function only: factory returning the PyTorch nn.Module (FILE.py:NAME or "
                        "module:NAME), for exporting seeded weights and for parity")
    g.add_argument("--output", action="append", default=None, metavar="NAME",
                   help="network function only (repeatable): output names in the order of the torch forward's "
                        "outputs (default: the keys the function returns)")
    return g


def add_backend_options(p: argparse.ArgumentParser, rtx: bool = False):
    """Group "backend": --backend, and with `rtx` TensorRT-RTX's --target and --cross-check."""
    g = p.add_argument_group("backend")
    g.add_argument("--backend", choices=CHOICES, default=None, help=BACKEND_HELP)
    if rtx:
        g.add_argument("--target", default=None, metavar="SM,...",
                       help="--backend tensorrt-rtx only: compute capabilities the engine is built for, e.g. "
                            "sm86,sm89,sm120 (default: NVIDIA's portable set sm86,sm89,sm120; 'current' = this GPU)")
        g.add_argument("--cross-check", action="store_true",
                       help="also build the network with the reference and TensorRT-RTX and fail unless they agree "
                            "on acceptance and every tensor's name, shape and dtype")
    return g


def add_input_options(p: argparse.ArgumentParser, *, distribution_help: str, scale_help: str,
                      seed_help: str = "seed of the random inputs"):
    """Group "inputs": the random inputs parity feeds the engine (--range, --distribution, --scale, --seed)."""
    g = p.add_argument_group("inputs")
    g.add_argument("--range", type=range_type, default=None, metavar="LO,HI", help=RANGE_HELP)
    g.add_argument("--distribution", choices=DISTRIBUTIONS, default=None, help=distribution_help)
    g.add_argument("--scale", type=positive_float, default=None, help=scale_help)
    g.add_argument("--seed", type=int, default=0, help=seed_help)
    return g


def add_tolerance_options(p: argparse.ArgumentParser, *, atol_help: str, rtol_help: str):
    """Group "tolerances": --atol and --rtol (finite, >= 0)."""
    g = p.add_argument_group("tolerances")
    g.add_argument("--atol", type=tolerance, default=None, help=atol_help)
    g.add_argument("--rtol", type=tolerance, default=None, help=rtol_help)
    return g


def add_output_files(p: argparse.ArgumentParser, *, out: str | None = None, out_type=None, out_required: bool = False,
                     json: str | None = None, html: str | None = None, png: str | None = None):
    """Group "output files": -o/--out, --json, --html and --png, each only where its help is given."""
    g = p.add_argument_group("output files")
    if out is not None:
        g.add_argument("--out", type=out_type, default=None, required=out_required, help=out)
    for flag, text in (("--json", json), ("--html", html), ("--png", png)):
        if text is not None:
            g.add_argument(flag, default=None, metavar="PATH", help=text)
    return g


def add_progress_option(p: argparse.ArgumentParser,
                        help: str = "no progress bars") -> None:  # noqa: A002 - argparse's keyword
    """--no-progress: no tqdm bars (logs and CI)."""
    p.add_argument("--no-progress", action="store_true", help=help)


def add_model_command(subparsers, name: str, help: str, description: str, *,  # noqa: A002 - argparse's keyword
                      weights_help: str = WEIGHTS_HELP, seed_help: str | None = None) -> argparse.ArgumentParser:
    """A subcommand on a model with the full set of model options (build, parity, serve): MODEL,
    the model, precision (int8/fp8 included), network-function and backend groups."""
    p = subparsers.add_parser(name, help=help, description=description,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_argument(p)
    add_model_options(p, weights_help=weights_help, seed_help=seed_help)
    add_precision_options(p, QUANTIZED_PRECISIONS, calibration_help=CALIBRATION_HELP, keep_help=KEEP_HELP)
    add_user_model_options(p)
    return p


# -------------------------------------------------------------------------------------- conventions


def _non_empty(convert):
    def check(text: str):
        if not text.strip():
            raise argparse.ArgumentTypeError("empty value: give a file name or value, or leave the option out")
        return convert(text) if convert is not None else text
    check.__name__ = getattr(convert, "__name__", "str")  # argparse names the type in its messages
    return check


def _alias(parser: argparse.ArgumentParser, long: str, short: str) -> None:
    action = parser._option_string_actions.get(long)
    if action is not None and short not in parser._option_string_actions:
        action.option_strings.insert(0, short)
        parser._option_string_actions[short] = action


def apply_conventions(subparsers) -> None:
    """Apply the conventions of the module docstring to every parser of an argparse subparsers action."""
    for parser in subparsers.choices.values():
        _alias(parser, "--out", "-o")
        if "-v" not in parser._option_string_actions and "--verbose" not in parser._option_string_actions:
            parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                help="log INFO messages (TensorRT's included); also accepted before the command")
        for action in parser._actions:
            takes_text = (isinstance(action, (argparse._StoreAction, argparse._AppendAction))
                          and action.nargs in (None, "?"))
            if takes_text and action.choices is None:
                action.type = _non_empty(action.type)


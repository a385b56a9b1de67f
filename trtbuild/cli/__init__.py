"""`trtbuild` command line. Each command is a module in this package exposing
`add_parser(subparsers)` (which sets `func=run` via set_defaults) and `run(args) -> int`."""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

from trtbuild import __version__
from trtbuild.backend import BackendError


def _command_modules():
    """The command modules, by name: those of this package that have add_parser (options.py has none)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            if hasattr(module, "add_parser"):
                yield module


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trtbuild",
                                     description="Build TensorRT engines layer by layer from PyTorch weights.")
    parser.add_argument("--version", action="version", version=f"trtbuild {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log INFO messages (TensorRT's included)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.add_parser(sub)
    from .options import apply_conventions

    apply_conventions(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = make_parser()  # imports torch (a second or so): Ctrl-C may come here too
        args = parser.parse_args(argv)
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: TensorRT's calls raise it once they return (trtbuild.engine.interrupts)
        print("trtbuild: interrupted", file=sys.stderr)
        return 130
    except BackendError as e:
        print(f"trtbuild: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as e:
        print(f"trtbuild: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # FileNotFoundError, IsADirectoryError, PermissionError, a full disk...
        print(f"trtbuild: error: {_os_error_text(e)}", file=sys.stderr)
        return 1


def _os_error_text(e: OSError) -> str:
    """The file and the system's reason ("engines: Is a directory"); str(e) where no file is named."""
    if e.filename is None or not e.strerror:
        return str(e)
    names = str(e.filename) if e.filename2 is None else f"{e.filename} -> {e.filename2}"
    return f"{names}: {e.strerror}"


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """Deprecated: trtbuild.cli.options.add_backend_options adds --backend (in its "backend" group)."""
    import warnings

    from .options import add_backend_options

    warnings.warn("trtbuild.cli.add_backend_option is deprecated; use trtbuild.cli.options.add_backend_options",
                  DeprecationWarning, stacklevel=2)
    add_backend_options(parser)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

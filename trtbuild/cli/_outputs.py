"""The files each command reads and writes, for trtbuild.files.outputs.check_outputs.

Every command calls :func:`check_paths` at the start of its ``run``, before any work or write, so
that an output naming one of its inputs, another output or a file of another kind is refused in
one sentence and nothing the user owns is overwritten.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from trtbuild.files.outputs import ENGINE, SIDECAR, check_outputs


def _sidecar(path) -> Path:
    from trtbuild.engine import sidecar_path

    return sidecar_path(path)


def engine_outputs(option: str, path) -> list[tuple]:
    """An engine written at `path` and its sidecar `<path>.json`."""
    return [(option, path, ENGINE), (f"{option}'s sidecar", _sidecar(path), SIDECAR)] if path is not None else []


def engine_inputs(option: str, path) -> list[tuple]:
    """An engine read from `path` and its sidecar `<path>.json`."""
    return [(option, path), (f"{option}'s sidecar", _sidecar(path))] if path is not None else []


def model_file_input(args) -> Iterator[tuple]:
    """(option, path) of the model argument when it names a file (``net.py`` or ``net.py:make``), else nothing."""
    for option, path, _words in _named_model_file_input(args):
        yield option, path


def _named_model_file_input(args) -> Iterator[tuple]:
    """model_file_input plus the words messages call it: "the model file net.py (of net.py:make)"
    (or "... (of --torch net.py:make)")."""
    for attr in ("model", "source", "torch"):
        value = getattr(args, attr, None)
        if isinstance(value, str) and value:
            path = value if os.path.exists(value) else value.rpartition(":")[0]
            if path and os.path.isfile(path):
                option = f"the model {value}" if attr in ("model", "source") else f"--{attr}"
                named = value if attr in ("model", "source") else f"--{attr} {value}"
                words = f"the model file {path}" + (f" (of {named})" if value != path else "")
                if attr == "torch" and value == path:
                    words = f"the model file {path} (--torch)"
                yield (option, path, words)


def check_paths(args, outputs, inputs=()) -> None:
    """check_outputs(outputs, inputs + the model's own file); raises OutputPathError (a ValueError)."""
    check_outputs(outputs, [*inputs, *_named_model_file_input(args)])

"""Read and write weight files: tensorrtx .wts, safetensors, PyTorch .pt/.pth state_dicts.

The format comes from the file extension (or an explicit ``format``).  Reading
returns ``(tensors, notes)``: ``{name: numpy array}`` plus human-readable notes
about anything ignored or converted.  Writing is atomic (temp file + rename).
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from trtbuild.files.atomic import atomic_write

from . import wts
from .errors import WeightsError, WeightsWriteError
from .tensors import check_names, contiguous, is_torch_tensor, torch_to_numpy
from .wts_stream import read_wts

FORMAT_BY_SUFFIX = {".wts": "wts", ".safetensors": "safetensors", ".pt": "pt", ".pth": "pt"}
FORMATS = ("wts", "safetensors", "pt")
CHECKPOINT_KEYS = ("state_dict", "model")


def format_for_path(path: str | os.PathLike, format: str | None = None) -> str:  # noqa: A002 - public keyword argument
    """The format for ``path``: ``format`` if given, else from the extension.

    Raises WeightsError for an unknown extension (without ``format``), an
    unknown ``format``, or a ``format`` contradicting a known extension.
    """
    suffix = Path(path).suffix.lower()
    by_suffix = FORMAT_BY_SUFFIX.get(suffix)
    if format is None:
        if by_suffix is None:
            raise WeightsError(
                f"{path}: unknown weight file extension {suffix or '(none)'!r}; "
                f"use one of {', '.join(FORMAT_BY_SUFFIX)} or name the format explicitly"
            )
        return by_suffix
    if format not in FORMATS:
        raise WeightsError(f"unknown weight format {format!r}; choose one of {', '.join(FORMATS)}")
    if by_suffix is not None and by_suffix != format:
        raise WeightsError(f"{path}: extension {suffix!r} means {by_suffix}, not {format}")
    return format


def read_weights(path: str | os.PathLike,
                 format: str | None = None) -> tuple[dict[str, np.ndarray], list[str]]:  # noqa: A002 - public keyword
    """Read a weight file into ``({name: array}, notes)``; see the module docstring."""
    fmt = format_for_path(path, format)
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"weight file {path} does not exist or is not a file")
    if fmt == "wts":
        return read_wts(path), []
    if fmt == "safetensors":
        return _read_safetensors(path)
    return _read_pt(path)


def write_weights(
    path: str | os.PathLike, tensors: Mapping[str, np.ndarray],
    format: str | None = None,  # noqa: A002 - public keyword argument
) -> list[str]:
    """Atomically write ``{name: numpy array}`` to ``path``; return notes (e.g. skipped tensors).

    .wts keeps only floating-point tensors (as float32) and skips integer/bool
    ones such as BatchNorm ``num_batches_tracked``; safetensors and .pt keep all.
    """
    fmt = format_for_path(path, format)
    check_names(tensors, str(path))
    arrays = {name: contiguous(value) for name, value in tensors.items()}
    notes: list[str] = []
    if fmt == "wts":
        for name in arrays:
            wts.check_wts_name(name)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as stream:
                skipped = wts.write_wts(stream, arrays)
            if skipped:
                notes.append(
                    f".wts is float32-only: skipped {len(skipped)} non-float tensors "
                    f"({', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''})"
                )

    elif fmt == "safetensors":

        def write(tmp: Path) -> None:
            from safetensors.numpy import save_file

            try:
                save_file(arrays, str(tmp))
            except Exception as exc:  # the library raises several types; report them as one
                raise WeightsError(f"{path}: safetensors cannot store these tensors: {exc}") from exc

    else:

        def write(tmp: Path) -> None:
            import torch

            state = {name: torch.from_numpy(_writable(a)) for name, a in arrays.items()}
            torch.save(state, tmp)

    atomic_write(path, write, WeightsWriteError)
    return notes


def _writable(array: np.ndarray) -> np.ndarray:
    return array if array.flags.writeable else array.copy()


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], list[str]]:
    from safetensors.numpy import load_file

    try:
        tensors = dict(load_file(str(path)))
        # With ml_dtypes imported (onnx does), numpy loads bfloat16 as a non-float type:
        # take the torch path below so bf16 is widened the same way in every process.
        if not any(a.dtype.name == "bfloat16" for a in tensors.values()):
            return tensors, []
    except TypeError as exc:
        if "bfloat16" not in str(exc):
            raise WeightsError(f"{path}: cannot read safetensors file: {exc}") from exc
    except Exception as exc:  # SafetensorError, OSError, ...: all mean "not a valid file"
        raise WeightsError(f"{path}: not a valid safetensors file: {exc}") from exc
    # numpy has no bfloat16: read through torch and widen those tensors to float32.
    from safetensors.torch import load_file as load_torch

    notes: list[str] = []
    tensors = {name: torch_to_numpy(t, name, notes, copy=False) for name, t in load_torch(str(path)).items()}
    return tensors, notes


def _read_pt(path: Path) -> tuple[dict[str, np.ndarray], list[str]]:
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        detail = re.search(r"WeightsUnpickler error: ([^\n]*)", str(exc))
        reason = detail.group(1)[:200] if detail else str(exc).splitlines()[0][:200]
        raise WeightsError(
            f"{path}: refused to load with torch.load(weights_only=True): the file holds "
            f"objects other than tensors and plain containers ({reason}). trtbuild never "
            f"unpickles code; re-save it with torch.save(model.state_dict(), path)"
        ) from exc
    except Exception as exc:  # zip/EOF/runtime errors from torch: the file is not a checkpoint
        first = (str(exc).splitlines() or [""])[0][:200]
        raise WeightsError(f"{path}: not a readable PyTorch file ({type(exc).__name__}: {first})") from exc
    state, notes = pick_state_dict(obj, str(path))
    tensors: dict[str, np.ndarray] = {}
    ignored: list[str] = []
    for name, value in state.items():
        if isinstance(name, str) and name and is_torch_tensor(value):
            tensors[name] = torch_to_numpy(value, name, notes, copy=False)
        else:
            ignored.append(f"{name!r} ({type(value).__name__})")
    if ignored:
        notes.append(f"ignored {len(ignored)} non-tensor entries: {', '.join(ignored[:8])}"
                     f"{', ...' if len(ignored) > 8 else ''}")
    if not tensors:
        raise WeightsError(f"{path}: the state_dict holds no tensors")
    return tensors, notes


def pick_state_dict(obj: Any, source: str) -> tuple[Mapping[Any, Any], list[str]]:
    """Find the state_dict in a loaded .pt object: the dict itself, or its "state_dict"/"model" entry."""
    if not isinstance(obj, dict):
        raise WeightsError(
            f"{source}: expected a state_dict (a dict of tensors) or a checkpoint dict, "
            f"found {type(obj).__name__}"
        )
    for key in CHECKPOINT_KEYS:
        inner = obj.get(key)
        if isinstance(inner, dict):
            others = [repr(k) for k in obj if k != key]
            note = f"using checkpoint[{key!r}]"
            if others:
                note += f"; ignored top-level entries {', '.join(others[:8])}"
            return inner, [note]
    return obj, []

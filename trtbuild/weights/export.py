"""Export weights from an nn.Module / state_dict / WeightMap, and convert between file formats."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .formats import format_for_path, write_weights
from .weightmap import WeightMap
from .wts import is_wts_storable


@dataclass
class ExportReport:
    """What an export wrote: path, format, tensor and value counts, and notes (skips, conversions)."""

    path: Path
    format: str
    tensors: int
    values: int
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for humans, e.g. ``wrote 320 tensors (25557032 values) to r50.wts [wts]``."""
        return f"wrote {self.tensors} tensors ({self.values} values) to {self.path} [{self.format}]"


def as_weight_map(source: Any, allow_nonfinite: bool = False, *, copy: bool = True) -> WeightMap:
    """A WeightMap for a WeightMap (as is), an nn.Module (its state_dict) or a mapping of tensors
    (copied unless ``copy=False``, which shares their memory)."""
    if isinstance(source, WeightMap):
        return source
    if callable(getattr(source, "state_dict", None)):
        return WeightMap.from_module(source, allow_nonfinite=allow_nonfinite, copy=copy)
    if isinstance(source, Mapping):
        return WeightMap.from_state_dict(source, allow_nonfinite=allow_nonfinite, copy=copy)
    raise TypeError(f"cannot export weights from a {type(source).__name__}; "
                    f"pass an nn.Module, a state_dict or a WeightMap")


def export_weights(source: Any, path: str | os.PathLike,
                   format: str | None = None,  # noqa: A002 - public keyword argument
                   allow_nonfinite: bool = False) -> ExportReport:
    """Atomically write the weights of ``source`` (nn.Module, state_dict or WeightMap) to ``path``.

    Modules contribute ``state_dict()``: parameters and persistent buffers
    (BatchNorm running_mean/running_var/num_batches_tracked).  safetensors and
    .pt keep every tensor in its dtype and shape.  .wts is float32-only and
    flat: floating tensors are written as float32, and integer buffers such as
    ``num_batches_tracked`` are skipped (listed in the report's notes).
    """
    fmt = format_for_path(path, format)
    weights = as_weight_map(source, allow_nonfinite=allow_nonfinite, copy=False)  # written once: no copy
    arrays = weights.stored_arrays()
    notes = list(weights.notes) + write_weights(path, arrays, fmt)
    written = [a for a in arrays.values() if fmt != "wts" or is_wts_storable(a)]
    return ExportReport(Path(path), fmt, len(written), sum(a.size for a in written), notes)


def convert_weights(src: str | os.PathLike, dst: str | os.PathLike,
                    format: str | None = None,  # noqa: A002 - public keyword argument
                    allow_nonfinite: bool = False) -> ExportReport:
    """Convert a weight file to another format (e.g. .pth -> .wts), chosen by ``dst``'s extension."""
    fmt = format_for_path(dst, format)
    weights = WeightMap.load(src, allow_nonfinite=allow_nonfinite)
    return export_weights(weights, dst, fmt, allow_nonfinite=allow_nonfinite)

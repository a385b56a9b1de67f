"""Calibration data: where the batches come from, checked against the model's input, and hashed.

    source = folder_source("calib/", sample_shape=(3, 224, 224))          # .npy / .pt files, sorted by name
    source = iterable_source("mypkg.data:calib_set", sample_shape=...)     # tensors or (tensor, label) items
    source = random_source((3, 224, 224), batches=8, batch_size=4, value_range=(-1, 1), seed=0)
    for batch in source.batches(batch_size=None, limit=None): ...
    source.description, source.kind

Each item (file or element) is one sample (C, H, W) or a batch (N, C, H, W) of the model's
per-sample shape; anything else, a non-float tensor (uint8 pixels too: refused, not converted, since
the model takes normalised float input), a non-finite one, or a file that cannot be read is a
ValueError in one sentence naming the file or the item. ``batch_size`` regroups the samples into
batches of that size (the last may be smaller); without it each item is one batch. The sha256 of the
data (:class:`DataHash`) covers the float32 bytes of every sample fed, in order, so the same samples
give the same hash however they are batched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = ["DATA_SUFFIXES", "CalibrationData", "DataHash", "folder_source", "iterable_source", "random_source",
           "shape_text"]

DATA_SUFFIXES = (".npy", ".pt")


def shape_text(shape) -> str:
    return "x".join(str(int(d)) for d in shape) or "scalar"


class DataHash:
    """sha256 over the float32 bytes of the samples fed (in order) and their per-sample shape."""

    def __init__(self, sample_shape):
        self._digest = hashlib.sha256(f"float32 {shape_text(sample_shape)}\n".encode())
        self.samples = 0
        self.batches = 0

    def update(self, batch: torch.Tensor) -> None:
        self._digest.update(np.ascontiguousarray(batch.detach().cpu().float().numpy()).tobytes())
        self.samples += int(batch.shape[0])
        self.batches += 1

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


@dataclass
class CalibrationData:
    """A source of calibration items. `items()` yields (label for messages, tensor); `kind` is
    "folder", "iterable" or "random"; `total` the number of items if known."""

    kind: str
    description: str
    sample_shape: tuple
    items: Callable[[], Iterator[tuple[str, object]]]
    total: int | None = None
    files: tuple = ()  # the files read (a folder source)

    def _as_batch(self, where: str, value) -> torch.Tensor:
        if isinstance(value, (tuple, list)) and value:  # (input, label) pairs: the input
            value = value[0]
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"calibration data {where} is of type {type(value).__name__}, not a tensor or array "
                             "(nor a (tensor, label) pair)")
        if not value.is_floating_point():  # e.g. uint8 pixels 0..255: the model takes normalised float input
            dtype = str(value.dtype).replace("torch.", "")
            raise ValueError(f"calibration data {where} has dtype {dtype}, not a floating-point type; give the samples "
                             "exactly as the model takes them (e.g. uint8 pixels converted to float32 and normalised "
                             "as in training)")
        shape = tuple(self.sample_shape)
        if tuple(value.shape) == shape:
            value = value.unsqueeze(0)
        elif value.dim() != len(shape) + 1 or tuple(value.shape[1:]) != shape or value.shape[0] == 0:
            raise ValueError(f"calibration data {where} has shape {shape_text(value.shape)}; the model takes "
                             f"{shape_text(shape)} per sample (one sample {shape_text(shape)} or a batch "
                             f"Nx{shape_text(shape)})")
        value = value.float()
        if not torch.isfinite(value).all():
            raise ValueError(f"calibration data {where} holds NaN or Inf values")
        return value

    def batches(self, batch_size: int | None = None, limit: int | None = None) -> Iterator[torch.Tensor]:
        """float32 batches (N, *sample_shape): items as they are, or regrouped into `batch_size`
        samples; at most `limit` batches."""
        count, pending, held = 0, [], 0
        for where, value in self.items():
            if limit is not None and count >= limit:
                return
            batch = self._as_batch(where, value)
            if batch_size is None:
                count += 1
                yield batch
                continue
            pending.append(batch)
            held += batch.shape[0]
            while held >= batch_size and (limit is None or count < limit):
                joined = torch.cat(pending)
                count += 1
                yield joined[:batch_size]
                rest = joined[batch_size:]
                pending, held = ([rest] if rest.shape[0] else []), int(rest.shape[0])
        if pending and (limit is None or count < limit):
            yield torch.cat(pending)

    def expected_batches(self, batch_size: int | None, limit: int | None) -> int | None:
        """How many batches `batches` will give, if known without reading the data (for the progress bar)."""
        n = self.total if batch_size is None or self.kind == "random" else None
        return limit if n is None else n if limit is None else min(n, limit)


def _load_file(path: Path):
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - numpy/torch raise many kinds for a bad file
        raise ValueError(f"calibration data file {path} cannot be read ({type(e).__name__}: {e})") from None
    return value


def folder_source(folder, sample_shape) -> CalibrationData:
    """The .npy / .pt files directly in `folder`, sorted by name (other files are ignored)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"--data {folder}: no such directory (give a folder of .npy/.pt tensors, "
                         "package.module:NAME, or 'random')")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES)
    if not files:
        raise ValueError(f"--data {folder}: the folder holds no .npy or .pt file")

    def items():
        for path in files:
            yield f"file {path}", _load_file(path)

    return CalibrationData("folder", f"folder {folder} ({len(files)} .npy/.pt files, sorted by name)",
                           tuple(sample_shape), items, total=len(files), files=tuple(files))


def iterable_source(ref: str, sample_shape) -> CalibrationData:
    """The items of the iterable `package.module:NAME` or `file.py:NAME` names (a callable taking no
    arguments is called first, so a generator function works)."""
    from trtbuild.models.user import call_without_arguments, load_object

    try:
        obj, where, _ = load_object(ref)
    except ValueError as e:
        raise ValueError(f"--data {ref}: {e}") from None
    if callable(obj) and not isinstance(obj, Iterable):
        obj = call_without_arguments(obj, f"--data {where}", "give an iterable or a function returning one")
    if isinstance(obj, (torch.Tensor, np.ndarray)) or not isinstance(obj, Iterable):
        raise ValueError(f"--data {where} is of type {type(obj).__name__}, not an iterable of tensors or "
                         "(tensor, label) pairs")

    def items():
        for i, value in enumerate(obj):
            yield f"item {i} of {where}", value

    total = len(obj) if hasattr(obj, "__len__") else None
    return CalibrationData("iterable", f"iterable {where}", tuple(sample_shape), items, total=total)


def random_source(sample_shape, batches: int, batch_size: int,
                  value_range=(-1.0, 1.0), seed: int = 0) -> CalibrationData:
    """`batches` seeded batches uniform in `value_range`: RANDOM data, labelled so in the description."""
    lo, hi = (float(v) for v in value_range)

    def items():
        gen = torch.Generator().manual_seed(int(seed))
        for i in range(batches):
            yield f"random batch {i}", torch.rand((batch_size, *sample_shape), generator=gen) * (hi - lo) + lo

    return CalibrationData("random", f"RANDOM inputs (not real data): uniform[{lo:g}, {hi:g}], seed {seed}, "
                           f"{batches} batches of {batch_size}", tuple(sample_shape), items, total=batches)

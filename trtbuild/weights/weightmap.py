"""WeightMap: typed, usage-tracked access to named weights for model builders."""

from __future__ import annotations

import difflib
import numbers
import os
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from .errors import WeightsError
from .formats import read_weights, write_weights
from .provenance import journaling, note_read, overlay_of, track
from .tensors import check_finite, check_names, contiguous, to_numpy


class WeightMap:
    """Named weight arrays with float32 accessors and tracking of which names were read.

    ``get`` returns contiguous float32 arrays (reshaped on request); ``prefix``
    returns a view of the names under ``"<p>."`` sharing storage and usage
    tracking, so builders can write ``wm.prefix("layer1.0").get("conv1.weight")``
    and the top-level map can still report ``unused()`` weights at the end.
    """

    def __init__(
        self,
        tensors: Mapping[str, np.ndarray],
        *,
        source: str = "<memory>",
        notes: Sequence[str] = (),
        allow_nonfinite: bool = False,
    ) -> None:
        """Wrap ``{name: numpy array}``; NaN/Inf are rejected unless ``allow_nonfinite``."""
        check_names(tensors, source)
        for name, value in tensors.items():
            if not isinstance(value, np.ndarray):
                raise WeightsError(f"{source}: tensor {name!r} is a {type(value).__name__}, not a numpy array")
        if not allow_nonfinite:
            check_finite(tensors, source)
        self._store: dict[str, np.ndarray] = {k: contiguous(v) for k, v in tensors.items()}
        self._used: set[str] = set()
        self._loose: set[str] = set()  # keys read while no network definition was open (provenance.journaling)
        self._prefix = ""
        self.source = source
        self.notes: list[str] = list(notes)

    # ---------------------------------------------------------------- constructors

    @classmethod
    def load(cls, path: str | os.PathLike, allow_nonfinite: bool = False,
             format: str | None = None) -> "WeightMap":  # noqa: A002 - public keyword argument
        """Read a .wts, .safetensors or .pt/.pth file (format from the extension unless given)."""
        tensors, notes = read_weights(path, format)
        return cls(tensors, source=str(path), notes=notes, allow_nonfinite=allow_nonfinite)

    @classmethod
    def from_state_dict(cls, state_dict: Mapping[str, Any], allow_nonfinite: bool = False,
                        source: str = "<state_dict>", *, copy: bool = True) -> "WeightMap":
        """Copy a mapping of torch tensors and/or numpy arrays (any other value is an error).
        ``copy=False`` shares their memory where it can (e.g. to write them out once)."""
        notes: list[str] = []
        tensors = {name: to_numpy(value, name, notes, copy=copy) for name, value in state_dict.items()}
        return cls(tensors, source=source, notes=notes, allow_nonfinite=allow_nonfinite)

    @classmethod
    def from_module(cls, module: Any, allow_nonfinite: bool = False, *, copy: bool = True) -> "WeightMap":
        """Snapshot an nn.Module's ``state_dict()``: parameters and persistent buffers (shared with
        the module if ``copy=False``)."""
        return cls.from_state_dict(module.state_dict(), allow_nonfinite,
                                   source=f"<{type(module).__name__} state_dict>", copy=copy)

    # ---------------------------------------------------------------- mapping protocol

    def _names(self) -> Iterator[str]:
        """Full names under this view's prefix, in storage order."""
        return (name for name in self._store if name.startswith(self._prefix))

    def keys(self) -> list[str]:
        """Names under this view (relative to its prefix), in storage order."""
        cut = len(self._prefix)
        return [name[cut:] for name in self._names()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return sum(1 for _ in self._names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (self._prefix + name) in self._store

    def has(self, name: str) -> bool:
        """True if ``name`` (relative to this view) exists; does not mark it used."""
        return name in self

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        """(name, stored array) pairs in their stored dtype/shape; does not mark them used. Inside a network
        definition every pair is a read of its key (trtbuild.weights.provenance.Journal), as the definition may
        put its values into weights that no name covers."""
        cut = len(self._prefix)
        pairs = [(name, overlay_of(name, self._store[name])) for name in self._names()]
        if journaling():
            for name, stored in pairs:
                note_read(name, stored, self)
        else:  # before a definition: its values may go into any network defined later (read_loose)
            for name, stored in pairs:
                self._loose.add(name)
                track(stored, name, register=False, owner=self)
        return ((name[cut:], stored) for name, stored in pairs)

    def arrays(self) -> dict[str, np.ndarray]:
        """``{name: stored array}`` for this view (shares memory with the map); reads as :meth:`items` does."""
        return dict(self.items())

    def stored_arrays(self) -> dict[str, np.ndarray]:
        """``{name: stored array}`` for this view, not counted as a read: for trtbuild's own bookkeeping (saving,
        hashing, refitting), whose reads put no values into a network."""
        cut = len(self._prefix)
        return {name[cut:]: self._store[name] for name in self._names()}

    def __repr__(self) -> str:
        where = f", prefix={self._prefix[:-1]!r}" if self._prefix else ""
        values = sum(self._store[n].size for n in self._names())
        return f"WeightMap({len(self)} tensors, {values} values, source={self.source!r}{where})"

    # ---------------------------------------------------------------- typed access

    def get(self, name: str, shape: int | Sequence[int] | None = None, *, copy: bool = False) -> np.ndarray:
        """The weight ``name`` as a contiguous float32 array, reshaped to ``shape`` if given.

        ``shape`` may hold one -1.  The element count must match (WeightsError
        otherwise, giving expected vs found).  Only shape-less tensors (1-D rows as
        .wts files store them, 0-d scalars) are reshaped: a stored N-D tensor whose
        shape differs from ``shape`` is a WeightsError naming both shapes (a builder
        that reads a tensor under another shape on purpose passes the stored shape
        and reshapes it itself).  Float16/64 are converted; integer
        and bool tensors are refused (use ``raw``).  Unless ``copy``, the result
        may share memory with the map: do not modify it; it is registered as
        ``name``'s values (trtbuild.weights.provenance), so that the weights a
        builder makes of it are named after ``name``.  Marks ``name`` used.
        """
        full = self._full(name)
        stored = self._lookup(full, name)
        if stored.dtype.kind != "f":
            raise WeightsError(
                f"weight {full!r} in {self.source} has dtype {stored.dtype}, not floating point; "
                f"use raw({name!r}) to read it as stored"
            )
        out = stored.astype(np.float32, copy=False)
        if shape is not None:
            out = out.reshape(self._resolve_shape(full, stored, shape))
        out = contiguous(out)
        copied = copy and np.shares_memory(out, stored)
        if copied:
            out = out.copy()
        elif np.shares_memory(out, stored):
            # changed in place, the map's values would change under every later read and a name would no longer
            # say what the weights hold: a view that cannot be written
            out = out.view()
            out.flags.writeable = False
        if not journaling():
            self._loose.add(full)
        # a copy is the caller's to change, so it is not registered as the key's values (but counts as a read)
        track(out, full, stored, None if shape is None else out.shape, register=not copied, owner=self)
        self._used.add(full)
        return out

    def raw(self, name: str) -> np.ndarray:
        """The stored array for ``name`` in its own dtype and shape (shared memory). Marks it used."""
        full = self._full(name)
        stored = self._lookup(full, name)
        if not note_read(full, stored, self):  # counted in the network definition reading it (provenance)
            self._loose.add(full)
        self._used.add(full)
        return stored

    def full_key(self, name: str) -> str:
        """The state_dict key of ``name`` under this view's prefix (``layer1.0`` + ``conv1.weight``)."""
        return self._full(name)

    def shape_of(self, name: str) -> tuple[int, ...]:
        """Stored shape of ``name`` (1-D for .wts files); does not mark it used."""
        return tuple(self._lookup(self._full(name), name).shape)

    def prefix(self, prefix: str) -> "WeightMap":
        """A view of the names under ``prefix + "."`` (a trailing dot is optional).

        The view shares storage and used-tracking with this map; its names are
        relative (``wm.prefix("layer1.0").get("conv1.weight")`` reads
        ``layer1.0.conv1.weight``).
        """
        if not isinstance(prefix, str) or not prefix.strip("."):
            raise WeightsError(f"prefix {prefix!r} must be a non-empty string")
        view = object.__new__(type(self))
        view._store = self._store
        view._used = self._used
        view._loose = self._loose
        view._prefix = self._prefix + prefix.strip(".") + "."
        view.source = self.source
        view.notes = self.notes
        return view

    # ---------------------------------------------------------------- usage tracking

    def used(self) -> list[str]:
        """Names under this view read through get/raw (or mark_used), in storage order."""
        cut = len(self._prefix)
        return [name[cut:] for name in self._names() if name in self._used]

    def unused(self) -> list[str]:
        """Names under this view never read; builders report these as leftover weights."""
        cut = len(self._prefix)
        return [name[cut:] for name in self._names() if name not in self._used]

    def usage(self) -> tuple[int, list[str]]:
        """(number of weights, names never read) under this view, leaving out PyTorch's BatchNorm
        ``num_batches_tracked`` counters, which no inference network reads."""
        names = [n for n in self.keys() if not n.endswith("num_batches_tracked")]
        unread = set(self.unused())
        return len(names), [n for n in names if n in unread]

    def read_loose(self) -> list[str]:
        """Full keys read with get/raw while no network definition was open (before build_plan, say): their
        values may be in any network defined later without that definition reading them again."""
        return sorted(self._loose)

    def mark_used(self, *names: str) -> None:
        """Mark names as used without reading them (e.g. weights a builder deliberately ignores)."""
        for name in names:
            self._lookup(self._full(name), name)
            self._used.add(self._full(name))

    # ---------------------------------------------------------------- output

    def save(self, path: str | os.PathLike,
             format: str | None = None) -> list[str]:  # noqa: A002 - public keyword argument
        """Atomically write this view's tensors (relative names) to ``path``; return notes."""
        return write_weights(path, self.stored_arrays(), format)

    # ---------------------------------------------------------------- helpers

    def _full(self, name: str) -> str:
        if not isinstance(name, str):
            raise WeightsError(f"weight name {name!r} must be a string")
        return self._prefix + name

    def _lookup(self, full: str, name: str) -> np.ndarray:
        stored = self._store.get(full)
        if stored is not None:
            return overlay_of(full, stored)
        where = f" (looked up as {name!r} under prefix {self._prefix[:-1]!r})" if self._prefix else ""
        close = difflib.get_close_matches(full, list(self._store), n=3, cutoff=0.6)
        hint = (f"; closest names: {', '.join(map(repr, close))}" if close
                else f"; it holds {len(self._store)} tensors")
        raise WeightsError(f"weight {full!r} not found in {self.source}{where}{hint}")

    def _resolve_shape(self, full: str, stored: np.ndarray, shape: int | Sequence[int]) -> tuple[int, ...]:
        dims = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        valid = all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= -1 for d in dims)
        if not valid or dims.count(-1) > 1:
            raise WeightsError(f"weight {full!r}: invalid shape {shape!r} (non-negative ints, at most one -1)")
        dims = tuple(int(d) for d in dims)
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        found = f"found {stored.size} values (stored shape {tuple(stored.shape)}) in {self.source}"
        if -1 in dims:
            if known == 0 or stored.size % known:
                raise WeightsError(f"weight {full!r}: shape {dims} does not fit: {found}")
            return self._check_stored_shape(full, stored, tuple(stored.size // known if d == -1 else d for d in dims))
        if known != stored.size:
            raise WeightsError(f"weight {full!r}: expected shape {dims} ({known} values) but {found}")
        return self._check_stored_shape(full, stored, dims)

    def _check_stored_shape(self, full: str, stored: np.ndarray, dims: tuple[int, ...]) -> tuple[int, ...]:
        """``dims``, unless ``stored`` has a shape of its own (2-D or more) that differs from it."""
        if stored.ndim >= 2 and tuple(stored.shape) != dims:
            raise WeightsError(f"weight {full!r} in {self.source} is stored with shape {tuple(stored.shape)} but "
                               f"shape {dims} was expected; only flat (1-D) tensors are reshaped")
        return dims

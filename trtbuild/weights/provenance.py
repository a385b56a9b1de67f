"""Which state_dict key an array's values are, so that the builders can name every weight after its key.

WeightMap.get registers the float32 array it returns (``track``); the layer helpers (trtbuild.layers.common)
ask ``origin_of`` for the arrays a builder hands them, before any conversion, and the weights that hold a key's
values unchanged are then named after the key (trtbuild.layers.weight_names.name_tracked_weights).

Why memory identity, not values: two keys may hold equal values (zeros, ones), and a value match would name
one key's weights after another. An array is the key's only when it is C-contiguous and has the data pointer,
byte count and dtype of a live registered array: a reshape of the whole key matches; a slice, a transposed view
or any computed array does not. Entries hold a weakref to the registered array, so its memory cannot be reused
while the entry answers, and a dead weakref answers nothing.

A key that was read more often than it was used whole also went into a computed weight (``w * 2``, a slice),
which a refit of the named use alone would leave stale, so the naming leaves such a key baked. The reads are
counted per network definition: trtbuild.engine.define opens a :class:`Journal` around each (``journal()``), and
every WeightMap.get / raw made while it is open is noted in it with the stored array read, so that the reads of
one definition are not mixed with another's from the same WeightMap, and the build's RefitRecord can list every
key the definition read that no name covers (with its values' sha256), also for a plain network function. Reads
made while no journal is open (before build_plan, say) are counted apart (``Origin.loose_reads``) and added to
every definition's count, as they may have gone into its weights; each key's ``Origin`` also keeps the counts of
its whole life (``reads``, ``uses``) for networks defined without a journal.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

__all__ = ["Origin", "Journal", "journal", "journaling", "note_read", "track", "alias", "origin_of", "key_of",
           "overlaid", "overlay_of"]


@dataclass(eq=False)
class Origin:
    """One stored state_dict tensor: its key, the shape it is stored with, the shape a builder first read it
    with (WeightMap.get's ``shape``; None: as stored), and how often it was read and used whole."""

    key: str
    stored_shape: tuple[int, ...]
    read_shape: tuple[int, ...] | None = None
    reads: int = 0
    uses: int = 0
    loose_reads: int = 0  # the reads made while no Journal was open
    stored: object = None  # a weakref to the stored array (its values, for a RefitRecord's baked keys)

    def values(self) -> np.ndarray | None:
        """The stored values, while the WeightMap holding them lives; else None."""
        return None if self.stored is None else self.stored()


@dataclass(eq=False)
class Journal:
    """The WeightMap reads of one network definition: how often each state_dict key was read (get or raw) and
    the stored array each read (held, not copied, so that its values can be hashed once the network is built)."""

    reads: dict = field(default_factory=dict)  # {key: count}
    stored: dict = field(default_factory=dict)  # {key: the stored array first read}
    #: {id of a WeightMap's storage: the WeightMap read}: its keys read before the definition (loose reads) are
    #: the definition's too, and trtbuild.engine.refit_verify defines the network again from perturbed values
    maps: dict = field(default_factory=dict)

    def note(self, key: str, stored: np.ndarray, owner=None) -> None:
        self.reads[key] = self.reads.get(key, 0) + 1
        self.stored.setdefault(key, stored)
        if owner is not None:
            self.maps.setdefault(id(owner._store), owner)

    def values(self, key: str) -> np.ndarray | None:
        """The stored values read for `key` (None if it was not read in this definition)."""
        return self.stored.get(key)


_JOURNAL: ContextVar[Journal | None] = ContextVar("trtbuild_weight_journal", default=None)


@contextmanager
def journal() -> Iterator[Journal]:
    """Note every WeightMap read made inside the block in a new Journal (one network definition; nested blocks
    note in the innermost only)."""
    current = Journal()
    token = _JOURNAL.set(current)
    try:
        yield current
    finally:
        _JOURNAL.reset(token)


def journaling() -> bool:
    """True while a Journal is open (inside a network definition)."""
    return _JOURNAL.get() is not None


def note_read(key: str, stored: np.ndarray, owner=None) -> bool:
    """Note a read of `key` (stored array `stored`, of WeightMap `owner`) in the open Journal; False if none is
    open."""
    current = _JOURNAL.get()
    if current is None:
        return False
    current.note(key, stored, owner)
    return True


#: {full state_dict key: the values every WeightMap read answers with instead of its stored array}, set by
#: trtbuild.engine.refit_verify while it defines a network again from perturbed values: context-local, so that a
#: build in another thread reading the same WeightMap meanwhile reads its own values, and the user's storage is
#: never written. Keyed by full key, so that a WeightMap made inside the network function reads them too.
_OVERLAY: ContextVar[dict | None] = ContextVar("trtbuild_weight_overlay", default=None)


@contextmanager
def overlaid(values: dict) -> Iterator[None]:
    """Every WeightMap read of a key in `values` ({full key: array}) inside the block answers with that array
    (where its shape and dtype are the stored array's), in this context only."""
    token = _OVERLAY.set(dict(values))
    try:
        yield
    finally:
        _OVERLAY.reset(token)


def overlay_of(key: str, stored: np.ndarray) -> np.ndarray:
    """`stored` (the array a WeightMap holds for `key`), or the overlay's values for `key` inside
    :func:`overlaid`."""
    values = _OVERLAY.get()
    if not values:
        return stored
    value = values.get(key)
    if value is None or value.shape != stored.shape or value.dtype != stored.dtype:
        return stored
    return value


#: data pointer -> (weakref to the registered array, nbytes, dtype, Origin)
_BY_POINTER: dict[int, tuple] = {}
#: id(stored array) -> (weakref to it, Origin): one Origin per stored tensor, whatever its reads converted
_BY_STORED: dict[int, tuple] = {}


def _pointer(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _live(table: dict, ident: int):
    entry = table.get(ident)
    if entry is not None and entry[0]() is None:
        del table[ident]
        return None
    return entry


def track(array: np.ndarray, key: str, stored: np.ndarray | None = None, read_shape=None,
          register: bool = True, owner=None) -> Origin:
    """Register `array` (what WeightMap.get returns) as the values of state_dict `key`, read from the stored
    array `stored` (default `array`) with `read_shape`; one read is counted (also with ``register=False``, for
    a copy the caller may change, which is counted but not registered). Returns the key's Origin."""
    stored = array if stored is None else stored
    entry = _live(_BY_STORED, id(stored))
    if entry is None or entry[1].key != key:
        ref = _ref(stored, _BY_STORED, id(stored))
        origin = Origin(key, tuple(int(d) for d in np.shape(stored)), stored=ref)
        _BY_STORED[id(stored)] = (ref, origin)
    else:
        origin = entry[1]
    if origin.read_shape is None and read_shape is not None:
        origin.read_shape = tuple(int(d) for d in read_shape)
    origin.reads += 1
    if not note_read(key, stored, owner):
        origin.loose_reads += 1
    if register:
        _register(array, origin)
    return origin


def alias(array: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Register `array`, an exact copy of `of`'s values in another type (a float64 copy of a float32 key),
    as the same key, when `of` is one; returns `array`."""
    origin = origin_of(of)
    if origin is not None:
        _register(array, origin)
    return array


def _register(array: np.ndarray, origin: Origin) -> None:
    if array.flags.c_contiguous and array.size:
        pointer = _pointer(array)
        _BY_POINTER[pointer] = (_ref(_owner(array), _BY_POINTER, pointer), int(array.nbytes), array.dtype, origin)


def _ref(array: np.ndarray, table: dict, ident: int):
    """A weakref to `array` that drops `table[ident]` when `array` dies (unless the entry was replaced)."""
    def drop(ref):
        entry = table.get(ident)
        if entry is not None and entry[0] is ref:
            del table[ident]

    return weakref.ref(array, drop)


def _owner(array: np.ndarray) -> np.ndarray:
    """The array that owns `array`'s memory (numpy keeps it alive as long as any view of it lives)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def origin_of(array) -> Origin | None:
    """The Origin of the key whose values `array` is, unchanged (see the module doc), else None."""
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.size:
        return None
    entry = _live(_BY_POINTER, _pointer(array))
    if entry is None:
        return None
    _, nbytes, dtype, origin = entry
    return origin if int(array.nbytes) == nbytes and array.dtype == dtype else None


def key_of(array) -> str | None:
    """The state_dict key whose values `array` is, unchanged; None for anything else."""
    origin = origin_of(array)
    return None if origin is None else origin.key

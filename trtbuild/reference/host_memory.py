"""IHostMemory of the reference backend: serialized bytes in memory of their own.

TensorRT's IHostMemory is a buffer, not a Python ``bytes`` object: ``memoryview(m)``, ``bytes(m)``,
``len(m)``, ``m.nbytes`` and ``m.dtype`` work. The reference's is an anonymous memory map (an
``mmap.mmap`` subclass) for the same reason TensorRT's is its own allocation: a plan holding a
model's weights is written into it exactly once (``host_memory_from_parts``), where building a ``bytes``
subclass would copy the whole plan a second time. The memory is page-aligned, so weights laid
out at aligned offsets in a plan can be used in place when it is loaded.
"""

from __future__ import annotations

import mmap
from typing import Iterable

from .enums import DataType


class IHostMemory(mmap.mmap):
    """Serialized bytes (a plan or a timing cache); a read-write buffer usable wherever bytes-like
    objects are (``bytes(m)`` copies it out). Instances carry attributes (trtbuild sets ``.info``)."""

    @property
    def dtype(self) -> DataType:
        return DataType.UINT8

    @property
    def nbytes(self) -> int:
        return len(self)

    def __eq__(self, other) -> bool:  # compare contents, as bytes would
        try:
            return memoryview(self) == memoryview(other).cast("B")
        except TypeError:
            return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"<IHostMemory {len(self)} bytes>"


def host_memory_from_parts(parts: Iterable, cls: type = IHostMemory) -> IHostMemory:
    """The concatenation of bytes-like `parts`, copied once into new memory of type `cls`
    (IHostMemory or a subclass). Kept out of the class, whose members mirror TensorRT's."""
    views = [memoryview(p).cast("B") for p in parts]
    total = sum(len(v) for v in views)
    if total == 0:
        raise ValueError("IHostMemory: nothing to hold (an anonymous memory map cannot be empty)")
    memory = cls(-1, total)
    pos = 0
    for view in views:
        memory[pos:pos + len(view)] = view
        pos += len(view)
    return memory


def host_memory_of(data, cls: type = IHostMemory) -> IHostMemory:
    """A copy of the bytes-like `data` in new memory of type `cls`."""
    return host_memory_from_parts([data], cls)

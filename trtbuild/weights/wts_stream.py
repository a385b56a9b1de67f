"""Streaming ``.wts`` reader: decodes a file block by block, so reading needs the arrays plus a few MB.

    tensors = read_wts("weights/alexnet.wts")     # {name: 1-D float32 array}, file order

The fast path takes files laid out the way trtbuild and gen_wts.py write them (header line, then
``name count`` + one or two spaces + space-separated 8-digit hex words per line, ``\\n`` line ends).
Anything else (CRLF, tabs, blank lines, and every malformed file) is read by
:func:`trtbuild.weights.wts.parse_wts` on the whole file instead, which gives the same tensors and
the same error messages (line and column of the problem).
"""

from __future__ import annotations

import os
from typing import BinaryIO

import numpy as np

from .wts import _HEAD, _SPACE, _decode_name, parse_wts

#: bytes read from the file at a time, and hex words decoded per step
READ_BLOCK = 1 << 22
DECODE_WORDS = 1 << 18
_NEWLINE = 0x0A


class _NotCanonical(Exception):
    """The file is not in the fast path's layout (or is bad): read it whole instead."""


class _Blocks:
    """A read buffer over a binary stream: ``need(n)`` makes n bytes available from ``pos``."""

    def __init__(self, stream: BinaryIO):
        self.stream, self.buf, self.pos = stream, b"", 0
        self.size = os.fstat(stream.fileno()).st_size

    def need(self, n: int) -> int:
        """Read until n bytes follow ``pos`` (fewer at the end of the file); return how many do."""
        have = len(self.buf) - self.pos
        if have < n:
            more = self.stream.read(max(n - have, READ_BLOCK))
            self.buf, self.pos = self.buf[self.pos:] + more, 0
            have = len(self.buf)
        return min(have, n)

    def byte(self) -> int | None:
        """The next byte (not consumed), or None at the end of the file."""
        return self.buf[self.pos] if self.need(1) else None


def read_wts(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a ``.wts`` file into ``{name: 1-D float32 array}`` (bit-exact, file order); raises
    WeightsError as parse_wts does."""
    try:
        with open(path, "rb") as stream:
            return _read(_Blocks(stream), str(path))
    except _NotCanonical:
        with open(path, "rb") as stream:
            return parse_wts(stream.read(), source=str(path))


def _read(blocks: _Blocks, source: str) -> dict[str, np.ndarray]:
    blocks.need(64)
    end = blocks.buf.find(b"\n", 0, 64)
    if end < 0 or not blocks.buf[:end].isdigit():
        raise _NotCanonical
    blocks.pos = end + 1
    tensors: dict[str, np.ndarray] = {}
    for _ in range(int(blocks.buf[:end])):
        name, values = _read_line(blocks, source)
        if name in tensors:
            raise _NotCanonical
        tensors[name] = values
    while blocks.need(READ_BLOCK):  # only whitespace may follow the last tensor
        if blocks.buf[blocks.pos:].strip():
            raise _NotCanonical
        blocks.pos = len(blocks.buf)
    return tensors


def _read_line(blocks: _Blocks, source: str) -> tuple[str, np.ndarray]:
    """Decode one canonical tensor line at ``blocks.pos`` (and its newline, or the end of the file)."""
    available = blocks.need(4096)
    head = _HEAD.match(blocks.buf, blocks.pos, blocks.pos + available)
    # the count might go on past the buffer, or its values are missing; at the end of the file (fewer
    # than 4096 bytes left) an empty tensor's line ("name 0", "\n" or nothing after it) is complete
    if head is None or (head.end() >= blocks.pos + available - 1 and (available == 4096 or int(head.group(2)))):
        raise _NotCanonical
    try:
        name = _decode_name(head.group(1), 0, source)
    except ValueError:
        raise _NotCanonical from None
    count = int(head.group(2))
    if 9 * count > blocks.size:  # a corrupt count: let parse_wts report it, allocate nothing
        raise _NotCanonical
    blocks.pos = head.end()
    values = np.empty(count, dtype=np.float32)
    if count:
        if blocks.buf[blocks.pos] == _SPACE and blocks.buf[blocks.pos + 1] == _SPACE:
            blocks.pos += 1  # gen_wts.py's two spaces after the count
        words = values.view(np.uint32)
        for start in range(0, count, DECODE_WORDS):
            n = min(DECODE_WORDS, count - start)
            words[start:start + n] = _decode_words(blocks, n)
    if blocks.byte() not in (_NEWLINE, None):
        raise _NotCanonical
    blocks.pos += 1
    return name, values


def _decode_words(blocks: _Blocks, n: int) -> np.ndarray:
    """n big-endian words from `` hhhhhhhh`` * n at ``blocks.pos`` (as in wts._decode_canonical)."""
    size = 9 * n
    if blocks.need(size) < size:
        raise _NotCanonical
    text = np.frombuffer(blocks.buf, dtype=np.uint8, count=size, offset=blocks.pos)
    if not (text[::9] == _SPACE).all():
        raise _NotCanonical
    try:
        raw = bytes.fromhex(str(memoryview(blocks.buf)[blocks.pos:blocks.pos + size], "ascii"))
    except (UnicodeDecodeError, ValueError):
        raise _NotCanonical from None
    if len(raw) != 4 * n:
        raise _NotCanonical
    blocks.pos += size
    return np.frombuffer(raw, dtype=">u4")

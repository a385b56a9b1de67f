"""tensorrtx ``.wts`` text format: vectorized reader and chunked canonical writer.

Layout (what tensorrtx's ``gen_wts.py`` writes and its C++ ``loadWeights`` reads)::

    2
    conv1.weight 4 3f800000 c0000000 3f000000 80000000
    conv1.bias 1 00000000

Line 1 is the tensor count.  Each further line is ``name count`` followed by
``count`` float32 values, each written as the big-endian bit pattern in 8 hex
digits (1.0 -> ``3f800000``).  Some gen_wts versions put two spaces after the
count; both forms are read.  Values are only float32: the file has no dtype.

Reading is vectorized: a well-formed line is checked with one strided numpy
comparison (separator positions) and decoded with one ``bytes.fromhex`` call.
Lines with other spacing (tabs, runs of spaces) are squeezed to single spaces
and decoded the same way.  Only a line known to be bad is walked token by token
to report the problem (line and 1-based column of the bad word).

Writing is chunked: WRITE_CHUNK values at a time are cast to float32 and turned into text with
one table lookup per 16-bit half (~1 GB/s of weights on one core, ~1.3 MB of buffers whatever the
tensor size; ``scripts/bench_wts_write.py``).
"""

from __future__ import annotations

import binascii
import io
import re
from typing import BinaryIO, Iterator, Mapping

import numpy as np

from .errors import WeightsError, show_bytes

_WHITESPACE = b" \t\r\n\x0b\x0c"
_SPACE = 0x20
_HEAD = re.compile(rb"(\S+) ([0-9]+)")
_TOKEN = re.compile(rb"\S+")
_WHITESPACE_RUN = re.compile(rb"\s+")
_HEX_WORD = re.compile(rb"[0-9a-fA-F]{8}")


# --------------------------------------------------------------------- reading


def parse_wts(data: bytes, source: str = "<bytes>") -> dict[str, np.ndarray]:
    """Parse the bytes of a ``.wts`` file into ``{name: 1-D float32 array}`` (file order).

    Values are decoded bit-exactly (NaN payloads, -0.0 and subnormals are kept).
    Blank lines and surrounding whitespace are ignored.  Raises WeightsError for
    a bad header, truncation, count mismatches, malformed hex (with line and
    column), bad names and duplicate names.
    """
    data = bytes(data)
    buf = np.frombuffer(data, dtype=np.uint8)
    lines = _lines(data)
    first = next(lines, None)
    if first is None:
        raise WeightsError(f"{source}: empty file; line 1 must hold the tensor count")
    lineno, _, start, end = first
    header = data[start:end]
    if not header.isdigit():
        raise WeightsError(
            f"{source}: line {lineno}: the header must be the tensor count "
            f"(a non-negative integer), found {show_bytes(header)}"
        )
    expected = int(header)

    tensors: dict[str, np.ndarray] = {}
    line_of: dict[str, int] = {}
    for lineno, line_start, start, end in lines:
        if len(tensors) == expected:
            extra = show_bytes(data[start:end].split()[0])
            raise WeightsError(
                f"{source}: header count mismatch: the header says {expected} tensors "
                f"but line {lineno} holds another one ({extra})"
            )
        name, values = _parse_tensor_line(data, buf, lineno, line_start, start, end, source)
        if name in line_of:
            raise WeightsError(
                f"{source}: duplicate tensor name {name!r} on lines {line_of[name]} and {lineno}"
            )
        tensors[name] = values
        line_of[name] = lineno

    if len(tensors) < expected:
        last = ""
        if line_of:
            last_name = next(reversed(line_of))
            last = f"; the last tensor read is {last_name!r} on line {line_of[last_name]}"
        raise WeightsError(
            f"{source}: truncated file: the header says {expected} tensors "
            f"but only {len(tensors)} tensor lines follow{last}"
        )
    return tensors


def _lines(data: bytes) -> Iterator[tuple[int, int, int, int]]:
    """Yield (1-based line number, line start, content start, content end) of non-blank lines."""
    pos, lineno, size = 0, 0, len(data)
    while pos < size:
        newline = data.find(b"\n", pos)
        if newline < 0:
            newline = size
        lineno += 1
        start, end = pos, newline
        while end > start and data[end - 1] in _WHITESPACE:
            end -= 1
        while start < end and data[start] in _WHITESPACE:
            start += 1
        if start < end:
            yield lineno, pos, start, end
        pos = newline + 1


def _parse_tensor_line(data, buf, lineno, line_start, start, end, source):
    """Decode one tensor line: canonical layouts directly, other spacing after squeezing it."""
    decoded = _decode_canonical(data, buf, start, end)
    if decoded is None:
        squeezed = _WHITESPACE_RUN.sub(b" ", data[start:end])
        decoded = _decode_canonical(squeezed, np.frombuffer(squeezed, np.uint8), 0, len(squeezed))
    if decoded is None:  # the line is bad: report where (columns refer to the original line)
        return _parse_tokens(data, lineno, line_start, start, end, source)
    name, values = decoded
    return _decode_name(name, lineno, source), values


def _decode_canonical(data, buf, start, end):
    """(name bytes, float32 values) if data[start:end] is ``name count`` + one or two spaces
    + space-separated 8-digit hex words; None if it is laid out any other way or is bad."""
    head = _HEAD.match(data, start, end)
    if head is None or (head.end() < end and data[head.end()] != _SPACE):
        return None
    count = int(head.group(2))
    payload = head.end()
    length = end - payload
    if count == 0 and length == 0:
        return head.group(1), np.zeros(0, dtype=np.float32)
    if length == 9 * count:
        offset = payload
    elif length == 9 * count + 1:
        offset = payload + 1
    else:
        return None
    # Every 9th byte must be a space; bytes.fromhex skips those spaces, and it can
    # only return 4 * count bytes if the other 8 * count characters are all hex
    # digits, so the word boundaries are exactly where the format puts them.
    separators = buf[offset : offset + 9 * count : 9]
    if not (separators == _SPACE).all():
        return None
    try:
        raw = bytes.fromhex(str(memoryview(data)[offset : offset + 9 * count], "ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if len(raw) != 4 * count:
        return None
    return head.group(1), _words_to_float32(raw)


def _parse_tokens(data, lineno, line_start, start, end, source):
    """Token-by-token decode of one tensor line; raises a WeightsError locating the problem."""
    tokens = data[start:end].split()
    name = _decode_name(tokens[0], lineno, source)
    if len(tokens) < 2:
        raise WeightsError(
            f"{source}: truncated line {lineno}: tensor {name!r} has no value count "
            f"(expected 'name count hex hex ...')"
        )
    if not tokens[1].isdigit():
        raise WeightsError(
            f"{source}: line {lineno}: the value count of tensor {name!r} must be a "
            f"non-negative integer, found {show_bytes(tokens[1])}"
        )
    count = int(tokens[1])
    values = tokens[2:]
    if len(values) != count:
        bad = _first_bad_word(data, line_start, start, end)
        hint = ""
        if bad is not None:
            column, word = bad
            hint = f"; first malformed hex word {show_bytes(word)} at line {lineno}, column {column}"
        problem = "truncated line" if len(values) < count else "value count mismatch on line"
        raise WeightsError(
            f"{source}: {problem} {lineno}: tensor {name!r} declares {count} values "
            f"but the line holds {len(values)}{hint}"
        )
    if count == 0:
        return name, np.zeros(0, dtype=np.float32)
    joined = b"".join(values)
    try:
        if len(joined) != 8 * count or min(map(len, values)) != 8:
            raise binascii.Error("word length")
        raw = binascii.unhexlify(joined)
    except binascii.Error:
        column, word = _first_bad_word(data, line_start, start, end)
        index = values.index(word) + 1
        partial = index == count and len(word) < 8 and _HEX_WORD.fullmatch(word.ljust(8, b"0"))
        raise WeightsError(
            f"{source}: line {lineno}, column {column}: malformed hex word {show_bytes(word)} "
            f"in tensor {name!r} (value {index} of {count}); each value must be exactly "
            f"8 hex digits{'; the line looks truncated' if partial else ''}"
        ) from None
    return name, _words_to_float32(raw)


def _first_bad_word(data, line_start, start, end):
    """(1-based column, word) of the first value token that is not 8 hex digits, or None."""
    for index, match in enumerate(_TOKEN.finditer(data, start, end)):
        if index >= 2 and _HEX_WORD.fullmatch(match.group()) is None:
            return match.start() - line_start + 1, match.group()
    return None


def _decode_name(raw: bytes, lineno: int, source: str) -> str:
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WeightsError(
            f"{source}: line {lineno}: tensor name {show_bytes(raw)} is not valid UTF-8"
        ) from None
    if any(ch.isspace() for ch in name):  # the writer refuses these too, so every file we read round-trips
        raise WeightsError(f"{source}: line {lineno}: tensor name {name!r} contains a whitespace character")
    return name


def _words_to_float32(raw: bytes) -> np.ndarray:
    """Big-endian 32-bit words -> native float32, through integers so every bit is kept."""
    return np.frombuffer(raw, dtype=">u4").astype(np.uint32).view(np.float32)


# --------------------------------------------------------------------- writing


def check_wts_name(name: object) -> str:
    """Return ``name`` if it can be a .wts tensor name (non-empty str, no whitespace)."""
    if not isinstance(name, str) or not name:
        raise WeightsError(f"tensor name {name!r} must be a non-empty string")
    if any(ch.isspace() for ch in name):
        raise WeightsError(f"tensor name {name!r} contains whitespace, which .wts cannot store")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise WeightsError(f"tensor name {name!r} cannot be encoded as UTF-8") from None
    return name


# Values encoded per step: bounds the writer's extra memory (~1.3 MB) whatever the tensor size.
WRITE_CHUNK = 1 << 16


def _hex4_table() -> np.ndarray:
    """65536 uint32 whose bytes in memory are the 4 lowercase hex digits of the index."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    index = np.arange(1 << 16)
    chars = [digits[(index >> shift) & 0xF] for shift in (12, 8, 4, 0)]
    return np.stack(chars, axis=1).copy().view(np.uint32).reshape(-1)


_HEX4 = _hex4_table()


class _HexEncoder:
    """Reusable buffers turning float32 chunks into `` hhhhhhhh`` text (one space + 8 hex digits each).

    The two 16-bit halves of each value's bits index _HEX4; the 4-byte results are stored through
    unaligned stride-9 views into a text buffer whose spaces are written once.
    """

    def __init__(self, size: int) -> None:
        self.text = np.full(9 * size, _SPACE, dtype=np.uint8)
        self.high = np.ndarray((size,), np.uint32, buffer=self.text, offset=1, strides=(9,))
        self.low = np.ndarray((size,), np.uint32, buffer=self.text, offset=5, strides=(9,))
        self.index = np.empty(size, dtype=np.intp)
        self.digits = np.empty(size, dtype=np.uint32)

    def encode(self, bits: np.ndarray) -> memoryview:
        """The text of ``bits`` (uint32 float32 bit patterns, at most ``size``); valid until the next call."""
        n = bits.size
        index, digits = self.index[:n], self.digits[:n]
        np.right_shift(bits, 16, out=index, casting="unsafe")
        np.take(_HEX4, index, out=digits)
        self.high[:n] = digits
        np.bitwise_and(bits, 0xFFFF, out=index, casting="unsafe")
        np.take(_HEX4, index, out=digits)
        self.low[:n] = digits
        return memoryview(self.text)[: 9 * n]


def write_wts_line(stream: BinaryIO, name: str, values: np.ndarray, encoder: _HexEncoder | None = None) -> None:
    """Write one canonical tensorrtx line to ``stream``: ``f"{name} {n}"``, ``" " + hex`` per value, newline.

    ``values`` must be floating point; it is flattened in C order and cast to float32 a chunk at
    a time, so memory stays bounded (no text or float32 copy of the whole tensor is made).
    """
    check_wts_name(name)
    flat = np.asarray(values).reshape(-1)
    stream.write(f"{name} {flat.size}".encode("utf-8"))
    if flat.size:
        encoder = encoder or _HexEncoder(min(flat.size, WRITE_CHUNK))
        for start in range(0, flat.size, WRITE_CHUNK):
            part = np.ascontiguousarray(flat[start : start + WRITE_CHUNK].astype(np.float32, copy=False))
            stream.write(encoder.encode(part.view(np.uint32)))
    stream.write(b"\n")


def wts_line(name: str, values: np.ndarray) -> bytes:
    """One canonical tensorrtx line as bytes (see write_wts_line)."""
    stream = io.BytesIO()
    write_wts_line(stream, name, values)
    return stream.getvalue()


def is_wts_storable(values: np.ndarray) -> bool:
    """True for floating-point arrays (the only kind .wts stores)."""
    return np.asarray(values).dtype.kind == "f"


def write_wts(stream: BinaryIO, tensors: Mapping[str, np.ndarray]) -> list[str]:
    """Write floating-point tensors to a binary stream in .wts form; return the skipped names.

    Integer and bool tensors (e.g. BatchNorm ``num_batches_tracked``) are skipped,
    since .wts is float32-only.  All names are checked before anything is written.
    """
    kept = [name for name, values in tensors.items() if is_wts_storable(values)]
    skipped = [name for name, values in tensors.items() if not is_wts_storable(values)]
    for name in kept:
        check_wts_name(name)
    stream.write(f"{len(kept)}\n".encode("ascii"))
    encoder = _HexEncoder(WRITE_CHUNK) if kept else None
    for name in kept:
        write_wts_line(stream, name, tensors[name], encoder)
    return skipped

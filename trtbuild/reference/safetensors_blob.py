"""safetensors blobs without copies: written as a list of buffers, read as views.

The reference plan stores its weights as a safetensors blob (https://github.com/huggingface/safetensors:
u64 header length, JSON header {name: {dtype, shape, data_offsets}}, the data). The library's
``save``/``load`` copy every tensor (twice when saving); these helpers let a plan hold the only
copy of a model's weights, and a loaded engine use them in place.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from .layers import _is_int


#: the alignment of the data (and of every array whose size is a multiple of it): c10's CPU allocator's
ALIGNMENT = 64

_ST_DTYPE = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
             "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
_ST_CODE = {np.dtype(v): k for k, v in _ST_DTYPE.items()}


def safetensors_parts(arrays: dict[str, np.ndarray], at: int = 0) -> list:
    """A safetensors file as [8-byte header length, JSON header, each array's bytes], without
    copying the arrays. The header is padded with spaces (as the format allows) so that the data
    starts 64-aligned when the blob starts at offset `at` of an aligned buffer; larger items go
    first, so every array is aligned to its item size, and within an item size the arrays whose
    byte size is a multiple of 64 go first, so each of them starts 64-aligned: a loaded plan's
    weights can then be used in place by CPU kernels, which want torch's 64-byte alignment."""
    names = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, arrays[n].nbytes % ALIGNMENT != 0, n))
    meta, data, offset = {}, [], 0
    for name in names:
        a = np.ascontiguousarray(arrays[name])
        if a.dtype not in _ST_CODE:
            raise ValueError(f"weights '{name}': numpy dtype {a.dtype} cannot be stored in a safetensors blob")
        meta[name] = {"dtype": _ST_CODE[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        data.append(memoryview(a).cast("B") if a.size else b"")
    head = json.dumps(meta, separators=(",", ":")).encode()
    head += b" " * (-(at + 8 + len(head)) % ALIGNMENT)
    return [struct.pack("<Q", len(head)), head, *data]


def safetensors_views(blob) -> dict[str, np.ndarray]:
    """{name: read-only array sharing the memory of `blob`} of a safetensors blob; ValueError
    saying what is wrong if it is not one (checked as the safetensors library checks)."""
    def fail(why: str):
        raise ValueError(why)

    blob = memoryview(blob).cast("B")
    if len(blob) < 8:
        fail(f"{len(blob)} bytes, shorter than its header length field")
    (n,) = struct.unpack_from("<Q", blob, 0)
    if n > len(blob) - 8:
        fail(f"its header claims {n} bytes but {len(blob) - 8} follow")
    try:
        meta = json.loads(bytes(blob[8:8 + n]))
    except ValueError as e:
        fail(f"the header is not UTF-8 JSON: {e}")
    if not isinstance(meta, dict):
        fail("the header is not a JSON object")
    data = blob[8 + n:]
    arrays, spans = {}, []
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or info.get("dtype") not in _ST_DTYPE:
            fail(f"tensor '{name}' has no known dtype")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
            fail(f"tensor '{name}' has a bad shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= len(data)):
            fail(f"tensor '{name}' has bad data offsets {offsets!r} for {len(data)} bytes of data")
        dtype = np.dtype(_ST_DTYPE[info["dtype"]])
        count = math.prod(shape)
        if offsets[1] - offsets[0] != count * dtype.itemsize:
            fail(f"tensor '{name}' of shape {shape} has {offsets[1] - offsets[0]} bytes")
        spans.append(tuple(offsets))
        array = np.frombuffer(data, dtype, count, offsets[0]) if count else np.zeros(0, dtype)
        array.flags.writeable = False
        arrays[name] = array.reshape(shape)
    end = 0
    for start, stop in sorted(spans):
        if start != end:
            fail("its tensors overlap or leave gaps")
        end = stop
    if end != len(data):
        fail(f"its tensors hold {end} bytes but {len(data)} follow the header")
    return arrays

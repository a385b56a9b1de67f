"""Checks and helpers that several layer types share: errors naming the layer, TensorRT's axes
bitmasks, the strongly typed rules, broadcasting, and the float32 view layers compute in."""

from __future__ import annotations

import torch

from ..core import NetworkError
from ..enums import DataType

FLOATS = (DataType.FLOAT, DataType.HALF, DataType.BF16)
#: the message given for INT8 where the reference needs a float type (tests/helpers/twin.py's REFERENCE_STRICTER
#: matches it: TensorRT-RTX takes INT8 in some of these layers)
INT8_QUANTIZED = ("has type INT8, a quantized type (TensorRT: \"Signed 8-bit integer representing a quantized "
                  "floating-point value\", whose scale only a Q/DQ pair gives); the reference computes this layer "
                  "in FLOAT, HALF or BF16 only (add_cast first)")
#: types the arithmetic layers refuse where the generic rules would let them through (TensorRT-RTX 1.7)
NO_BOOL_UINT8 = (DataType.BOOL, DataType.UINT8)
ARITHMETIC_TYPES = "FLOAT, HALF, BF16, INT8, INT32 or INT64"


def fail(name: str, msg: str):
    raise NetworkError(f"layer '{name}': {msg}")


def need_float(name, dtype, what="input"):
    if dtype == DataType.INT8:
        fail(name, f"{what} {INT8_QUANTIZED}")
    if dtype not in FLOATS:
        fail(name, f"{what} has type {dtype.name}; this layer needs FLOAT, HALF or BF16")


def axes_of(mask: int, rank: int) -> list[int]:
    """The dims a TensorRT axes bitmask selects (bit i: dim i), in increasing order."""
    return [i for i in range(rank) if mask >> i & 1]


def bits(mask: int, rank: int, name: str, what: str = "axes") -> list[int]:
    """axes_of, refusing a mask that selects nothing or a dim beyond the rank."""
    if mask <= 0 or mask >= (1 << rank):
        fail(name, f"{what} bitmask {mask:#b} is invalid for a rank-{rank} input "
                   f"(bit i selects explicit dimension i, bit 0 is the batch; valid masks are 1..{(1 << rank) - 1})")
    return axes_of(mask, rank)


def same_types(name, dtypes):
    if len(set(dtypes)) > 1:
        fail(name, "inputs have different types (" + ", ".join(d.name for d in dtypes) +
             "); a strongly typed network does not convert implicitly, use add_cast")


def no_uint8(name, dtypes):
    """The data-movement layers (shuffle, slice, concatenation) refuse UINT8, as TensorRT-RTX does."""
    if DataType.UINT8 in dtypes:
        fail(name, "input has type UINT8; TensorRT takes UINT8 only as a network input or output, converted by "
                   "add_identity or add_cast")


def check_weights_type(name, weights, dtype, keys):
    for k in keys:
        w = weights.get(k)
        if w is not None and w.size and w.dtype != dtype:
            fail(name, f"{k} weights have type {w.dtype.name} but the input is {dtype.name}; "
                       f"in a strongly typed network weights must match the input type")


def broadcast(name, a, b):
    if len(a) != len(b):
        fail(name, f"inputs have ranks {len(a)} {tuple(a)} and {len(b)} {tuple(b)}; elementwise broadcasting needs "
                   "equal ranks (reshape with add_shuffle first)")
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif x == -1 or y == -1:
            out.append(max(x, y))
        else:
            fail(name, f"dimension {i} does not broadcast: {x} vs {y} (shapes {tuple(a)} and {tuple(b)})")
    return tuple(out)


def f32(t: torch.Tensor) -> torch.Tensor:
    """A float tensor in float32 (layers compute in float32 and round at the output); others as they are."""
    return t.float() if t.is_floating_point() else t


def weights_like(w, x: torch.Tensor) -> torch.Tensor | None:
    """Weights as a float32 tensor on x's device; None for absent or empty weights."""
    return None if w is None or w.numel() == 0 else w.to(device=x.device, dtype=torch.float32)


def same_shape_and_type(p, w, shapes, dtypes, name, plugin):
    """The inference of a layer whose output is its input (shape and type)."""
    return [tuple(shapes[0])], [dtypes[0]]


def wrap_indices(idx: torch.Tensor, size, what: str) -> torch.Tensor:
    """Indices as int64 with negative ones counted from the end (gather, scatter); an index out of range is an
    IndexError (the run fails). One pass finds the extremes: the usual all-in-range, non-negative case costs no
    more than the conversion."""
    idx = idx.long()
    if idx.numel() == 0:
        return idx
    scalar = not isinstance(size, (list, tuple))
    if scalar:
        low, high = torch.aminmax(idx)
        if int(low) >= 0 and int(high) < size:
            return idx
        if int(low) < -size or int(high) >= size:
            raise IndexError(f"{what}: an index is out of range for a dimension of size {size}")
        return torch.where(idx < 0, idx + size, idx)
    bound = torch.as_tensor(size, dtype=torch.long, device=idx.device)
    if bool(((idx < -bound) | (idx >= bound)).any()):
        raise IndexError(f"{what}: an index is out of range for a dimension of size(s) {list(size)}")
    return torch.where(idx < 0, idx + bound, idx)

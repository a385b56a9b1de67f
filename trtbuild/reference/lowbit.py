"""The quantized types narrower than a byte, and FP8 weights: their encodings and how the reference holds them.

TensorRT's Weights of INT4 and FP4 pack two values per byte (DataType.itemsize 0.5); the reference reads the
first value from the low four bits, ONNX's INT4/FLOAT4E2M1 layout (TensorRT's docs do not spell the nibble
order out). FP8 weights are one E4M3 byte each. Weights keeps them unpacked, one value per byte (INT4 as int8
in [-8, 7], FP4 as its 4-bit code, FP8 as its byte), so a weight count stays an element count. At run time a
tensor of these types is held in a torch type that represents every value exactly: INT4 in int8, FP4 (E2M1:
0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) in float8_e4m3fn, FP8 in float8_e4m3fn. Network outputs of
INT4/FP4 are written packed, as TensorRT writes them (pack). E8M0, the OCP Microscaling (MX) scale type that only
a dynamic quantize layer produces, is one byte a value, an unsigned biased exponent (byte e means 2^(e - 127),
0xFF is NaN; no zero, no sign): held in torch.float8_e8m0fnu, whose bytes are exactly these.
"""

from __future__ import annotations

import numpy as np
import torch

from .enums import DataType

#: E2M1 magnitudes by the three low bits of the code (bit 3 is the sign)
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FP4_MAX = 6.0
INT4_MIN, INT4_MAX = -8, 7
#: E8M0's exponent bias and its finite exponent range (bytes 0..254; 255 is NaN)
E8M0_BIAS, E8M0_MIN_EXP, E8M0_MAX_EXP = 127, -127, 127
#: the torch type that holds each narrow type's values at run time
HOLDER = {DataType.INT4: torch.int8, DataType.FP4: torch.float8_e4m3fn}
#: how Weights stores each of these types (unpacked: one value per byte)
STORAGE = {DataType.INT4: np.int8, DataType.FP4: np.uint8, DataType.FP8: np.uint8}


def unpack_nibbles(packed: np.ndarray, count: int) -> np.ndarray:
    """The `count` 4-bit fields of `packed` bytes, low nibble first, as uint8 in [0, 15]."""
    b = np.asarray(packed, np.uint8).reshape(-1)
    return np.stack([b & 0xF, b >> 4], axis=1).reshape(-1)[:count]


def from_bytes(dtype: DataType, raw: bytes, count: int) -> np.ndarray:
    """The stored (unpacked) array of `count` values of `dtype` read from TensorRT's packed layout."""
    data = np.frombuffer(raw, np.uint8)
    if dtype == DataType.FP8:
        return data[:count].copy()
    nibbles = unpack_nibbles(data, count)
    if dtype == DataType.INT4:  # two's complement in four bits
        return (nibbles.astype(np.int16) - ((nibbles >> 3) << 4)).astype(np.int8)
    return nibbles


def fp4_decode(codes) -> torch.Tensor:
    """float32 values of E2M1 codes."""
    codes = torch.as_tensor(np.asarray(codes)).long()
    mag = torch.tensor(FP4_VALUES)[codes & 7]
    return torch.where(codes >= 8, -mag, mag)


def values(dtype: DataType, stored: np.ndarray) -> np.ndarray:
    """The numeric values of stored weights: INT4 as int8, FP4 and FP8 as float32."""
    if dtype == DataType.INT4:
        return stored
    if dtype == DataType.FP4:
        return fp4_decode(stored).numpy()
    return torch.from_numpy(np.ascontiguousarray(stored)).view(torch.float8_e4m3fn).float().numpy()


def holder(dtype: DataType, stored: torch.Tensor) -> torch.Tensor:
    """The run-time tensor of stored weights (see the module doc)."""
    if dtype == DataType.FP4:
        return fp4_decode(stored.cpu().numpy()).to(stored.device).to(torch.float8_e4m3fn)
    if dtype == DataType.FP8:
        return stored.view(torch.float8_e4m3fn)
    return stored


def round_fp4(v: torch.Tensor) -> torch.Tensor:
    """`v` saturated to +-6 and rounded to the nearest E2M1 value, ties to the even code (the one whose
    mantissa bit is 0: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4)."""
    grid = torch.tensor(FP4_VALUES, dtype=torch.float64, device=v.device)
    a = v.double().abs().clamp(max=FP4_MAX).unsqueeze(-1)
    dist = (a - grid).abs()
    best = dist.min(dim=-1, keepdim=True).values
    # among the nearest grid points (one, or two at a tie) take the even code: codes 0, 2, 4, 6 are even
    even = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1], dtype=torch.float64, device=v.device)
    pick = torch.argmin(torch.where(dist == best, even, torch.full_like(dist, 2.0)), dim=-1)
    mag = grid[pick]
    return torch.where(v < 0, -mag, mag).to(torch.float32)


def fp4_encode(v: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8) of values already on the E2M1 grid."""
    v = v.float()
    mag = torch.tensor(FP4_VALUES, device=v.device)
    code = torch.argmin((v.abs().unsqueeze(-1) - mag).abs(), dim=-1).to(torch.uint8)
    return code | (torch.signbit(v).to(torch.uint8) << 3)


def pack(dtype: DataType, held: torch.Tensor) -> torch.Tensor:
    """TensorRT's packed bytes of an INT4 or FP4 tensor held as HOLDER says: two values a byte, the first in the
    low four bits (the layout Weights reads)."""
    flat = held.reshape(-1)
    nib = (flat.to(torch.int16) & 0xF).to(torch.uint8) if dtype == DataType.INT4 else fp4_encode(flat)
    if nib.numel() % 2:
        nib = torch.cat([nib, nib.new_zeros(1)])
    return nib[0::2] | (nib[1::2] << 4)


def e8m0_round_up(v: torch.Tensor) -> torch.Tensor:
    """The smallest power of two >= `v` (v >= 0, float32) as E8M0 (torch.float8_e8m0fnu), saturated to E8M0's finite
    range [2^-127, 2^127]: 0 and anything below 2^-127 give 2^-127 (byte 0), as E8M0 has no zero; NaN stays NaN.
    Computed from the float's exponent and mantissa (frexp), never from a rounded log2."""
    v = v.float()
    mant, exp = torch.frexp(v)  # v = mant * 2^exp, mant in [0.5, 1) for finite v > 0
    exp = torch.where(mant == 0.5, exp - 1, exp).to(torch.int32)  # an exact power of two is its own bound
    exp = torch.where(v > 0, exp, torch.full_like(exp, E8M0_MIN_EXP))
    exp = torch.where(torch.isinf(v), torch.full_like(exp, E8M0_MAX_EXP), exp)
    code = (exp.clamp(E8M0_MIN_EXP, E8M0_MAX_EXP) + E8M0_BIAS).to(torch.uint8)
    code = torch.where(torch.isnan(v), torch.full_like(code, 255), code)
    return code.view(torch.float8_e8m0fnu)

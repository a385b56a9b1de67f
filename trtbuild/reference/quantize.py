"""Explicit quantization in the reference backend: IQuantizeLayer / IDequantizeLayer's checks,
shape and type inference, and execution (TensorRT 10/11 and TensorRT-RTX semantics).

    q = add_quantize(x, scale, DataType.INT8)    # clamp(round_half_even(x * (1 / scale)), -128, 127)
    q = add_quantize(x, scale, DataType.INT4)    # clamp(round_half_even(x * (1 / scale)), -8, 7)
    q = add_quantize(x, scale, DataType.FP8)     # x * (1 / scale) as float8 E4M3, saturated to +-448
    q = add_quantize(x, scale, DataType.FP4)     # x * (1 / scale) as E2M1, saturated to +-6 (lowbit.round_fp4)
    y = add_dequantize(q, scale, DataType.FLOAT) # q * scale, as FLOAT, HALF or BF16

The scale is per tensor (0-D, or one element), per channel (1-D, as many values as the input has along
`axis`; axis -1, the last dimension, unless set) or per block (the input's rank, equal to the input's shape
but in one of its last two dimensions, which it divides: each scale value serves a block of that many
consecutive elements there; `axis` plays no part, as on TensorRT-RTX). The checks are those TensorRT documents
and TensorRT-RTX 1.7's builder applies (tests/reference/test_quantize.py judges every probe): a float input and
an INT8/FP8/INT4/FP4 output for a quantize, the reverse for a dequantize, a float scale, an axis in range, a
per-channel scale of the axis' size, one blocked dimension among the last two. INT4, FP4 and FP8 constants
(quantized weights, lowbit.py) feed dequantize layers only. Stricter than TensorRT-RTX, documented: the scale
must be a build-time constant (TensorRT: "The subgraph which terminates with the scale tensor must be a
build-time constant"; TensorRT-RTX 1.7 also builds a scale fed by a network input), and a zero-point input is
refused (symmetric only). The exception is a dynamic quantize layer's block scales (ops/dynamic_quantize.py): a
dequantize takes them, or a dequantize of them, as its block scale, the one way to dequantize NVFP4 and MXFP8
data; E8M0 scales (MX) go straight into the data's dequantize, to any float output type.

TensorRT multiplies by the reciprocal of the scale, both computed in float32, where its documentation
writes x / scale: real TensorRT output shows it. The two differ where x / scale lies within a float32
rounding of a half (8.15 / 0.1 = 81.49999 but 8.15 * (1 / 0.1) = 81.5 in float32, hence 81 or 82 after
rounding half to even); the reference multiplies, like TensorRT.
"""

from __future__ import annotations

import math

import torch

from .enums import DataType, LayerType
from .infer_window import fail
from .lowbit import INT4_MAX, INT4_MIN, round_fp4

FLOATS = (DataType.FLOAT, DataType.HALF, DataType.BF16)
QUANTIZED = (DataType.INT8, DataType.FP8, DataType.INT4, DataType.FP4)
#: the largest finite float8 E4M3 magnitude; FP8 quantization saturates to it (ONNX QuantizeLinear's
#: saturate=1, the default that TensorRT's ONNX parser imports)
FP8_MAX = 448.0
#: TensorRT's IQuantizeLayer documentation, quoted where the reference refuses what TensorRT-RTX builds
CONSTANT_SCALE = ("TensorRT: \"The subgraph which terminates with the scale tensor must be a build-time constant\" "
                  "(make it with add_constant)")


def _names(types) -> str:
    return ", ".join(t.name for t in types)


def infer(ltype, p, shapes, dtypes, name):
    """([output shape], [output type]) of a quantize or dequantize layer, or NetworkError."""
    quantize = ltype == LayerType.QUANTIZE
    what = "quantize" if quantize else "dequantize"
    if len(shapes) > 2 and shapes[2] is not None:
        fail(name, f"a zero-point input (input 2) is not supported: TensorRT's {what} is symmetric "
                   "(\"zeroPt must only contain zero-valued coefficients\"); leave it unset")
    if len(shapes) < 2 or shapes[1] is None:
        fail(name, f"the {what} layer's scale (input 1) is not set")
    x, s = tuple(shapes[0]), tuple(shapes[1])
    xdt, sdt, to = dtypes[0], dtypes[1], DataType(p["to_type"])
    want_in, want_out = (FLOATS, QUANTIZED) if quantize else (QUANTIZED, FLOATS)
    if xdt not in want_in:
        fail(name, f"input has type {xdt.name} but a {what} layer takes {_names(want_in)}")
    if to not in want_out:
        fail(name, f"output type {to.name}: a {what} layer outputs {_names(want_out)}")
    if sdt not in FLOATS and (quantize or sdt != DataType.E8M0):
        also = "" if quantize else " (or E8M0, a dynamic quantize layer's MX block scales)"
        fail(name, f"the scale has type {sdt.name}; it must be FLOAT, HALF or BF16{also}")
    if sdt != DataType.E8M0:  # TensorRT-RTX 1.7 dequantizes with E8M0 scales to FLOAT, HALF or BF16 alike
        _check_scale_type(quantize, to if quantize else xdt, xdt if quantize else to, sdt, name)
    rank = len(x)
    if rank == 0:
        fail(name, f"the input is 0-D; a {what} layer needs rank >= 1")
    four_bit = to if quantize else xdt
    if four_bit in (DataType.INT4, DataType.FP4) and all(d >= 0 for d in x) and math.prod(x) % 2:
        fail(name, f"a {four_bit.name} {what} of the {x} input: {math.prod(x)} values, an odd count, which 4-bit types "
                   "(two values a byte) do not support (TensorRT-RTX: \"Sub-byte quantization with odd tensor volume "
                   "is not supported\")")
    axis = p["axis"]
    if not -rank <= axis < rank:
        fail(name, f"axis {axis} is out of range [-{rank}, {rank}) for the rank-{rank} input {x}")
    if len(s) >= 2:
        _check_blocks(x, s, name)
    if len(s) == 1 and s[0] != 1:
        size = x[axis % rank]
        if s[0] < 0 or (size >= 0 and size != s[0]):
            fail(name, f"a per-channel scale of {s[0]} values on axis {axis}, but the input {x} has {size} "
                       f"there (set the layer's axis, or give one value per dimension {axis % rank})")
    return [x], [to]


#: the scale types TensorRT-RTX 1.7 compiles for each narrow type, given the float side's type (the quantize's
#: input, the dequantize's output): "float" = FLOAT or that type, "same" = that type only. INT8 takes any.
_SCALE_TYPES = {(True, DataType.INT4): "float", (True, DataType.FP8): "float", (True, DataType.FP4): "same",
                (False, DataType.INT4): "same", (False, DataType.FP4): "same", (False, DataType.FP8): "float"}


def _check_scale_type(quantize: bool, narrow: DataType, wide: DataType, sdt: DataType, name) -> None:
    rule = _SCALE_TYPES.get((quantize, narrow))
    ok = rule is None or sdt == wide or (rule == "float" and sdt == DataType.FLOAT)
    if not ok:
        side = f"{wide.name} input" if quantize else f"{wide.name} output"
        allowed = wide.name if rule == "same" or wide == DataType.FLOAT else f"FLOAT or {wide.name}"
        fail(name, f"a {narrow.name} {'quantize' if quantize else 'dequantize'} with a {side} takes a {allowed} scale, "
                   f"not {sdt.name} (TensorRT-RTX 1.7 compiles no other)")


def _check_blocks(x, s, name) -> None:
    """A block scale: the input's rank, one dimension (among the last two) smaller, dividing the input's."""
    if len(s) != len(x):
        fail(name, f"the scale has shape {s}, the rank-{len(x)} input {x}: a block scale has the input's rank")
    if math.prod(s) == 1:
        fail(name, f"the scale has shape {s} but one value: per-tensor scales are 0-D or 1-D (TensorRT-RTX: "
                   "\"ScaleMode is illegal\")")
    differ = [i for i, (a, b) in enumerate(zip(x, s)) if a != b]
    if len(differ) != 1:
        fail(name, f"the block scale {s} differs from the input {x} in {len(differ)} dimensions; exactly one "
                   "(the blocked one) must differ")
    i = differ[0]
    if i < len(x) - 2:
        fail(name, f"the block scale {s} blocks dimension {i} of the input {x}; the blocked dimension must be the "
                   "last or second-to-last")
    if s[i] <= 0 or (x[i] >= 0 and x[i] % s[i]):
        fail(name, f"the block scale's {s[i]} values along dimension {i} do not divide the input's {x[i]}")


def _scale_like(scale: torch.Tensor, x: torch.Tensor, axis: int) -> torch.Tensor:
    s = scale.to(torch.float32)
    if s.dim() >= 2:  # a block scale: each value repeated over its block of the blocked dimension
        for i, (a, b) in enumerate(zip(x.shape, s.shape)):
            if a != b:
                s = s.repeat_interleave(a // b, dim=i)
        return s
    if s.dim() == 1 and s.numel() > 1:
        shape = [1] * x.dim()
        shape[axis % x.dim()] = s.numel()
        return s.reshape(shape)
    return s.reshape(())


def quantize(p, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """INT8/INT4: clamp(round_half_to_even(x * (1 / scale))) to the type's range; FP8: x * (1 / scale)
    saturated to +-448 and rounded to nearest (even) float8 E4M3; FP4: saturated to +-6 and rounded to the
    nearest (even) E2M1 value. Computed in float32, as TensorRT does (module doc)."""
    v = x.to(torch.float32) * torch.reciprocal(_scale_like(scale, x, p["axis"]))
    return round_to(DataType(p["to_type"]), v)


def round_to(to: DataType, v: torch.Tensor) -> torch.Tensor:
    """`v` (float32, already times the reciprocal scale) as a quantize to `to` gives it (quantize's doc)."""
    if to == DataType.INT8:
        return torch.clamp(torch.round(v), -128, 127).to(torch.int8)  # torch.round: half to even
    if to == DataType.INT4:
        return torch.clamp(torch.round(v), INT4_MIN, INT4_MAX).to(torch.int8)
    if to == DataType.FP4:
        return round_fp4(v).to(torch.float8_e4m3fn)  # exact: every E2M1 value is an E4M3 value
    return torch.clamp(v, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def dequantize(p, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q * scale in float32 (rounded to the output type by the caller)."""
    return q.to(torch.float32) * _scale_like(scale, q, p["axis"])


def _reaches_input(network, tensor, seen: set) -> "object | None":
    """The network input `tensor` is computed from, or None if it is a build-time constant or comes from a dynamic
    quantize layer (its block scales are a scale by design: DQ(data, DQ(scales, s2)) is how TensorRT dequantizes
    NVFP4, DQ(data, scales) MXFP8)."""
    todo = [tensor]
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        if t._producer is None:
            return t
        if t._producer._TYPE != LayerType.DYNAMIC_QUANTIZE:
            todo.extend(t._producer._inputs)
    return None


def validate(network) -> None:
    """Whole-network rules, checked at build: each Q/DQ scale is a build-time constant (or computed from a dynamic
    quantize layer's block scales), a dynamic quantize layer is one TensorRT-RTX builds (ops/dynamic_quantize.py),
    and a quantized constant (INT8, INT4, FP4 or FP8 weights) feeds dequantize layers only (TensorRT-RTX:
    "Quantized constant ... is only allowed before DQ"), never a network output."""
    consumers: dict[int, list] = {}
    for layer in network._layers:
        for i, t in enumerate(layer._inputs):
            if t is not None:
                consumers.setdefault(id(t), []).append((layer, i))
    from .ops.dynamic_quantize import check_build

    for layer in network._layers:
        if layer._TYPE == LayerType.DYNAMIC_QUANTIZE:
            scale = layer._inputs[1] if len(layer._inputs) > 1 else None
            check_build(layer, None if scale is None else _reaches_input(network, scale, set()))
        if layer._TYPE in (LayerType.QUANTIZE, LayerType.DEQUANTIZE):
            source = _reaches_input(network, layer._inputs[1], set())
            if source is not None:
                fail(layer.name, f"its scale '{layer._inputs[1].name}' is computed from the network input "
                                 f"'{source.name}'; {CONSTANT_SCALE}")
        wtype = layer._weights["weights"].dtype if layer._TYPE == LayerType.CONSTANT else None
        if wtype in QUANTIZED:
            t = layer._outputs[0]
            bad = [c.name for c, i in consumers.get(id(t), []) if c._TYPE != LayerType.DEQUANTIZE or i != 0]
            if bad or t in network._outputs:
                where = f"layer '{bad[0]}'" if bad else "a network output"
                fail(layer.name, f"{wtype.name} weights make a quantized constant, which TensorRT allows only as the "
                                 f"input of dequantize layers, but it feeds {where}; use FLOAT, HALF, BF16, INT32 "
                                 "or INT64 weights, or add_dequantize it")


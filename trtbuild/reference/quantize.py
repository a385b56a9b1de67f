"""Explicit quantization in the reference backend: IQuantizeLayer / IDequantizeLayer's checks,
shape and type inference, and execution (TensorRT 10/11 and TensorRT-RTX semantics).

    q = add_quantize(x, scale, DataType.INT8)    # clamp(round_half_even(x * (1 / scale)), -128, 127)
    q = add_quantize(x, scale, DataType.FP8)     # x * (1 / scale) as float8 E4M3, saturated to +-448
    y = add_dequantize(q, scale, DataType.FLOAT) # q * scale, as FLOAT, HALF or BF16

The scale is per tensor (0-D, or one element) or per channel (1-D, as many values as the input
has along `axis`; axis -1, the last dimension, unless set). The checks are those TensorRT
documents and TensorRT-RTX 1.7's builder applies (tests/reference/test_quantize.py judges every probe):
a float input and an INT8/FP8 output for a quantize, the reverse for a dequantize, a float scale,
an axis in range, a per-channel scale of the axis' size. Stricter than TensorRT-RTX, each one
documented: the scale must be a build-time constant (TensorRT: "The subgraph which terminates
with the scale tensor must be a build-time constant"; TensorRT-RTX 1.7 also builds a scale fed by
a network input), INT4/FP4 and block quantization (a scale of rank >= 2: "The scale value must be
either a scalar ... or a 1D tensor"; TensorRT-RTX 1.7 builds a scale of the input's rank that
differs from it in one dimension) are refused, and so is a zero-point input (symmetric only).

TensorRT multiplies by the reciprocal of the scale, both computed in float32, where its documentation
writes x / scale: real TensorRT output shows it. The two differ where x / scale lies within a float32
rounding of a half (8.15 / 0.1 = 81.49999 but 8.15 * (1 / 0.1) = 81.5 in float32, hence 81 or 82 after
rounding half to even); the reference multiplies, like TensorRT.
"""

from __future__ import annotations

import torch

from .enums import DataType, LayerType
from .infer_window import fail

FLOATS = (DataType.FLOAT, DataType.HALF, DataType.BF16)
QUANTIZED = (DataType.INT8, DataType.FP8)
#: the largest finite float8 E4M3 magnitude; FP8 quantization saturates to it (ONNX QuantizeLinear's
#: saturate=1, the default that TensorRT's ONNX parser imports)
FP8_MAX = 448.0
#: TensorRT's IQuantizeLayer documentation, quoted where the reference refuses what TensorRT-RTX builds
CONSTANT_SCALE = ("TensorRT: \"The subgraph which terminates with the scale tensor must be a build-time constant\" "
                  "(make it with add_constant)")
BLOCK_SCALE = ("TensorRT: \"The scale value must be either a scalar for per-tensor quantization, or a 1D tensor for "
               "per-axis quantization\" (the reference has no block quantization, which TensorRT-RTX 1.7 builds "
               "for a scale of the input's rank)")
FOUR_BIT = ("TensorRT: \"The output type, if constrained, must be constrained to tensorrt.int8 or tensorrt.fp8\"; "
            "the reference has no storage for INT4/FP4")


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
    if quantize and to in (DataType.INT4, DataType.FP4):
        fail(name, f"output type {to.name}: {FOUR_BIT}")
    if to not in want_out:
        fail(name, f"output type {to.name}: a {what} layer outputs {_names(want_out)}")
    if sdt not in FLOATS:
        fail(name, f"the scale has type {sdt.name}; it must be FLOAT, HALF or BF16")
    rank = len(x)
    if rank == 0:
        fail(name, f"the input is 0-D; a {what} layer needs rank >= 1")
    axis = p["axis"]
    if not -rank <= axis < rank:
        fail(name, f"axis {axis} is out of range [-{rank}, {rank}) for the rank-{rank} input {x}")
    if len(s) >= 2:
        fail(name, f"the scale has shape {s}: {BLOCK_SCALE}")
    if len(s) == 1 and s[0] != 1:
        size = x[axis % rank]
        if s[0] < 0 or (size >= 0 and size != s[0]):
            fail(name, f"a per-channel scale of {s[0]} values on axis {axis}, but the input {x} has {size} "
                       f"there (set the layer's axis, or give one value per dimension {axis % rank})")
    return [x], [to]


def _scale_like(scale: torch.Tensor, x: torch.Tensor, axis: int) -> torch.Tensor:
    s = scale.to(torch.float32)
    if s.dim() == 1 and s.numel() > 1:
        shape = [1] * x.dim()
        shape[axis % x.dim()] = s.numel()
        return s.reshape(shape)
    return s.reshape(())


def quantize(p, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """INT8: clamp(round_half_to_even(x * (1 / scale)), -128, 127); FP8: x * (1 / scale) saturated to
    +-448 and rounded to nearest (even) float8 E4M3. Computed in float32, as TensorRT does (module doc)."""
    v = x.to(torch.float32) * torch.reciprocal(_scale_like(scale, x, p["axis"]))
    if DataType(p["to_type"]) == DataType.INT8:
        return torch.clamp(torch.round(v), -128, 127).to(torch.int8)  # torch.round: half to even
    return torch.clamp(v, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def dequantize(p, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q * scale in float32 (rounded to the output type by the caller)."""
    return q.to(torch.float32) * _scale_like(scale, q, p["axis"])


def _reaches_input(network, tensor, seen: set) -> "object | None":
    """The network input `tensor` is computed from, or None if it is a build-time constant."""
    todo = [tensor]
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        if t._producer is None:
            return t
        todo.extend(t._producer._inputs)
    return None


def validate(network) -> None:
    """Whole-network rules, checked at build: no dynamic quantize layer (ops/dynamic_quantize.py), each Q/DQ
    scale is a build-time constant, and an INT8 constant (a quantized weight) feeds dequantize layers only
    (TensorRT-RTX: "Quantized constant ... is only allowed before DQ"), never a network output."""
    consumers: dict[int, list] = {}
    for layer in network._layers:
        for i, t in enumerate(layer._inputs):
            if t is not None:
                consumers.setdefault(id(t), []).append((layer, i))
    from .ops.dynamic_quantize import NOT_BUILT

    for layer in network._layers:
        if layer._TYPE == LayerType.DYNAMIC_QUANTIZE:
            fail(layer.name, NOT_BUILT)
        if layer._TYPE in (LayerType.QUANTIZE, LayerType.DEQUANTIZE):
            source = _reaches_input(network, layer._inputs[1], set())
            if source is not None:
                fail(layer.name, f"its scale '{layer._inputs[1].name}' is computed from the network input "
                                 f"'{source.name}'; {CONSTANT_SCALE}")
        if layer._TYPE == LayerType.CONSTANT and layer._weights["weights"].dtype == DataType.INT8:
            t = layer._outputs[0]
            bad = [c.name for c, i in consumers.get(id(t), []) if c._TYPE != LayerType.DEQUANTIZE or i != 0]
            if bad or t in network._outputs:
                where = f"layer '{bad[0]}'" if bad else "a network output"
                fail(layer.name, f"INT8 weights make a quantized constant, which TensorRT allows only as the "
                                 f"input of dequantize layers, but it feeds {where}; use FLOAT, HALF, BF16, INT32 "
                                 "or INT64 weights, or add_dequantize it")


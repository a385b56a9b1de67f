"""Shared helpers of the normalization builders: typed constants, casts, and range-safe pieces.

In a strongly typed network every layer computes in its input type, so fp16 (max 65504, smallest
normal 2**-14 ~ 6.1e-5) overflows as soon as an intermediate such as a sum of squares leaves
that range, and bf16 (8-bit mantissa) rounds every intermediate to ~2**-9. Two strongly typed
remedies exist and the builders use them (each module's docstring says which and why):

- an fp32 island: ``add_cast`` to FLOAT before the risky part and back to the input type after
  (``to_float`` / ``restore``);
- pre-scaling by the per-position max-abs ``m = max(max_c |x|, tiny)`` (``max_abs``), so that
  ``x / m`` lies in [-1, 1] and sums of squares over C channels are at most C.

BF16 has no numpy type, so weights cannot be made for it: weighted layers run in FLOAT around
casts (``scale_channel``), and constants are made in FLOAT and cast (``const``).

All layers are named under the caller's ``name``; weight arrays handed to TensorRT are kept alive
for the network's lifetime (the real ``trt.Weights`` does not copy numpy memory).
"""

from __future__ import annotations

import math

import numpy as np

from trtbuild.backend import trt_of

from trtbuild.weights.provenance import alias

from .common import BuilderError, named, out, typed_array

FP16_MAX = 65504.0
FP16_MIN_NORMAL = 2.0 ** -14
FP32_MIN_NORMAL = float(np.finfo(np.float32).tiny)
STRATEGIES = ("safe", "naive")
IMPLS = ("auto", "native", "composed")


# -- checks ----------------------------------------------------------------------------------

def kind(network, t, name: str) -> str:
    """'fp32', 'fp16' or 'bf16' for a float tensor; BuilderError naming the layer otherwise."""
    trt = trt_of(network)
    dt = t.dtype
    if dt == trt.DataType.FLOAT:
        return "fp32"
    if dt == trt.DataType.HALF:
        return "fp16"
    if dt == trt.DataType.BF16:
        return "bf16"
    raise BuilderError(f"layer '{name}': input '{t.name}' has type {dt}; FLOAT, HALF or BF16 is needed")


def check_choice(value: str, allowed, what: str, name: str) -> str:
    if value not in allowed:
        raise BuilderError(f"layer '{name}': {what}={value!r} is not one of {', '.join(map(repr, allowed))}")
    return value


def check_rank(x, lo: int, hi: int, name: str, why: str) -> int:
    rank = len(x.shape)
    if not lo <= rank <= hi:
        span = f"{lo}" if lo == hi else f"{lo}..{hi}"
        raise BuilderError(f"layer '{name}': input '{x.name}' has shape {tuple(x.shape)} (rank {rank}); "
                           f"rank {span} is needed ({why})")
    return rank


def channels(x, name: str, why: str) -> int:
    """The channel count (dim 1) of `x`, which must be known at build time; the batch and spatial dims
    may be dynamic (-1, set by an optimization profile)."""
    c = tuple(x.shape)[1]
    if c < 0:
        raise BuilderError(f"layer '{name}': input '{x.name}' has shape {tuple(x.shape)}; dim 1 (C) must be known "
                           f"at build time ({why})")
    return c


def dynamic_dims(x, first: int = 2) -> list[int]:
    """The positions of the dims of `x` from `first` on that are dynamic (-1)."""
    return [i for i, d in enumerate(tuple(x.shape)) if i >= first and d < 0]


def dims_text(dims) -> str:
    """[2] -> 'dim 2', [2, 3] -> 'dims 2, 3'."""
    return ("dim " if len(dims) == 1 else "dims ") + ", ".join(map(str, dims))


def vector(values, n: int, what: str, name: str, default: float | None = None) -> np.ndarray:
    """A float64 vector of exactly `n` finite values (None gives `default` everywhere)."""
    if values is None:
        if default is None:
            raise BuilderError(f"layer '{name}': {what} is required")
        return np.full(n, float(default))
    arr = np.asarray(values.detach().cpu().numpy() if hasattr(values, "detach") else values, dtype=np.float64)
    if isinstance(values, np.ndarray):  # a float64 copy holds a key's float32 values exactly: it keeps the key
        alias(arr, values)
    if arr.ndim == 0:
        raise BuilderError(f"layer '{name}': {what} must hold {n} values (one per channel), got a scalar")
    arr = arr.reshape(-1)
    if arr.size != n:
        raise BuilderError(f"layer '{name}': {what} has {arr.size} values but {n} are needed (one per channel)")
    if not np.all(np.isfinite(arr)):
        raise BuilderError(f"layer '{name}': {what} contains NaN or Inf")
    return arr


def positive_eps(eps, name: str, allow_zero: bool = False) -> float:
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0 or (eps == 0 and not allow_zero):
        raise BuilderError(f"layer '{name}': eps must be finite and {'>= 0' if allow_zero else '> 0'}, got {eps}")
    return eps


def fits_fp16(values: np.ndarray, allow_subnormal: bool = False) -> bool:
    """True when every value is representable in fp16 without overflow or (unless allowed)
    loss of relative precision to subnormals; zeros are fine."""
    a = np.abs(np.asarray(values, dtype=np.float64))
    if not np.all(np.isfinite(a)) or np.any(a > FP16_MAX):
        return False
    return allow_subnormal or bool(np.all((a == 0) | (a >= FP16_MIN_NORMAL)))


# -- typed pieces ----------------------------------------------------------------------------

def cast(network, t, dtype, name: str):
    """`t` cast to `dtype` (a layer named `name`), or `t` itself when it already has that type."""
    if t.dtype == dtype:
        return t
    return out(network.add_cast(t, dtype), name)


def to_float(network, x, name: str):
    """(x as FLOAT, x's original dtype); the cast layer, if any, is named `name`."""
    return cast(network, x, trt_of(network).DataType.FLOAT, name), x.dtype


def restore(network, y, dtype, name: str):
    """`y` cast back to `dtype` (layer `name`) when it differs."""
    return cast(network, y, dtype, name)


def _typed_array(network, like, array) -> np.ndarray:
    """`array` in `like`'s numpy type (HALF: float16, else float32), kept alive with the network; naive fp16
    builds may overflow on purpose (safe ones check first). A state_dict key's values, also as :func:`vector`'s
    float64 copy, keep their key (trtbuild.layers.common.typed_array), so their weights are named after it."""
    trt = trt_of(network)
    np_type = np.float16 if like.dtype == trt.DataType.HALF else np.float32
    return typed_array(network, np_type, array, overflow_ok=True)


def const(network, array, like, name: str):
    """A constant with `array`'s shape and `like`'s type; BF16 is made in FLOAT and cast
    (layers `name`/f32 and `name`)."""
    trt = trt_of(network)
    arr = _typed_array(network, like, array)
    if like.dtype == trt.DataType.BF16:
        c = out(network.add_constant(trt.Dims(arr.shape), trt.Weights(arr)), f"{name}/f32")
        return cast(network, c, trt.DataType.BF16, name)
    return out(network.add_constant(trt.Dims(arr.shape), trt.Weights(arr)), name)


def scalar(network, value: float, like, name: str):
    """A constant holding `value`, shaped [1]*rank(like) to broadcast in elementwise layers."""
    return const(network, np.full([1] * len(like.shape), float(value)), like, name)


def elementwise(network, a, b, op, name: str):
    return out(network.add_elementwise(a, b, op), name)


def weights_ok(network, x) -> bool:
    """Whether weights (scale layers) can be made for `x`'s type: FLOAT or HALF, rank >= 3."""
    trt = trt_of(network)
    return x.dtype in (trt.DataType.FLOAT, trt.DataType.HALF) and len(x.shape) >= 3


def square(network, x, name: str, via_power: bool = False):
    """x**2 as x * x (elementwise PROD, exact for negative x on every backend). via_power=True
    uses a UNIFORM scale layer with power 2 instead, as tensorrtx does (weights of x's type; not
    for BF16): some TensorRT builds evaluate pow(x, y) as NaN for negative x (seen in TensorRT-RTX,
    pytorch/TensorRT#4181), so only the naive compositions use it."""
    trt = trt_of(network)
    if via_power and weights_ok(network, x):
        return out(network.add_scale_nd(x, trt.ScaleMode.UNIFORM, None, None,
                                        _typed_array(network, x, [2.0]), channel_axis=1), name)
    return elementwise(network, x, x, trt.ElementWiseOperation.PROD, name)


def uniform_affine(network, x, scale: float, shift: float, power: float, name: str):
    """(x * scale + shift) ** power: one UNIFORM scale layer where weights can be made, else
    elementwise layers with typed constants (`name`/mul, `name`/add, `name`/pow)."""
    trt = trt_of(network)
    if weights_ok(network, x):
        w = [None if v is None else _typed_array(network, x, [v]) for v in (shift, scale, power)]
        return out(network.add_scale_nd(x, trt.ScaleMode.UNIFORM, w[0], w[1], w[2], channel_axis=1), name)
    E = trt.ElementWiseOperation
    y = x
    if scale is not None and scale != 1.0:
        y = elementwise(network, y, scalar(network, scale, y, f"{name}/scale_c"), E.PROD, f"{name}/mul")
    if shift is not None and shift != 0.0:
        y = elementwise(network, y, scalar(network, shift, y, f"{name}/shift_c"), E.SUM, f"{name}/add")
    if power is not None and power != 1.0:
        y = elementwise(network, y, scalar(network, power, y, f"{name}/power_c"), E.POW, f"{name}/pow")
    if y is x:
        y = out(network.add_identity(x), f"{name}/identity")
    return y


def scale_channel(network, x, scale, shift, name: str, channel_axis: int = 1):
    """y = x * scale[c] + shift[c] as one CHANNEL scale layer named `name` (x rank >= 3).

    FLOAT and HALF use weights of their own type; BF16 has no weight type, so it runs in FLOAT
    between casts `name`/to_f32 and `name`/to_bf16. Callers decide when HALF weights are safe.
    """
    trt = trt_of(network)
    if kind(network, x, name) == "bf16":
        x32 = cast(network, x, trt.DataType.FLOAT, f"{name}/to_f32")
        y = scale_channel(network, x32, scale, shift, name, channel_axis)
        return cast(network, y, trt.DataType.BF16, f"{name}/to_bf16")
    w_shift = None if shift is None else _typed_array(network, x, shift)
    w_scale = None if scale is None else _typed_array(network, x, scale)
    return out(network.add_scale_nd(x, trt.ScaleMode.CHANNEL, w_shift, w_scale, None,
                                    channel_axis=channel_axis), name)


def tiny_for(network, x) -> float:
    """The smallest positive normal number of `x`'s type (the floor for max-abs pre-scaling)."""
    return FP16_MIN_NORMAL if x.dtype == trt_of(network).DataType.HALF else FP32_MIN_NORMAL


def max_abs(network, x, axes: int, name: str):
    """Per-position scale m = max(max_{axes} |x|, tiny), keep_dims, in x's type.

    Layers: `name`/abs, `name`/absmax, `name`/absmax_floor (+ constant `name`/tiny). Dividing x by
    m maps it into [-1, 1] exactly where m is the true max (x/x computes to 1), and all-zero
    positions stay 0 instead of becoming 0/0.
    """
    trt = trt_of(network)
    a = out(network.add_unary(x, trt.UnaryOperation.ABS), f"{name}/abs")
    m = out(network.add_reduce(a, trt.ReduceOperation.MAX, axes, True), f"{name}/absmax")
    floor = scalar(network, tiny_for(network, x), m, f"{name}/tiny")
    return elementwise(network, m, floor, trt.ElementWiseOperation.MAX, f"{name}/absmax_floor")


def reshape(network, x, dims, name: str):
    """add_shuffle with reshape_dims (0 copies the input dim at that position, -1 is inferred)."""
    layer = named(network.add_shuffle(x), name)
    layer.reshape_dims = tuple(int(d) for d in dims)
    return out(layer, name)


def shuffle(network, x, name: str, first=None, dims=None, second=None):
    """One add_shuffle: transpose by `first`, reshape to `dims` (0 copies the dim at that position of
    the transposed tensor), transpose by `second`; each step is skipped when None. With 0s and
    transposes it keeps dynamic dims, where a reshape to literal sizes cannot."""
    layer = named(network.add_shuffle(x), name)
    if first is not None:
        layer.first_transpose = tuple(int(a) for a in first)
    if dims is not None:
        layer.reshape_dims = tuple(int(d) for d in dims)
    if second is not None:
        layer.second_transpose = tuple(int(a) for a in second)
    return out(layer, name)


def finish(y, name: str):
    """Name the builder's result tensor `name` (its layer keeps its own `name`/... name)."""
    y.name = name
    return y

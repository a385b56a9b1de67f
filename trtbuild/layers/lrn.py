"""Local response normalization across channels, matching ``torch.nn.functional.local_response_norm``:

    y = x / (k + alpha / size * sum_{c' in window(c)} x[c']^2) ** beta

with the window zero-padded by size // 2 channels before and (size - 1) // 2 after (torch's
padding; for odd sizes it is centred, for even sizes one more channel is taken before than after).
Inputs (N, C, ...) of rank 3, 4 or 5 (any rank >= 3 works).

impl="native" uses ``add_lrn``: TensorRT's ILRNLayer needs an odd window in [1, 15],
alpha in [-1e20, 1e20], beta in [0.01, 1e5] and k in [1e-5, 1e10] (documented ILRNLayer ranges),
and these are checked here with an error naming the layer. TensorRT's operator reference defines
the window over dimension n-2 of [D0..Dn], i.e. the channel of a 4-D NCHW tensor (not axis 1 of
a 3-D or 5-D one), so non-4-D inputs are reshaped to (N, C, S, 1) around add_lrn; the same page
lists float32 as LRN's only data type, one more reason for the safe strategy's fp32 island.
impl="composed" squares x (x * x), reshapes it to (N, 1, C, S) and takes a (size x 1) AVERAGE pooling with explicit zero
padding (size // 2, (size - 1) // 2) and average_count_excludes_padding=False, so the denominator is
always `size`, exactly torch's avg_pool over the padded channels; then one UNIFORM scale layer
computes (alpha * avg + k) ** -beta and a PROD applies it. It supports any window and parameters.
impl="auto" picks native when its constraints hold, else composed.

Dynamic shapes. N and the spatial dims may be dynamic (an optimization profile sets them). The
reshapes to (N, C, S, 1) and (N, 1, C, S) copy N (and C) with 0 and flatten the spatial dims with
-1, and the way back restores one dynamic spatial dim with -1; with two or more (dynamic H and W),
the composed LRN instead transposes C to the first pooled dim, (N, H, C, W) or (N, D, C, H, W), pools
a (size x 1) or (size x 1 x 1) window there and transposes back, which keeps every dim; the native
one on a 4-D input needs no reshape at all. A native LRN on a rank-5 (or higher) input with two or
more dynamic spatial dims is refused (impl="auto" takes the composed one), and the composed LRN's
reshape needs C known at build time.

Range safety. LRN is not scale invariant (k is not scaled with x), so per-position pre-scaling
would have to carry k / m^2 along, which itself overflows fp16 for small m; the robust choice is
an fp32 island: strategy="safe" (default) casts fp16/bf16 inputs to FLOAT, runs the native or
composed LRN there and casts the result back (x^2 of any fp16 value is < 4.3e9, far inside fp32).
strategy="naive" computes in the input type: the composed form overflows in x^2 once |x| > 256
(then (k + alpha * inf)^-beta = 0 and the output collapses to 0), and in the window average
once it exceeds 65504. For the native layer the
reference backend computes internally in fp32, so its naive fp16 rows pass there; on a GPU the
precision inside TensorRT's LRN kernel is TensorRT's choice, which the safe cast takes out of play.

Layers are named under `name` (/to_f32, /to_nc_s1, /lrn or /sq, /to_nc1s or /to_window_view,
/window_avg, /to_input_shape, /denom, /mul, /from_f32); the returned tensor is named `name`.
"""

from __future__ import annotations

import math

from trtbuild.backend import trt_of

from . import safe_range as S
from .common import BuilderError, named, out

__all__ = ["lrn", "native_lrn_allowed"]

NATIVE_MAX_WINDOW = 15


def native_lrn_allowed(size: int, alpha: float, beta: float, k: float) -> str | None:
    """None when TensorRT's ILRNLayer accepts these parameters, else the reason it does not."""
    if size < 1 or size > NATIVE_MAX_WINDOW or size % 2 == 0:
        return f"TensorRT's ILRNLayer needs an odd window in [1, {NATIVE_MAX_WINDOW}], got size={size}"
    if not -1e20 <= alpha <= 1e20:
        return f"TensorRT's ILRNLayer needs alpha in [-1e20, 1e20], got {alpha}"
    if not 0.01 <= beta <= 1e5:
        return f"TensorRT's ILRNLayer needs beta in [0.01, 1e5], got {beta}"
    if not 1e-5 <= k <= 1e10:
        return f"TensorRT's ILRNLayer needs k in [1e-5, 1e10], got {k}"
    return None


def lrn(network, x, size: int, alpha: float, beta: float, k: float, name: str,
        impl: str = "auto", strategy: str = "safe"):
    """Local response normalization of `x` (N, C, ...) across channels; returns the output.

    impl: "auto" | "native" (add_lrn) | "composed" (pooling over channels; any size).
    strategy: "safe" (fp32 island for fp16/bf16) | "naive" (compute in the input type).
    """
    S.check_choice(impl, S.IMPLS, "impl", name)
    S.check_choice(strategy, S.STRATEGIES, "strategy", name)
    S.check_rank(x, 3, 8, name, "LRN works across channel axis 1 of (N, C, ...), as torch's local_response_norm")
    S.kind(network, x, name)
    if isinstance(size, bool) or int(size) != size or size < 1:
        raise BuilderError(f"layer '{name}': size must be a positive integer, got {size!r}")
    size, alpha, beta, k = int(size), float(alpha), float(beta), float(k)
    if not all(math.isfinite(v) for v in (alpha, beta, k)):
        raise BuilderError(f"layer '{name}': alpha, beta and k must be finite, got {alpha}, {beta}, {k}")
    reason = native_lrn_allowed(size, alpha, beta, k)
    if impl == "native" and reason:
        raise BuilderError(f"layer '{name}': impl='native' is not possible: {reason}; use impl='composed' or 'auto'")
    use_native = impl == "native" or (impl == "auto" and reason is None)
    rank, dynamic = len(x.shape), S.dynamic_dims(x)
    if use_native and rank != 4 and len(dynamic) > 1:
        if impl == "native":
            raise BuilderError(f"layer '{name}': input '{x.name}' has shape {tuple(x.shape)}; impl='native' needs all "
                               f"but one of dims 2..{rank - 1} known at build time on a rank-{rank} input "
                               f"({S.dims_text(dynamic)} are dynamic, and TensorRT's LRN windows over the C of a 4-D "
                               f"view, so the input is reshaped to (N, C, S, 1) and back, which restores one dynamic "
                               f"dim at most); use impl='composed' or 'auto'")
        use_native = False  # auto: the composed LRN takes any dynamic dims
    if not use_native and len(dynamic) <= 1:
        S.channels(x, name, "the composed LRN reshapes to (N, 1, C, S) and back")
    dtype = x.dtype
    if strategy == "safe" or use_native:  # TensorRT's LRN operator takes FLOAT only
        x, _ = S.to_float(network, x, f"{name}/to_f32")
    if use_native:
        y = _native(network, x, size, alpha, beta, k, name)
    else:
        y = _composed(network, x, size, alpha, beta, k, name)
    return S.finish(S.restore(network, y, dtype, f"{name}/from_f32"), name)


def _native(network, x, size: int, alpha: float, beta: float, k: float, name: str):
    """add_lrn on a 4-D view: TensorRT's LRN operator windows over dimension rank-3 (the C of NCHW),
    so other ranks are reshaped to (N, C, S, 1) and back (0 copies N and C; the caller makes sure at
    most one of the spatial dims is dynamic, which the -1 of the way back restores)."""
    if len(x.shape) == 4:
        return out(network.add_lrn(x, size, alpha, beta, k), f"{name}/lrn")
    x4 = S.reshape(network, x, (0, 0, -1, 1), f"{name}/to_nc_s1")
    y4 = out(network.add_lrn(x4, size, alpha, beta, k), f"{name}/lrn")
    return S.reshape(network, y4, (0, 0, *tuple(x.shape)[2:]), f"{name}/to_input_shape")


def _composed(network, x, size: int, alpha: float, beta: float, k: float, name: str):
    trt = trt_of(network)
    rank = len(x.shape)
    sq = S.square(network, x, f"{name}/sq")
    flat = len(S.dynamic_dims(x)) <= 1
    if flat:  # (N, 1, C, S) and back: the -1 restores at most one dynamic dim
        c = tuple(x.shape)[1]
        view = S.reshape(network, sq, (0, 1, c, -1), f"{name}/to_nc1s")
        nsp = 2
    else:  # two or more dynamic spatial dims (rank >= 4): C becomes the first pooled dim, (N, H, C, W) or
        nsp = min(rank - 2, 3)  # (N, D, C, H, W), so the window runs over C with 1 along the others
        perm = [0, *range(2, rank - nsp + 1), 1, *range(rank - nsp + 1, rank)]
        view = S.shuffle(network, sq, f"{name}/to_window_view", first=perm)
    rest = (1,) * (nsp - 1)
    pool = named(network.add_pooling_nd(view, trt.PoolingType.AVERAGE, trt.Dims((size, *rest))), f"{name}/window_avg")
    pool.stride_nd = trt.Dims((1, *rest))
    pool.pre_padding = trt.Dims((size // 2, *[0] * (nsp - 1)))
    pool.post_padding = trt.Dims(((size - 1) // 2, *[0] * (nsp - 1)))
    pool.average_count_excludes_padding = False
    avg_view = out(pool, f"{name}/window_avg")
    if flat:
        avg = S.reshape(network, avg_view, (0, c, *tuple(x.shape)[2:]), f"{name}/to_input_shape")
    else:
        avg = S.shuffle(network, avg_view, f"{name}/to_input_shape", first=[perm.index(i) for i in range(rank)])
    inv = S.uniform_affine(network, avg, alpha, k, -beta, f"{name}/denom")
    return S.elementwise(network, x, inv, trt.ElementWiseOperation.PROD, f"{name}/mul")

"""Pooling builders: max and average pooling as torch.nn.MaxPoolNd / AvgPoolNd (ceil_mode included), global and
adaptive average pooling, and PyTorch's pooling output size.

Each builder is a plain function ``(network, tensor, params..., name) -> ITensor`` that names every layer it adds
(``name`` or ``name/part``) and runs unchanged on the real ``tensorrt`` module and on ``trtbuild.reference``.
They are importable from trtbuild.layers.basic too.
"""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of

from .common import BuilderError, constant, out
from .spatial import _ntuple, _shape, _unsqueezed

__all__ = ["max_pool", "avg_pool", "adaptive_avg_pool", "global_avg_pool", "pool_output_size"]


def pool_output_size(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (0 where PyTorch refuses the pooling), including its rule that
    with ``ceil_mode`` a last window starting entirely in the right padding is dropped. With
    ``ceil_mode`` a window reaching past the padded input still counts (size 1, kernel 2, stride 2: 1)."""
    span = size + 2 * padding - kernel
    o = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (o - 1) * stride >= size + padding:
        o -= 1
    return max(o, 0)


def _check_pool_output(name: str, x, sizes, ks, st, pd, ceil_mode: bool) -> None:
    """Refuse a window larger than the padded input here, naming this layer. PyTorch's pooling
    refuses it ("Output size is too small"); TensorRT(-RTX) accepts a pooling whose output has an
    empty dim and fails only at the next layer that needs data (a convolution: "image size is
    smaller than filter size"), naming that layer instead. Dynamic sizes are checked at run time."""
    for i, (size, k, t, p) in enumerate(zip(sizes, ks, st, pd)):
        if size >= 0 and pool_output_size(size, k, t, p, ceil_mode) <= 0:
            raise BuilderError(f"layer '{name}': the pooling window {k} is larger than the padded input '{x.name}' "
                               f"(spatial dim {i}: size {size}, padding {p} on each side), so no window fits and its "
                               "output would be empty; PyTorch refuses this and TensorRT would fail at the next layer")


def _pool(network, x, ptype, kernel, stride, padding, name, ceil_mode, count_include_pad=True):
    shape = _shape(x)
    if isinstance(kernel, (str, bytes)) or not hasattr(kernel, "__iter__"):  # one size (else _ntuple refuses it)
        nsp = len(shape) - 2
    else:
        kernel = tuple(kernel)
        nsp = len(kernel)
    if nsp not in (1, 2, 3) or len(shape) < nsp + 2:
        raise BuilderError(f"layer '{name}': pooling needs an (N, C, *spatial) input with 1 to 3 spatial dims, "
                           f"got '{x.name}' with shape {shape} and kernel {kernel}")
    ks = _ntuple(kernel, nsp, "kernel", name)
    st = ks if stride is None else _ntuple(stride, nsp, "stride", name)
    pd = _ntuple(padding, nsp, "padding", name)
    _check_pool_output(name, x, shape[len(shape) - nsp:], ks, st, pd, ceil_mode)
    if nsp == 1 and len(shape) == 3:  # TensorRT's windows have 2 or 3 dims: pool (N, C, L, 1)
        return _unsqueezed(network, x, name, lambda n, x4: _pool(
            n, x4, ptype, ks + (1,), st + (1,), pd + (0,), f"{name}/pool2d", ceil_mode, count_include_pad))
    if any(2 * p > k for p, k in zip(pd, ks)):
        raise BuilderError(f"layer '{name}': padding {pd} must be at most half the kernel {ks} (as in PyTorch)")
    trt = trt_of(network)
    mode = trt.PaddingMode.EXPLICIT_ROUND_DOWN
    post = pd
    if ceil_mode:
        sizes = shape[-nsp:]
        if any(s < 0 for s in sizes):
            raise BuilderError(f"layer '{name}': ceil_mode needs known spatial sizes, got {shape}")
        torch_out = [pool_output_size(s, k, t, p, True) for s, k, t, p in zip(sizes, ks, st, pd)]
        down = [pool_output_size(s, k, t, p, False) for s, k, t, p in zip(sizes, ks, st, pd)]
        rounded_up = [max(-(-(s + 2 * p - k) // t), 0) + 1 for s, k, t, p in zip(sizes, ks, st, pd)]
        if torch_out == rounded_up:
            mode = trt.PaddingMode.EXPLICIT_ROUND_UP
        elif torch_out != down:
            # Some dims keep the extra window, others drop it: pad those dims' right side explicitly
            # so ROUND_DOWN yields PyTorch's sizes (max pooling ignores padding, so this is exact).
            if ptype != trt.PoolingType.MAX:
                raise BuilderError(f"layer '{name}': ceil_mode output {torch_out} mixes kept and dropped last "
                                   "windows; only max pooling supports that")
            post = tuple(max(p, (o - 1) * t + k - s - p) for s, k, t, p, o in zip(sizes, ks, st, pd, torch_out))
        # else: PyTorch dropped every extra window, so ROUND_DOWN gives exactly its output.
    layer = network.add_pooling_nd(x, ptype, trt.Dims(ks))
    if layer is None:
        return out(layer, name)
    layer.stride_nd = trt.Dims(st)
    layer.pre_padding = trt.Dims(pd)
    layer.post_padding = trt.Dims(post)
    layer.padding_mode = mode
    if ptype == trt.PoolingType.AVERAGE:
        layer.average_count_excludes_padding = not count_include_pad
    return out(layer, name)


def max_pool(network, x, kernel, stride, padding, name: str, ceil_mode: bool = False):
    """Max pooling as ``torch.nn.MaxPoolNd(kernel, stride, padding, ceil_mode=...)`` (``stride=None``
    means ``stride=kernel``). ``ceil_mode`` maps to PaddingMode.EXPLICIT_ROUND_UP, except where PyTorch
    drops a last window that would start in the right padding (then ROUND_DOWN gives its exact size).
    A 1-D pooling is a 2-D one on ``(N, C, L, 1)`` between two shuffles (``name/2d``, ``name/pool2d``,
    ``name``), as TensorRT's windows have 2 or 3 dims."""
    return _pool(network, x, trt_of(network).PoolingType.MAX, kernel, stride, padding, name, ceil_mode)


def avg_pool(network, x, kernel, stride, padding, name: str, ceil_mode: bool = False, count_include_pad: bool = True):
    """Average pooling as ``torch.nn.AvgPoolNd`` (same arguments; ``count_include_pad`` default True)."""
    return _pool(network, x, trt_of(network).PoolingType.AVERAGE, kernel, stride, padding, name, ceil_mode,
                 count_include_pad)


def global_avg_pool(network, x, name: str):
    """Mean over every dim after the channel dim, keeping them as size 1 (``AdaptiveAvgPoolNd(1)``)."""
    rank = len(x.shape)
    if rank < 3:
        raise BuilderError(f"layer '{name}': global average pooling needs (N, C, *spatial), got '{x.name}' {_shape(x)}")
    trt = trt_of(network)
    axes = sum(1 << i for i in range(2, rank))
    return out(network.add_reduce(x, trt.ReduceOperation.AVG, axes, True), name)


def _adaptive_matrix(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] averaging matrix of PyTorch's adaptive pooling windows
    (window i covers [floor(i*n_in/n_out), ceil((i+1)*n_in/n_out)))."""
    m = np.zeros((n_out, n_in), dtype=np.float64)
    for i in range(n_out):
        start, end = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def adaptive_avg_pool(network, x, output_size, name: str):
    """``torch.nn.AdaptiveAvgPool2d(output_size)`` on a 4-D input with known spatial size.

    Output 1x1: a mean reduction. Same size: an identity layer (free in TensorRT), so the result is
    always a tensor named ``name``. Input divisible by
    the output: one pooling layer with kernel = stride = in/out. Otherwise the exact PyTorch windows
    as two matrix multiplies by constant averaging matrices (``P_h @ x @ P_w^T``, layers ``name/rows``,
    ``name/cols`` and their constants).
    """
    shape = _shape(x)
    if len(shape) != 4 or any(d < 0 for d in shape[2:]):
        raise BuilderError(f"layer '{name}': adaptive_avg_pool needs an (N, C, H, W) input with known H, W, "
                           f"got '{x.name}' {shape}")
    oh, ow = _ntuple(output_size, 2, "output_size", name)
    h, w = shape[2:]
    if (oh, ow) == (h, w):
        return out(network.add_identity(x), name)
    if (oh, ow) == (1, 1):
        return global_avg_pool(network, x, name)
    if h % oh == 0 and w % ow == 0:
        k = (h // oh, w // ow)
        return avg_pool(network, x, k, k, 0, name)
    trt = trt_of(network)
    rows = constant(network, _adaptive_matrix(h, oh).reshape(1, 1, oh, h), x, f"{name}/rows_matrix")
    cols = constant(network, _adaptive_matrix(w, ow).reshape(1, 1, ow, w), x, f"{name}/cols_matrix")
    none, tr = trt.MatrixOperation.NONE, trt.MatrixOperation.TRANSPOSE
    y = out(network.add_matrix_multiply(rows, none, x, none), f"{name}/rows")
    return out(network.add_matrix_multiply(y, none, cols, tr), name)

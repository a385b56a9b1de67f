"""Tensor builders with PyTorch's semantics: reshape, permute, transpose, flatten, concat, slice, select,
chunk, split, expand, softmax and matmul.

Each is a thin named wrapper over one TensorRT layer (a shuffle, concatenation, slice, gather,
softmax or matrix multiply), so that a network function reads like the module's ``forward``:
dims count like PyTorch's (negative dims from the end), ``slice`` clamps like Python slicing,
``chunk`` and ``split`` return PyTorch's pieces, and ``matmul`` broadcasts like ``torch.matmul``
(rank-1 operands, batch dims of different ranks). Each layer and its output are named ``name``
(the i-th piece of ``chunk`` / ``split``: ``name/i``). Bad arguments raise BuilderError naming the
layer, before any layer is added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trtbuild.backend import trt_of

from .common import BuilderError, keep_alive, out

__all__ = ["reshape", "permute", "transpose", "flatten", "concat", "slice", "select", "chunk", "split", "expand",
           "DimOf", "softmax", "matmul"]


def _shape(x) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _dim(x, dim, name: str, rank: int | None = None) -> int:
    """`dim` of `x` (or of a tensor of `rank` dims) as a non-negative index, like PyTorch's dim wrapping."""
    rank = len(_shape(x)) if rank is None else rank
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -rank <= dim < max(rank, 1):
        raise BuilderError(f"layer '{name}': dim {dim!r} is out of range for '{x.name}' of rank {rank} "
                           f"(expected an integer in [{-rank}, {rank - 1}])")
    return int(dim) % max(rank, 1)


def shuffle(network, x, name: str, dims=None, perm=None, placeholder: bool = True, then=None):
    """One shuffle layer: permute by `perm` (first_transpose), reshape to `dims` (0 copies the input
    dim at that index when `placeholder`, -1 is inferred), then permute by `then` (second_transpose)."""
    trt = trt_of(network)
    layer = network.add_shuffle(x)
    if layer is not None:
        if perm is not None:
            layer.first_transpose = trt.Permutation(list(perm))
        if dims is not None:
            layer.reshape_dims = trt.Dims(tuple(dims))
            layer.zero_is_placeholder = placeholder
        if then is not None:
            layer.second_transpose = trt.Permutation(list(then))
    return out(layer, name)


def reshape(network, x, shape, name: str):
    """``x.reshape(shape)``: one dim may be -1 (inferred); 0 is a size-0 dim, as in PyTorch. An input with a
    dynamic dim can be reshaped with one -1 standing for what the dynamic dims make."""
    shape = tuple(int(d) for d in shape)
    if sum(d == -1 for d in shape) > 1 or any(d < -1 for d in shape):
        raise BuilderError(f"layer '{name}': shape {shape} may hold one -1 and no other negative size")
    dims = _shape(x)
    if all(d >= 0 for d in dims):
        total = math.prod(dims)
        known = math.prod(d for d in shape if d != -1)
        if (-1 in shape and (known == 0 or total % known)) or (-1 not in shape and known != total):
            raise BuilderError(f"layer '{name}': shape {shape} is invalid for '{x.name}' {dims} of {total} elements")
    return shuffle(network, x, name, dims=shape, placeholder=False)


def permute(network, x, dims, name: str):
    """``x.permute(*dims)`` (negative dims allowed): one shuffle layer."""
    rank = len(_shape(x))
    perm = [_dim(x, d, name) for d in dims]
    if sorted(perm) != list(range(rank)):
        raise BuilderError(f"layer '{name}': dims {tuple(dims)} are not a permutation of the {rank} dims of '{x.name}'")
    return shuffle(network, x, name, perm=perm)


def transpose(network, x, dim0, dim1, name: str):
    """``x.transpose(dim0, dim1)``: one shuffle layer."""
    a, b = _dim(x, dim0, name), _dim(x, dim1, name)
    perm = list(range(len(_shape(x))))
    perm[a], perm[b] = perm[b], perm[a]
    return shuffle(network, x, name, perm=perm)


def flatten(network, x, name: str, start_dim: int = 1, end_dim: int = -1):
    """``torch.flatten(x, start_dim, end_dim)``, by default as ``nn.Flatten()`` (start_dim=1): one shuffle.
    Dims before `start_dim` may be dynamic; of the merged dims and those after `end_dim`, at most one
    may be (TensorRT infers one -1)."""
    dims = _shape(x)
    s, e = _dim(x, start_dim, name), _dim(x, end_dim, name)
    if s > e:
        raise BuilderError(f"layer '{name}': start_dim {start_dim} comes after end_dim {end_dim} for rank {len(dims)}")
    merged = dims[s:e + 1]
    new = [0] * s + [math.prod(merged) if all(d >= 0 for d in merged) else -1] + list(dims[e + 1:])
    if sum(d < 0 for d in new[s:]) > 1:
        raise BuilderError(f"layer '{name}': flattening dims {s}..{e} of '{x.name}' {dims} leaves more than one "
                           "dynamic size at or after the merged dim; TensorRT can infer only one")
    return shuffle(network, x, name, dims=new)


def concat(network, tensors, dim, name: str):
    """``torch.cat(tensors, dim)``: one concatenation layer."""
    tensors = list(tensors)
    if not tensors:
        raise BuilderError(f"layer '{name}': concat needs at least one tensor")
    axis = _dim(tensors[0], dim, name)
    layer = network.add_concatenation(tensors)
    if layer is not None:
        layer.axis = axis
    return out(layer, name)


def _sized(x, axis: int, name: str) -> int:
    size = _shape(x)[axis]
    if size < 0:
        raise BuilderError(f"layer '{name}': dim {axis} of '{x.name}' {_shape(x)} must be known at build time")
    return size


def _take(network, x, axis: int, start: int, length: int, step: int, name: str):
    """`length` elements from `start` by `step` along `axis`: a slice layer where every dim is known,
    else a gather of those indices (which keeps the other dims dynamic)."""
    trt = trt_of(network)
    dims = _shape(x)
    if all(d >= 0 for d in dims):
        st, sz, sd = [0] * len(dims), list(dims), [1] * len(dims)
        st[axis], sz[axis], sd[axis] = start, length, step
        return out(network.add_slice(x, trt.Dims(st), trt.Dims(sz), trt.Dims(sd)), name)
    idx = keep_alive(network, np.arange(start, start + length * step, step, dtype=np.int32)[:length])
    indices = out(network.add_constant(trt.Dims(idx.shape), idx), f"{name}/indices")
    return out(network.add_gather(x, indices, axis), name)


def slice(network, x, dim, start, end, name: str, step: int = 1):  # noqa: A001 - the name PyTorch users look for
    """``x[..., start:end:step]`` along `dim` (None, negative and out-of-range bounds as Python slicing;
    step > 0 as in PyTorch). `dim` must be known; other dims may be dynamic (then a gather)."""
    axis = _dim(x, dim, name)
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step <= 0:
        raise BuilderError(f"layer '{name}': step {step!r} must be a positive integer (as in PyTorch)")
    size = _sized(x, axis, name)
    first, last, step = range(size)[start:end:step].start, range(size)[start:end:step].stop, int(step)
    length = len(range(first, last, step))
    return _take(network, x, axis, first if length else 0, length, step, name)


def select(network, x, dim, index: int, name: str):
    """``x.select(dim, index)`` (``x[:, index]`` for dim 1): the dim is removed. One gather layer with a
    scalar index (constant ``name/index``)."""
    trt = trt_of(network)
    axis = _dim(x, dim, name)
    size = _sized(x, axis, name)
    if not -size <= index < size:
        raise BuilderError(f"layer '{name}': index {index} is out of range for dim {dim} of size {size}")
    idx = keep_alive(network, np.array(index % size, dtype=np.int32))
    indices = out(network.add_constant(trt.Dims(()), idx), f"{name}/index")
    return out(network.add_gather(x, indices, axis), name)


def _pieces(network, x, axis: int, sizes, name: str) -> list:
    pieces, start = [], 0
    for i, n in enumerate(sizes):
        pieces.append(_take(network, x, axis, start, n, 1, f"{name}/{i}"))
        start += n
    return pieces


def chunk(network, x, chunks: int, name: str, dim: int = 0) -> list:
    """``torch.chunk(x, chunks, dim)``: pieces of ``ceil(size / chunks)`` (the last smaller; fewer pieces
    than `chunks` where PyTorch gives fewer), each a slice layer ``name/i``."""
    axis = _dim(x, dim, name)
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise BuilderError(f"layer '{name}': chunks {chunks!r} must be a positive integer")
    size = _sized(x, axis, name)
    each = -(-size // chunks) if size else 0
    sizes = [min(each, size - s) for s in range(0, size, each)] if each else [0]
    return _pieces(network, x, axis, sizes, name)


def split(network, x, split_size_or_sections, name: str, dim: int = 0) -> list:
    """``torch.split(x, split_size_or_sections, dim)``: pieces of that size (the last smaller), or of the
    given sizes, which must add up to the dim's size; each a slice layer ``name/i``."""
    axis = _dim(x, dim, name)
    size = _sized(x, axis, name)
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        each = int(split_size_or_sections)
        if each <= 0 and size:
            raise BuilderError(f"layer '{name}': split size {each} must be positive")
        sizes = [min(each, size - s) for s in range(0, size, each)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise BuilderError(f"layer '{name}': sections {tuple(sizes)} must be non-negative and add up to the "
                               f"size {size} of dim {dim}")
    return _pieces(network, x, axis, sizes, name)


@dataclass(frozen=True)
class DimOf:
    """A size read from a network tensor: dim `dim` of `tensor`, as ``t.shape[dim]`` in PyTorch. Where
    that dim is dynamic, :func:`expand` reads it at run time (a shape layer and a gather)."""

    tensor: object
    dim: int


def _size_source(size, name: str):
    """An expand size as (int, None) or, for a dynamic DimOf, (-2, the DimOf with its dim wrapped)."""
    if isinstance(size, DimOf):
        dim = _dim(size.tensor, size.dim, name)
        known = _shape(size.tensor)[dim]
        return (known, None) if known >= 0 else (-2, DimOf(size.tensor, dim))
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise BuilderError(f"layer '{name}': expand size {size!r} must be an integer or a DimOf")
    return int(size), None


def _run_time_sizes(network, target, sources, name: str):
    """The expanded shape as an INT64 shape tensor (``name/size``): known sizes as constants
    (``name/size{i}``), each dynamic size gathered from its tensor's shape (``name/shape{i}``, ``name/dim{i}``)."""
    trt = trt_of(network)
    parts = []
    for i, (size, src) in enumerate(zip(target, sources)):
        if src is None:
            arr = keep_alive(network, np.array([size], dtype=np.int64))
            parts.append(out(network.add_constant(trt.Dims((1,)), arr), f"{name}/size{i}"))
            continue
        shape = out(network.add_shape(src.tensor), f"{name}/shape{i}")
        at = keep_alive(network, np.array([src.dim], dtype=np.int64))
        index = out(network.add_constant(trt.Dims((1,)), at), f"{name}/dim{i}/index")
        parts.append(out(network.add_gather(shape, index, 0), f"{name}/dim{i}"))
    return out(network.add_concatenation(parts), f"{name}/size")


def expand(network, x, sizes, name: str):
    """``x.expand(*sizes)``: size-1 dims repeated (-1 keeps a dim), new leading dims allowed; one slice
    layer with stride 0 along the repeated dims (``name/view`` first, a reshape, for new leading dims).

    A size may be ``DimOf(t, d)``, PyTorch's ``t.shape[d]``: ``cls_token.expand(x.shape[0], -1, -1)`` is
    ``expand(network, cls, (DimOf(x, 0), -1, -1), name)``. Where such a dim is dynamic (a dynamic batch),
    the slice's size is a shape tensor (its input 2, see ``_run_time_sizes``); the other sizes must be known."""
    trt = trt_of(network)
    resolved = [_size_source(s, name) for s in sizes]
    shown = tuple(s.tensor.name + f".shape[{s.dim}]" if isinstance(s, DimOf) else s for s in sizes)
    dims = _shape(x)
    if len(resolved) < len(dims):
        raise BuilderError(f"layer '{name}': {len(resolved)} sizes for '{x.name}' of rank {len(dims)}")
    full = (1,) * (len(resolved) - len(dims)) + dims
    lead = len(resolved) - len(dims)
    target = [d if s == -1 and i >= lead else s for i, ((s, _), d) in enumerate(zip(resolved, full))]
    sources = [src for _, src in resolved]
    bad = any(d < 0 for d in full) or any(s < 0 and src is None for s, src in zip(target, sources)) \
        or any(d not in (1, s) and src is None for d, s, src in zip(full, target, sources)) \
        or any(d != 1 and src is not None for d, src in zip(full, sources))
    if bad:
        raise BuilderError(f"layer '{name}': cannot expand '{x.name}' {dims} to {shown}: only known size-1 "
                           "dims can grow (-1 keeps a dim)")
    if len(full) != len(dims):
        x = shuffle(network, x, f"{name}/view", dims=full, placeholder=False)
    stride = [0 if d == 1 and (s != 1 or src is not None) else 1 for d, s, src in zip(full, target, sources)]
    if all(src is None for src in sources):
        return out(network.add_slice(x, trt.Dims([0] * len(full)), trt.Dims(target), trt.Dims(stride)), name)
    size = _run_time_sizes(network, target, sources, name)
    layer = network.add_slice(x, trt.Dims([0] * len(full)), trt.Dims([1] * len(full)), trt.Dims(stride))
    if layer is not None:
        layer.set_input(2, size)
    return out(layer, name)


def softmax(network, x, dim, name: str):
    """``torch.softmax(x, dim)`` (negative dims allowed): one softmax layer."""
    axis = _dim(x, dim, name)
    layer = network.add_softmax(x)
    if layer is not None:
        layer.axes = 1 << axis
    return out(layer, name)


def unsqueeze_axes(network, x, axes, name: str):
    """`x` with size-1 dims inserted at `axes` of the output (an unsqueeze layer `name`, its axes a
    constant `name/axes`); the other dims may be dynamic."""
    trt = trt_of(network)
    arr = keep_alive(network, np.asarray(list(axes), dtype=np.int32))
    at = out(network.add_constant(trt.Dims(arr.shape), arr), f"{name}/axes")
    return out(network.add_unsqueeze(x, at), name)


def lead_ones(network, x, count: int, name: str):
    """`x` with `count` size-1 dims in front (see unsqueeze_axes)."""
    return unsqueeze_axes(network, x, range(count), name)


def matmul(network, a, b, name: str, transpose_a: bool = False, transpose_b: bool = False):
    """``torch.matmul(a, b)``: rank-1 operands as vectors, batch dims broadcast (an operand of lower rank
    >= 2 gets leading size-1 dims, layer ``name/a_view`` or ``name/b_view``); one matrix multiply.
    `transpose_a` / `transpose_b` multiply by the operand's last two dims swapped (``a.mT``), with no
    extra layer."""
    trt = trt_of(network)
    ra, rb = len(_shape(a)), len(_shape(b))
    if ra == 0 or rb == 0 or (transpose_a and ra < 2) or (transpose_b and rb < 2):
        raise BuilderError(f"layer '{name}': matmul needs operands of rank >= 1 (>= 2 to transpose), got "
                           f"'{a.name}' {_shape(a)} and '{b.name}' {_shape(b)}")
    if ra >= 2 and rb >= 2 and ra != rb:
        if ra < rb:
            a = lead_ones(network, a, rb - ra, f"{name}/a_view")
        else:
            b = lead_ones(network, b, ra - rb, f"{name}/b_view")
    if ra == 1 and rb > 2:  # (K) @ (..., K, M): a row vector against every matrix of the batch
        a = lead_ones(network, a, rb - 2, f"{name}/a_view")
        a_op = trt.MatrixOperation.VECTOR
    else:
        a_op = trt.MatrixOperation.VECTOR if ra == 1 else (
            trt.MatrixOperation.TRANSPOSE if transpose_a else trt.MatrixOperation.NONE)
    b_op = trt.MatrixOperation.VECTOR if rb == 1 else (
        trt.MatrixOperation.TRANSPOSE if transpose_b else trt.MatrixOperation.NONE)
    if rb == 1 and ra > 2:
        b = lead_ones(network, b, ra - 2, f"{name}/b_view")
    ka = _shape(a)[-1] if a_op != trt.MatrixOperation.TRANSPOSE else _shape(a)[-2]
    kb = _shape(b)[-1] if b_op != trt.MatrixOperation.NONE else _shape(b)[-2]
    if ka >= 0 and kb >= 0 and ka != kb:
        raise BuilderError(f"layer '{name}': cannot multiply '{a.name}' {_shape(a)} by '{b.name}' {_shape(b)}: "
                           f"inner sizes {ka} and {kb} differ")
    return out(network.add_matrix_multiply(a, a_op, b, b_op), name)

"""IRotaryEmbeddingLayer: rotary position embedding (RoPE) of a [B, N, S, H] input, NVIDIA's RotaryEmbedding
operator and ONNX RotaryEmbedding (opset 23) on a rank-4 input.

The first R = rotary_embedding_dim dims of each head (all H where it is 0) are paired: the two halves of those R
dims (interleaved False, GPT-NeoX) or adjacent elements (interleaved True, GPT-J); each pair (x1, x2) becomes
(cos * x1 - sin * x2, sin * x1 + cos * x2) with the cos/sin of its token and pair index; the other H - R dims pass
through. The caches are [B, S, R / 2]; with position_ids (input 3, set by set_input: [B, S], INT32 or INT64) they
are [max_position + 1, R / 2] tables that the ids index. Input and caches have one type, FLOAT, HALF or BF16.
TensorRT-RTX 1.7 requires these shapes exactly (no broadcasting), R even and 0 <= R <= H (an odd or negative R is
refused by add_rotary_embedding and the setter alike), and H even where R is 0 (all of H rotates); a partial
rotation of an odd H is accepted. A position id outside the tables fails the run.
"""

from __future__ import annotations

import torch

from ..core import ITensor, NetworkError
from ..enums import DataType, LayerType
from .base import ILayer, param
from .common import f32, fail, need_float
from .registry import register


def _even_non_negative(dim):
    return "rotary_embedding_dim must be even and >= 0" if dim < 0 or dim % 2 else None


class IRotaryEmbeddingLayer(ILayer):
    _TYPE = LayerType.ROTARY_EMBEDDING
    _MAX_INPUTS = 4  # input, cos_cache, sin_cache and the optional position_ids
    interleaved = param("interleaved", "bool")
    rotary_embedding_dim = param("rotary_embedding_dim", "int", check=_even_non_negative)

    @classmethod
    def _type_label(cls) -> str:
        return "RotaryEmbedding"


def infer(p, w, shapes, dtypes, name, plugin):
    x = tuple(shapes[0])
    positions = len(shapes) > 3 and shapes[3] is not None
    need_float(name, dtypes[0])
    for i, what in ((1, "cos_cache"), (2, "sin_cache")):
        if dtypes[i] != dtypes[0]:
            fail(name, f"{what} has type {dtypes[i].name} but the input has {dtypes[0].name}; they must be equal")
    if len(x) != 4:
        fail(name, f"the input has rank {len(x)}; a rotary embedding takes rank 4 [batch, heads, sequence, head size]")
    b, s, head = x[0], x[2], x[3]
    dim = p["rotary_embedding_dim"]
    if _even_non_negative(dim):
        fail(name, f"rotary_embedding_dim is {dim}; it must be even and >= 0")
    if head % 2 and not dim:
        fail(name, f"the head size (input dim 3) is {head}; rotating all of it (rotary_embedding_dim 0) needs it even")
    if dim > head:
        fail(name, f"rotary_embedding_dim {dim} is larger than the head size {head}")
    half = (dim or head) // 2
    for i, what in ((1, "cos_cache"), (2, "sin_cache")):
        c = tuple(shapes[i])
        if positions and (len(c) != 2 or c[1] != half):  # a table of any number of positions
            fail(name, f"{what} has shape {c} but must be [max_position + 1, {half}] with position_ids")
        if not positions and c != (b, s, half):
            fail(name, f"{what} has shape {c} but must be [{b}, {s}, {half}] (or 2-D with position_ids)")
    if positions:
        if dtypes[3] not in (DataType.INT32, DataType.INT64):
            fail(name, f"position_ids have type {dtypes[3].name}; they must be INT32 or INT64")
        if tuple(shapes[3]) != (b, s):
            fail(name, f"position_ids have shape {tuple(shapes[3])} but must be [{b}, {s}] (the input's batch and "
                       "sequence length)")
    return [x], [dtypes[0]]


def run(p, w, inputs, plugin):
    x, cos, sin = (f32(t) for t in inputs[:3])
    if len(inputs) > 3 and inputs[3] is not None:
        ids = inputs[3].long()
        if ids.numel() and (ids.min() < 0 or ids.max() >= cos.shape[0]):
            raise IndexError(f"rotary embedding: a position id is outside [0, {cos.shape[0] - 1}]")
        cos, sin = cos[ids], sin[ids]
    dim = p["rotary_embedding_dim"] or x.shape[-1]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, S, R/2]: the same for every head
    rot, rest = x[..., :dim], x[..., dim:]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if p["interleaved"] else rot.chunk(2, dim=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    rot = torch.stack([real, imag], -1).flatten(-2) if p["interleaved"] else torch.cat([real, imag], -1)
    return [torch.cat([rot, rest], -1)]


def _ranks_and_dim(name, shapes, dim):
    """What add_rotary_embedding itself checks (as TensorRT does): the caches' shapes are checked once the layer
    is complete, because position_ids (which make them 2-D tables) are set after it is added."""
    if len(shapes[0]) != 4:
        fail(name, f"the input has rank {len(shapes[0])}; a rotary embedding takes rank 4 [batch, heads, sequence, "
                   "head size]")
    for i, what in ((1, "cos_cache"), (2, "sin_cache")):
        if len(shapes[i]) not in (2, 3):
            fail(name, f"{what} has rank {len(shapes[i])}; it must be 3 [batch, sequence, R/2] or, with "
                       "position_ids, 2")
    if _even_non_negative(dim):
        fail(name, f"rotary_embedding_dim is {dim}; it must be even and >= 0")
    if dim > shapes[0][3]:
        fail(name, f"rotary_embedding_dim {dim} is larger than the head size {shapes[0][3]}")


def add_rotary_embedding(self, input: ITensor, cos_cache: ITensor, sin_cache: ITensor, interleaved: bool,
                         rotary_embedding_dim: int) -> IRotaryEmbeddingLayer:
    layer = self._add(IRotaryEmbeddingLayer, [input, cos_cache, sin_cache],
                      {"interleaved": bool(interleaved), "rotary_embedding_dim": int(rotary_embedding_dim)},
                      eager=False)
    try:
        _ranks_and_dim(layer.name, [tuple(t.shape) for t in (input, cos_cache, sin_cache)], int(rotary_embedding_dim))
    except NetworkError:  # not added, as TensorRT returns None (what _add does after a failed inference)
        self._layers.pop()
        for t in layer._outputs:
            self._unregister_tensor(t)
        raise
    return layer


register(IRotaryEmbeddingLayer, infer, run, adds=(add_rotary_embedding,))

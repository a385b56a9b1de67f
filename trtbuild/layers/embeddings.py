"""``embedding``: ``nn.Embedding`` as a gather from a constant table.

The table ``[num_embeddings, embedding_dim]`` is a constant (``name/weight``) in the float type asked
for (fp32, fp16 or bf16: the indices are integers, so no input type says which); one gather layer on
axis 0 (``name``) gives ``indices.shape + (embedding_dim,)``. ``padding_idx`` only matters for
training (its row gets no gradient), so inference ignores it. TensorRT quantizes only the inputs of
convolutions and matrix multiplies, so there is no quantized variant: choose the table's type with
`dtype` (what ``--keep`` would choose for a planned layer).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from trtbuild.backend import trt_of

from .common import BuilderError, constant, out

__all__ = ["embedding"]

_TYPES = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16"}


def embedding(network, indices, weight, name: str, dtype: str = "fp32"):
    """``nn.Embedding.from_pretrained(weight)(indices)``: INT32 or INT64 `indices` of any shape (dynamic
    dims too), `weight` ``[num_embeddings, embedding_dim]``; the output has type `dtype`."""
    trt = trt_of(network)
    w = np.asarray(weight)
    if w.ndim != 2:
        raise BuilderError(f"layer '{name}': the embedding table must be [num_embeddings, embedding_dim], got "
                           f"shape {w.shape}")
    if dtype not in _TYPES:
        raise BuilderError(f"layer '{name}': dtype {dtype!r} is not one of {', '.join(map(repr, _TYPES))}")
    if indices.dtype not in (trt.DataType.INT32, trt.DataType.INT64):
        raise BuilderError(f"layer '{name}': indices '{indices.name}' have type {indices.dtype.name}; INT32 or INT64 "
                           "is needed")
    like = SimpleNamespace(dtype=getattr(trt.DataType, _TYPES[dtype]))
    table = constant(network, w, like, f"{name}/weight")
    return out(network.add_gather(table, indices, 0), name)

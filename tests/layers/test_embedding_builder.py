"""trtbuild.layers.embeddings.embedding against nn.Embedding: INT32 and INT64 indices of rank 1 to 3 (a dynamic batch
too), tables in fp32, fp16 and bf16 (exact: a gather copies rows of the table rounded to that type), built
by TensorRT-RTX with the same layers; refusals name the layer."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trtbuild.layers.embeddings import embedding

from helpers.builder_pair import build_pair, np_weights, refused, rounded

TABLE = np_weights(11, 6)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("itype", ["int32", "int64"])
@pytest.mark.parametrize("shape", [(5,), (2, 4), (2, 3, 2)], ids=str)
def test_embedding_matches_torch(shape, itype, dtype):
    emb = nn.Embedding.from_pretrained(torch.from_numpy(TABLE), padding_idx=0)
    idx = torch.randint(0, 11, shape, generator=torch.Generator().manual_seed(3))
    idx.view(-1)[0] = 0  # the padding row is an ordinary row at inference
    pair = build_pair({"ids": (shape, itype)}, lambda n, ids: embedding(n, ids, TABLE, "tok", dtype=dtype))
    (got,) = pair.run(ids=idx)
    assert torch.equal(got.double(), rounded(emb(idx), dtype))
    assert pair.names == ["tok/weight", "tok"]


def test_embedding_dynamic_batch():
    pair = build_pair({"ids": ((-1, 4), "int32")}, lambda n, ids: embedding(n, ids, TABLE, "tok"),
                      profile={"ids": ((1, 4), (2, 4), (3, 4))})
    idx = torch.tensor([[1, 2, 3, 10], [0, 0, 5, 7], [9, 8, 7, 6]])
    assert torch.equal(pair.run(ids=idx)[0].double(), rounded(torch.from_numpy(TABLE), "fp32")[idx])


def test_refusals_name_the_layer():
    assert refused({"ids": ((3,), "fp32")}, lambda n, ids: embedding(n, ids, TABLE, "tok")) == (
        "layer 'tok': indices 'ids' have type FLOAT; INT32 or INT64 is needed")
    assert refused({"ids": ((3,), "int32")}, lambda n, ids: embedding(n, ids, TABLE.reshape(-1), "tok")) == (
        "layer 'tok': the embedding table must be [num_embeddings, embedding_dim], got shape (66,)")
    assert refused({"ids": ((3,), "int32")}, lambda n, ids: embedding(n, ids, TABLE, "tok", dtype="int8")) == (
        "layer 'tok': dtype 'int8' is not one of 'fp32', 'fp16', 'bf16'")

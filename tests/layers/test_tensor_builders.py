"""trtbuild.layers.tensor against PyTorch: reshape, permute, transpose, flatten, concat, slice, select, chunk,
split, expand, softmax and matmul, in fp32, fp16 and bf16 (data movement exactly; softmax and matmul within
the type's rounding), each built by TensorRT-RTX with the same layers; refusals name the layer."""

from __future__ import annotations

import pytest
import torch

from trtbuild.layers import tensor as T

from helpers.builder_pair import assert_close, build_pair, refused, rounded, seeded

DTYPES = ["fp32", "fp16", "bf16"]
X = (2, 3, 4, 5)

#: label -> (builder on x, PyTorch on x): pure data movement, so exact in every type
MOVES = {
    "reshape": (lambda n, x: T.reshape(n, x, (6, -1), "r"), lambda x: x.reshape(6, -1)),
    "reshape 0-free": (lambda n, x: T.reshape(n, x, (2, 60), "r"), lambda x: x.reshape(2, 60)),
    "permute": (lambda n, x: T.permute(n, x, (0, 2, -1, 1), "r"), lambda x: x.permute(0, 2, -1, 1)),
    "transpose": (lambda n, x: T.transpose(n, x, 1, -1, "r"), lambda x: x.transpose(1, -1)),
    "flatten": (lambda n, x: T.flatten(n, x, "r"), lambda x: torch.flatten(x, 1)),
    "flatten 0..1": (lambda n, x: T.flatten(n, x, "r", 0, 1), lambda x: torch.flatten(x, 0, 1)),
    "flatten 2..": (lambda n, x: T.flatten(n, x, "r", start_dim=2), lambda x: torch.flatten(x, 2)),
    "flatten 1..2": (lambda n, x: T.flatten(n, x, "r", 1, -2), lambda x: torch.flatten(x, 1, -2)),
    "slice": (lambda n, x: T.slice(n, x, 2, 1, 3, "r"), lambda x: x[:, :, 1:3]),
    "slice step": (lambda n, x: T.slice(n, x, -1, None, None, "r", step=2), lambda x: x[..., ::2]),
    "slice negative": (lambda n, x: T.slice(n, x, 1, -2, None, "r"), lambda x: x[:, -2:]),
    "slice clamped": (lambda n, x: T.slice(n, x, 3, 2, 99, "r", step=2), lambda x: x[..., 2:99:2]),
    "select": (lambda n, x: T.select(n, x, 1, 0, "r"), lambda x: x[:, 0]),
    "select negative": (lambda n, x: T.select(n, x, -1, -1, "r"), lambda x: x[..., -1]),
    "expand": (lambda n, x: T.expand(n, T.slice(n, x, 1, 0, 1, "s"), (2, 4, -1, -1), "r"),
               lambda x: x[:, :1].expand(2, 4, -1, -1)),
    "expand new dims": (lambda n, x: T.expand(n, T.select(n, T.select(n, x, 0, 1, "s0"), 0, 2, "s1"), (3, 4, 5), "r"),
                        lambda x: x[1, 2].expand(3, 4, 5)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("label", MOVES)
def test_data_movement_is_exact(label, dtype):
    build, torch_fn = MOVES[label]
    pair = build_pair({"x": (X, dtype)}, lambda n, x: build(n, x))
    x = rounded(seeded(*X), dtype)
    (got,) = pair.run(x=x)
    want = torch_fn(x)
    assert tuple(got.shape) == tuple(want.shape)
    assert torch.equal(got.double(), want)
    assert pair.outputs[0].name == "r" and pair.names[-1] == "r"


@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_negative_dim(dtype):
    pair = build_pair({"a": ((2, 3, 4), dtype), "b": ((2, 3, 1), dtype)}, lambda n, a, b: T.concat(n, [a, b], -1, "c"))
    a, b = rounded(seeded(2, 3, 4), dtype), rounded(seeded(2, 3, 1, seed=1), dtype)
    assert torch.equal(pair.run(a=a, b=b)[0].double(), torch.cat([a, b], -1))
    assert pair.names == ["c"]


@pytest.mark.parametrize("chunks,dim", [(3, 1), (2, -1), (4, 2), (5, 0), (3, -1)])
def test_chunk_matches_torch(chunks, dim):
    pair = build_pair({"x": (X, "fp32")}, lambda n, x: T.chunk(n, x, chunks, "c", dim=dim))
    x = seeded(*X).float()
    want = torch.chunk(x, chunks, dim)
    got = pair.run(x=x)
    assert len(got) == len(want) and [t.name for t in pair.outputs] == [f"c/{i}" for i in range(len(want))]
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("sizes,dim", [(2, 3), ([1, 3, 1], -1), (3, 1), ([0, 4], 2)])
def test_split_matches_torch(sizes, dim):
    pair = build_pair({"x": (X, "fp32")}, lambda n, x: T.split(n, x, sizes, "s", dim=dim))
    x = seeded(*X).float()
    want = torch.split(x, sizes, dim)
    got = pair.run(x=x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_dynamic_batch_slice_select_flatten_reshape():
    """A dynamic batch: slice and select become gathers, flatten and reshape infer one -1."""
    def build(n, x):
        y = T.slice(n, x, 1, 1, None, "s")
        return [y, T.select(n, x, 1, 0, "cls"), T.flatten(n, y, "f"), T.reshape(n, x, (-1, 20), "r")]

    pair = build_pair({"x": ((-1, 3, 4, 5), "fp32")}, build, profile={"x": ((1, 3, 4, 5), (2, 3, 4, 5), (3, 3, 4, 5))})
    x = seeded(3, 3, 4, 5).float()
    got = pair.run(x=x)
    for g, w in zip(got, [x[:, 1:], x[:, 0], x[:, 1:].flatten(1), x.reshape(-1, 20)]):
        assert torch.equal(g, w)
    assert "s/indices" in pair.names


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_softmax_dim(dtype, dim):
    pair = build_pair({"x": ((2, 3, 4), dtype)}, lambda n, x: T.softmax(n, x, dim, "sm"))
    x = rounded(seeded(2, 3, 4, scale=3), dtype)
    assert_close(pair.run(x=x)[0], torch.softmax(x, dim), dtype)
    assert pair.names == ["sm"]


MATMULS = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
           ((2, 1, 3, 4), (5, 4, 6)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)), ((2, 3, 4), (2, 4, 6))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", MATMULS, ids=str)
def test_matmul_broadcasts_like_torch(sa, sb, dtype):
    pair = build_pair({"a": (sa, dtype), "b": (sb, dtype)}, lambda n, a, b: T.matmul(n, a, b, "mm"))
    a, b = rounded(seeded(*sa), dtype), rounded(seeded(*sb, seed=1), dtype)
    assert_close(pair.run(a=a, b=b)[0], torch.matmul(a, b), dtype, scale=3)
    assert pair.names[-1] == "mm"


def test_matmul_transposed_operands():
    pair = build_pair({"a": ((2, 4, 3), "fp32"), "b": ((2, 5, 4), "fp32")},
                      lambda n, a, b: T.matmul(n, a, b, "mm", transpose_a=True, transpose_b=True))
    a, b = seeded(2, 4, 3), seeded(2, 5, 4, seed=1)
    assert_close(pair.run(a=a, b=b)[0], a.mT @ b.mT, "fp32")
    assert pair.names == ["mm"]


@pytest.mark.parametrize("build,message", [
    (lambda n, x: T.reshape(n, x, (7, -1), "r"), "layer 'r': shape (7, -1) is invalid for 'x' (2, 3, 4, 5) of 120"),
    (lambda n, x: T.reshape(n, x, (-1, -1), "r"), "layer 'r': shape (-1, -1) may hold one -1"),
    (lambda n, x: T.permute(n, x, (0, 1, 1, 2), "r"), "layer 'r': dims (0, 1, 1, 2) are not a permutation"),
    (lambda n, x: T.transpose(n, x, 0, 4, "r"), "layer 'r': dim 4 is out of range for 'x' of rank 4"),
    (lambda n, x: T.flatten(n, x, "r", 2, 1), "layer 'r': start_dim 2 comes after end_dim 1"),
    (lambda n, x: T.slice(n, x, 1, 0, 2, "r", step=0), "layer 'r': step 0 must be a positive integer"),
    (lambda n, x: T.select(n, x, 1, 3, "r"), "layer 'r': index 3 is out of range for dim 1 of size 3"),
    (lambda n, x: T.chunk(n, x, 0, "r"), "layer 'r': chunks 0 must be a positive integer"),
    (lambda n, x: T.split(n, x, [1, 1], "r", dim=1), "layer 'r': sections (1, 1) must be non-negative and add up"),
    (lambda n, x: T.expand(n, x, (2, 6, 4, 5), "r"), "layer 'r': cannot expand 'x' (2, 3, 4, 5) to (2, 6, 4, 5)"),
    (lambda n, x: T.softmax(n, x, -5, "r"), "layer 'r': dim -5 is out of range"),
    (lambda n, x: T.matmul(n, x, x, "r"), "layer 'r': cannot multiply 'x' (2, 3, 4, 5) by 'x' (2, 3, 4, 5): inner"),
    (lambda n, x: T.concat(n, [], 0, "r"), "layer 'r': concat needs at least one tensor"),
])
def test_refusals_name_the_layer(build, message):
    assert refused({"x": (X, "fp32")}, build).startswith(message)


def test_dynamic_dim_refusals():
    assert refused({"x": ((2, -1, 4), "fp32")}, lambda n, x: T.slice(n, x, 1, 0, 1, "r")) == (
        "layer 'r': dim 1 of 'x' (2, -1, 4) must be known at build time")
    assert "more than one dynamic size" in refused({"x": ((2, -1, -1), "fp32")},
                                                   lambda n, x: T.flatten(n, x, "r", 0, 1))

"""trtbuild.reference: RotaryEmbedding against a float64 RoPE written here from NVIDIA's operator page and ONNX
RotaryEmbedding (opset 23): pairs are the two halves of the rotated dims (interleaved False, GPT-NeoX) or adjacent
elements (interleaved True, GPT-J); each pair (a, b) becomes (a cos - b sin, a sin + b cos); dims past
rotary_embedding_dim pass through; caches are [B, S, R/2], or [max_position + 1, R/2] tables indexed by
position_ids. Each construction is also built by TensorRT-RTX (the `refnet` twin); the ONNX reference evaluator
(onnx.reference) checks the same values as a second, independent implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(23)
B, N, S, H = 2, 3, 4, 8


def rope64(x, cos, sin, interleaved: bool, dim: int, positions=None) -> np.ndarray:
    """Element by element in float64 (x [B, N, S, H]; cos/sin [B, S, R/2] or tables with positions [B, S])."""
    x, cos, sin = (np.asarray(t, dtype=np.float64) for t in (x, cos, sin))
    r = dim or x.shape[-1]
    out = x.copy()
    for b, n, s in np.ndindex(*x.shape[:3]):
        row = positions[b][s] if positions is not None else None
        for i in range(r // 2):
            c = cos[row, i] if row is not None else cos[b, s, i]
            sn = sin[row, i] if row is not None else sin[b, s, i]
            j, k = (2 * i, 2 * i + 1) if interleaved else (i, i + r // 2)
            out[b, n, s, j] = x[b, n, s, j] * c - x[b, n, s, k] * sn
            out[b, n, s, k] = x[b, n, s, j] * sn + x[b, n, s, k] * c
    return out


def caches(*shape):
    angles = torch.rand(*shape, generator=gen) * 6.3
    return torch.cos(angles), torch.sin(angles)


def rotary(refnet, x, cos, sin, interleaved, dim, positions=None, dt=trt.float32):
    net = refnet.network
    layer = net.add_rotary_embedding(refnet.input("x", tuple(x.shape), dt), refnet.input("c", tuple(cos.shape), dt),
                                     refnet.input("s", tuple(sin.shape), dt), interleaved, dim)
    feeds = {"x": x, "c": cos, "s": sin}
    if positions is not None:
        layer.set_input(3, refnet.input("p", tuple(positions.shape), trt.int64 if positions.dtype == torch.int64
                                        else trt.int32))
        feeds["p"] = positions
    assert layer.interleaved == interleaved and layer.rotary_embedding_dim == dim
    return layer, refnet.run(feeds, y=layer.get_output(0))["y"]


@pytest.mark.parametrize("dim", [0, 4, 8])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_without_position_ids(refnet, interleaved, dim):
    x = torch.randn(B, N, S, H, generator=gen)
    cos, sin = caches(B, S, (dim or H) // 2)
    layer, y = rotary(refnet, x, cos, sin, interleaved, dim)
    assert layer.num_inputs == 3
    close(y, rope64(x, cos, sin, interleaved, dim))
    if dim == 4:
        close(y[..., 4:], x[..., 4:], atol=0, rtol=0)  # the dims past rotary_embedding_dim pass through


@pytest.mark.parametrize("pdt", [torch.int64, torch.int32])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_with_position_ids(refnet, interleaved, pdt):
    x = torch.randn(B, N, S, H, generator=gen)
    cos, sin = caches(10, 2)
    positions = torch.randint(0, 10, (B, S), generator=gen, dtype=pdt)
    layer, y = rotary(refnet, x, cos, sin, interleaved, 4, positions)
    assert layer.num_inputs == 4 and layer.get_input(3) is not None
    close(y, rope64(x, cos, sin, interleaved, 4, positions.tolist()))


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_is_onnx_rotary_embedding(refnet, interleaved):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    x = torch.randn(B, N, S, H, generator=gen)
    cos, sin = caches(7, 3)
    positions = torch.randint(0, 7, (B, S), generator=gen)
    _, y = rotary(refnet, x, cos, sin, interleaved, 6, positions)
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], interleaved=int(interleaved),
                            rotary_embedding_dim=6)
    io = [helper.make_tensor_value_info(n, t, None) for n, t in
          (("x", TensorProto.DOUBLE), ("c", TensorProto.DOUBLE), ("s", TensorProto.DOUBLE), ("p", TensorProto.INT64),
           ("y", TensorProto.DOUBLE))]
    model = helper.make_model(helper.make_graph([node], "rope", io[:4], io[4:]),
                              opset_imports=[helper.make_opsetid("", 23)])
    want = ReferenceEvaluator(model).run(None, {"x": x.double().numpy(), "c": cos.double().numpy(),
                                                "s": sin.double().numpy(), "p": positions.numpy()})[0]
    close(y, want)


def test_a_partial_rotation_of_an_odd_head_size(refnet):
    """TensorRT-RTX accepts an odd head size where rotary_embedding_dim is set (only all of H must pair up)."""
    x = torch.randn(1, 2, 3, 5, generator=gen)
    cos, sin = caches(1, 3, 2)
    _, y = rotary(refnet, x, cos, sin, True, 4)
    close(y, rope64(x, cos, sin, True, 4))
    close(y[..., 4], x[..., 4], atol=0, rtol=0)


def test_hand_computed_rotation(refnet):
    """A quarter turn of (1, 0) is (0, 1); half a turn of (2, 3) is (-2, -3) (H = 4, halves: pairs (0, 2), (1, 3))."""
    x = torch.tensor([1.0, 2.0, 0.0, 3.0]).reshape(1, 1, 1, 4)
    cos, sin = torch.tensor([[[0.0, -1.0]]]), torch.tensor([[[1.0, 0.0]]])
    _, y = rotary(refnet, x, cos, sin, False, 0)
    close(y, [[[[0.0, -2.0, 1.0, -3.0]]]], atol=1e-7)


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_half_types_keep_their_type(refnet, dt, torch_dt):
    x = torch.randn(B, N, S, H, generator=gen).to(torch_dt)
    cos, sin = (c.to(torch_dt) for c in caches(B, S, H // 2))
    _, y = rotary(refnet, x, cos, sin, True, 0, dt=dt)
    assert y.dtype == torch_dt
    close(y, rope64(x.double(), cos.double(), sin.double(), True, 0), atol=3e-2, rtol=3e-2)


def test_rotary_embedding_dim_can_change(refnet):
    x = torch.randn(B, N, S, H, generator=gen)
    cos, sin = caches(B, S, 1)
    net = refnet.network
    layer = net.add_rotary_embedding(refnet.input("x", (B, N, S, H)), refnet.input("c", (B, S, 1)),
                                     refnet.input("s", (B, S, 1)), False, 4)
    with pytest.raises(trt.NetworkError, match="c.* has shape .* but must be"):
        layer.get_output(0).shape  # noqa: B018 - caches of R/2 = 1 do not fit rotary_embedding_dim 4
    layer.rotary_embedding_dim = 2
    layer.interleaved = True
    y = refnet.run({"x": x, "c": cos, "s": sin}, y=layer.get_output(0))["y"]
    close(y, rope64(x, cos, sin, True, 2))


@pytest.mark.parametrize("dim", [3, -2])
def test_the_setter_refuses_an_odd_or_negative_dim(refnet, dim):
    layer = refnet.network.add_rotary_embedding(refnet.input("x", (B, N, S, H)), refnet.input("c", (B, S, 4)),
                                                refnet.input("s", (B, S, 4)), False, 0)
    with pytest.raises(trt.NetworkError, match="must be even and >= 0"):
        layer.rotary_embedding_dim = dim
    assert layer.rotary_embedding_dim == 0


@pytest.mark.parametrize("x_shape, c_shape, dim, words", [
    ((B, N, S, H), (B, S, 4), 3, "rotary_embedding_dim is 3; it must be even"),
    ((B, N, S, H), (B, S, 5), 10, "rotary_embedding_dim 10 is larger than the head size 8"),
    ((B, N, S, 7), (B, S, 3), 0, "head size .* is 7; rotating all of it .* needs it even"),
    ((B, S, H), (B, S, 4), 0, "rank 3; a rotary embedding takes rank 4"),
    ((1, B, N, S, H), (B, S, 4), 0, "rank 5; a rotary embedding takes rank 4"),
    ((B, N, S, H), (B, S, 3), 0, r"cos_cache has shape \(2, 4, 3\) but must be \[2, 4, 4\]"),
    ((B, N, S, H), (1, S, 4), 0, r"cos_cache has shape \(1, 4, 4\)"),
    ((B, N, S, H), (B, 1, 4), 0, r"cos_cache has shape \(2, 1, 4\)"),
    ((B, N, S, H), (S, 4), 0, "or 2-D with position_ids"),
    ((B, N, S, H), (B, 1, S, 4), 0, "cos_cache has rank 4; it must be 3"),
])
def test_refused_shapes(refnet, x_shape, c_shape, dim, words):
    with pytest.raises(trt.NetworkError, match=words):
        layer = refnet.network.add_rotary_embedding(refnet.input("x", x_shape), refnet.input("c", c_shape),
                                                    refnet.input("s", c_shape), False, dim)
        layer.get_output(0).shape  # noqa: B018


def test_sin_cache_shape_is_checked_too(refnet):
    layer = refnet.network.add_rotary_embedding(refnet.input("x", (B, N, S, H)), refnet.input("c", (B, S, 4)),
                                                refnet.input("s", (1, S, 4)), False, 0)
    with pytest.raises(trt.NetworkError, match=r"sin_cache has shape \(1, 4, 4\)"):
        layer.get_output(0).shape  # noqa: B018 - the caches are checked once position_ids could have been set


@pytest.mark.parametrize("c_shape, p_shape, p_dt, words", [
    ((B, S, 4), (B, S), trt.int64, "with position_ids"),
    ((10, 4), (B, 5), trt.int64, r"position_ids have shape \(2, 5\) but must be \[2, 4\]"),
    ((10, 4), (1, S), trt.int64, r"position_ids have shape \(1, 4\)"),
    ((10, 4), (S,), trt.int64, r"position_ids have shape \(4,\)"),
    ((10, 4), (B, S), trt.float32, "position_ids have type FLOAT; they must be INT32 or INT64"),
    ((10, 4), (B, S), trt.int8, "position_ids have type INT8"),
])
def test_refused_position_ids(refnet, c_shape, p_shape, p_dt, words):
    layer = refnet.network.add_rotary_embedding(refnet.input("x", (B, N, S, H)), refnet.input("c", c_shape),
                                                refnet.input("s", c_shape), False, 0)
    layer.set_input(3, refnet.input("p", p_shape, p_dt))
    with pytest.raises(trt.NetworkError, match=words):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("x_dt, c_dt, s_dt, words", [
    (trt.float16, trt.float32, trt.float32, "cos_cache has type FLOAT but the input has HALF"),
    (trt.float32, trt.bfloat16, trt.float32, "cos_cache has type BF16 but the input has FLOAT"),
    (trt.float32, trt.float32, trt.float16, "sin_cache has type HALF but the input has FLOAT"),
    (trt.int32, trt.int32, trt.int32, "needs FLOAT, HALF or BF16"),
    (trt.int8, trt.int8, trt.int8, "INT8, a quantized type"),
])
def test_refused_types(refnet, x_dt, c_dt, s_dt, words):
    layer = refnet.network.add_rotary_embedding(refnet.input("x", (B, N, S, H), x_dt),
                                                refnet.input("c", (B, S, 4), c_dt), refnet.input("s", (B, S, 4), s_dt),
                                                False, 0)
    with pytest.raises(trt.NetworkError, match=words):
        layer.get_output(0).shape  # noqa: B018 - TensorRT checks types at the shape query


def test_a_position_outside_the_tables_fails_the_run():
    from trtbuild.reference.ops.rotary_embedding import run

    x, (cos, sin) = torch.randn(1, 1, 2, 4), caches(3, 2)
    with pytest.raises(IndexError, match="position id is outside"):
        run({"interleaved": False, "rotary_embedding_dim": 0}, {}, [x, cos, sin, torch.tensor([[0, 3]])], None)

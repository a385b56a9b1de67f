"""trtbuild.reference: Shuffle, Concatenation, Slice, Padding, MatrixMultiply, SoftMax, Cast,
Identity and Constant layers, against numpy / torch and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import add_profile, close as shared_close

gen = torch.Generator().manual_seed(2)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


close = shared_close


def build_fails_naming(refnet, layer, name: str, *words):
    layer.name = name
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert any(name in m and all(w in m for w in words) for m in refnet.logger.errors), refnet.logger.errors


# -- Shuffle -----------------------------------------------------------------------------------
def test_shuffle_transpose_reshape_transpose(refnet):
    x = randn(2, 3, 4, 5)
    layer = refnet.network.add_shuffle(refnet.input("x", (2, 3, 4, 5)))
    layer.first_transpose = (0, 2, 3, 1)  # (2, 4, 5, 3)
    layer.reshape_dims = (0, 20, 3)  # 0 copies dimension 0 -> (2, 20, 3)
    layer.second_transpose = (0, 2, 1)  # (2, 3, 20)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x.permute(0, 2, 3, 1).reshape(2, 20, 3).permute(0, 2, 1))


def test_shuffle_minus_one_infers_a_dimension(refnet):
    x = randn(2, 3, 4)
    layer = refnet.network.add_shuffle(refnet.input("x", (2, 3, 4)))
    layer.reshape_dims = (-1, 4)
    assert tuple(layer.get_output(0).shape) == (6, 4)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x.reshape(6, 4))


def test_shuffle_zero_placeholder_copies_the_input_dims(refnet):
    x = randn(2, 3, 4)
    layer = refnet.network.add_shuffle(refnet.input("x", (2, 3, 4)))
    layer.reshape_dims = (0, 0, 2, 2)
    assert tuple(layer.get_output(0).shape) == (2, 3, 2, 2)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x.reshape(2, 3, 2, 2))


def test_shuffle_rejects_volume_change(refnet):
    layer = refnet.network.add_shuffle(refnet.input("x", (2, 3, 4)))
    layer.reshape_dims = (5, 5)  # accepted as set; shape inference refuses it
    with pytest.raises(trt.NetworkError, match=r"cannot reshape \(2, 3, 4\) \(volume 24\) to \(5, 5\) \(volume 25\)"):
        layer.get_output(0).shape  # noqa: B018


def test_shuffle_rejects_two_minus_ones(refnet):
    layer = refnet.network.add_shuffle(refnet.input("x", (2, 3, 4)))
    layer.reshape_dims = (-1, -1)
    build_fails_naming(refnet, layer, "shuffle_two_minus_ones", "-1")


# -- Concatenation -----------------------------------------------------------------------------
def test_concatenation_default_axis_is_channel(refnet):
    a, b = randn(2, 3, 4, 5), randn(2, 2, 4, 5)
    layer = refnet.network.add_concatenation([refnet.input("a", (2, 3, 4, 5)), refnet.input("b", (2, 2, 4, 5))])
    assert layer.axis == 1
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    close(y, torch.cat([a, b], dim=1))


def test_concatenation_default_axis_is_zero_below_rank_three(refnet):
    a, b = randn(2, 5), randn(3, 5)
    layer = refnet.network.add_concatenation([refnet.input("a", (2, 5)), refnet.input("b", (3, 5))])
    assert layer.axis == 0
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    close(y, torch.cat([a, b], dim=0))


def test_concatenation_explicit_axis(refnet):
    xs = [randn(1, 2, 3, n) for n in (1, 2, 3)]
    layer = refnet.network.add_concatenation([refnet.input(f"x{i}", tuple(x.shape)) for i, x in enumerate(xs)])
    layer.axis = 3
    y = refnet.run({f"x{i}": x for i, x in enumerate(xs)}, y=layer.get_output(0))["y"]
    close(y, torch.cat(xs, dim=3))


def test_concatenation_rejects_mismatched_dims(refnet):
    layer = refnet.network.add_concatenation([refnet.input("a", (1, 2, 3, 4)), refnet.input("b", (1, 2, 5, 4))])
    build_fails_naming(refnet, layer, "concat_mismatch", "axis")


# -- Slice -------------------------------------------------------------------------------------
def test_slice_documented_example(refnet):
    """ISliceLayer docs: input {{0, 2, 4}, {1, 3, 5}}, start {1, 0}, size {1, 2}, stride {1, 2} -> {{1, 5}}."""
    x = torch.tensor([[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]])
    layer = refnet.network.add_slice(refnet.input("x", (2, 3)), (1, 0), (1, 2), (1, 2))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, [[1.0, 5.0]])


def test_slice_strides_and_negative_stride(refnet):
    x = randn(4, 9)
    t = refnet.input("x", (4, 9))
    fwd = refnet.network.add_slice(t, (1, 1), (2, 3), (2, 3))
    back = refnet.network.add_slice(t, (3, 8), (4, 3), (-1, -2))
    out = refnet.run({"x": x}, fwd=fwd.get_output(0), back=back.get_output(0))
    close(out["fwd"], x[1::2, 1::3][:2, :3])
    close(out["back"], x.flip(0)[:, [8, 6, 4]])


SAMPLE = trt.SampleMode


@pytest.mark.parametrize("mode,expected_indices", [
    (SAMPLE.WRAP, [3, 4, 0, 1, 2, 3, 4, 0, 1]),  # index mod 5
    (SAMPLE.CLAMP, [0, 0, 0, 1, 2, 3, 4, 4, 4]),
    (SAMPLE.REFLECT, [2, 1, 0, 1, 2, 3, 4, 3, 2]),  # mirror about the edge elements
])
def test_slice_out_of_bounds_modes(refnet, mode, expected_indices):
    """start -2 and 9 elements over a size-5 axis: positions -2..6."""
    x = torch.arange(10.0, 15.0).reshape(1, 5)
    layer = refnet.network.add_slice(refnet.input("x", (1, 5)), (0, -2), (1, 9), (1, 1))
    layer.mode = mode
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x[:, expected_indices])


def test_slice_fill_mode_defaults_to_zero(refnet):
    x = torch.arange(10.0, 15.0).reshape(1, 5)
    layer = refnet.network.add_slice(refnet.input("x", (1, 5)), (0, -2), (1, 9), (1, 1))
    layer.mode = SAMPLE.FILL
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, [[0.0, 0.0, 10.0, 11.0, 12.0, 13.0, 14.0, 0.0, 0.0]])


def test_slice_fill_mode_uses_the_fifth_input(refnet):
    x = torch.arange(10.0, 15.0).reshape(1, 5)
    layer = refnet.network.add_slice(refnet.input("x", (1, 5)), (0, -2), (1, 9), (1, 1))
    layer.mode = SAMPLE.FILL
    layer.set_input(4, refnet.network.add_constant((), np.array(7.0, np.float32)).get_output(0))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, [[7.0, 7.0, 10.0, 11.0, 12.0, 13.0, 14.0, 7.0, 7.0]])


@pytest.mark.parametrize("start,size,stride", [((0, -1), (1, 2), (1, 1)), ((0, 3), (1, 3), (1, 1)),
                                               ((0, 0), (1, 3), (1, 3))])
def test_slice_strict_bounds_rejects_out_of_bounds(refnet, start, size, stride):
    layer = refnet.network.add_slice(refnet.input("x", (1, 5)), start, size, stride)
    build_fails_naming(refnet, layer, "slice_oob", "outside")


# -- Padding -----------------------------------------------------------------------------------
def test_padding_positive(refnet):
    x = randn(1, 2, 3, 4)
    layer = refnet.network.add_padding_nd(refnet.input("x", (1, 2, 3, 4)), (1, 2), (0, 3))
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, F.pad(x, (2, 3, 1, 0)))


def test_padding_negative_trims(refnet):
    x = randn(1, 2, 5, 6)
    layer = refnet.network.add_padding_nd(refnet.input("x", (1, 2, 5, 6)), (-1, 2), (-2, -3))
    assert tuple(layer.get_output(0).shape) == (1, 2, 2, 5)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    expected = F.pad(x[:, :, 1:3, 0:3], (2, 0, 0, 0))
    close(y, expected)


def test_padding_rejects_three_dimensions(refnet):
    t = refnet.input("x", (1, 2, 3, 4, 5))
    with pytest.raises(trt.NetworkError, match="padding layer supports exactly 2 dimensions"):
        refnet.network.add_padding_nd(t, (1, 1, 1), (1, 1, 1))


# -- MatrixMultiply ----------------------------------------------------------------------------
MO = trt.MatrixOperation


def test_matmul_batch_broadcasting(refnet):
    a, b = randn(2, 1, 3, 4), randn(1, 5, 4, 2)
    ta, tb = refnet.input("a", (2, 1, 3, 4)), refnet.input("b", (1, 5, 4, 2))
    layer = refnet.network.add_matrix_multiply(ta, MO.NONE, tb, MO.NONE)
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    close(y, torch.matmul(a, b), atol=1e-5)


def test_matmul_transpose(refnet):
    a, b = randn(2, 4, 3), randn(2, 5, 4)
    layer = refnet.network.add_matrix_multiply(refnet.input("a", (2, 4, 3)), MO.TRANSPOSE, refnet.input("b", (2, 5, 4)),
                                            MO.TRANSPOSE)
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    close(y, a.transpose(1, 2) @ b.transpose(1, 2), atol=1e-5)


def test_matmul_matrix_vector_and_vector_matrix(refnet):
    """matrix * vector -> vector, vector * matrix -> vector (per batch)."""
    m, v, m2 = randn(2, 3, 4), randn(2, 4), randn(2, 4, 5)
    tm, tv, tm2 = (refnet.input(n, tuple(t.shape)) for n, t in (("m", m), ("v", v), ("m2", m2)))
    mv = refnet.network.add_matrix_multiply(tm, MO.NONE, tv, MO.VECTOR)
    vm = refnet.network.add_matrix_multiply(tv, MO.VECTOR, tm2, MO.NONE)
    out = refnet.run({"m": m, "v": v, "m2": m2}, mv=mv.get_output(0), vm=vm.get_output(0))
    close(out["mv"], torch.einsum("bij,bj->bi", m, v), atol=1e-5)
    close(out["vm"], torch.einsum("bj,bjk->bk", v, m2), atol=1e-5)


def test_matmul_vector_vector_gives_scalars(refnet):
    """vector * vector -> scalar (per batch): (2, 4) . (2, 4) -> (2,)."""
    v, w = randn(2, 4), randn(2, 4)
    vv = refnet.network.add_matrix_multiply(refnet.input("v", (2, 4)), MO.VECTOR, refnet.input("w", (2, 4)), MO.VECTOR)
    assert tuple(vv.get_output(0).shape) == (2,)
    out = refnet.run({"v": v, "w": w}, vv=vv.get_output(0))
    close(out["vv"], (v * w).sum(-1), atol=1e-5)


def test_matmul_rejects_unequal_ranks(refnet):
    """TensorRT broadcasts batch dimensions of equal-rank inputs only (reshape first otherwise)."""
    with pytest.raises(trt.NetworkError, match=r"(?s)batch ranks.*'a'"):
        refnet.network.add_matrix_multiply(refnet.input("a", (2, 3, 4)), MO.NONE, refnet.input("b", (4, 5)), MO.NONE)


def test_matmul_rejects_inner_dimension_mismatch(refnet):
    with pytest.raises(trt.NetworkError, match=r"(?s)inner dimensions.*'a'"):
        refnet.network.add_matrix_multiply(refnet.input("a", (2, 3)), MO.NONE, refnet.input("b", (4, 2)), MO.NONE)


# -- SoftMax -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 1), ((3, 4, 5), 0), ((4, 5), 0), ((2, 2, 3, 4, 5), 2)])
def test_softmax_default_axis(refnet, shape, axis):
    """Default: the number of axes minus three, or 0 below three axes."""
    x = randn(*shape)
    layer = refnet.network.add_softmax(refnet.input("x", shape))
    assert layer.axes == 1 << axis
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, torch.softmax(x, dim=axis))


def test_softmax_explicit_axis(refnet):
    x = randn(2, 3, 4, 5)
    layer = refnet.network.add_softmax(refnet.input("x", (2, 3, 4, 5)))
    layer.axes = 1 << 3
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, torch.softmax(x, dim=3))


def test_softmax_rejects_two_axes(refnet):
    layer = refnet.network.add_softmax(refnet.input("x", (2, 3, 4)))
    layer.axes = 0b110
    build_fails_naming(refnet, layer, "softmax_two_axes", "axes")


# -- Cast --------------------------------------------------------------------------------------
def test_cast_fp32_to_fp16_rounds_to_nearest_even_and_overflows(refnet):
    values = [1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65519.0, 65520.0, 70000.0, -70000.0, 1e-8]
    expected = [1.0, 1.0 + 2.0 ** -9, 65504.0, math.inf, math.inf, -math.inf, 0.0]
    layer = refnet.network.add_cast(refnet.input("x", (7,)), trt.float16)
    assert layer.get_output(0).dtype == trt.float16
    y = refnet.run({"x": torch.tensor(values, dtype=torch.float32)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.float16
    assert y.float().tolist() == expected


def test_cast_float_to_int32_and_back(refnet):
    t = refnet.input("x", (4,))
    to_int = refnet.network.add_cast(t, trt.int32)
    back = refnet.network.add_cast(to_int.get_output(0), trt.float32)
    out = refnet.run({"x": torch.tensor([3.0, -2.0, 0.0, 1000.0])}, i=to_int.get_output(0), f=back.get_output(0))
    assert out["i"].dtype == torch.int32 and out["i"].tolist() == [3, -2, 0, 1000]
    assert out["f"].tolist() == [3.0, -2.0, 0.0, 1000.0]


# -- Identity / Constant -----------------------------------------------------------------------
def test_identity_keeps_values_and_type(refnet):
    x = randn(2, 3).half()
    layer = refnet.network.add_identity(refnet.input("x", (2, 3), trt.float16))
    assert layer.get_output(0).dtype == trt.float16
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.float16 and torch.equal(y, x)


def test_constant_values_shape_and_broadcast_add(refnet):
    c = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    const = refnet.network.add_constant((1, 3, 1), c)
    x = randn(2, 3, 4)
    add = refnet.network.add_elementwise(refnet.input("x", (2, 3, 4)), const.get_output(0),
                                         trt.ElementWiseOperation.SUM)
    out = refnet.run({"x": x}, c=const.get_output(0), y=add.get_output(0))
    close(out["c"], torch.from_numpy(c))
    close(out["y"], x + torch.from_numpy(c))


def test_constant_int32(refnet):
    const = refnet.network.add_constant((2, 2), np.array([[1, -2], [3, 4]], np.int32))
    assert const.get_output(0).dtype == trt.int32
    out = refnet.run({}, c=const.get_output(0))
    assert out["c"].dtype == torch.int32 and out["c"].tolist() == [[1, -2], [3, 4]]


def test_constant_rejects_wrong_count(refnet):
    with pytest.raises(trt.NetworkError, match="weights hold 5 values"):
        refnet.network.add_constant((2, 3), np.ones(5, np.float32))




@pytest.mark.parametrize("op0,op1", [(trt.MatrixOperation.NONE, trt.MatrixOperation.NONE),
                                     (trt.MatrixOperation.TRANSPOSE, trt.MatrixOperation.NONE)])
def test_matmul_rank_one_needs_vector(refnet, op0, op1):
    """A rank-1 input takes MatrixOperation.VECTOR; NONE/TRANSPOSE need rank >= 2 (this raised
    IndexError before, TensorRT-RTX: "Assertion rank >= 2 failed")."""
    a, b = refnet.input("a", (4,)), refnet.input("b", (4, 3))
    with pytest.raises(trt.NetworkError,
                       match=r"with MatrixOperation\.\w+ needs rank >= 2 \(a rank-1 input takes VECTOR\)"):
        refnet.network.add_matrix_multiply(a, op0, b, op1)


def test_softmax_needs_rank_two(refnet):
    layer = refnet.network.add_softmax(refnet.input("x", (5,)))
    with pytest.raises(trt.NetworkError, match=r"softmax needs rank >= 2"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("start,stride", [(-1, 1), (3, -1), (3, 0), (4, 0)])
def test_slice_empty_with_a_start_outside_is_rejected(refnet, start, stride):
    """TensorRT-RTX 1.7 fails to build an empty STRICT_BOUNDS slice starting before the input (or,
    stepping backwards or by 0, at or after its end); starting at or after the end stepping forwards builds."""
    layer = refnet.network.add_slice(refnet.input("x", (2, 3)), (0, start), (2, 0), (1, stride))
    build_fails_naming(refnet, layer, "empty_slice", "an empty slice")


@pytest.mark.parametrize("start,stride", [(3, 1), (2, 0)])
def test_slice_empty_starting_at_the_end_is_accepted(refnet, start, stride):
    """Forwards from the end, or by 0 from inside the dim: TensorRT-RTX 1.7 builds both."""
    layer = refnet.network.add_slice(refnet.input("x", (2, 3)), (0, start), (2, 0), (1, stride))
    y = refnet.run({"x": randn(2, 3)}, y=layer.get_output(0))["y"]
    assert tuple(y.shape) == (2, 0)


@pytest.mark.parametrize("dims,builds", [((2, 8), True), ((3, 8), False), ((1, 8), False)])
def test_dynamic_reshape_must_fit_the_profile_opt_shape(refnet, dims, builds):
    """(-1, 2, 4) reshaped to fixed dims, profile batch 1/2/3: TensorRT-RTX checks the reshape at the opt
    shape ("kOPT values for profile 0 violate shape constraints"), so only a volume of 16 builds."""
    layer = refnet.network.add_shuffle(refnet.input("x", (-1, 2, 4)))
    layer.reshape_dims = dims
    add_profile(refnet, {"x": ((1, 2, 4), (2, 2, 4), (3, 2, 4))})
    if builds:
        y = refnet.run({"x": randn(2, 2, 4)}, y=layer.get_output(0))["y"]
        assert tuple(y.shape) == dims
    else:
        build_fails_naming(refnet, layer, "reshape", "opt shapes", "cannot reshape")


@pytest.mark.parametrize("other,builds", [(3, False), (4, True)])
def test_dynamic_broadcast_against_a_static_dim(refnet, other, builds):
    """(-1, 2) + (other, 2), profile batch 1/2/3: the batch broadcasts only if 1 or `other`. With
    `other` 3 (inside the profile) TensorRT-RTX refuses the opt shape 2; with 4 (beyond it) the batch
    can only be 1 and it builds (a batch of 2 then fails at run time, on the reference too)."""
    a, b = refnet.input("a", (-1, 2)), refnet.input("b", (other, 2))
    layer = refnet.network.add_elementwise(a, b, trt.ElementWiseOperation.SUM)
    assert tuple(layer.get_output(0).shape) == (other, 2)
    add_profile(refnet, {"a": ((1, 2), (2, 2), (3, 2))})
    if not builds:
        build_fails_naming(refnet, layer, "sum", "opt shapes", "does not broadcast")
        return
    y = refnet.run({"a": torch.ones(1, 2), "b": torch.ones(other, 2)}, y=layer.get_output(0))["y"]
    close(y, torch.full((other, 2), 2.0))

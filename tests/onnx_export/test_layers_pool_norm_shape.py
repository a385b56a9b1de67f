"""Pooling, LRN, normalization, data movement and matrix multiply: reference vs onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_onnx, run_onnxruntime
from trtbuild.reference.core import NetworkError

from helpers.onnx_layer_check import BOTH, F16, F32, build, check, one, w
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

P = trt.PaddingMode
PT = trt.PoolingType

POOL_CASES = {
    "max_2d": dict(t=PT.MAX, shape=(1, 3, 8, 8), ws=(2, 2), stride=(2, 2)),
    "max_2d_pad_round_up": dict(t=PT.MAX, shape=(1, 3, 9, 9), ws=(3, 3), stride=(2, 2), pre=(1, 1), post=(0, 1),
                                mode=P.EXPLICIT_ROUND_UP),
    "avg_excl_round_up": dict(t=PT.AVERAGE, shape=(2, 3, 9, 8), ws=(3, 2), stride=(2, 2), pre=(1, 0),
                              mode=P.EXPLICIT_ROUND_UP),
    "avg_incl_pad": dict(t=PT.AVERAGE, shape=(1, 3, 7, 7), ws=(3, 3), stride=(2, 2), pre=(1, 1), post=(1, 1),
                         excl=False),
    "avg_incl_round_up": dict(t=PT.AVERAGE, shape=(1, 2, 9, 10), ws=(3, 3), stride=(2, 2), pre=(1, 1), post=(0, 0),
                              mode=P.EXPLICIT_ROUND_UP, excl=False),
    "avg_incl_same_upper": dict(t=PT.AVERAGE, shape=(1, 2, 7, 6), ws=(3, 3), stride=(2, 2), mode=P.SAME_UPPER,
                                excl=False),
    "avg_excl_same_lower": dict(t=PT.AVERAGE, shape=(1, 2, 7, 6), ws=(2, 3), stride=(2, 2), mode=P.SAME_LOWER),
    "max_same_upper": dict(t=PT.MAX, shape=(1, 2, 7, 6), ws=(3, 3), stride=(2, 2), mode=P.SAME_UPPER),
    "blend": dict(t=PT.MAX_AVERAGE_BLEND, shape=(1, 3, 8, 8), ws=(3, 3), stride=(2, 2), pre=(1, 1), blend=0.3),
    "blend_incl_round_up": dict(t=PT.MAX_AVERAGE_BLEND, shape=(1, 2, 8, 9), ws=(2, 2), stride=(2, 2),
                                mode=P.EXPLICIT_ROUND_UP, excl=False, blend=0.6),
    "avg_3d": dict(t=PT.AVERAGE, shape=(1, 2, 5, 6, 7), ws=(2, 2, 3), stride=(2, 2, 2), pre=(1, 0, 1)),
    "max_3d_rank6": dict(t=PT.MAX, shape=(1, 2, 2, 4, 4, 4), ws=(2, 2, 2), stride=(2, 2, 2)),
    # padding not smaller than the window (TensorRT-RTX accepts it; ONNX pools need an explicit Pad)
    "max_pad_ge_window": dict(t=PT.MAX, shape=(1, 2, 3, 3), ws=(2, 2), pre=(2, 2), post=(2, 1)),
    "avg_incl_pad_ge_window": dict(t=PT.AVERAGE, shape=(1, 2, 3, 4), ws=(2, 2), pre=(2, 0), post=(0, 3), excl=False),
    "avg_incl_pad_ge_window_round_up": dict(t=PT.AVERAGE, shape=(1, 2, 3, 4), ws=(3, 2), stride=(2, 1), pre=(3, 0),
                                            mode=P.EXPLICIT_ROUND_UP, excl=False),
}


def _pool(net, x, c):
    layer = net.add_pooling_nd(x, c["t"], trt.Dims(c["ws"]))
    nsp = len(c["ws"])
    layer.stride_nd = c.get("stride", (1,) * nsp)
    layer.pre_padding = c.get("pre", (0,) * nsp)
    layer.post_padding = c.get("post", (0,) * nsp)
    layer.padding_mode = c.get("mode", P.EXPLICIT_ROUND_DOWN)
    layer.average_count_excludes_padding = c.get("excl", True)
    layer.blend_factor = c.get("blend", 0.0)
    return layer


@BOTH
@pytest.mark.parametrize("case", list(POOL_CASES))
def test_pooling(case, dt):
    c = POOL_CASES[case]
    check(lambda net, dt: one(net, dt, c["shape"], lambda net, x: _pool(net, x, c)), dt)


#: Constructions TensorRT (and TensorRT-RTX 1.7's builder) refuses, which the reference refuses too,
#: so they never reach the export: (shape, add(net, x), the reason in the error)
REFUSED = {
    "conv_1d": ((2, 3, 12), lambda net, x: net.add_convolution_nd(x, 5, (3,), w(45, F32)), "2-D or 3-D"),
    "deconv_1d": ((1, 3, 7), lambda net, x: net.add_deconvolution_nd(x, 2, (3,), w(18, F32)), "2-D or 3-D"),
    "pool_1d": ((2, 3, 11), lambda net, x: net.add_pooling_nd(x, PT.MAX, (3,)), "2-D or 3-D"),
    "pool_2d_rank3": ((3, 8, 8), lambda net, x: net.add_pooling_nd(x, PT.MAX, (2, 2)), "rank >= 4"),
    "lrn_rank3": ((6, 9, 2), lambda net, x: net.add_lrn(x, 3, 0.3, 0.9, 1.5), "rank >= 4"),
    "deconv_strided_dilated": ((1, 2, 4, 4), lambda net, x: _strided_dilated(net, x), "strided and dilated"),
}


def _strided_dilated(net, x):
    layer = net.add_deconvolution_nd(x, 2, (3, 3), w(36, F32))
    layer.stride_nd, layer.dilation_nd = (2, 1), (2, 1)
    return layer


@pytest.mark.parametrize("case", REFUSED)
def test_refused_constructions_are_not_exported(case):
    """The ONNX export reads only networks TensorRT accepts; these were exported (and run by
    onnxruntime) before the reference learned, from TensorRT-RTX's builder, that TensorRT refuses them."""
    shape, add, reason = REFUSED[case]
    with pytest.raises((OnnxExportError, NetworkError), match=reason):
        export_onnx(build(lambda net, dt: one(net, F32, shape, add), F32))


def test_pooling_same_padding_counts_as_padding():
    """TensorRT: without average_count_excludes_padding the divisor is the window's overlap with
    the padded input; SAME padding is padding, so every window divides by its full size."""
    c = POOL_CASES["avg_incl_same_upper"]
    net = build(lambda net, dt: one(net, F32, c["shape"], lambda net, x: _pool(net, x, c)), F32)
    model = export_onnx(net)
    (node,) = model.graph.node
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert node.op_type == "AveragePool" and attrs["count_include_pad"] == 1
    # H 7 -> 4 needs 2 rows of padding (1 + 1), W 6 -> 3 needs 1 column (SAME_UPPER: at the end)
    assert attrs["pads"] == [1, 0, 1, 1]
    x = torch.rand(c["shape"])
    got = run_onnxruntime(model, {"x": x})["y"]
    expect = F.avg_pool2d(F.pad(x, (0, 1, 1, 1)), 3, 2)  # hand-written SAME_UPPER padding, counted
    np.testing.assert_allclose(got, expect.numpy(), rtol=1e-6, atol=1e-6)


def test_pooling_round_up_rescale_constant_is_needed():
    """Under EXPLICIT_ROUND_UP the part of the last window beyond the padded input is not counted."""
    c = POOL_CASES["avg_incl_round_up"]
    model = check(lambda net, dt: one(net, F32, c["shape"], lambda net, x: _pool(net, x, c)))
    assert [n.op_type for n in model.graph.node] == ["AveragePool", "Mul"]
    x = torch.rand(c["shape"])
    got = run_onnxruntime(model, {"x": x})["y"]
    # explicit zero padding (counted) before, then PyTorch's ceil_mode, which clips the last window
    # to the (padded) input: 10 x 11 -> 5 x 5
    expect = F.avg_pool2d(F.pad(x, (1, 0, 1, 0)), 3, 2, ceil_mode=True)
    np.testing.assert_allclose(got, expect.numpy(), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- LRN
@pytest.mark.parametrize("shape,window,alpha,beta,k", [((1, 7, 4, 5), 5, 1e-2, 0.75, 2.0),
                                                       ((2, 4, 3, 3), 3, 0.5, 0.5, 1.0),
                                                       ((1, 2, 5, 3, 2), 5, 0.2, 1.0, 1.0),
                                                       ((-1, 5, 3, 2), 3, 0.1, 0.6, 1.0),
                                                       ((-1, 2, 5, 3, 2), 1, 0.2, 1.0, 1.0)])
def test_lrn(shape, window, alpha, beta, k):
    """TensorRT's LRN (FLOAT only) windows over dimension rank-3."""
    def define(net, dt):
        return one(net, F32, shape, lambda net, x: net.add_lrn(x, window, alpha, beta, k))
    static = tuple(3 if d < 0 else d for d in shape)
    model = check(define, feeds=lambda net: {"x": torch.rand(static) * 4 - 2})
    lrn = next(n for n in model.graph.node if n.op_type == "LRN")
    attrs = {a.name: a for a in lrn.attribute}
    assert attrs["size"].i == window and attrs["alpha"].f == pytest.approx(alpha)  # same alpha/size convention


def test_lrn_rank4_against_torch():
    """Hand-checked semantics: for NCHW both TensorRT and torch window over C with alpha/size."""
    net = build(lambda net, dt: one(net, F32, (2, 7, 3, 3), lambda net, x: net.add_lrn(x, 5, 0.3, 0.75, 2.0)), F32)
    x = torch.rand(2, 7, 3, 3) * 4 - 2
    got = run_onnxruntime(export_onnx(net), {"x": x})["y"]
    np.testing.assert_allclose(got, F.local_response_norm(x, 5, 0.3, 0.75, 2.0).numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- normalization
NORM_CASES = {
    "instance": dict(shape=(2, 3, 4, 5), axes=0b1100, sshape=(1, 3, 1, 1), op="InstanceNormalization"),
    "instance_3d": dict(shape=(1, 2, 3, 4, 2), axes=0b11100, sshape=(1, 2, 1, 1, 1), op="InstanceNormalization"),
    "layer_last": dict(shape=(2, 3, 8), axes=0b100, sshape=(1, 1, 8), op="LayerNormalization"),
    "layer_last2": dict(shape=(2, 3, 4, 5), axes=0b1100, sshape=(1, 1, 4, 5), op="LayerNormalization"),
    "channels": dict(shape=(2, 6, 3, 3), axes=0b0010, sshape=(1, 6, 1, 1), op="ReduceMean"),
    "broadcast_scale": dict(shape=(2, 3, 4, 5), axes=0b1110, sshape=(1, 3, 1, 1), op="ReduceMean"),
    "group_v1": dict(shape=(2, 6, 3, 4), axes=0b1100, groups=3, sshape=(1, 3, 1, 1), op="ReduceMean"),
    "group_v2": dict(shape=(2, 6, 3, 4), axes=0b1100, groups=2, sshape=(1, 6, 1, 1), v2=True, op="ReduceMean"),
    "group_v2_3d": dict(shape=(1, 4, 2, 3, 2), axes=0b11100, groups=2, sshape=(1, 4, 1, 1, 1), v2=True,
                        op="ReduceMean"),
}


@BOTH
@pytest.mark.parametrize("case", NORM_CASES)
@pytest.mark.parametrize("as_constant", [True, False], ids=["const", "input"])
def test_normalization(case, as_constant, dt):
    c = NORM_CASES[case]
    scale, bias = w(c["sshape"], dt, 0.5, 1.5), w(c["sshape"], dt)

    def define(net, dt):
        x = net.add_input("x", dt, c["shape"])
        if as_constant:
            s = net.add_constant(trt.Dims(c["sshape"]), trt.Weights(scale)).get_output(0)
            b = net.add_constant(trt.Dims(c["sshape"]), trt.Weights(bias)).get_output(0)
        else:
            s, b = net.add_input("scale", dt, c["sshape"]), net.add_input("bias", dt, c["sshape"])
        add = net.add_normalization_v2 if c.get("v2") else net.add_normalization
        layer = add(x, s, b, c["axes"])
        layer.epsilon = 1e-3
        layer.num_groups = c.get("groups", 1)
        return {"y": layer.get_output(0)}
    feeds = None
    if not as_constant:
        def feeds(net):
            return {"x": torch.rand(c["shape"]).to(torch.float16 if dt == F16 else torch.float32) * 4 - 2,
                    "scale": torch.from_numpy(scale), "bias": torch.from_numpy(bias)}
    check(define, dt, feeds=feeds, expect_ops=(c["op"],), tol=None if dt == F32 else dict(rtol=1e-2, atol=1e-2))


def test_layer_norm_decomposed_below_opset17():
    c = NORM_CASES["layer_last"]
    net = build(lambda net, dt: {"y": net.add_normalization(
        net.add_input("x", dt, c["shape"]),
        net.add_constant(trt.Dims(c["sshape"]), trt.Weights(w(c["sshape"], dt))).get_output(0),
        net.add_constant(trt.Dims(c["sshape"]), trt.Weights(w(c["sshape"], dt))).get_output(0),
        c["axes"]).get_output(0)}, F32)
    ops = [n.op_type for n in export_onnx(net, opset=16).graph.node]
    assert "LayerNormalization" not in ops and "ReduceMean" in ops


# ---------------------------------------------------------------- shuffle / concat
SHUFFLE_CASES = {
    "transpose": dict(shape=(2, 3, 4), first=(2, 0, 1)),
    "reshape_placeholder": dict(shape=(2, 3, 4, 5), dims=(0, -1, 5)),
    "reshape_then_transpose": dict(shape=(2, 12, 5), dims=(2, 3, 4, 5), second=(0, 2, 1, 3)),
    "all_three": dict(shape=(2, 3, 4), first=(1, 0, 2), dims=(3, 0, 2, 2), second=(3, 2, 1, 0)),
    "identity": dict(shape=(2, 3)),
    "flatten": dict(shape=(1, 4, 2, 2), dims=(1, 16)),
}


@BOTH
@pytest.mark.parametrize("case", SHUFFLE_CASES)
def test_shuffle(case, dt):
    c = SHUFFLE_CASES[case]

    def add(net, x):
        layer = net.add_shuffle(x)
        if "first" in c:
            layer.first_transpose = trt.Permutation(c["first"])
        if "dims" in c:
            layer.reshape_dims = trt.Dims(c["dims"])
        if "second" in c:
            layer.second_transpose = trt.Permutation(c["second"])
        return layer
    check(lambda net, dt: one(net, dt, c["shape"], add), dt)


@BOTH
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concatenation(axis, dt):
    def define(net, dt):
        shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
        ins = []
        for i, s in enumerate(shapes):
            s = list(s)
            s[axis] += i
            ins.append(net.add_input(f"x{i}", dt, tuple(s)))
        layer = net.add_concatenation(ins)
        layer.axis = axis
        return {"y": layer.get_output(0)}
    check(define, dt)


# ---------------------------------------------------------------- slice / padding
S = trt.SampleMode
SLICE_CASES = {
    "strict_stride": dict(start=(0, 1, 0), size=(2, 2, 3), stride=(1, 2, 2)),
    "strict_negative_stride": dict(start=(1, 4, 5), size=(2, 3, 6), stride=(-1, -2, -1)),
    "strict_negative_to_zero": dict(start=(1, 2, 3), size=(2, 3, 2), stride=(-1, -1, -3)),
    "wrap": dict(start=(0, -2, 3), size=(2, 7, 4), stride=(1, 1, 2), mode=S.WRAP),
    "clamp": dict(start=(-1, -2, 2), size=(3, 8, 4), stride=(1, 1, 1), mode=S.CLAMP),
    "fill": dict(start=(-1, 3, 0), size=(4, 3, 6), stride=(1, 1, 1), mode=S.FILL),
    "reflect": dict(start=(0, -3, -2), size=(2, 9, 10), stride=(1, 1, 1), mode=S.REFLECT),
    "strict_stride0": dict(start=(0, 2, 0), size=(2, 3, 6), stride=(1, 0, 1)),
}


@BOTH
@pytest.mark.parametrize("case", SLICE_CASES)
def test_slice(case, dt):
    c = SLICE_CASES[case]

    def add(net, x):
        layer = net.add_slice(x, trt.Dims(c["start"]), trt.Dims(c["size"]), trt.Dims(c["stride"]))
        layer.mode = c.get("mode", S.STRICT_BOUNDS)
        return layer
    check(lambda net, dt: one(net, dt, (2, 5, 6), add), dt)


@BOTH
@pytest.mark.parametrize("pre,post", [((1, 2), (2, 0)), ((-1, 0), (0, -2)), ((2, -1), (-1, 3))])
def test_padding(pre, post, dt):
    model = check(lambda net, dt: one(net, dt, (2, 3, 5, 6),
                                      lambda net, x: net.add_padding_nd(x, trt.Dims(pre), trt.Dims(post))), dt)
    if min(pre + post) < 0:
        assert "Slice" in [n.op_type for n in model.graph.node]


# ---------------------------------------------------------------- matrix multiply
M = trt.MatrixOperation
MM_CASES = {
    "plain": ((2, 3, 4), M.NONE, (2, 4, 5), M.NONE),
    "broadcast_batch": ((1, 3, 4), M.NONE, (2, 4, 5), M.NONE),
    "transpose_both": ((2, 4, 3), M.TRANSPOSE, (2, 5, 4), M.TRANSPOSE),
    "vector_rhs": ((2, 3, 4), M.NONE, (2, 4), M.VECTOR),
    "vector_lhs": ((2, 4), M.VECTOR, (2, 4, 5), M.NONE),
    "vector_lhs_transpose_rhs": ((3, 4), M.VECTOR, (3, 5, 4), M.TRANSPOSE),
    "rank2": ((3, 4), M.NONE, (4, 6), M.NONE),
}


@BOTH
@pytest.mark.parametrize("case", MM_CASES)
def test_matrix_multiply(case, dt):
    sa, oa, sb, ob = MM_CASES[case]

    def define(net, dt):
        a, b = net.add_input("a", dt, sa), net.add_input("b", dt, sb)
        return {"y": net.add_matrix_multiply(a, oa, b, ob).get_output(0)}
    check(define, dt, tol=None if dt == F32 else dict(rtol=1e-2, atol=1e-2))


def _dot_network(net, dt):
    a, b = net.add_input("a", dt, (3, 4)), net.add_input("b", dt, (3, 4))
    return {"y": net.add_matrix_multiply(a, M.VECTOR, b, M.VECTOR).get_output(0)}


def test_matrix_multiply_vector_vector_is_a_batched_dot_product():
    net = build(_dot_network, F32)
    a, b = torch.rand(3, 4), torch.rand(3, 4)
    got = run_onnxruntime(export_onnx(net), {"a": a, "b": b})["y"]
    assert got.shape == (3,)
    np.testing.assert_allclose(got, (a * b).sum(-1).numpy(), rtol=1e-6, atol=1e-6)


def test_matrix_multiply_vector_vector_against_reference():
    check(_dot_network, F32)

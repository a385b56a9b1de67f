"""GridSample, RaggedSoftMax and RotaryEmbedding: reference vs onnxruntime (ONNX GridSample at opset 16..19 and 20,
a masked Softmax, ONNX RotaryEmbedding's definition written out); every export also parsed and built by
TensorRT-RTX. KVCacheUpdate is refused in one sentence."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_onnx

from helpers.onnx_layer_check import BOTH, build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

IM, SM = trt.InterpolationMode, trt.SampleMode


def _grid_sample(x_shape, g_shape, mode, sample_mode, align):
    def define(net, dt):
        layer = net.add_grid_sample(net.add_input("x", dt, x_shape), net.add_input("g", dt, g_shape))
        layer.interpolation_mode, layer.sample_mode, layer.align_corners = mode, sample_mode, align
        return {"y": layer.get_output(0)}
    return define


def _feeds(x_shape, g_shape, dt):
    np_dt = np.float16 if dt == trt.float16 else np.float32
    rng = np.random.default_rng(5)
    return lambda net: {"x": rng.standard_normal(x_shape).astype(np_dt),
                        "g": rng.uniform(-1.3, 1.3, g_shape).astype(np_dt)}


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("sample_mode", [SM.FILL, SM.CLAMP, SM.REFLECT])
@pytest.mark.parametrize("mode", [IM.NEAREST, IM.LINEAR, IM.CUBIC])
@pytest.mark.parametrize("opset", [17, 20])
def test_grid_sample_rank4(mode, sample_mode, align, opset):
    x_shape, g_shape = (2, 3, 4, 5), (2, 3, 6, 2)
    net = build(_grid_sample(x_shape, g_shape, mode, sample_mode, align), trt.float32)
    from trtbuild.onnx_export import export_and_run

    model, ref, got = export_and_run(net, _feeds(x_shape, g_shape, trt.float32)(net), opset=opset)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-5)
    node = [n for n in model.graph.node if n.op_type == "GridSample"][0]
    attrs = {a.name: a for a in node.attribute}
    names_16 = {IM.NEAREST: b"nearest", IM.LINEAR: b"bilinear", IM.CUBIC: b"bicubic"}
    names_20 = {IM.NEAREST: b"nearest", IM.LINEAR: b"linear", IM.CUBIC: b"cubic"}
    assert attrs["mode"].s == (names_20 if opset >= 20 else names_16)[mode]
    assert attrs["padding_mode"].s == {SM.FILL: b"zeros", SM.CLAMP: b"border", SM.REFLECT: b"reflection"}[sample_mode]
    assert attrs["align_corners"].i == int(align)


@BOTH
def test_grid_sample_half(dt):
    x_shape, g_shape = (1, 2, 4, 5), (1, 3, 3, 2)
    check(_grid_sample(x_shape, g_shape, IM.LINEAR, SM.CLAMP, False), dt, feeds=_feeds(x_shape, g_shape, dt),
          expect_ops=("GridSample",))


@pytest.mark.parametrize("sample_mode", [SM.FILL, SM.CLAMP, SM.REFLECT])
@pytest.mark.parametrize("mode", [IM.NEAREST, IM.LINEAR])
def test_grid_sample_rank5_needs_opset_20(mode, sample_mode):
    """onnxruntime runs rank-5 GridSample for nearest and linear (its cubic is rank-4 only)."""
    x_shape, g_shape = (1, 2, 3, 4, 5), (1, 2, 3, 4, 3)
    net = build(_grid_sample(x_shape, g_shape, mode, sample_mode, True), trt.float32)
    with pytest.raises(OnnxExportError, match="GridSample of a rank-5 input needs ONNX opset >= 20"):
        export_onnx(net, None, opset=19)
    from trtbuild.onnx_export import export_and_run

    _, ref, got = export_and_run(net, _feeds(x_shape, g_shape, trt.float32)(net), opset=20)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-5)


def _ragged(x_shape, b_shape, bounds):
    def define(net, dt):
        layer = net.add_ragged_softmax(net.add_input("x", dt, x_shape), net.add_input("b", trt.int32, b_shape))
        return {"y": layer.get_output(0)}

    def feeds(net):
        rng = np.random.default_rng(9)
        dt = np.float16 if net.get_input(0).dtype == trt.float16 else np.float32
        return {"x": rng.standard_normal(x_shape).astype(dt), "b": np.asarray(bounds, np.int32).reshape(b_shape)}
    return define, feeds


@BOTH
@pytest.mark.parametrize("b_shape, bounds", [((2, 3, 1), [0, 1, 3, 5, 9, -1]), ((1, 3, 1), [2, 5, 0]),
                                             ((2, 3, 5), np.arange(30) % 7)])
def test_ragged_softmax(dt, b_shape, bounds):
    define, feeds = _ragged((2, 3, 5), b_shape, bounds)
    check(define, dt, feeds=feeds, expect_ops=("Softmax", "Less", "Where"))


def _rotary(interleaved, dim, positions, shape=(2, 3, 4, 8), rows=6):
    b, _, s, h = shape
    half = (dim or h) // 2

    def define(net, dt):
        c_shape = (rows, half) if positions else (b, s, half)
        layer = net.add_rotary_embedding(net.add_input("x", dt, shape), net.add_input("c", dt, c_shape),
                                         net.add_input("s", dt, c_shape), interleaved, dim)
        if positions:
            layer.set_input(3, net.add_input("p", positions, (b, s)))
        return {"y": layer.get_output(0)}

    def feeds(net):
        rng = np.random.default_rng(3)
        np_dt = np.float16 if net.get_input(0).dtype == trt.float16 else np.float32
        c_shape = tuple(net.get_input(1).shape)
        angles = rng.uniform(0, 6.3, c_shape)
        out = {"x": rng.standard_normal(shape).astype(np_dt), "c": np.cos(angles).astype(np_dt),
               "s": np.sin(angles).astype(np_dt)}
        if positions:
            out["p"] = rng.integers(0, rows, (b, s)).astype(np.int64 if positions == trt.int64 else np.int32)
        return out
    return define, feeds


@BOTH
@pytest.mark.parametrize("positions", [None, trt.int64, trt.int32], ids=["caches", "ids64", "ids32"])
@pytest.mark.parametrize("dim", [0, 4])
@pytest.mark.parametrize("interleaved", [False, True], ids=["halves", "interleaved"])
def test_rotary_embedding_decomposed(dt, interleaved, dim, positions):
    define, feeds = _rotary(interleaved, dim, positions)
    check(define, dt, feeds=feeds, expect_ops=("Slice", "Mul", "Sub", "Concat"))


def test_rotary_embedding_of_an_odd_head_size():
    define, feeds = _rotary(True, 2, trt.int64, shape=(1, 2, 3, 5))
    check(define, trt.float32, feeds=feeds, expect_ops=("Gather", "Reshape"))


def test_kv_cache_update_is_refused_in_one_sentence():
    def define(n, dt):
        layer = n.add_kv_cache_update(n.add_input("c", dt, (1, 2, 4, 3)), n.add_input("u", dt, (1, 2, 1, 3)),
                                      n.add_input("w", trt.int32, (1,)), trt.KVCacheMode.LINEAR)
        return {"y": layer.get_output(0)}

    with pytest.raises(OnnxExportError, match=r"^layer '.*\[KVCacheUpdate\]': a KV cache update \(an in-place write "
                                              r"into a network input\) has no ONNX equivalent$"):
        export_onnx(build(define, trt.float32), None)

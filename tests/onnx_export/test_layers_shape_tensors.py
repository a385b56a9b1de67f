"""Shape tensors and Fill: reference vs onnxruntime (ONNX Shape, Range, RandomUniform(Like), RandomNormal(Like),
Reshape/Slice/Resize with shape inputs); TensorRT-RTX's OnnxParser parses and builds every export."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_onnx

from helpers.onnx_layer_check import build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

LIN, UNI, NORM = trt.FillOperation.LINSPACE, trt.FillOperation.RANDOM_UNIFORM, trt.FillOperation.RANDOM_NORMAL


def const(net, values, dtype=np.int64):
    arr = np.array(values, dtype=dtype)
    return net.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def test_shape():
    def define(net, dt):
        return {"s": net.add_shape(net.add_input("x", dt, (2, 3, 5))).get_output(0)}
    check(define, expect_ops=("Shape",))


def test_flatten_by_shape_arithmetic():
    def define(net, dt):
        x = net.add_input("x", dt, (2, 3, 4, 4))
        s = net.add_shape(x).get_output(0)
        batch = net.add_gather(s, const(net, [0]), 0).get_output(0)
        sh = net.add_shuffle(x)
        sh.set_input(1, net.add_concatenation([batch, const(net, [-1])]).get_output(0))
        return {"y": sh.get_output(0)}
    check(define, expect_ops=("Shape", "Reshape"))


def test_reshape_by_an_int32_shape_tensor_with_a_placeholder():
    def define(net, dt):
        sh = net.add_shuffle(net.add_input("x", dt, (2, 3, 4)))
        sh.set_input(1, const(net, [0, 12], np.int32))
        return {"y": sh.get_output(0)}
    check(define, expect_ops=("Cast", "Reshape"))


def test_slice_with_start_and_size_tensors():
    def define(net, dt):
        sl = net.add_slice(net.add_input("x", dt, (4, 6)), (0, 0), (1, 1), (1, 2))
        sl.set_input(1, const(net, [1, 0]))
        sl.set_input(2, const(net, [2, 3], np.int32))
        return {"y": sl.get_output(0)}
    check(define, expect_ops=("Slice",))


def test_resize_to_a_shape_tensor():
    def define(net, dt):
        r = net.add_resize(net.add_input("x", dt, (1, 1, 2, 3)))
        r.set_input(1, const(net, [1, 1, 4, 6]))
        return {"y": r.get_output(0)}
    check(define, expect_ops=("Resize",))


@pytest.mark.parametrize("to", [trt.float32, trt.int32, trt.int64])
def test_linspace_is_range(to):
    def define(net, dt):
        f = net.add_fill((5,), LIN, to)
        f.alpha, f.beta = (4, -3) if to == trt.int64 else (4.0, -3.0)
        return {"y": f.get_output(0)}
    check(define, expect_ops=("Range",))


def test_float_alpha_beta_with_an_int32_linspace_truncate():
    def define(net, dt):
        f = net.add_fill((4,), LIN, trt.int32)
        f.alpha, f.beta = 1.5, 0.75
        return {"y": f.get_output(0)}
    model = check(define, expect_ops=("Range", "Cast"))
    assert model is not None


def test_linspace_sized_by_a_shape_tensor_with_tensor_bounds():
    def define(net, dt):
        x = net.add_input("x", dt, (7, 2))
        f = net.add_fill((0,), LIN, trt.float32)
        f.set_input(0, net.add_slice(net.add_shape(x).get_output(0), (0,), (1,), (1,)).get_output(0))
        f.set_input(1, const(net, 0.5, np.float32))
        f.set_input(2, const(net, [0.25], np.float32))
        return {"y": f.get_output(0)}
    check(define, expect_ops=("Range",))


@pytest.mark.parametrize("op, kind", [(UNI, "RandomUniform"), (NORM, "RandomNormal")])
def test_random_fills_export_their_distribution(op, kind):
    """The bits of a random fill are not documented: the export's attributes, and onnxruntime's draws
    (shape, bounds, mean), are checked instead of values."""
    from trtbuild.onnx_export import run_onnxruntime

    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    f = net.add_fill((100, 100), op, trt.float32)
    f.alpha, f.beta = 1.0, 2.0
    f.get_output(0).name = "y"
    net.mark_output(f.get_output(0))
    model = export_onnx(net)
    node = [n for n in model.graph.node if n.op_type == kind][0]
    attrs = {a.name: a for a in node.attribute}
    assert list(attrs["shape"].ints) == [100, 100]
    names = ("low", "high") if op == UNI else ("mean", "scale")
    assert (attrs[names[0]].f, attrs[names[1]].f) == (1.0, 2.0)
    y = np.asarray(run_onnxruntime(model, {})["y"], dtype=np.float64)
    assert y.shape == (100, 100)
    if op == UNI:
        assert 1.0 <= y.min() and y.max() <= 2.0 and abs(y.mean() - 1.5) < 0.02
    else:
        assert abs(y.mean() - 1.0) < 0.05 and abs(y.std() - 2.0) < 0.05


def test_random_fill_sized_by_a_shape_tensor_is_like():
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = net.add_input("x", trt.float32, (3, 4))
    f = net.add_fill((0, 0), UNI, trt.float32)
    f.set_input(0, net.add_shape(x).get_output(0))
    net.mark_output(f.get_output(0))
    assert "RandomUniformLike" in [n.op_type for n in export_onnx(net).graph.node]


def test_nd_linspace_is_refused_in_one_sentence():
    def define(net, dt):
        f = net.add_fill((2, 3), LIN, trt.float32)
        f.set_input(1, const(net, 0.0, np.float32))
        f.set_input(2, const(net, [3.0, 1.0], np.float32))
        return {"y": f.get_output(0)}
    with pytest.raises(OnnxExportError, match="ONNX Range makes only 1-D sequences"):
        export_onnx(build(define, trt.float32))


def test_random_fill_with_tensor_bounds_is_refused_in_one_sentence():
    def define(net, dt):
        f = net.add_fill((2, 3), UNI, trt.float32)
        f.set_input(1, const(net, 0.0, np.float32))
        f.set_input(2, const(net, 1.0, np.float32))
        return {"y": f.get_output(0)}
    with pytest.raises(OnnxExportError, match="take their bounds only as attributes"):
        export_onnx(build(define, trt.float32))


def test_slice_with_an_axes_input():
    def define(net, dt):
        sl = net.add_slice(net.add_input("x", dt, (4, 6, 5)), (1, 0), (2, 3), (1, 2))
        sl.set_input(5, const(net, [-1, 1], np.int32))
        return {"y": sl.get_output(0)}
    check(define, expect_ops=("Slice",))


def test_flatten_of_a_dynamic_batch():
    def define(net, dt):
        x = net.add_input("x", dt, (-1, 3, 2, 2))
        s = net.add_shape(x).get_output(0)
        sh = net.add_shuffle(x)
        sh.set_input(1, net.add_concatenation([net.add_slice(s, (0,), (1,), (1,)).get_output(0),
                                               const(net, [-1])]).get_output(0))
        return {"y": sh.get_output(0)}
    model = check(define, feeds=lambda net: {"x": np.arange(60, dtype=np.float32).reshape(5, 3, 2, 2)},
                  expect_ops=("Shape", "Slice", "Concat", "Reshape"))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert not dims[0].HasField("dim_value")  # the batch stays dynamic in the ONNX model


def test_range_sized_by_a_dynamic_batch():
    def define(net, dt):
        x = net.add_input("x", dt, (-1, 2))
        f = net.add_fill((0,), LIN, trt.int64)
        f.set_input(0, net.add_slice(net.add_shape(x).get_output(0), (0,), (1,), (1,)).get_output(0))
        f.alpha, f.beta = 3, 2
        return {"y": f.get_output(0)}
    model = check(define, feeds=lambda net: {"x": np.zeros((6, 2), np.float32)}, expect_ops=("Shape", "Range"))
    assert model is not None

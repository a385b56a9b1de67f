"""TopK, Scatter, ReverseSequence and Einsum: reference vs onnxruntime (ONNX TopK, ScatterElements, ScatterND,
ReverseSequence, Einsum); every export is also parsed and built by TensorRT-RTX."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt

from helpers.onnx_layer_check import BOTH, NP, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

X = (3, 4, 5)


# -- TopK -------------------------------------------------------------------------------------------------------------
def _topk(op, k, axis, indices_type=trt.int32, k_tensor=None, in_dt=None):
    def define(net, dt):
        layer = net.add_topk(net.add_input("x", in_dt or dt, X), op, k, 1 << axis, indices_type)
        if k_tensor is not None:
            arr = np.array(k_tensor, np.int32)
            layer.set_input(1, net.add_constant(arr.shape, trt.Weights(arr)).get_output(0))
        return {"v": layer.get_output(0), "i": layer.get_output(1)}
    return define


def _distinct(dt):
    """Values without ties, so that every index is determined."""
    def feeds(net):
        return {"x": (np.random.default_rng(3).permutation(60).reshape(X) * 0.125 - 3).astype(NP.get(dt, dt))}
    return feeds


@BOTH
@pytest.mark.parametrize("op", [trt.TopKOperation.MAX, trt.TopKOperation.MIN])
@pytest.mark.parametrize("axis, k", [(2, 3), (1, 4), (0, 1)])
@pytest.mark.parametrize("indices_type", [trt.int32, trt.int64])
def test_topk(op, axis, k, indices_type, dt):
    check(_topk(op, k, axis, indices_type), dt, feeds=_distinct(dt), expect_ops=("TopK",))


def test_topk_k_tensor_and_integer_inputs():
    check(_topk(trt.TopKOperation.MAX, 1, 2, k_tensor=2), trt.float32, feeds=_distinct(trt.float32),
          expect_ops=("TopK",))
    for in_dt, np_dt in [(trt.int32, np.int32), (trt.int8, np.int8)]:
        check(_topk(trt.TopKOperation.MIN, 2, 2, in_dt=in_dt), trt.float32, feeds=_distinct(np_dt),
              expect_ops=("TopK",))


# -- Scatter ----------------------------------------------------------------------------------------------------------
def _scatter(mode, i, u_shape, axis=0):
    def define(net, dt):
        idt = trt.int64 if i.dtype == np.int64 else trt.int32
        layer = net.add_scatter(net.add_input("x", dt, X), net.add_input("i", idt, i.shape),
                                net.add_input("u", dt, u_shape), mode)
        layer.axis = axis
        return {"y": layer.get_output(0)}

    def feeds(net):
        rng = np.random.default_rng(11)
        np_dt = NP[net.get_input(0).dtype]
        return {"x": rng.standard_normal(X).astype(np_dt), "i": i, "u": rng.standard_normal(u_shape).astype(np_dt)}
    return define, feeds


@BOTH
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_scatter_element(axis, dt):
    rng = np.random.default_rng(axis + 5)
    i_shape = tuple(d - 1 for d in X)
    n = X[axis]
    lines = np.stack([rng.permutation(n)[:i_shape[axis]] - rng.integers(0, 2) * n  # unique, some negative
                      for _ in range(int(np.prod(i_shape)) // i_shape[axis])])
    i = np.moveaxis(lines.reshape(tuple(d for a, d in enumerate(i_shape) if a != axis % 3) + (i_shape[axis],)),
                    -1, axis % 3).astype(np.int64 if axis == 1 else np.int32)
    define, feeds = _scatter(trt.ScatterMode.ELEMENT, np.ascontiguousarray(i), i_shape, axis)
    check(define, dt, feeds=feeds, expect_ops=("ScatterElements",))


@BOTH
@pytest.mark.parametrize("i", [np.array([[2], [0]], np.int32), np.array([[1, 3], [2, -1], [0, 0]], np.int64),
                               np.array([[[0, 1, 2]], [[2, 3, -1]]], np.int32)], ids=["q1", "q2", "q3"])
def test_scatter_nd(i, dt):
    q = i.shape[-1]
    define, feeds = _scatter(trt.ScatterMode.ND, i, i.shape[:-1] + X[q:])
    check(define, dt, feeds=feeds, expect_ops=("ScatterND",))


# -- ReverseSequence --------------------------------------------------------------------------------------------------
def _reverse(b, s, shape, lens):
    def define(net, dt):
        ldt = trt.int64 if lens.dtype == np.int64 else trt.int32
        layer = net.add_reverse_sequence(net.add_input("x", dt, shape), net.add_input("l", ldt, lens.shape))
        layer.batch_axis, layer.sequence_axis = b, s
        return {"y": layer.get_output(0)}
    return define


@BOTH
@pytest.mark.parametrize("b, s, shape, lens", [
    (1, 0, (4, 3), np.array([4, 1, 2], np.int32)),
    (0, 1, (3, 4, 2), np.array([0, 4, 3], np.int64)),
    (2, 0, (4, 2, 3), np.array([2, 4, 3], np.int32)),  # transposed around ONNX's {0, 1} axes
    (1, 3, (2, 3, 2, 5), np.array([5, 1, 3], np.int32)),
])
def test_reverse_sequence(b, s, shape, lens, dt):
    check(_reverse(b, s, shape, lens), dt, feeds=lambda net: {
        "x": np.random.default_rng(2).standard_normal(shape).astype(NP[dt]), "l": lens},
        expect_ops=("ReverseSequence",))


# -- Einsum -----------------------------------------------------------------------------------------------------------
def _einsum(equation, *shapes):
    def define(net, dt):
        layer = net.add_einsum([net.add_input(f"x{k}", dt, s) for k, s in enumerate(shapes)], equation)
        return {"y": layer.get_output(0)}
    return define


@BOTH
@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]), ("i,j,k->ijk", [(2,), (3,), (4,)]),
])
def test_einsum(equation, shapes, dt):
    check(_einsum(equation, *shapes), dt, expect_ops=("Einsum",))


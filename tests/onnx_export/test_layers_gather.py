"""Gather: reference vs onnxruntime (ONNX Gather, GatherElements, GatherND)."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_onnx

from helpers.onnx_layer_check import BOTH, build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

G = trt.GatherMode
X = (4, 5, 6)


def _feeds(i_values, dt):
    def feeds(net):
        rng = np.random.default_rng(5)
        np_dt = np.float32 if dt == trt.float32 else np.float16
        return {"x": rng.standard_normal(X).astype(np_dt), "i": i_values}
    return feeds


def _define(mode, i, axis=0, ned=0):
    def define(net, dt):
        idt = trt.int64 if i.dtype == np.int64 else trt.int32
        layer = net.add_gather_v2(net.add_input("x", dt, X), net.add_input("i", idt, i.shape), mode)
        layer.axis, layer.num_elementwise_dims = axis, ned
        return {"y": layer.get_output(0)}
    return define


@BOTH
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_default(axis, dt):
    i = np.array([[0, -1, 2], [1, 1, 0]], np.int32)
    check(_define(G.DEFAULT, i, axis), dt, feeds=_feeds(i, dt), expect_ops=("Gather",))


@BOTH
@pytest.mark.parametrize("axis, i_shape", [(0, (3, 5, 6)), (1, (4, 2, 6)), (2, (4, 5, 9))])
def test_gather_element(axis, i_shape, dt):
    i = np.random.default_rng(axis).integers(-X[axis], X[axis], size=i_shape).astype(np.int64)
    check(_define(G.ELEMENT, i, axis), dt, feeds=_feeds(i, dt), expect_ops=("GatherElements",))


@BOTH
@pytest.mark.parametrize("ned, i_shape", [(0, (3, 2)), (0, (2, 2, 1)), (1, (4, 2, 1)), (1, (4, 2)), (2, (4, 5, 1))])
def test_gather_nd(ned, i_shape, dt):
    rng = np.random.default_rng(ned)
    q = i_shape[-1]
    i = np.stack([rng.integers(-X[ned + j], X[ned + j], size=i_shape[:-1]) for j in range(q)], axis=-1)
    i = i.astype(np.int32)
    check(_define(G.ND, i, 0, ned), dt, feeds=_feeds(i, dt), expect_ops=("GatherND",))


def test_gather_default_with_an_elementwise_dim_is_refused_in_one_sentence():
    i = np.zeros((4, 3), np.int32)
    net = build(_define(G.DEFAULT, i, 1, 1), trt.float32)
    with pytest.raises(OnnxExportError, match="no ONNX equivalent"):
        export_onnx(net)

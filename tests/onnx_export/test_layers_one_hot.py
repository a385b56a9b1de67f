"""OneHot: reference vs onnxruntime (ONNX OneHot)."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt

from helpers.onnx_layer_check import BOTH, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


@BOTH
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis, dt):
    def define(net, dt):
        depth = np.array(5, np.int32)
        layer = net.add_one_hot(net.add_input("i", trt.int32, (2, 3)), net.add_input("v", dt, (2,)),
                                net.add_constant((), trt.Weights(depth)).get_output(0), axis)
        return {"y": layer.get_output(0)}

    def feeds(net):
        np_dt = np.float32 if dt == trt.float32 else np.float16
        return {"i": np.array([[0, 4, -1], [2, 7, -6]], np.int32), "v": np.array([-1.5, 3.0], np_dt)}
    check(define, dt, feeds=feeds, expect_ops=("OneHot",))

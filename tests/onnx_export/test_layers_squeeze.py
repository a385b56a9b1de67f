"""Squeeze and Unsqueeze: reference vs onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt

from helpers.onnx_layer_check import BOTH, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


def const(net, values, dtype=np.int64):
    arr = np.asarray(values, dtype=dtype)
    return net.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


@BOTH
@pytest.mark.parametrize("axes", [[1], [1, -1], None], ids=["one", "two", "all"])
def test_squeeze(axes, dt):
    def define(net, dt):
        x = net.add_input("x", dt, (2, 1, 3, 1))
        layer = net.add_squeeze(x) if axes is None else net.add_squeeze(x, const(net, axes))
        return {"y": layer.get_output(0)}
    check(define, dt, expect_ops=("Squeeze",))


@BOTH
@pytest.mark.parametrize("axes", [[0], [0, -1], [1, 3]], ids=["front", "both_ends", "inner"])
def test_unsqueeze(axes, dt):
    def define(net, dt):
        layer = net.add_unsqueeze(net.add_input("x", dt, (2, 3)), const(net, axes, np.int32))
        return {"y": layer.get_output(0)}
    check(define, dt, expect_ops=("Unsqueeze",))

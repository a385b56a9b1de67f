"""Cumulative: reference vs onnxruntime (ONNX CumSum)."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt

from helpers.onnx_layer_check import BOTH, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


def _define(axis, exclusive, reverse, shape=(3, 4, 5), in_dt=None):
    def define(net, dt):
        arr = np.array(axis, np.int32)
        a = net.add_constant(arr.shape, trt.Weights(arr)).get_output(0)
        layer = net.add_cumulative(net.add_input("x", in_dt or dt, shape), a, trt.CumulativeOperation.SUM,
                                   exclusive, reverse)
        return {"y": layer.get_output(0)}
    return define


@BOTH
@pytest.mark.parametrize("exclusive", [False, True], ids=["inclusive", "exclusive"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumulative(axis, exclusive, reverse, dt):
    check(_define(axis, exclusive, reverse), dt, expect_ops=("CumSum",))


def test_cumulative_int32():
    check(_define(1, True, False, (2, 6), trt.int32), trt.float32, expect_ops=("CumSum",))

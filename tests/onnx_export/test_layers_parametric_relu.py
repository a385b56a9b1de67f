"""ParametricReLU: reference vs onnxruntime (ONNX PRelu)."""

from __future__ import annotations

import pytest

from helpers.onnx_layer_check import BOTH, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


@BOTH
@pytest.mark.parametrize("slopes", [(1, 3, 1, 1), (2, 3, 4, 5), (1, 1, 1, 5)], ids=["channel", "full", "last"])
def test_parametric_relu(slopes, dt):
    def define(net, dt):
        layer = net.add_parametric_relu(net.add_input("x", dt, (2, 3, 4, 5)), net.add_input("s", dt, slopes))
        return {"y": layer.get_output(0)}
    check(define, dt, expect_ops=("PRelu",))

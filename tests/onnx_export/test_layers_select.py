"""Select: reference vs onnxruntime (ONNX Where)."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt

from helpers.onnx_layer_check import BOTH, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


@BOTH
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((2, 1, 4), (1, 3, 4), (2, 3, 1))],
                         ids=["same", "broadcast"])
def test_select(shapes, dt):
    def define(net, dt):
        c = net.add_input("c", trt.bool, shapes[0])
        layer = net.add_select(c, net.add_input("a", dt, shapes[1]), net.add_input("b", dt, shapes[2]))
        return {"y": layer.get_output(0)}

    def feeds(net):
        rng = np.random.default_rng(3)
        np_dt = np.float32 if dt == trt.float32 else np.float16
        return {"c": rng.random(shapes[0]) > 0.5, "a": rng.standard_normal(shapes[1]).astype(np_dt),
                "b": rng.standard_normal(shapes[2]).astype(np_dt)}
    check(define, dt, feeds=feeds, expect_ops=("Where",))


def test_select_int32():
    def define(net, dt):
        c = net.add_input("c", trt.bool, (2, 3))
        layer = net.add_select(c, net.add_input("a", trt.int32, (2, 3)), net.add_input("b", trt.int32, (1, 3)))
        return {"y": layer.get_output(0)}
    check(define, trt.float32, expect_ops=("Where",))

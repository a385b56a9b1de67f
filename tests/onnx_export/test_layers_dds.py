"""NonZero and NMS (data-dependent output shapes): reference vs onnxruntime (ONNX NonZero, NonMaxSuppression);
every export also parsed by TensorRT-RTX, whose builder has no kernel for either (tests/helpers/twin.py
RTX_NO_KERNEL), so its parsed outputs are compared but not built."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt

from helpers.onnx_layer_check import check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


def _sparse(shape, dtype, seed=3):
    gen = torch.Generator().manual_seed(seed)
    keep = torch.rand(shape, generator=gen) < 0.4
    return torch.where(keep, torch.randint(-3, 4, shape, generator=gen).float(), torch.zeros(shape)).to(dtype)


@pytest.mark.parametrize("dt, torch_dt", [(trt.float32, torch.float32), (trt.float16, torch.float16),
                                          (trt.bfloat16, torch.bfloat16), (trt.int32, torch.int32),
                                          (trt.int64, torch.int64), (trt.bool, torch.bool)])
@pytest.mark.parametrize("indices_type", [trt.int32, trt.int64])
def test_non_zero(dt, torch_dt, indices_type, rtx_export_outcomes):
    shape = (3, 4, 5)

    def define(net, _):
        return {"y": net.add_non_zero(net.add_input("x", dt, shape), indices_type).get_output(0)}

    model = check(define, feeds=lambda net: {"x": _sparse(shape, torch_dt)}, expect_ops=("NonZero",))
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim][:1] == [3]
    assert rtx_export_outcomes == ["parsed, no RTX kernel"]


def test_non_zero_empty():
    def define(net, _):
        return {"y": net.add_non_zero(net.add_input("x", trt.float32, (2, 3))).get_output(0)}

    check(define, feeds=lambda net: {"x": np.zeros((2, 3), np.float32)}, expect_ops=("NonZero",))

"""Slices with stride 0 and a shape-tensor size (``expand`` to a dynamic batch, trtbuild.layers.tensor.DimOf):
exported as ONNX Slice (that dim cut to its one element) then Expand, run by onnxruntime at several batch
sizes against PyTorch and against the reference; TensorRT-RTX's OnnxParser parses and builds every export."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.layers import tensor as T
from trtbuild.layers.common import constant
from trtbuild.onnx_export import OnnxExportError, export_onnx, run_onnxruntime

from helpers.onnx_layer_check import build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

TOKEN = np.random.default_rng(3).uniform(-1, 1, (1, 1, 8)).astype(np.float32)


def const(net, values, dtype=np.int64):
    arr = np.array(values, dtype=dtype)
    return net.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def test_class_token_to_a_dynamic_batch_matches_torch(rtx_export_outcomes):
    def define(net, dt):
        x = net.add_input("x", dt, (-1, 5, 8))
        cls = T.expand(net, constant(net, TOKEN, x, "cls_token"), (T.DimOf(x, 0), -1, -1), "cls")
        return {"y": T.concat(net, [cls, x], 1, "tokens")}

    model = export_onnx(build(define, trt.float32))
    assert [n.op_type for n in model.graph.node if n.op_type in ("Slice", "Expand")] == ["Slice", "Expand"]
    for batch in (1, 3):
        x = torch.rand(batch, 5, 8, generator=torch.Generator().manual_seed(batch))
        got = run_onnxruntime(model, {"x": x})["y"]
        want = torch.cat([torch.from_numpy(TOKEN).expand(batch, -1, -1), x], 1).numpy()
        np.testing.assert_array_equal(got, want)
    assert rtx_export_outcomes == ["built"]


def test_stride_0_repeats_the_element_at_start(rtx_export_outcomes):
    """A raw slice: start [2, 1] (a tensor), size [5, 3] (a tensor), stride (0, 1): row 2, columns 1..3, five times."""
    def define(net, dt):
        sl = net.add_slice(net.add_input("x", dt, (4, 6)), (0, 0), (1, 1), (0, 1))
        sl.set_input(1, const(net, [2, 1], np.int32))
        sl.set_input(2, const(net, [5, 3]))
        return {"y": sl.get_output(0)}

    def feeds(net):
        return {"x": torch.arange(24, dtype=torch.float32).reshape(4, 6)}

    model = check(define, feeds=feeds, expect_ops=("Slice", "Expand"))
    got = run_onnxruntime(model, feeds(None))["y"]
    np.testing.assert_array_equal(got, np.tile(np.arange(13, 16, dtype=np.float32), (5, 1)))
    assert "built" in rtx_export_outcomes


def test_negative_stride_with_a_size_tensor_is_refused_in_one_sentence():
    def define(net, dt):
        sl = net.add_slice(net.add_input("x", dt, (4, 6)), (3, 0), (1, 1), (-1, 1))
        sl.set_input(2, const(net, [2, 6]))
        sl.name = "back"
        return {"y": sl.get_output(0)}

    with pytest.raises(OnnxExportError, match=r"layer 'back' \(SLICE\): a slice with a stride tensor or a stride < 0 "
                                              "and start/size shape tensors: ONNX Slice would count a negative end"):
        export_onnx(build(define, trt.float32))

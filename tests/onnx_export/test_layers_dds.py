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
    assert rtx_export_outcomes == ["no RTX importer"]


def test_non_zero_empty():
    def define(net, _):
        return {"y": net.add_non_zero(net.add_input("x", trt.float32, (2, 3))).get_output(0)}

    check(define, feeds=lambda net: {"x": np.zeros((2, 3), np.float32)}, expect_ops=("NonZero",))


def _nms_define(n=8, c=3, batch=2, iou=None, score=None, center=False, indices_type=None, dt=trt.float32,
                max_out=3, max_dtype=np.int32, limit=None):
    def define(net, _):
        b, s = net.add_input("b", dt, (batch, n, 4)), net.add_input("s", dt, (batch, n, c))
        arr = np.array(max_out, max_dtype)
        m = net.add_constant((), trt.Weights(arr)).get_output(0)
        layer = net.add_nms(b, s, m) if indices_type is None else net.add_nms(b, s, m, indices_type)
        for index, value in ((3, iou), (4, score)):
            if value is not None:
                v = np.array(value, np.float32)
                layer.set_input(index, net.add_constant((), trt.Weights(v)).get_output(0))
        if center:
            layer.bounding_box_format = trt.BoundingBoxFormat.CENTER_SIZES
        if limit is not None:
            layer.topk_box_limit = limit
        return {"sel": layer.get_output(0), "cnt": layer.get_output(1)}
    return define


def _nms_feeds(n=8, c=3, batch=2, center=False, dtype=torch.float32, seed=5):
    from helpers.nms_expected import random_boxes

    gen = torch.Generator().manual_seed(seed)
    return lambda net: {"b": random_boxes(gen, batch, n, center=center).to(dtype),
                        "s": torch.rand(batch, n, c, generator=gen).to(dtype)}


@pytest.mark.parametrize("iou, score", [(None, None), (0.3, None), (0.5, 0.4), (1.0, -1.0)])
@pytest.mark.parametrize("center", [False, True], ids=["corner_pairs", "center_sizes"])
def test_nms(iou, score, center, rtx_export_outcomes):
    model = check(_nms_define(iou=iou, score=score, center=center), feeds=_nms_feeds(center=center),
                  expect_ops=("NonMaxSuppression", "TopK"))
    assert rtx_export_outcomes == ["parsed, no RTX kernel"]
    nms_node = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    assert [a.i for a in nms_node.attribute if a.name == "center_point_box"] == [int(center)]


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_nms_half_and_bf16(dt, torch_dt):
    check(_nms_define(iou=0.4, dt=dt), feeds=_nms_feeds(dtype=torch_dt), expect_ops=("NonMaxSuppression",))


@pytest.mark.parametrize("max_out, max_dtype", [(0, np.int32), (1, np.int64), (100, np.int32)])
def test_nms_indices_int64_and_limits(max_out, max_dtype):
    check(_nms_define(iou=0.5, indices_type=trt.int64, max_out=max_out, max_dtype=max_dtype, limit=48),
          feeds=_nms_feeds(), expect_ops=("NonMaxSuppression",))


def test_nms_equal_scores_keep_the_reference_order():
    """Equal scores across classes and boxes: the TopK re-sort keeps ONNX's class-then-box order, the reference's."""
    boxes = torch.tensor([[[0.0, 0, 1, 1], [2, 0, 3, 1], [4, 0, 5, 1]]])
    scores = torch.full((1, 3, 2), 0.5)
    scores[0, 1, 0] = 0.7
    check(_nms_define(n=3, c=2, batch=1, max_out=5), feeds=lambda net: {"b": boxes, "s": scores})


def test_nms_without_an_onnx_form():
    from trtbuild.onnx_export import OnnxExportError, export_onnx
    from helpers.onnx_layer_check import build

    with pytest.raises(OnnxExportError, match=r"topk_box_limit 10 can drop candidates of the 8 x 3 \(box, class\) "
                                              "scores, which ONNX NonMaxSuppression has no form of"):
        export_onnx(build(_nms_define(limit=10), trt.float32), None)

    def per_class(net, _):
        b, s = net.add_input("b", trt.float32, (1, 5, 2, 4)), net.add_input("s", trt.float32, (1, 5, 2))
        layer = net.add_nms(b, s, net.add_constant((), trt.Weights(np.array(2, np.int32))).get_output(0))
        return {"sel": layer.get_output(0)}

    with pytest.raises(OnnxExportError, match=r"\(NMS\): boxes per class \(batch, boxes, classes, 4\) have no ONNX "
                                              "NonMaxSuppression form"):
        export_onnx(build(per_class, trt.float32), None)


def test_assertion_has_no_onnx_form():
    from trtbuild.onnx_export import OnnxExportError, export_onnx
    from helpers.onnx_layer_check import build

    def define(net, _):
        a = np.array([2, 3], np.int32)
        c = net.add_constant((2,), trt.Weights(a)).get_output(0)
        net.add_assertion(net.add_elementwise(c, c, trt.ElementWiseOperation.EQUAL).get_output(0), "dims agree")
        return {"y": net.add_identity(net.add_input("x", trt.float32, (2, 3))).get_output(0)}

    with pytest.raises(OnnxExportError, match=r"^layer '\(Unnamed Layer\* 2\) \[Assertion\]': an assertion \("
                                              r"\"dims agree\"\) has no ONNX equivalent \(ONNX has no operator that "
                                              r"stops a run when a condition is false\); remove the add_assertion"):
        export_onnx(build(define, trt.float32), None)


def test_non_zero_then_gather_nd():
    """The masked-select pattern: the count stays symbolic through the transpose and GatherND."""
    def define(net, _):
        x = net.add_input("x", trt.float32, (3, 4))
        shuffle = net.add_shuffle(net.add_non_zero(x, trt.int64).get_output(0))
        shuffle.first_transpose = (1, 0)
        return {"y": net.add_gather_v2(x, shuffle.get_output(0), trt.GatherMode.ND).get_output(0)}

    check(define, feeds=lambda net: {"x": _sparse((3, 4), torch.float32)}, expect_ops=("NonZero", "GatherND"))

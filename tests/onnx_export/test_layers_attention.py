"""Attention: reference vs onnxruntime (MatMul / Softmax composition); TensorRT-RTX's parser builds every export."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_onnx

from helpers.onnx_layer_check import BOTH, build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

Kind = trt.CausalMaskKind


def _define(qs, kvs, kind=Kind.NONE, norm=trt.AttentionNormalizationOp.SOFTMAX, mask=None, lengths=False,
            quantize=None):
    def define(net, dt):
        q, k, v = (net.add_input(n, dt, s) for n, s in (("q", qs), ("k", kvs), ("v", kvs)))
        a = net.add_attention_v2(q, k, v, norm, kind)
        a.decomposable = True
        if mask is not None:
            a.mask = net.add_input("m", mask[1] if mask[1] is not None else dt, mask[0])
        if lengths:
            a.key_value_lengths = net.add_input("lengths", trt.int32, (kvs[0],))
        if quantize is not None:
            a.normalization_quantize_to_type = quantize
            s = np.array(1 / 64, np.float32 if dt == trt.float32 else np.float16)
            a.normalization_quantize_scale = net.add_constant((), trt.Weights(s)).get_output(0)
        return {"y": a.get_output(0)}
    return define


def _feeds(lengths=None, mask_keep=None):
    def feeds(net):
        from trtbuild.onnx_export import random_feeds

        f = random_feeds(net, seed=3, low=-2.0, high=2.0)
        if lengths is not None:
            f["lengths"] = np.array(lengths, np.int32)
        if mask_keep is not None:
            keep = np.random.default_rng(5).random(f["m"].shape) < 0.7
            keep[..., 0] = True
            f["m"] = keep
        return f
    return feeds


@BOTH
@pytest.mark.parametrize("kind", [Kind.NONE, Kind.UPPER_LEFT, Kind.LOWER_RIGHT])
def test_attention(dt, kind):
    check(_define((2, 4, 3, 8), (2, 2, 5, 8), kind), dt, expect_ops=("MatMul", "Softmax"))


def test_attention_masks_lengths_and_norm_none():
    check(_define((2, 2, 3, 4), (2, 2, 5, 4), mask=((2, 1, 3, 5), trt.bool)), feeds=_feeds(mask_keep=True),
          expect_ops=("Where",))
    check(_define((2, 2, 3, 4), (2, 2, 5, 4), mask=((1, 2, 3, 5), None)), expect_ops=("Add",))
    check(_define((2, 2, 3, 4), (2, 2, 5, 4), lengths=True), feeds=_feeds(lengths=[5, 2]), expect_ops=("Less",))
    check(_define((1, 2, 3, 4), (1, 2, 5, 4), kind=Kind.LOWER_RIGHT, norm=trt.AttentionNormalizationOp.NONE))


def test_normalization_quantize_int8():
    check(_define((1, 2, 3, 4), (1, 2, 5, 4), quantize=trt.DataType.INT8), expect_ops=("QuantizeLinear",))


def test_fp8_normalization_quantize_needs_opset_19():
    net = build(_define((1, 2, 3, 4), (1, 2, 5, 4), quantize=trt.DataType.FP8), trt.float32)
    with pytest.raises(OnnxExportError, match="FP8 normalization quantization needs ONNX opset >= 19"):
        export_onnx(net, opset=17)


def test_dynamic_quantize_is_refused_in_one_sentence():
    def define(net, dt):
        layer = net.add_dynamic_quantize(net.add_input("x", dt, (4, 32)), 1, 16, trt.DataType.FP4, trt.DataType.FP8)
        layer.set_input(1, net.add_constant((), trt.Weights(np.array(1.0, np.float32))).get_output(0))
        return {"y": layer.get_output(0)}

    from trtbuild.onnx_export.graph import GraphBuilder
    from trtbuild.onnx_export.lower_dynamic_quantize import lower_dynamic_quantize

    net = build(define, trt.float16)
    layer = net.get_layer(0)
    g = GraphBuilder(17)
    g.begin_layer(layer, [])
    with pytest.raises(OnnxExportError) as info:
        lower_dynamic_quantize(g, layer, [], [])
    assert str(info.value) == (f"layer '{layer.name}' (DYNAMIC_QUANTIZE): ONNX has no dynamic block quantization "
                               "operator (DynamicQuantizeLinear is per-tensor UINT8 with a zero point), so a dynamic "
                               "quantize layer cannot be exported")
    with pytest.raises(OnnxExportError, match="no dynamic block quantization operator"):
        export_onnx(net)

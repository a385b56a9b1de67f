"""Zoo models exported with dynamic dims: unet with dynamic H and W (its bilinear x2 resizes become ONNX Resize
with scales, exact for whole-number scales at any size), yolov8n with a dynamic batch (its C2f splits
gather) and vit_tiny with a dynamic batch (its class token expanded to it), run by onnxruntime at several
shapes against PyTorch, parsed and built by TensorRT-RTX. The zoo tolerance: max|y - ref| <= 1e-5 + 1e-4 * max|ref|."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine.build import new_network, serialize_network
from trtbuild.models import registry
from trtbuild.onnx_export import OnnxExportError, export_onnx, run_onnxruntime
from trtbuild.onnx_export.rtx_parse import parse_with_tensorrt_rtx
from trtbuild.weights import WeightMap


def _export(name, shape):
    spec, model = registry.get(name), registry.get_torch_model(name, small=True)
    net = new_network(trt)[1]
    outs = spec.build_network(net, WeightMap.from_module(model), net.add_input("input", trt.float32, shape))
    for n, t in outs.items():
        t.name = n
        net.mark_output(t)
    return spec, model, export_onnx(net)


def _check(model, onnx_model, spec, shapes):
    for i, shape in enumerate(shapes):
        x = torch.rand(*shape, generator=torch.Generator().manual_seed(i))
        got = run_onnxruntime(onnx_model, {"input": x})[spec.output_names[0]]
        with torch.no_grad():
            ref = model(x).numpy()
        assert got.shape == ref.shape, (shape, got.shape)
        assert np.abs(got - ref).max() <= 1e-5 + 1e-4 * np.abs(ref).max(), shape


def test_unet_with_dynamic_h_w(rtx):
    spec, model, onnx_model = _export("unet", (-1, 3, -1, -1))
    dims = [d.dim_param or d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
    assert dims[1] == 3 and all(isinstance(d, str) for d in (dims[0], dims[2], dims[3]))
    assert sum(n.op_type == "Resize" for n in onnx_model.graph.node) == 3
    _check(model, onnx_model, spec, [(1, 3, 32, 48), (2, 3, 64, 64), (1, 3, 8, 16)])
    # TensorRT-RTX: parse, then build with a profile of multiples of 2**depth (its builder checks the opt
    # shapes against the skip concats)
    builder, network, logger = new_network(rtx)
    parser = rtx.OnnxParser(network, logger)
    assert parser.parse(onnx_model.SerializeToString()), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    assert tuple(network.get_output(0).shape) == (-1, 2, -1, -1)
    plan = serialize_network(rtx, builder, network, logger, progress=False, targets=("8.6",),
                             profile_shapes={"input": ((1, 3, 32, 32), (1, 3, 64, 64), (2, 3, 96, 128))})
    assert len(plan) > 0


def test_yolov8n_with_dynamic_batch(rtx):
    spec, model, onnx_model = _export("yolov8n", (-1, 3, 64, 64))
    assert sum(n.op_type == "Gather" for n in onnx_model.graph.node) == 16  # 8 C2f x 2 halves
    _check(model, onnx_model, spec, [(2, 3, 64, 64)])
    result = parse_with_tensorrt_rtx(onnx_model, rtx)  # batch profile 1, 2, 4
    assert result.ok, result.reason()
    assert result.outputs == [("output0", (-1, 84, 84), "FLOAT")]


def test_resize_by_a_fraction_of_an_unknown_size_is_refused():
    net = new_network(trt)[1]
    x = net.add_input("x", trt.float32, (1, 2, -1, -1))
    layer = net.add_resize(x)
    layer.scales = [1.0, 1.0, 1.5, 2.0]
    layer.name = "up"
    layer.get_output(0).name = "y"
    net.mark_output(layer.get_output(0))
    with pytest.raises(OnnxExportError, match=r"layer 'up' \(RESIZE\): scales \(1.0, 1.0, 1.5, 2.0\) on an input of "
                                              r"unknown shape \(1, 2, -1, -1\)"):
        export_onnx(net)


def test_vit_tiny_with_dynamic_batch(rtx):
    """The class token follows the batch: a Shape, Gather and Concat make the size, a Slice and Expand repeat it."""
    spec, model, onnx_model = _export("vit_tiny", (-1, 3, 48, 48))
    ops = [n.op_type for n in onnx_model.graph.node]
    assert ops.count("Expand") == 1 and ops.count("Shape") == 1 and ops.count("LayerNormalization") == 5
    _check(model, onnx_model, spec, [(1, 3, 48, 48), (3, 3, 48, 48)])
    result = parse_with_tensorrt_rtx(onnx_model, rtx)  # batch profile 1, 2, 4
    assert result.ok, result.reason()
    assert result.outputs == [("logits", (-1, 1000), "FLOAT")]

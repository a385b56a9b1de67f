"""NVIDIA TensorRT-RTX's ONNX parser reads trtbuild's ONNX exports (the `trtexec --onnx` step).

Most of the coverage is not here: tests/helpers/onnx_rtx.py makes every export of the other tests in
tests/onnx_export/ (layers, builders, zoo models, file structure) go through TensorRT-RTX's parser into
a STRONGLY_TYPED network and its builder (sm86, no GPU), comparing the parsed outputs and values with
the export's. This module adds the full-size zoo models, RedNet with and without its plugin, the one
lowering that TensorRT-RTX's parser needs written differently, and checks that the checker itself
fails where it should.
"""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import TensorProto, helper

import trtbuild.reference as trt
from helpers.onnx_rtx import RtxRejected, check_export, rtx_parses_every_export  # noqa: F401  (autouse)
from trtbuild.onnx_export import export_onnx
from trtbuild.onnx_export.reference_network import build_reference_network, new_reference_network
from trtbuild.onnx_export.rtx_parse import (RtxParseResult, declared_outputs, output_differences,
                                            parse_with_tensorrt_rtx, value_differences)

from trtbuild.models import registry

#: the zoo models without plugins, checked at full size in fp32 and fp16
FULL_SIZE = ["alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0"]
AUTO_NAME = re.compile(r"\(Unnamed Layer\* \d+\) \[.*\]")


def _floor_div_int32():
    """int32 FLOOR_DIV from unnamed layers: lowered to Mod, Sub, Div; TensorRT-RTX's Mod importer
    adds helper layers that it names "(Unnamed Layer* 0) [ElementWise]", ..."""
    net = new_reference_network()
    a, b = net.add_input("a", trt.int32, (2, 4)), net.add_input("b", trt.int32, (2, 4))
    y = net.add_elementwise(a, b, trt.ElementWiseOperation.FLOOR_DIV).get_output(0)
    y.name = "y"
    net.mark_output(y)
    return net


def test_unnamed_layers_export_node_names_the_parser_cannot_repeat(rtx, rtx_export_outcomes):
    net = _floor_div_int32()
    model = export_onnx(net)
    assert rtx_export_outcomes == ["built"]
    names = [n.name for n in model.graph.node]
    assert names == ["Unnamed Layer 0 [ElementWise]/Mod", "Unnamed Layer 0 [ElementWise]/Sub",
                     "Unnamed Layer 0 [ElementWise]"]
    # what the export wrote before: the layer's own (automatic) name on its node
    for node in model.graph.node:
        node.name = node.name.replace("Unnamed Layer 0 [ElementWise]", "(Unnamed Layer* 0) [ElementWise]")
    result = parse_with_tensorrt_rtx(model, rtx)
    assert result.parsed and result.built is False
    assert "Repeated layer name (Unnamed Layer* 0) [ElementWise]" in result.build_errors


def test_no_exported_node_carries_an_automatic_layer_name():
    net = new_reference_network()
    x = net.add_input("x", trt.float32, (1, 3, 4, 4))
    r = net.add_activation(x, trt.ActivationType.RELU)
    s = net.add_reduce(r.get_output(0), trt.ReduceOperation.AVG, 0b1100, True)
    net.mark_output(s.get_output(0))
    named = net.add_unary(x, trt.UnaryOperation.EXP)
    named.name = "exp"
    net.mark_output(named.get_output(0))
    nodes = [n.name for n in export_onnx(net).graph.node]
    assert "exp" in nodes and not any(AUTO_NAME.fullmatch(n) for n in nodes), nodes


def _det_model():
    """A valid ONNX model with an op TensorRT-RTX's parser has no importer for (Det)."""
    node = helper.make_node("Det", ["x"], ["y"], name="det")
    graph = helper.make_graph([node], "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def test_checker_fails_on_a_model_the_parser_rejects(rtx):
    result = parse_with_tensorrt_rtx(_det_model(), rtx)
    assert not result.parsed and result.built is None and not result.ok
    assert "node 'det' (Det)" in result.reason()
    with pytest.raises(RtxRejected, match=r"parser rejected the model: node 'det' \(Det\)"):
        check_export(rtx, new_reference_network("det"), _det_model())


def test_output_and_value_differences_are_reported():
    model = _det_model()
    model.graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.FLOAT16, [2, 3]))
    same = RtxParseResult("x", True, outputs=[("y", (2,), "FLOAT")], tensors={"t": ((2, 3), "HALF")})
    assert output_differences(same, model) == [] and value_differences(same, model) == []
    other = RtxParseResult("x", True, outputs=[("z", (2, 1), "HALF")], tensors={"t": ((3, 2), "HALF")})
    assert output_differences(other, model) == ["output names: TensorRT-RTX ['z'] vs ONNX ['y']",
                                                "output 'z': TensorRT-RTX (2, 1) HALF vs ONNX (2,) FLOAT"]
    assert value_differences(other, model) == ["value 't': TensorRT-RTX (3, 2) HALF vs ONNX value_info (2, 3) HALF"]


def test_strided_dilated_deconvolution_is_a_builder_limit_not_an_export_one(rtx):
    """TensorRT-RTX 1.7 parses a ConvTranspose with stride 2 and dilation 2 but its builder refuses
    it (as it refuses add_deconvolution_nd with both); the reference refuses it for that reason, so
    the export never writes one."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2, 3, 3], [0.1] * 36)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv", strides=[2, 1], dilations=[2, 1])
    graph = helper.make_graph([node], "d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 11, 6])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    result = parse_with_tensorrt_rtx(model, rtx)
    assert result.parsed and result.outputs == [("y", (1, 2, 11, 6), "FLOAT")]
    assert result.built is False and "Strided & Dilated Deconv are currently not supported" in result.build_errors


def test_rednet_plugin_export_is_refused_and_the_composed_one_builds(rtx, rtx_export_outcomes):
    """TensorRT-RTX has no plugins: the Involution nodes cannot be parsed (the parser's fallback
    looks for a plugin creator and finds none). impl='composed', what trtbuild builds on
    TensorRT-RTX, exports native ops only, and those parse and build."""
    import trtbuild.ops  # noqa: F401  (registers the reference's Involution plugin creator)

    from trtbuild.models.pytorch import rednet as torch_rednet
    from trtbuild.models.rednet import SMALL
    from trtbuild.weights import WeightMap

    spec = registry.get("rednet")
    # the seeded PyTorch RedNet without the zoo's BN calibration (seconds; the values do not matter here)
    wm = WeightMap.from_module(torch_rednet.rednet(26, seed=0, **SMALL))
    plugin_net, _ = build_reference_network(spec, wm, small=True)
    plugin_model = export_onnx(plugin_net)
    result = parse_with_tensorrt_rtx(plugin_model, rtx)
    assert not result.parsed
    assert any("(Involution)" in e and "Plugin not found" in e for e in result.parse_errors), result.parse_errors
    composed_net, _ = build_reference_network(spec.with_options(involution_impl="composed"), wm, small=True)
    composed = export_onnx(composed_net)
    assert not [n for n in composed.graph.node if n.domain]
    assert rtx_export_outcomes == ["plugin rejected", "built"]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", FULL_SIZE)
def test_full_size_zoo_model_parses_and_builds(name, precision, rtx, rtx_export_outcomes):
    """The full-size model (the registry's seeded weights), exported, parsed by TensorRT-RTX and
    built for sm86; outputs (names, shapes, types) and every value agree with the export."""
    net, outputs = build_reference_network(name, precision=precision)
    model = export_onnx(net)
    assert rtx_export_outcomes == ["built"]  # and TensorRT-RTX's outputs are the declared ones:
    dtype = "FLOAT" if precision == "fp32" else "HALF"
    assert declared_outputs(model) == [(n, tuple(t.shape), dtype) for n, t in outputs.items()]

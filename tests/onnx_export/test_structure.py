"""Structure of the exported model: names, types, opsets, checks, plugin nodes, errors, files."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

import trtbuild.reference as trt
from trtbuild.onnx_export import (OnnxExportError, OnnxRuntimeError, export_and_run, export_onnx,
                                  layerwise_against_onnxruntime, run_onnxruntime)
from trtbuild.reference.plugins import IPluginCreatorV3One, IPluginV3, fields_to_dict

from helpers.onnx_layer_check import F16, F32, build
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)


def _conv_relu(net, dt, name_tensors=True):
    x = net.add_input("image", dt, (1, 2, 6, 6))
    k = np.arange(3 * 2 * 9, dtype=np.float32).astype(np.float16 if dt == F16 else np.float32) / 50
    conv = net.add_convolution_nd(x, 3, (3, 3), k, None)
    conv.padding_nd = (1, 1)
    relu = net.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    if name_tensors:
        conv.name, relu.name = "stem/conv", "stem/relu"
        conv.get_output(0).name = "stem/conv"
    return {"features": relu.get_output(0)}


def test_names_types_and_opset():
    net = build(_conv_relu, F32)
    model = export_onnx(net)
    assert [i.name for i in model.graph.input] == ["image"]
    assert [o.name for o in model.graph.output] == ["features"]
    nodes = {n.name: n for n in model.graph.node}
    assert nodes["stem/conv"].op_type == "Conv" and list(nodes["stem/conv"].output) == ["stem/conv"]
    assert nodes["stem/relu"].op_type == "Relu" and list(nodes["stem/relu"].input) == ["stem/conv"]
    assert {o.domain: o.version for o in model.opset_import} == {"": 17}
    assert model.ir_version == 8  # the lowest IR version holding opset 17, readable by older parsers
    pads = next(a for a in nodes["stem/conv"].attribute if a.name == "pads").ints
    assert list(pads) == [1, 1, 1, 1]
    vi = {v.name: v for v in model.graph.value_info}
    assert [d.dim_value for d in vi["stem/conv"].type.tensor_type.shape.dim] == [1, 3, 6, 6]


def test_fp16_network_has_float16_tensors_and_weights():
    model = export_onnx(build(_conv_relu, F16))
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert {i.data_type for i in model.graph.initializer} == {TensorProto.FLOAT16}


def test_default_names_and_duplicates_are_made_unique():
    def define(net, dt):
        x = net.add_input("x", dt, (2, 3))
        a = net.add_unary(x, trt.UnaryOperation.ABS).get_output(0)
        b = net.add_unary(a, trt.UnaryOperation.NEG).get_output(0)
        # TensorRT's API keeps tensor names unique (a rename to a name in use is refused, or takes an automatic
        # name from its holder, which is renamed: tests/reference/test_names.py), so the duplicate is planted in the
        # reference's bookkeeping, as a network from elsewhere could hold it
        a.name = "(Unnamed Layer* 1) [Unary]_output"  # taken from b, which becomes ..._output_1
        b._name = a.name
        assert a.name == b.name == "(Unnamed Layer* 1) [Unary]_output"
        return {"y": net.add_elementwise(a, b, trt.ElementWiseOperation.SUM).get_output(0)}
    net = build(define, F32)
    model, ref, got = export_and_run(net)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=0, atol=0)
    nodes = {n.op_type: n for n in model.graph.node}
    a, b = "(Unnamed Layer* 1) [Unary]_output", "(Unnamed Layer* 1) [Unary]_output__1"
    assert list(nodes["Abs"].output) == [a] and list(nodes["Neg"].input) == [a] and list(nodes["Neg"].output) == [b]
    assert list(nodes["Add"].input) == [a, b]
    outs = [o for n in model.graph.node for o in n.output]
    assert len(set(outs)) == len(outs)


def test_unused_layers_are_pruned_and_all_outputs_adds_every_layer():
    def define(net, dt):
        x = net.add_input("x", dt, (2, 3))
        net.add_unary(x, trt.UnaryOperation.EXP)  # feeds nothing
        return {"y": net.add_unary(x, trt.UnaryOperation.ABS).get_output(0)}
    net = build(define, F32)
    assert [n.op_type for n in export_onnx(net).graph.node] == ["Abs"]
    full = export_onnx(net, all_outputs=True)
    assert sorted(n.op_type for n in full.graph.node) == ["Abs", "Exp"]
    assert len(full.graph.output) == 2


@pytest.mark.parametrize("norm", ["layer", "instance", "group"])
def test_every_initializer_is_read_so_onnxruntime_removes_none(norm, capfd):
    """Normalization scale/bias from Constant layers are re-shaped into initializers of their own; the
    originals must not stay behind unread (onnxruntime warns "Removing initializer" for each)."""
    shape, axes, sshape, groups = {"layer": ((2, 3, 8), 0b100, (1, 1, 8), 1),
                                   "instance": ((2, 3, 4, 5), 0b1100, (1, 3, 1, 1), 1),
                                   "group": ((2, 6, 3, 4), 0b1100, (1, 3, 1, 1), 3)}[norm]

    def define(net, dt):
        s, b = (net.add_constant(trt.Dims(sshape), trt.Weights(np.full(sshape, v, np.float32))).get_output(0)
                for v in (1.5, 0.25))
        layer = net.add_normalization(net.add_input("x", dt, shape), s, b, axes)
        layer.num_groups = groups
        return {"y": layer.get_output(0)}
    model = export_onnx(build(define, F32))
    read = {name for node in model.graph.node for name in node.input}
    assert [t.name for t in model.graph.initializer if t.name not in read] == []
    import onnxruntime

    capfd.readouterr()
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 1  # info and up: the removal warning included
    onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    assert "Removing initializer" not in "".join(capfd.readouterr())


def test_dynamic_batch_becomes_a_symbolic_dim_and_runs():
    def define(net, dt):
        x = net.add_input("x", dt, (-1, 3, 4))
        r = net.add_reduce(x, trt.ReduceOperation.SUM, 0b100, False)
        return {"y": net.add_activation(r.get_output(0), trt.ActivationType.SIGMOID).get_output(0)}
    net = build(define, F32)
    model = export_onnx(net)
    dim0 = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim0.dim_param and not dim0.HasField("dim_value")
    for batch in (1, 5):
        x = torch.randn(batch, 3, 4)
        got = run_onnxruntime(model, {"x": x})["y"]
        np.testing.assert_allclose(got, torch.sigmoid(x.sum(-1)).numpy(), rtol=1e-6, atol=1e-6)


def test_save_is_atomic_and_round_trips(tmp_path):
    net = build(_conv_relu, F32)
    path = tmp_path / "m.onnx"
    path.write_bytes(b"old")
    model = export_onnx(net, path)
    assert onnx.load(path) == model
    assert os.listdir(tmp_path) == ["m.onnx"]
    with pytest.raises(ValueError, match="does not exist"):
        export_onnx(net, tmp_path / "missing" / "m.onnx")


@pytest.mark.parametrize("opset", [12, 22])
def test_opset_out_of_range_is_refused(opset):
    with pytest.raises(OnnxExportError, match=f"opset {opset}"):
        export_onnx(build(_conv_relu, F32), opset=opset)


@pytest.mark.parametrize("opset", [13, 17, 18, 20, 21])
def test_every_supported_opset_checks_and_runs(opset):
    def define(net, dt):
        x = net.add_input("x", dt, (2, 4, 6))
        r = net.add_reduce(x, trt.ReduceOperation.AVG, 0b100, True)
        s = net.add_normalization(x, net.add_constant((1, 1, 6), np.full((1, 1, 6), 2, np.float32)).get_output(0),
                                  net.add_constant((1, 1, 6), np.zeros((1, 1, 6), np.float32)).get_output(0), 0b100)
        g = net.add_activation(s.get_output(0), trt.ActivationType.GELU_ERF)
        return {"y": net.add_elementwise(g.get_output(0), r.get_output(0), trt.ElementWiseOperation.SUM).get_output(0)}
    model, ref, got = export_and_run(build(define, F32), opset=opset)
    assert model.opset_import[0].version == opset
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-5)


def test_network_of_another_backend_is_refused():
    with pytest.raises(OnnxExportError, match="trtbuild.reference"):
        export_onnx(object())


def test_network_without_outputs_is_refused():
    net = build(lambda net, dt: {}, F32)
    net.add_input("x", F32, (1, 2))
    with pytest.raises(OnnxExportError, match="no outputs"):
        export_onnx(net)


def test_deconvolution_same_padding_exports_the_documented_crop():
    """NvInfer.h: SAME deconvolution gives O = min(I*S, (I-1)*S + DK), trimming max(DK - S, 0)."""
    def define(net, dt):
        x = net.add_input("x", dt, (1, 2, 4, 4))
        d = net.add_deconvolution_nd(x, 2, (3, 3), np.ones(2 * 2 * 9, np.float32), None)
        d.padding_mode = trt.PaddingMode.SAME_UPPER
        d.stride_nd = (2, 1)
        d.name = "up"
        return {"y": d.get_output(0)}
    model = export_onnx(build(define, F32))
    node = next(n for n in model.graph.node if n.op_type == "ConvTranspose")
    pads = next(onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "pads")
    assert list(pads) == [0, 1, 1, 1]  # H: DK-S = 1 -> (0, 1) for SAME_UPPER; W: DK-S = 2 -> (1, 1)
    out = model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in out] == [1, 2, min(4 * 2, 3 * 2 + 3), min(4, 3 + 3)]


def test_round_up_pooling_with_dynamic_spatial_size_is_refused():
    def define(net, dt):
        x = net.add_input("x", dt, (1, 2, -1, -1))
        p = net.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2))
        p.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
        p.name = "pool"
        return {"y": p.get_output(0)}
    with pytest.raises(OnnxExportError, match="layer 'pool'.*EXPLICIT_ROUND_UP"):
        export_onnx(build(define, F32))


# ---------------------------------------------------------------- plugins
class _ScalePlugin(IPluginV3):
    def _output_shapes(self, shapes):
        return [shapes[0]]

    def _output_dtypes(self, dtypes):
        return [dtypes[0]]

    def _execute(self, inputs):
        return [inputs[0] * float(self._fields["scale"].reshape(-1)[0])]


class _ScaleCreator(IPluginCreatorV3One):
    name = "TestScale"
    plugin_version = "2"

    def create_plugin(self, name, field_collection, phase):
        plugin = _ScalePlugin()
        plugin._setup(name, fields_to_dict(field_collection), self)
        return plugin


@pytest.fixture
def scale_creator():
    creator = _ScaleCreator()
    assert trt.get_plugin_registry().register_creator(creator, "")
    yield creator
    trt.get_plugin_registry().deregister_creator(creator)


def test_plugin_exports_as_custom_node_with_typed_attributes(scale_creator):
    fields = trt.PluginFieldCollection([
        trt.PluginField("scale", np.array([1.5], np.float32), trt.PluginFieldType.FLOAT32),
        trt.PluginField("ids", np.array([3, 1, 4], np.int32), trt.PluginFieldType.INT32),
        trt.PluginField("count", np.array(7, np.int32), trt.PluginFieldType.INT32),
        trt.PluginField("mode", np.array("linear"), trt.PluginFieldType.CHAR),
        trt.PluginField("table", np.array([0.5, 2.0], np.float16), trt.PluginFieldType.FLOAT16)])

    def define(net, dt):
        x = net.add_input("x", dt, (1, 3, 2, 2))
        plugin = scale_creator.create_plugin("scale1", fields, trt.TensorRTPhase.BUILD)
        layer = net.add_plugin_v3([x], [], plugin)
        layer.name = "custom"
        return {"y": net.add_activation(layer.get_output(0), trt.ActivationType.RELU).get_output(0)}
    model = export_onnx(build(define, F32))
    node = next(n for n in model.graph.node if n.name == "custom")
    assert (node.op_type, node.domain) == ("TestScale", "trtbuild")
    assert {o.domain: o.version for o in model.opset_import} == {"": 17, "trtbuild": 1}
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["plugin_version"] == b"2" and attrs["plugin_namespace"] == b""
    assert attrs["scale"] == [1.5] and attrs["ids"] == [3, 1, 4] and attrs["count"] == 7 and attrs["mode"] == b"linear"
    table = next(a for a in node.attribute if a.name == "table")
    assert table.type == onnx.AttributeProto.TENSOR and table.t.data_type == TensorProto.FLOAT16
    vi = {v.name for v in model.graph.value_info}
    assert node.output[0] in vi  # typed/shaped, so shape inference continues past the plugin
    with pytest.raises(OnnxRuntimeError, match="TestScale"):
        run_onnxruntime(model, {"x": np.ones((1, 3, 2, 2), np.float32)})
    with pytest.raises(OnnxExportError, match="plugin"):
        layerwise_against_onnxruntime(build(define, F32))


def test_involution_plugin_node():
    import trtbuild.layers.involution as inv

    def define(net, dt):
        x = net.add_input("x", dt, (1, 8, 6, 6))
        k = net.add_input("kernels", dt, (1, 2, 9, 3, 3))
        return {"y": inv.involution_plugin(net, x, k, 3, 2, 1, 1, 2, "inv")}
    for dt, etype in ((F32, TensorProto.FLOAT), (F16, TensorProto.FLOAT16)):
        model = export_onnx(build(define, dt))
        (node,) = [n for n in model.graph.node if n.name == "inv"]
        assert (node.op_type, node.domain) == ("Involution", "trtbuild")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs == {"plugin_version": b"1", "plugin_namespace": b"trtbuild", "kernel_size": [3], "stride": [2],
                         "padding": [1], "dilation": [1], "groups": [2]}
        out = model.graph.output[0]
        assert out.type.tensor_type.elem_type == etype
        assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 8, 3, 3]

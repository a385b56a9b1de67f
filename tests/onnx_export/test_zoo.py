"""Every zoo model (small configuration), exported to ONNX and run by onnxruntime, against the
PyTorch model — the zoo tests' comparison with onnxruntime as the engine and the same tolerances:
  fp32: max|y - ref| <= 1e-5 + 1e-4 * max|ref|
  fp16: max|y - ref| <= 1e-2 * max|ref| and cosine > 0.999
Models with plugins (onnxruntime cannot run them) are checked for their custom nodes instead.
Also: layerwise_against_onnxruntime and compare_arrays."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from trtbuild.onnx_export import (compare_arrays, export_onnx, format_rows, layerwise_against_onnxruntime,
                                  run_onnxruntime)

from trtbuild.models import registry
from trtbuild.engine import quick
from trtbuild.weights import WeightMap
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

ZOO = registry.names()


def prepare(name):
    spec = registry.get(name)
    model = registry.get_torch_model(name, seed=0, small=True)
    if name.startswith("vgg16"):  # per-channel L2Norm weights, so channel order matters
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for key, p in model.named_parameters():
                if "L2Norm" in key:
                    p.mul_(torch.rand(p.shape, generator=g) + 0.5)
    lo, hi = spec.value_range
    x = torch.rand(spec.input_shape(True), generator=torch.Generator().manual_seed(0)) * (hi - lo) + lo
    return spec, model, x


def export_spec(spec, model, precision):
    if spec.uses_plugins:
        import trtbuild.ops  # noqa: F401
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    outs = quick.build_spec_network(net, spec, WeightMap.from_module(model), precision, small=True)
    for name in spec.output_names:
        outs[name].name = name
        net.mark_output(outs[name])
    return export_onnx(net)


PLUGIN_MODELS = [n for n in ZOO if registry.get(n).uses_plugins]


@pytest.mark.parametrize("name", PLUGIN_MODELS)
def test_plugin_model_exports_one_custom_node_per_plugin_layer(name):
    """onnxruntime cannot run TensorRT plugins, so check what TensorRT's parser will look up."""
    spec, model, _ = prepare(name)
    onnx_model = export_spec(spec, model, "fp32")
    custom = [n for n in onnx_model.graph.node if n.domain]
    plugin_layers = [n for n in model.modules() if type(n).__name__ == "Involution"]
    assert len(custom) == len(plugin_layers) > 0
    for node in custom:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert (node.op_type, node.domain, attrs["plugin_version"]) == ("Involution", "trtbuild", b"1")
        assert {"kernel_size", "stride", "padding", "dilation", "groups"} <= set(attrs)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", [n for n in ZOO if n not in PLUGIN_MODELS])
def test_zoo_model_through_onnxruntime_matches_torch(name, precision):
    spec, model, x = prepare(name)
    onnx_model = export_spec(spec, model, precision)
    feed = x if precision == "fp32" else x.half()
    got = run_onnxruntime(onnx_model, {spec.input_name: feed})
    with torch.no_grad():
        refs = model(x)
    refs = refs if isinstance(refs, tuple) else (refs,)
    assert [o.name for o in onnx_model.graph.output] == spec.output_names
    for oname, ref in zip(spec.output_names, refs):
        if not ref.is_floating_point():  # an argmax (crnn's labels): exact in fp32; fp16 may flip near-ties
            labels = torch.from_numpy(got[oname])
            assert labels.dtype == ref.dtype and labels.shape == ref.shape, (oname, labels.dtype, labels.shape)
            agree = (labels == ref).double().mean().item()
            assert agree == 1.0 if precision == "fp32" else agree >= 0.75, f"{name}/{oname}: {agree:.0%} agree"
            continue
        y = torch.from_numpy(got[oname]).float()
        assert y.shape == ref.shape, (oname, y.shape, ref.shape)
        err, scale = (y - ref).abs().max().item(), ref.abs().max().item()
        if precision == "fp32":
            assert got[oname].dtype == np.float32
            assert err <= 1e-5 + 1e-4 * scale, f"{name}/{oname}: max abs err {err:.3g}, max|ref| {scale:.3g}"
        else:
            assert got[oname].dtype == np.float16 and torch.isfinite(y).all()
            assert err <= 1e-2 * scale, f"{name}/{oname} fp16: max abs err {err:.3g}, max|ref| {scale:.3g}"
            cos = F.cosine_similarity(y.flatten().double(), ref.flatten().double(), dim=0).item()
            assert cos > 0.999, f"{name}/{oname} fp16: cosine {cos}"


@pytest.mark.parametrize("name", [n for n in ["resnet18", "vgg16_refinedet"] if n in ZOO])
def test_layerwise_rows_cover_every_layer_and_agree(name):
    rows = layerwise_against_onnxruntime(name, small=True)
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    spec, model, _ = prepare(name)
    quick.build_spec_network(net, spec, WeightMap.from_module(model), "fp32", small=True)
    assert [r["layer"] for r in rows] == [net.get_layer(i).name for i in range(net.num_layers)]
    assert set(rows[0]) >= {"layer", "type", "tensor", "shape", "dtype", "max_abs_err", "max_rel_err", "cosine"}
    for r in rows:
        assert r["max_abs_err"] <= 1e-5 + 1e-4 * r["ref_max_abs"], r
        assert r["cosine"] > 1 - 1e-6, r
    assert format_rows(rows).count("\n") == len(rows) + 1


def test_layerwise_restores_a_given_network_and_uses_given_inputs():
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = net.add_input("x", trt.float32, (2, 3))
    a = net.add_unary(x, trt.UnaryOperation.EXP)
    b = net.add_activation(a.get_output(0), trt.ActivationType.RELU)
    net.mark_output(b.get_output(0))
    rows = layerwise_against_onnxruntime(net, {"x": np.zeros((2, 3), np.float32)})
    assert net.num_outputs == 1 and net.get_output(0) is b.get_output(0)
    assert [r["type"] for r in rows] == ["UNARY", "ACTIVATION"]
    assert all(r["max_abs_err"] == 0.0 and r["ref_max_abs"] == 1.0 for r in rows)  # exp(0) = 1 exactly


def test_compare_arrays_hand_values():
    r = compare_arrays(np.array([1.0, 2.45, 0.0, np.inf, np.nan]), np.array([1.0, 2.5, 1e-7, np.inf, np.nan]))
    assert r["max_abs_err"] == pytest.approx(0.05)
    assert r["max_rel_err"] == pytest.approx(1e-7 / 1e-6)  # relative to max(|ref|, 1e-6): 0.1 > 0.05 / 2.5
    assert r["cosine"] == pytest.approx((1 + 2.45 * 2.5) / (math.sqrt(1 + 2.45 ** 2) * math.sqrt(1 + 6.25 + 1e-14)))
    assert r["ref_max_abs"] == 2.5
    bad = compare_arrays(np.array([np.inf]), np.array([1.0]))
    assert bad["max_abs_err"] == math.inf and bad["max_rel_err"] == math.inf
    assert compare_arrays(np.zeros(3), np.zeros(3))["cosine"] == 1.0
    assert compare_arrays(np.zeros(2), np.zeros(3))["max_abs_err"] == math.inf

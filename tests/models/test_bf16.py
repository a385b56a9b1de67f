"""bf16 end to end: zoo models built with bf16 weights (TensorRT's Weights(BF16, ptr, count))
and bf16 activations on the reference backend, against the fp32 PyTorch model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import Engine, build_plan
from trtbuild.layers.common import trt_weights
from trtbuild.models import registry
from trtbuild.weights import WeightMap


def test_bf16_weights_round_trip_through_the_plan():
    """Bit patterns in, exact bf16 values out, after serialization."""
    values = np.array([1.0, -2.5, 3.140625, 1e-3, 65504.0, 1e30], dtype=np.float32)
    expected = torch.from_numpy(values).bfloat16().float()

    def define(network):
        x = network.add_input("x", trt.bfloat16, (1, 6, 1, 1))
        w = trt_weights(network, x, values)
        assert w.dtype == trt.bfloat16 and w.size == 6
        layer = network.add_scale_nd(x, trt.ScaleMode.CHANNEL, None, w, None, 1)
        layer.get_output(0).name = "y"
        return {"y": layer.get_output(0)}

    engine = Engine(build_plan(trt, define, progress=False), trt)
    out = engine.run({"x": torch.ones(1, 6, 1, 1, dtype=torch.bfloat16)})["y"]
    assert torch.equal(out.float().reshape(-1), expected)


def test_bf16_weights_for_a_float_tensor_are_rejected():
    network = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x16 = network.add_input("x16", trt.bfloat16, (1, 2, 1, 1))
    x32 = network.add_input("x32", trt.float32, (1, 2, 1, 1))
    with pytest.raises(trt.NetworkError, match="BF16 but the input is FLOAT"):
        network.add_scale_nd(x32, trt.ScaleMode.CHANNEL, None, trt_weights(network, x16, [1, 2]), None, 1)


@pytest.mark.parametrize("name", ["alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0"])
def test_zoo_model_in_bf16(name):
    spec = registry.get(name)
    model = registry.get_torch_model(name, small=True)
    plan = build_plan(trt, spec, weights=WeightMap.from_module(model), precision="bf16", small=True, progress=False)
    x = torch.rand(spec.input_shape(True), generator=torch.Generator().manual_seed(0)) * 2 - 1
    out = Engine(plan, trt).run({spec.input_name: x})
    with torch.no_grad():
        ref = model(x)
    for key, r in zip(spec.output_names, ref if isinstance(ref, (tuple, list)) else (ref,)):
        a = out[key].float()
        assert torch.isfinite(a).all()
        rel = float((a - r).abs().max() / r.abs().max())
        cos = float(torch.nn.functional.cosine_similarity(a.flatten(), r.flatten(), dim=0))
        assert rel < 3e-2 and cos > 0.999, f"{name}/{key}: max rel err {rel:.3g}, cosine {cos:.6f}"

"""Builders name weights after their state_dict keys, and record folds, so that an engine refits from a state_dict.

Checked on ResNet-18 (small) on the reference backend: every refittable weight of the network is named by a key of
the model's state_dict; an engine built refittable from one model and refit, through trtbuild.layers.weight_names,
from another model's state_dict computes what PyTorch computes with the other model (and exactly what an engine
built from it computes).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt

from helpers.refnet import CapturingLogger
from trtbuild.layers.weight_names import CONV_BN_BIAS, CONV_BN_WEIGHT, COPY, source_values, weight_sources
from trtbuild.models import registry
from trtbuild.reference.refit import ROLES
from trtbuild.weights import WeightMap

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)



def _resnet18(model, refit: bool):
    spec = registry.get("resnet18")
    logger = CapturingLogger()
    builder = trt.Builder(logger)
    network = builder.create_network(STRONGLY_TYPED)
    x = network.add_input("input", trt.float32, spec.input_shape(True))
    out = spec.build_network(network, WeightMap.from_module(model), x)["logits"]
    network.mark_output(out)
    config = builder.create_builder_config()
    if refit:
        config.set_flag(trt.BuilderFlag.REFIT)
    plan = builder.build_serialized_network(network, config)
    assert plan is not None, logger.errors
    return network, trt.Runtime(logger).deserialize_cuda_engine(plan), logger


def _run(engine, x: torch.Tensor) -> torch.Tensor:
    context = engine.create_execution_context()
    y = torch.empty(tuple(engine.get_tensor_shape("logits")))
    context.set_tensor_address("input", x.data_ptr())
    context.set_tensor_address("logits", y.data_ptr())
    assert context.execute_async_v3(0)
    return y


@pytest.fixture(scope="module")
def models():
    return [registry.get_torch_model("resnet18", seed=seed, small=True) for seed in (0, 1)]


def test_every_refittable_weight_of_resnet18_is_named_by_its_state_dict_key(models):
    network, engine, _ = _resnet18(models[0], refit=True)
    keys = set(models[0].state_dict())
    names = []
    for layer in network:
        for key, w in layer._weights.items():
            if (layer.type.name, key) in ROLES and w.size:
                names.append(network._weights_name(w))
    assert len(names) == 2 * 20 + 2  # 20 convs (17 + 3 downsample) with folded kernel and bias, and fc
    assert None not in names and set(names) <= keys
    assert len(set(names)) == len(names)
    sources = weight_sources(network)
    assert set(sources) == set(names)
    assert sources["layer1.0.conv1.weight"].keys == ("layer1.0.conv1.weight", "layer1.0.bn1.weight",
                                                    "layer1.0.bn1.bias", "layer1.0.bn1.running_mean",
                                                    "layer1.0.bn1.running_var")
    assert sources["layer1.0.conv1.weight"].fold == CONV_BN_WEIGHT
    assert sources["layer2.0.bn1.bias"].fold == CONV_BN_BIAS
    assert sources["layer2.0.downsample.1.bias"].keys[0] == "layer2.0.downsample.0.weight"
    assert sources["fc.weight"].fold == COPY and sources["fc.bias"].keys == ("fc.bias",)
    assert sorted(trt.Refitter(engine, CapturingLogger()).get_all_weights()) == sorted(names)


def test_refit_from_another_state_dict_computes_what_pytorch_computes(models):
    network, engine, logger = _resnet18(models[0], refit=True)
    other = models[1].state_dict()
    refitter = trt.Refitter(engine, logger)
    for name, source in weight_sources(network).items():
        assert refitter.set_named_weights(name, trt.Weights(source_values(source, other))), logger.errors
    assert refitter.get_missing_weights() == [] and refitter.refit_cuda_engine()
    x = torch.from_numpy(np.random.default_rng(3).standard_normal((1, 3, 64, 64)).astype(np.float32))
    y = _run(engine, x)
    with torch.no_grad():
        want = models[1](x)
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(y, models[0](x).detach(), atol=1e-2)
    _, rebuilt, _ = _resnet18(models[1], refit=False)
    assert torch.equal(y, _run(rebuilt, x))


def test_source_values_names_a_missing_key(models):
    network, _, _ = _resnet18(models[0], refit=False)
    source = weight_sources(network)["layer1.0.conv1.weight"]
    state = {k: v for k, v in models[1].state_dict().items() if k != "layer1.0.bn1.running_var"}
    with pytest.raises(KeyError, match=r"weights 'layer1.0.conv1.weight' are computed from .* but the state_dict "
                                        r"has no \['layer1.0.bn1.running_var'\]"):
        source_values(source, state)


def test_tensorrt_rtx_takes_the_same_names(models):
    """The naming goes through TensorRT's own API (get_layer, the layer's weights, set_weights_name): on
    TensorRT-RTX's network every name is accepted, and the names are the reference's."""
    rtx = pytest.importorskip("tensorrt_rtx")
    from trtbuild.engine.logging_bridge import make_logger

    logger = make_logger(rtx)  # shared by the session: only this test's errors count
    start = len(logger.errors)
    network = rtx.Builder(logger).create_network(1 << int(rtx.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    spec = registry.get("resnet18")
    x = network.add_input("input", rtx.float32, spec.input_shape(True))
    spec.build_network(network, WeightMap.from_module(models[0]), x)
    ours, _, _ = _resnet18(models[0], refit=False)
    assert weight_sources(network) == weight_sources(ours) and len(weight_sources(network)) == 42
    assert logger.errors[start:] == []
    assert network.mark_weights_refittable("layer1.0.bn1.bias")  # names TensorRT-RTX knows

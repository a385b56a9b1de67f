"""RedNet (involution network) in the zoo: PyTorch model, network builder with the Involution
plugin, and parity with PyTorch on the reference backend.

Tolerances are the zoo's (tests/helpers/model_checks.py), against the fp32 PyTorch output:
  fp32: max|y - ref| <= 1e-5 + 1e-4 * max|ref|
  fp16: max|y - ref| <= 1e-2 * max|ref|  and  cosine > 0.999
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.layers.common import BuilderError
from trtbuild.models import registry
from trtbuild.models.pytorch.rednet import RedNet, calibrate_bn_, rednet
from trtbuild.engine import make_logger
from trtbuild.engine.quick import build_spec_network, run_network, run_spec
from trtbuild.ops.involution import Involution
from trtbuild.ops.involution_reference_plugin import InvolutionReferenceCreator
from trtbuild.weights import WeightMap

from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32
from helpers.refnet import concrete

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)


@pytest.fixture(scope="module")
def small():
    """(spec, torch model, input) for the small RedNet, seed 0."""
    spec = registry.get("rednet")
    model = registry.get_torch_model("rednet", seed=0, small=True)
    g = torch.Generator().manual_seed(0)
    lo, hi = spec.value_range
    x = torch.rand(spec.input_shape(True), generator=g) * (hi - lo) + lo
    return spec, model, x


def torch_logits(model, x):
    with torch.no_grad():
        return model(x)


def unused(wm):
    return [k for k in wm.unused() if not k.endswith("num_batches_tracked")]


def involution_modules(model) -> dict[str, Involution]:
    return {n: m for n, m in model.named_modules() if isinstance(m, Involution)}


def build_network(spec, wm, precision="fp32"):
    network = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    build_spec_network(network, spec, wm, precision, small=True)
    return network


# ---------------------------------------------------------------------------- PyTorch model

def test_torch_model_follows_the_official_layout(small):
    _, model, x = small
    keys = set(model.state_dict())
    assert {"stem.0.conv.weight", "stem.0.bn.running_var", "stem.1.conv1.conv.weight", "stem.1.conv2.conv.bias",
            "stem.2.weight", "stem.4.conv.weight", "layer1.0.conv1.weight", "layer1.0.conv2.conv1.bn.weight",
            "layer2.0.conv2.conv2.conv.weight", "layer2.0.downsample.0.weight", "layer4.0.bn3.bias",
            "fc.weight"} <= keys
    blocks = [len(getattr(model, f"layer{i}")) for i in range(1, 5)]
    assert blocks == [1, 2, 4, 1]  # RedNet-26
    inv = involution_modules(model)
    assert len(inv) == 9
    assert (inv["stem.1"].kernel_size, inv["stem.1"].stride) == (3, 1)
    assert all(m.kernel_size == 7 for n, m in inv.items() if n != "stem.1")
    assert [n for n, m in inv.items() if m.stride == 2] == ["layer2.0.conv2", "layer3.0.conv2", "layer4.0.conv2"]
    assert torch_logits(model, x).shape == (1, 10)
    assert not model.training


def test_torch_model_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a = registry.get_torch_model("rednet", seed=3, small=True).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    b = registry.get_torch_model("rednet", seed=3, small=True).state_dict()
    c = registry.get_torch_model("rednet", seed=4, small=True).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["layer3.1.conv2.conv2.conv.weight"], c["layer3.1.conv2.conv2.conv.weight"])


def test_calibrated_batchnorm_normalizes_the_involution_outputs():
    """BN statistics come from data: in eval mode each bn2 output has ~zero mean and ~gamma std on
    fresh inputs of the calibration distribution (randomly drawn statistics would not)."""
    model = calibrate_bn_(rednet(26, num_classes=10, stem_channels=16, base_channels=8, group_channels=4, seed=1),
                          (16, 3, 64, 64), seed=1)
    seen = {}

    def keep(module, inputs, output):  # returns None: a returned value would replace the output
        seen["y"] = output.detach().clone()

    hook = model.layer2[1].bn2.register_forward_hook(keep)
    with torch.no_grad():
        model(torch.rand(32, 3, 64, 64, generator=torch.Generator().manual_seed(9)) * 2 - 1)
    hook.remove()
    y = seen["y"].transpose(0, 1).flatten(1)  # channels x samples; gamma 1, beta 0 (not randomized here)
    # Measured: means within 0.16, stds within 0.16 of 1 (default statistics: means up to 2.4, some
    # channels constant; randomize_bn_ statistics: means up to 11).
    assert y.mean(1).abs().max() < 0.3
    assert ((y.std(1) - 1).abs().max()) < 0.3


def test_rednet_rejects_group_channels_that_do_not_divide_the_widths():
    with pytest.raises(ValueError, match="group_channels=16"):
        RedNet(stem_channels=16, base_channels=8, group_channels=16)


# ---------------------------------------------------------------------------- parity

@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_small_rednet_matches_torch(small, precision):
    spec, model, x = small
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x, precision, small=True)
    assert list(out) == ["logits"]
    (check_fp32 if precision == "fp32" else check_fp16)(out["logits"], torch_logits(model, x), f"rednet {precision}")
    assert unused(wm) == [], f"weights the builder never read: {unused(wm)}"


def test_layer_map_tensors_match_torch_modules(small):
    """Every layer_map entry (each involution's reduce/span/plugin outputs included) equals the
    output of its torch module, which runs exactly once per forward."""
    spec, model, x = small
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: torch_logits(model, x))
    for name in involution_modules(model):
        assert spec.layer_map[name] == name and spec.layer_map[f"{name}.conv2"] == f"{name}.conv2"
    extra = [t for t in spec.layer_map if t != "logits"]
    out = run_spec(spec, WeightMap.from_module(model), x, "fp32", small=True, extra_outputs=extra)
    for tname, mname in spec.layer_map.items():
        assert len(captured[mname]) == 1, f"module {mname} ran {len(captured[mname])} times"
        check_fp32(out[tname], captured[mname][0], f"tensor {tname} vs module {mname}")


def test_builds_from_flat_weights_like_wts_files(small):
    """tensorrtx .wts files (the CLI's default weights) store every tensor 1-D."""
    spec, model, x = small
    flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in model.state_dict().items()})
    out = run_spec(spec, flat, x, "fp32", small=True)
    check_fp32(out["logits"], torch_logits(model, x), "rednet from flat weights")
    assert unused(flat) == []


def test_fp32_input_cast_to_half_engine_saved_and_loaded(small, tmp_path):
    """trtbuild.engine path: float32 input cast to HALF at the start, plan saved, loaded, run."""
    from trtbuild.engine import build_plan, load_engine, make_sidecar, save_engine

    spec, model, x = small
    plan = build_plan(trt, spec, weights=WeightMap.from_module(model), precision="fp16", small=True, progress=False)
    path = save_engine(tmp_path / "rednet.engine", plan, make_sidecar(trt, plan))
    engine = load_engine(path)
    assert engine.tensors["input"].dtype == torch.float32
    y = engine(x.to(engine.device))["logits"].cpu()
    assert y.dtype == torch.float32
    assert torch.equal(y, y.half().float())  # computed in HALF, cast to FLOAT at the end
    check_fp16(y.half(), torch_logits(model, x), "rednet fp16 engine with float32 I/O")


# ---------------------------------------------------------------------------- plugin layers

def test_involutions_are_plugin_layers_named_after_the_modules(small):
    spec, model, _ = small
    network = build_network(spec, WeightMap.from_module(model))
    layers = [concrete(network.get_layer(i)) for i in range(network.num_layers)]
    plugins = {layer.name: layer for layer in layers if layer.type == trt.LayerType.PLUGIN_V3}
    modules = involution_modules(model)
    assert list(plugins) == list(modules)
    for name, layer in plugins.items():
        m = modules[name]
        assert layer.get_output(0).name == name
        assert layer.plugin.params == dict(kernel_size=m.kernel_size, stride=m.stride, padding=m.padding,
                                           dilation=m.dilation, groups=m.groups), name
        assert [layer.get_input(i).name for i in range(layer.num_inputs)][1] == f"{name}.conv2"
    # Layer names follow the torch modules (hand-listed) and nothing is left unnamed.
    names = {layer.name for layer in layers}
    assert {"stem.0.conv", "stem.1.conv1.conv", "stem.1.conv2", "stem.2/scale", "stem.3", "stem.4.conv", "maxpool",
            "layer2.0.conv2.avgpool", "layer3.2.conv1", "layer3.2.bn2/scale", "layer4.0.downsample", "layer4.0",
            "fc"} <= names
    assert not any(re.fullmatch(r"(Unnamed|\(Unnamed).*", n) for n in names)


def test_builder_loads_the_plugin_library_before_adding_plugin_layers(small, monkeypatch):
    spec, model, _ = small
    import trtbuild.models.rednet as rednet_builder  # after the registry loaded (it keeps import order)

    calls = []
    real = rednet_builder.load_plugin_library

    def spy(trt_module, *args, **kw):
        calls.append((trt_module, network.num_layers))
        return real(trt_module, *args, **kw)

    monkeypatch.setattr(rednet_builder, "load_plugin_library", spy)
    network = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    build_spec_network(network, spec, WeightMap.from_module(model), "fp32", small=True)
    assert calls == [(trt, 0)]


def test_plan_recreates_the_plugins_from_the_registry(small):
    """The serialized plan names the plugin by name/version/namespace; deserializing asks the
    registry's creator for each of the 9 plugins, and fails cleanly when none is registered."""
    spec, model, x = small
    logger = make_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(STRONGLY_TYPED)
    outs = build_spec_network(network, spec, WeightMap.from_module(model), "fp32", small=True)
    outs["logits"].name = "logits"
    network.mark_output(outs["logits"])
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    assert plan is not None, logger.messages
    plan = bytes(plan)

    registry_ = trt.get_plugin_registry()
    original = registry_.get_creator("Involution", "1", "trtbuild")
    created = []

    class SpyCreator(InvolutionReferenceCreator):
        def create_plugin(self, name, field_collection, phase):
            created.append((name, phase))
            return super().create_plugin(name, field_collection, phase)

    try:
        assert registry_.deregister_creator(original)
        missing = make_logger(trt)
        assert trt.Runtime(missing).deserialize_cuda_engine(plan) is None
        assert any("Involution" in msg and "not registered" in msg for _, msg in missing.messages), missing.messages

        assert registry_.register_creator(SpyCreator(), "trtbuild")
        engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
        assert engine is not None, logger.messages
        assert created == [(n, trt.TensorRTPhase.RUNTIME) for n in involution_modules(model)]
        ctx = engine.create_execution_context()
        from trtbuild.reference.runtime import device

        xin = x.to(device()).contiguous()
        y = torch.empty((1, 10), device=device())
        ctx.set_input_shape("input", tuple(xin.shape))
        ctx.set_tensor_address("input", xin.data_ptr())
        ctx.set_tensor_address("logits", y.data_ptr())
        assert ctx.execute_async_v3(0)
        check_fp32(y.cpu(), torch_logits(model, x), "rednet from a deserialized plan")
    finally:
        spy = registry_.get_creator("Involution", "1", "trtbuild")
        if spy is not None and spy is not original:
            registry_.deregister_creator(spy)
        if registry_.get_creator("Involution", "1", "trtbuild") is None:
            registry_.register_creator(original, "trtbuild")
    assert registry_.get_creator("Involution", "1", "trtbuild") is original


# ---------------------------------------------------------------------------- errors

def test_wrong_span_weight_is_reported_by_name(small):
    spec, model, x = small
    sd = dict(model.state_dict())
    key = "layer3.1.conv2.conv2.conv.weight"
    sd[key] = sd[key][:-1]  # one span channel short: no longer K*K*G
    with pytest.raises(BuilderError, match=re.escape(key)):
        run_spec(spec, WeightMap.from_state_dict(sd), x, "fp32", small=True)


def test_missing_involution_weight_is_reported_by_name(small):
    from trtbuild.weights import WeightsError

    spec, model, x = small
    sd = {k: v for k, v in model.state_dict().items() if k != "layer2.0.conv2.conv1.bn.running_mean"}
    with pytest.raises(WeightsError, match=r"layer2\.0\.conv2\.conv1\.bn\.running_mean"):
        run_spec(spec, WeightMap.from_state_dict(sd), x, "fp32", small=True)


def test_input_size_not_divisible_by_32_is_refused(small):
    spec, model, _ = small
    wm = WeightMap.from_module(model)

    def define(network):
        x = network.add_input("input", trt.DataType.FLOAT, trt.Dims((1, 3, 48, 48)))
        return spec.build_network(network, wm, x)

    with pytest.raises(BuilderError, match=r"input 'input' \(1, 3, 48, 48\).*divisible by 32"):
        run_network(define, {"input": torch.zeros(1, 3, 48, 48)})


def test_bf16_input_is_refused_by_the_plugin_and_composed_by_auto(small):
    spec, model, _ = small
    wm = WeightMap.from_module(model)
    network = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    x = network.add_input("input", trt.DataType.BF16, trt.Dims((1, 3, 64, 64)))
    with pytest.raises(BuilderError, match=r"input 'input' is BF16; the Involution plugin runs in FLOAT or HALF"):
        spec.with_options(involution_impl="plugin").build_network(network, wm, x)
    assert network.num_layers == 0
    out = spec.build_network(network, wm, x)["logits"]  # auto: the plugin cannot take BF16, so composed
    assert out.dtype == trt.DataType.BF16
    kinds = {type(concrete(network.get_layer(i))).__name__ for i in range(network.num_layers)}
    assert "IPluginV3Layer" not in kinds and "ISliceLayer" in kinds


def test_cli_builds_and_checks_the_small_rednet(tmp_path, capsys, monkeypatch):
    from trtbuild.cli import main

    monkeypatch.chdir(tmp_path)  # default weights/rednet-small.wts are exported here
    engine = tmp_path / "rednet.engine"
    assert main(["build", "rednet", "--small", "--backend", "reference", "--out", str(engine), "--no-progress"]) == 0
    assert engine.is_file() and (tmp_path / "weights" / "rednet-small.wts").is_file()
    assert main(["parity", "rednet", "--small", "--backend", "reference", "--engine", str(engine)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("backend: reference")
    assert re.search(r"^logits .* PASS$", text, re.M), text


def test_rednet_is_registered_as_a_plugin_model():
    spec = registry.get("rednet")
    assert spec.uses_plugins and spec.output_names == ["logits"]
    assert spec.input_shape(True) == (1, 3, 64, 64) and spec.input_shape(False) == (1, 3, 224, 224)


# ---------------------------------------------------------------------------- full size

@pytest.mark.slow
def test_full_size_rednet26_matches_torch():
    spec = registry.get("rednet")
    model = registry.get_torch_model("rednet", seed=0, small=False)
    x = torch.rand(spec.input_shape(False), generator=torch.Generator().manual_seed(0)) * 2 - 1
    ref = torch_logits(model, x)
    wm = WeightMap.from_module(model)
    check_fp32(run_spec(spec, wm, x, "fp32")["logits"], ref, "rednet-26 fp32")
    check_fp16(run_spec(spec, wm, x, "fp16")["logits"], ref, "rednet-26 fp16")
    assert unused(wm) == []
    assert np.prod(ref.shape) == 1000

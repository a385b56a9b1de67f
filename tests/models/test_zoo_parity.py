"""Every zoo model, built layer by layer on the reference backend from a WeightMap of the PyTorch
model's state dict, against the PyTorch model (eval mode, BN statistics randomized).

Tolerances (computed against the fp32 PyTorch output of the same input):
  fp32: max|y - ref| <= 1e-5 + 1e-4 * max|ref|
  fp16 (input declared HALF, so every layer and weight is fp16):
        max|y - ref| <= 1e-2 * max|ref|  and  cosine(y, ref) > 0.999
Small configurations run by default (< 10 s each); the full-size models are @pytest.mark.slow.
"""

from __future__ import annotations

import re

import pytest
import torch

from trtbuild.models import registry
from trtbuild.engine.quick import run_spec
from trtbuild.weights import WeightMap

from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32
from helpers.refnet import concrete

ZOO = ["alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0"]


def make_input(spec, small, seed=0):
    lo, hi = spec.value_range
    g = torch.Generator().manual_seed(seed)
    return torch.rand(spec.input_shape(small), generator=g) * (hi - lo) + lo


def torch_outputs(model, x) -> tuple:
    with torch.no_grad():
        out = model(x)
    return out if isinstance(out, tuple) else (out,)


def prepare(name, small):
    spec = registry.get(name)
    model = registry.get_torch_model(name, seed=0, small=small)
    if name.startswith("vgg16"):  # give the L2Norm weights per-channel values so channel order matters
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for key, p in model.named_parameters():
                if "L2Norm" in key:
                    p.mul_(torch.rand(p.shape, generator=g) + 0.5)
    return spec, model, make_input(spec, small)


def unused(wm):
    return [k for k in wm.unused() if not k.endswith("num_batches_tracked")]


@pytest.mark.parametrize("name", ZOO)
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_small_model_matches_torch(name, precision):
    spec, model, x = prepare(name, small=True)
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x, precision, small=True)
    assert list(out) == spec.output_names
    for oname, ref in zip(spec.output_names, torch_outputs(model, x)):
        (check_fp32 if precision == "fp32" else check_fp16)(out[oname], ref, f"{name}/{oname}")
    assert unused(wm) == [], f"{name}: weights the builder never read: {unused(wm)}"


def _conv_weights(model) -> int:
    return sum(1 for k, v in model.state_dict().items() if k.endswith("weight") and v.dim() == 4)


# Layer counts worked out by hand from the architectures (see each builder's docstring):
#   resnet18: conv1 relu maxpool (3) + 8 blocks x (conv relu conv add relu) + 3 downsample convs
#             + avgpool + fc (flatten, weight, matmul, bias, add) = 3 + 43 + 1 + 5 = 52
#   resnet50: 3 + 16 blocks x 7 + 4 downsample + 1 + 5 = 125
#   repvgg_a0: 22 blocks x (conv, relu) + gap + 5 = 50
EXPECTED_LAYERS = {"resnet18": 52, "resnet50": 125, "repvgg_a0": 50}


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "repvgg_a0"])
def test_batchnorm_is_folded_one_conv_per_block(name):
    spec, model, x = prepare(name, small=True)
    import trtbuild.reference as trt
    from trtbuild.engine.quick import build_spec_network

    builder = trt.Builder(trt.Logger())
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    build_spec_network(network, spec, WeightMap.from_module(model), "fp32", small=True)
    layers = [concrete(network.get_layer(i)) for i in range(network.num_layers)]
    convs = [layer for layer in layers if isinstance(layer, trt.IConvolutionLayer)]
    assert not any(isinstance(layer, (trt.IScaleLayer, trt.INormalizationLayer)) for layer in layers)
    if name == "repvgg_a0":  # three conv branches per block fused into one 3x3 conv
        n_blocks = sum(1 for k in model.state_dict() if k.endswith("rbr_dense.conv.weight"))
        assert len(convs) == n_blocks == 22
        assert all(tuple(c.kernel_size_nd) == (3, 3) for c in convs)
    else:
        assert len(convs) == _conv_weights(model)
    assert network.num_layers == EXPECTED_LAYERS[name]


@pytest.mark.parametrize("name", ZOO)
def test_layer_map_points_at_matching_torch_modules(name):
    """Every layer_map entry: the network tensor exists and equals the torch module's output
    (the module runs exactly once per forward)."""
    spec, model, x = prepare(name, small=True)
    modules = dict(model.named_modules())
    for tname, mname in spec.layer_map.items():
        assert mname in modules, f"{name}: layer_map[{tname!r}] = {mname!r} is not a module"
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: torch_outputs(model, x))
    extra = [t for t in spec.layer_map if t not in spec.output_names]
    out = run_spec(spec, WeightMap.from_module(model), x, "fp32", small=True, extra_outputs=extra)
    for tname, mname in spec.layer_map.items():
        assert len(captured[mname]) == 1, f"{name}: module {mname} ran {len(captured[mname])} times"
        check_fp32(out[tname], captured[mname][0], f"{name}: tensor {tname} vs module {mname}")


def test_layer_names_follow_torch_modules():
    spec, model, x = prepare("resnet18", small=True)
    import trtbuild.reference as trt
    from trtbuild.engine.quick import build_spec_network

    network = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    build_spec_network(network, spec, WeightMap.from_module(model), "fp32", small=True)
    names = {concrete(network.get_layer(i)).name for i in range(network.num_layers)}
    assert {"conv1", "maxpool", "layer1.0.conv1", "layer2.0.downsample", "layer4.1", "fc"} <= names
    convs = {n for n in names if re.fullmatch(r"layer\d\.\d\.conv\d", n)}
    assert len(convs) == 16


def test_builder_reports_missing_weight_by_name():
    from trtbuild.weights import WeightsError

    spec, model, x = prepare("resnet18", small=True)
    sd = {k: v for k, v in model.state_dict().items() if k != "layer3.1.bn2.running_var"}
    with pytest.raises(WeightsError, match=r"layer3\.1\.bn2\.running_var"):
        run_spec(spec, WeightMap.from_state_dict(sd), x, "fp32", small=True)


def test_repvgg_deploy_checkpoint_builds_the_same_network():
    from trtbuild.models.pytorch import repvgg_model_convert

    spec, model, x = prepare("repvgg_a0", small=True)
    deployed = repvgg_model_convert(model)
    out = run_spec(spec, WeightMap.from_module(deployed), x, "fp32", small=True)
    check_fp32(out["logits"], torch_outputs(model, x)[0], "repvgg_a0 deploy form")


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_full_size_model_matches_torch(name):
    spec, model, x = prepare(name, small=False)
    wm = WeightMap.from_module(model)
    refs = torch_outputs(model, x)
    for precision, check in (("fp32", check_fp32), ("fp16", check_fp16)):
        out = run_spec(spec, wm, x, precision, small=False)
        for oname, ref in zip(spec.output_names, refs):
            check(out[oname], ref, f"{name}/{oname} {precision}")
    assert unused(wm) == []


def test_repvgg_unfused_network_matches_and_keeps_branches():
    """The benchmark's unfused form: same output, 3 branches per block. Layer count by hand:
    5 blocks without identity x 6 (conv, bn, conv, bn, add, relu) + 17 with identity x 8
    (+ identity bn, add) + gap + linear (5) = 30 + 136 + 6 = 172."""
    import trtbuild.reference as trt
    from trtbuild.engine.quick import run_network
    from trtbuild.models.repvgg import build_repvgg

    spec, model, x = prepare("repvgg_a0", small=True)
    wm = WeightMap.from_module(model)
    info = {}

    def define(network):
        t = network.add_input("input", trt.DataType.FLOAT, trt.Dims(tuple(x.shape)))
        outs = build_repvgg(network, wm, t, fused=False)
        info["layers"] = network.num_layers
        return outs

    out = run_network(define, {"input": x})
    check_fp32(out["logits"], torch_outputs(model, x)[0], "repvgg_a0 unfused")
    assert info["layers"] == 172


@pytest.mark.parametrize("name", ZOO)
def test_builds_from_flat_weights_like_wts_files(name):
    """tensorrtx .wts files store every tensor 1-D: builders take shapes from the architecture."""
    spec, model, x = prepare(name, small=True)
    flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in model.state_dict().items()})
    out = run_spec(spec, flat, x, "fp32", small=True)
    for oname, ref in zip(spec.output_names, torch_outputs(model, x)):
        check_fp32(out[oname], ref, f"{name}/{oname} from flat weights")
    assert unused(flat) == []


def test_alexnet_builder_reads_the_torchvision_layout_too():
    from trtbuild.models.pytorch import alexnet

    spec = registry.get("alexnet")
    model = alexnet(num_classes=10, variant="torchvision", width=0.125, hidden=32, seed=3).eval()
    x = make_input(spec, small=True)
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x, "fp32", small=True)
    check_fp32(out["logits"], torch_outputs(model, x)[0], "alexnet torchvision layout")
    assert unused(wm) == []

"""Every zoo model (--small) built in INT8 and FP8 from a calibration file made here, on the
reference backend: parity against the fp32 PyTorch model within the quantization-error budget the
README states, a much tighter match against a PyTorch fake-quant model written here with the same
scales (the strong test), NVIDIA's placement of the Q/DQ layers, --keep, the refusals, and the
builds accepted by TensorRT-RTX's builder (FP8 needs sm89 or newer, so targets 8.9 and 12.0)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval
from torch.overrides import TorchFunctionMode

import trtbuild.reference as ref_trt
from trtbuild.engine import Engine, build_model, quant_plan
from trtbuild.engine.build import build_plan, definition_step
from trtbuild.models import registry
from trtbuild.parity.check import check_model_parity, make_inputs
from trtbuild.quant import CalibrationFileError
from trtbuild.weights import WeightMap

from helpers.refnet import concrete
from helpers.zoo_quant import fake_quant_errors, torch_model

MODELS = ["alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0", "rednet"]
#: cosine similarity to the fp32 PyTorch outputs every quantized build must reach (README)
MIN_COSINE = 0.99


def _spec(name):
    spec = registry.get(name)
    return spec.with_options(involution_impl="composed") if name == "rednet" else spec


@pytest.mark.parametrize("precision", ["int8", "fp8"])
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_passes_parity_quantized(name, precision, calib_file):
    spec = _spec(name)
    quant = quant_plan(spec, precision, calib_file(name), small=True, module=torch_model(name))
    report = check_model_parity(spec, ref_trt, precision=precision, small=True, seed=1, quant=quant,
                                module=torch_model(name))
    assert report.passed, report.to_table()
    for stats in report.outputs:
        assert stats.cosine > MIN_COSINE, (stats.name, stats.cosine)
    q = report.meta["quantization"]
    assert q["precision"] == precision and q["quantized_layers"]
    if name == "rednet":  # the involutions' own convs make per-pixel kernels: never quantized
        assert not [n for n in q["quantized_layers"] if ".conv2." in n or n.startswith("stem.1")]
        assert len(q["quantized_adds"]) == 8


# --- the strong test: a PyTorch fake-quant model with the same scales ---------------------------

def _int8(x, amax):
    return torch.fake_quantize_per_tensor_affine(x, float(amax) / 127, 0, -128, 127)


def _fp8(x, scale):
    return torch.clamp(x / scale, -448, 448).to(torch.float8_e4m3fn).to(torch.float32) * scale


def _fake(dtype, x, amax):
    return _int8(x, amax) if dtype == "int8" else _fp8(x, float(amax) / 448)


def _fake_weight(dtype, w):
    amax = w.abs().reshape(w.shape[0], -1).amax(1)
    scale = torch.where(amax > 0, amax, torch.ones_like(amax)) / (127 if dtype == "int8" else 448)
    if dtype == "int8":
        return torch.fake_quantize_per_channel_affine(w, scale, torch.zeros(len(scale), dtype=torch.int32), 0,
                                                      -128, 127)
    return _fp8(w, scale.reshape(-1, *[1] * (w.dim() - 1)))


def _fold_resnet_bn(m):
    """Fold each BatchNorm into its conv (conv1/bn1, convK/bnK, downsample.0/.1), BN -> Identity."""
    pairs = [(m, "conv1", "bn1")]
    for stage in (m.layer1, m.layer2, m.layer3, m.layer4):
        for block in stage:
            pairs += [(block, f"conv{k}", f"bn{k}") for k in (1, 2, 3) if hasattr(block, f"conv{k}")]
            if block.downsample is not None:
                pairs.append((block.downsample, "0", "1"))
    for parent, c, b in pairs:
        setattr(parent, c, fuse_conv_bn_eval(getattr(parent, c), getattr(parent, b)))
        setattr(parent, b, nn.Identity())


class _QuantizeResidualAdds(TorchFunctionMode):
    """Fake-quantize the second operand of each residual add (same-shape tensor add), the i-th add
    with the amax of the calibration's i-th add (forward order)."""

    ADDS = {torch.add, torch.Tensor.add, torch.Tensor.add_, torch.Tensor.__add__, torch.Tensor.__iadd__}

    def __init__(self, amaxes, dtype):
        super().__init__()
        self.amaxes, self.dtype, self.i = amaxes, dtype, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if (func in self.ADDS and len(args) >= 2 and isinstance(args[1], torch.Tensor)
                and args[0].shape == args[1].shape):
            args = (args[0], _fake(self.dtype, args[1], self.amaxes[self.i]), *args[2:])
            self.i += 1
        return func(*args, **(kwargs or {}))


def _fake_quant_forward(name, model, calib, dtype, x):
    m = copy.deepcopy(model)
    if name.startswith("resnet"):
        _fold_resnet_bn(m)
    for mod_name, module in m.named_modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            with torch.no_grad():
                module.weight.copy_(_fake_weight(dtype, module.weight))
            amax = calib.activations[f"{mod_name}.input"]
            module.register_forward_pre_hook(lambda mod, args, a=amax: (_fake(dtype, args[0], a),))
    amaxes = [calib.activations[keys[1]] for keys in calib.adds.values()]
    with torch.no_grad(), _QuantizeResidualAdds(amaxes, dtype) as mode:
        y = m(x)
    assert mode.i == len(amaxes)
    return y


@pytest.mark.parametrize("precision", ["int8", "fp8"])
@pytest.mark.parametrize("name", ["resnet18", "alexnet", "vgg16_ssd"])
def test_engine_matches_a_pytorch_fake_quant_model_with_the_same_scales(name, precision, calib_file):
    from trtbuild.quant import load_calibration

    spec = _spec(name)
    model = torch_model(name)
    calib = load_calibration(calib_file(name), spec, small=True, module=model)
    plan = build_model(spec, WeightMap.from_module(model), ref_trt, precision, small=True, progress=False,
                       quant=quant_plan(spec, precision, calib_file(name), small=True, module=model))
    x = make_inputs({"input": spec.input_shape(True)}, seed=1, value_range=spec.value_range)["input"]
    outputs = Engine(plan, ref_trt, sidecar=plan.info)(input=x)
    fakes = _fake_quant_forward(name, model, calib, precision, x)
    with torch.no_grad():
        fp32s = model(x)
    if isinstance(fp32s, torch.Tensor):
        fakes, fp32s = [fakes], [fp32s]
    assert len(fp32s) == len(spec.output_names)
    for out_name, fake, fp32 in zip(spec.output_names, fakes, fp32s):
        quant_error, engine_vs_fake = fake_quant_errors(outputs[out_name], fake, fp32)
        assert quant_error > 1e-3, out_name  # the fake-quant model really quantizes
        assert engine_vs_fake < quant_error / 10, (out_name, float(engine_vs_fake), float(quant_error))
        assert engine_vs_fake < 1e-4, out_name  # measured: 0 (resnet18, alexnet), 2e-7 (vgg16_ssd's L2Norm)


# --- placement, --keep, refusals ------------------------------------------------------------------

def _network(name, precision, quant):
    model = torch_model(name)
    defined = definition_step(_spec(name), weights=WeightMap.from_module(model), precision=precision, small=True,
                              quant=quant)(ref_trt)
    net = defined.network
    return {layer.name: concrete(layer) for layer in map(net.get_layer, range(net.num_layers))}


def _is(layer, kind):  # by class: IActivationLayer.type is its ActivationType, as in TensorRT
    return type(layer).__name__ == f"I{kind}Layer"


def test_int8_resnet18_follows_nvidias_placement_rules(calib_file):
    layers = _network("resnet18", "int8", quant_plan("resnet18", "int8", calib_file("resnet18"), small=True))
    convs = [n for n, layer in layers.items() if _is(layer, "Convolution")]
    assert len(convs) == 20  # conv1, 16 block convs, 3 downsamples
    for conv in convs:  # both inputs: the activation per tensor, the weight per output channel (axis 0)
        assert f"{conv}/input_q/quantize" in layers and f"{conv}/weight_q" in layers, conv
        assert layers[f"{conv}/weight_q"].axis == 0
        assert layers[conv].get_input(0).name == f"{conv}/input_q"
        assert layers[conv].get_input(1).name == f"{conv}/weight_q"  # the kernel is the dequantized weight
    assert "fc/input_q/quantize" in layers and "fc/weight_q" in layers  # the matmul too
    assert [layers["fc/matmul"].get_input(i).name for i in (0, 1)] == ["fc/flatten", "fc/weight_q"]
    assert layers["fc/flatten"].get_input(0).name == "fc/input_q"  # the quantized activation, flattened
    adds = [f"layer{s}.{b}.add" for s in range(1, 5) for b in range(2)]
    for add in adds:  # the residual (identity) input quantized, so the add fuses into the conv before it
        assert layers[add].get_input(1).name == f"{add}/residual_q", add
    assert "conv1/bn" not in " ".join(layers)  # BN folded, not simulated
    last = list(layers.values())[-1]
    assert not _is(last, "Dequantize") and last.name == "fc"  # no Q/DQ after the last layer


def test_keep_keeps_named_layers_out_of_quantization_with_casts(calib_file):
    quant = quant_plan("resnet18", "int8", calib_file("resnet18"), ["fp16:layer4.*", "fp32:conv1"], small=True)
    layers = _network("resnet18", "int8", quant)
    kept = [n for n in layers if n.startswith("layer4.") and _is(layers[n], "Convolution")]
    assert kept and all(n.endswith("/fp16") for n in kept)
    for conv in kept:
        base = conv[: -len("/fp16")]
        assert not any(n.startswith(f"{base}/input_q") or n.startswith(f"{base}/weight_q") for n in layers)
        cast = layers[f"{base}/keep_fp16"]
        assert cast.get_output(0).dtype == ref_trt.DataType.HALF and layers[conv].get_input(0).name == cast.name
        assert layers[base].get_output(0).dtype == ref_trt.DataType.FLOAT  # cast back to the network's type
    assert "layer4.0.add/residual_q" not in layers  # the add in layer4 is kept too
    assert "conv1/input_q/quantize" not in layers and layers["conv1"].get_input(0).dtype == ref_trt.DataType.FLOAT
    assert "layer3.1.conv2/input_q/quantize" in layers  # the others are still quantized


def test_fp16_build_keeps_modules_in_fp32_and_passes_parity():
    quant = quant_plan("vgg16_ssd", "fp16", keep=["fp32:L2Norm,features.0"], small=True)
    layers = _network("vgg16_ssd", "fp16", quant)
    assert layers["conv4_3_norm/keep_fp32"].get_output(0).dtype == ref_trt.DataType.FLOAT
    assert layers["features.0/fp32"].get_input(0).dtype == ref_trt.DataType.FLOAT
    assert layers["features.2"].get_input(0).dtype == ref_trt.DataType.HALF  # the rest stays fp16
    report = check_model_parity("vgg16_ssd", ref_trt, precision="fp16", small=True, quant=quant)
    assert report.passed, report.to_table()


def test_calibration_of_another_model_is_refused(calib_file):
    with pytest.raises(CalibrationFileError, match="was made for model 'resnet18', not 'resnet50'"):
        quant_plan("resnet50", "int8", calib_file("resnet18"), small=True)


def test_int8_without_calibration_is_refused_and_calibration_without_int8_too(calib_file):
    wm = WeightMap.from_module(torch_model("alexnet"))
    with pytest.raises(ValueError, match="--precision int8 needs a calibration"):
        build_model("alexnet", wm, ref_trt, "int8", small=True, progress=False)
    with pytest.raises(ValueError, match="--calibration applies to --precision int8 or fp8 only"):
        quant_plan("alexnet", "fp16", calib_file("alexnet"), small=True)
    with pytest.raises(ValueError, match="--native-io does not apply"):
        build_model("alexnet", wm, ref_trt, "int8", small=True, fp32_io=False, progress=False,
                    quant=quant_plan("alexnet", "int8", calib_file("alexnet"), small=True))


@pytest.mark.parametrize("precision", ["int8", "fp8"])
@pytest.mark.parametrize("name", MODELS)
def test_tensorrt_rtx_builds_the_quantized_networks(rtx, name, precision, calib_file):
    model = torch_model(name)
    plan = build_plan(ref_trt, _spec(name), weights=WeightMap.from_module(model), precision=precision, small=True,
                      quant=quant_plan(name, precision, calib_file(name), small=True), progress=False,
                      cross_check=True, targets=("8.9", "12.0"))
    cross = plan.info["cross_check"]  # CrossCheckError otherwise: TensorRT-RTX refused it or disagreed
    assert cross["targets"] == ["8.9", "12.0"] and cross["tensors_compared"] > 20 and cross["rtx_engine_bytes"] > 0


def test_fp8_cross_check_targets_sm89_and_newer_by_default(rtx, calib_file):
    model = torch_model("alexnet")
    quant = quant_plan("alexnet", "fp8", calib_file("alexnet"), small=True)
    plan = build_plan(ref_trt, _spec("alexnet"), weights=WeightMap.from_module(model), precision="fp8", small=True,
                      quant=quant, progress=False, cross_check=True)
    assert plan.info["cross_check"]["targets"] == ["8.9", "12.0"]  # not the default sm86
    with pytest.raises(ValueError, match="compiles FP8 for sm89 and newer only, not for sm86"):
        build_plan(ref_trt, _spec("alexnet"), weights=WeightMap.from_module(model), precision="fp8", small=True,
                   quant=quant, progress=False, cross_check=True, targets=("8.6", "8.9"))


# --- the command line -----------------------------------------------------------------------------

def _cli(capsys, *argv):
    from trtbuild.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_builds_int8_with_keep_and_parity_reads_the_sidecar(tmp_path, monkeypatch, capsys, calib_file):
    import hashlib
    import json
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(calib_file("resnet18"), "calib.json")
    ref = ["--small", "--backend", "reference", "--no-progress"]
    code, out, err = _cli(capsys, "build", "resnet18", *ref, "--precision", "int8", "--calibration", "calib.json",
                          "--keep", "fp32:layer4.*")
    assert code == 0, err
    side = json.load(open("engines/resnet18-small-int8.engine.json"))
    assert side["precision"] == "int8"
    q = side["quantization"]
    assert q["keep"] == ["fp32:layer4.*"] and q["calibration"]["method"] == {"name": "max"}
    # 20 convs + fc, less layer4's 5 convs; 8 residual adds, less layer4's 2
    assert len(q["quantized_layers"]) == 16 and "layer4.0.conv1" not in q["quantized_layers"]
    assert len(q["quantized_adds"]) == 6 and "16 convolutions/matmuls and 6 residual adds quantized" in out
    assert q["calibration"]["sha256"] == hashlib.sha256(open("calib.json", "rb").read()).hexdigest()
    code, out, err = _cli(capsys, "parity", "resnet18", "--small", "--backend", "reference", "--engine",
                          "engines/resnet18-small-int8.engine")
    assert code == 0, out + err
    assert "precision=int8" in out and "atol=0.1*max|expected|" in out
    assert ("quantization (from the sidecar): int8; 16 convolutions/matmuls and 6 residual adds quantized; "
            "calibration calib.json") in out
    assert "kept: fp32:layer4.*" in out
    code, out, err = _cli(capsys, "parity", "resnet18", "--small", "--backend", "reference", "--engine",
                          "engines/resnet18-small-int8.engine", "--calibration", "calib.json")
    assert code == 1 and "--calibration and --keep apply to an engine built in memory" in err


def test_cli_refuses_int8_without_calibration_and_another_models_file(tmp_path, monkeypatch, capsys, calib_file):
    monkeypatch.chdir(tmp_path)
    ref = ["--small", "--backend", "reference", "--no-progress"]
    code, _, err = _cli(capsys, "build", "alexnet", *ref, "--precision", "int8")
    assert code == 1 and err.strip().endswith("--precision int8 needs a calibration file (--calibration calib.json, "
                                              "written by `trtbuild calibrate`)")
    code, _, err = _cli(capsys, "build", "alexnet", *ref, "--precision", "fp8", "--calibration",
                        str(calib_file("resnet18")))
    assert code == 1 and "was made for model 'resnet18', not 'alexnet'" in err
    code, _, err = _cli(capsys, "parity", "alexnet", "--small", "--backend", "reference", "--precision", "fp16",
                        "--keep", "fp32:nosuchlayer")
    assert code == 1 and "--keep: nosuchlayer matches no module" in err
    assert not (tmp_path / "engines").exists()  # refused before anything was written



def test_cli_refuses_a_keep_that_reaches_no_layer_naming_the_modules_that_can_be_kept(tmp_path, monkeypatch, capsys,
                                                                                      calib_file):
    """resnet18's ReLU and max-pool modules exist in PyTorch, but its builder asks the plan about no
    layer of theirs: a --keep of them would change nothing, so it is refused, nothing is written,
    and the message names what can be kept."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(calib_file("resnet18"), "calib.json")
    ref = ["--small", "--backend", "reference", "--no-progress"]
    code, _, err = _cli(capsys, "build", "resnet18", *ref, "--precision", "int8", "--calibration", "calib.json",
                        "--keep", "fp32:relu", "--keep", "fp32:layer4.*")
    assert code == 1 and "--keep fp32:relu would keep nothing: model 'resnet18' builds no layer of that module" in err
    assert "the modules that can be kept: conv1, layer1.0.conv1, layer1.0.conv2, layer1.0.add," in err
    code, _, err = _cli(capsys, "build", "resnet18", *ref, "--precision", "fp16", "--keep", "fp32:maxpool,layer1.0.*")
    assert code == 1 and "--keep fp32:maxpool would keep nothing" in err
    assert not (tmp_path / "engines").exists()  # no engine, no sidecar recording the keep
    quant = quant_plan("resnet18", "int8", calib_file("resnet18"), ["fp32:relu,conv1", "fp16:maxpool"], small=True)
    with pytest.raises(ValueError, match=r"--keep fp32:relu fp16:maxpool would keep nothing: model 'resnet18' builds "
                                         r"no layer of those modules"):
        build_model("resnet18", WeightMap.from_module(torch_model("resnet18")), ref_trt, "int8", small=True,
                    progress=False, quant=quant)

# --- trtbuild.layers.planned in your own network ---------------------------------------------------

class _Tiny(nn.Module):
    """conv-relu, conv + residual, linear: every kind of layer a plan quantizes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.relu, self.fc = nn.ReLU(), nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        y = self.relu(self.conv1(x))
        return self.fc(torch.flatten(self.conv2(y) + y, 1))


def test_planned_helpers_quantize_a_user_network_as_a_fake_quant_pytorch_model():
    from helpers.refnet import RefNet

    from trtbuild.layers.basic import relu
    from trtbuild.layers.planned import planned_add, planned_conv, planned_linear
    from trtbuild.quant import QuantPlan, calibrate

    model = _Tiny().eval()
    gen = torch.Generator().manual_seed(0)
    calib = calibrate(model, [torch.randn(4, 3, 6, 6, generator=gen) for _ in range(2)], "max", model_name="tiny")
    assert list(calib.adds) == ["add"]
    quant = QuantPlan.build(calib, "int8")
    refnet = RefNet()
    net = refnet.network
    params = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    x = refnet.input("x", (2, 3, 6, 6))
    y = relu(net, planned_conv(net, x, params["conv1.weight"], params["conv1.bias"], "conv1", quant, padding=1),
             "relu")
    z = planned_conv(net, y, params["conv2.weight"], params["conv2.bias"], "conv2", quant, padding=1)
    out = planned_linear(net, planned_add(net, z, y, "add", quant), params["fc.weight"], params["fc.bias"], "fc",
                         quant)
    xt = torch.randn(2, 3, 6, 6, generator=gen)
    got = refnet.run({"x": xt}, out=out)["out"]
    want = _fake_quant_forward("tiny", model, calib, "int8", xt)
    with torch.no_grad():
        fp32 = model(xt)
    assert (want - fp32).abs().max() > 1e-3  # quantization shows
    torch.testing.assert_close(got, want, atol=1e-5 * float(fp32.abs().max()), rtol=0)



class _InvertedResidual(nn.Module):
    """torchvision MobileNetV2's residual form: the identity is the first operand."""

    def __init__(self, width):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width))

    def forward(self, x):
        return x + self.conv(x)


class _MobileBlock(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem, self.relu, self.block = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), _InvertedResidual(8)
        with torch.no_grad():
            self.block.conv[1].running_mean.uniform_(-0.5, 0.5)
            self.block.conv[1].running_var.uniform_(0.5, 2.0)
            self.block.conv[1].weight.uniform_(4.0, 6.0)  # the branch's range differs from the identity's

    def forward(self, x):
        return self.block(self.relu(self.stem(x)))


def _mobile_network(model, quant, swapped=False, names=("stem", "relu")):
    from helpers.refnet import RefNet

    refnet = RefNet()
    return refnet, _mobile_layers(refnet.network, refnet.input("x", (2, 3, 6, 6)), model, quant, swapped, names)


def _mobile_layers(net, x, model, quant, swapped=False, names=("stem", "relu")):
    """The block's layers on `net` (any backend) from input `x`; returns the add's output."""
    from trtbuild.layers.basic import relu
    from trtbuild.layers.planned import planned_add, planned_conv, planned_conv_bn

    wm = WeightMap.from_module(model)
    y = relu(net, planned_conv(net, x, wm.get("stem.weight"), wm.get("stem.bias"), names[0], quant, "stem",
                               padding=1), names[1])
    b = planned_conv_bn(net, y, wm, "block.conv.0", "block.conv.1", "block.conv.0", quant, padding=1, kernel=3)
    if names != ("stem", "relu"):  # a layer between the conv and the add, named after no module
        b = net.add_identity(b)
        b.name = b.get_output(0).name = "mystery"
        b = b.get_output(0)
    return planned_add(net, b, y, "block.add", quant) if swapped else planned_add(net, y, b, "block.add", quant)


@pytest.mark.parametrize("swapped", [False, True], ids=["pytorch_order", "swapped"])
def test_the_int8_residual_block_is_built_by_tensorrt_rtx_with_the_same_layers(swapped, rtxnet):
    """The same Q/DQ placement is accepted by NVIDIA's builder, layer for layer."""
    from trtbuild.quant import QuantPlan, calibrate

    model = _MobileBlock().eval()
    calib = calibrate(model, [torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(0))], "max",
                      model_name="mobile")
    refnet, _ = _mobile_network(model, QuantPlan.build(calib, "int8"), swapped)
    x = rtxnet.network.add_input("x", rtxnet.trt.float32, (2, 3, 6, 6))
    out = _mobile_layers(rtxnet.network, x, model, QuantPlan.build(calib, "int8"), swapped)
    rtxnet.network.mark_output(out)
    assert rtxnet.build() is not None, rtxnet.errors

    def layers(network):  # name, output dtype and shape (TensorRT's get_layer returns the base ILayer)
        return [(layer.name, layer.get_output(0).dtype.name, tuple(layer.get_output(0).shape))
                for layer in map(network.get_layer, range(network.num_layers))]

    assert layers(rtxnet.network) == layers(refnet.network)


@pytest.mark.parametrize("swapped", [False, True], ids=["pytorch_order", "swapped"])
def test_planned_add_quantizes_the_identity_whatever_the_operand_order(swapped):
    """``x + self.conv(x)``: NVIDIA's placement quantizes the identity x (with x's own range) and
    leaves the convolution branch to fuse with the add, whichever argument the builder passes first;
    checked against a fake-quant PyTorch model written here."""
    from trtbuild.quant import QuantPlan, calibrate

    model = _MobileBlock().eval()
    gen = torch.Generator().manual_seed(0)
    calib_x = torch.randn(4, 3, 6, 6, generator=gen)
    calib = calibrate(model, [calib_x], "max", model_name="mobile")
    assert calib.adds == {"block.add": ["relu.output", "block.conv.output"]}
    assert calib.add_sources == {"block.add": [None, "block.conv.0"]}  # the branch comes from the conv (BN folded)
    with torch.no_grad():
        identity = model.relu(model.stem(calib_x))
        branch = model.block.conv(identity)
    assert calib.activations["relu.output"] == pytest.approx(float(identity.abs().max()), rel=1e-6)
    assert calib.activations["block.conv.output"] == pytest.approx(float(branch.abs().max()), rel=1e-6)
    assert calib.activations["block.conv.output"] > 2 * calib.activations["relu.output"]
    refnet, out = _mobile_network(model, QuantPlan.build(calib, "int8"), swapped)
    layers = {refnet.network.get_layer(i).name: refnet.network.get_layer(i)
              for i in range(refnet.network.num_layers)}
    assert layers["block.add/residual_q/quantize"].get_input(0).name == "relu"  # the identity, not the branch
    xt = torch.randn(2, 3, 6, 6, generator=gen)
    got = refnet.run({"x": xt}, out=out)["out"]
    with torch.no_grad():  # fake quantization by hand: stem and conv inputs, weights per channel, the identity
        folded = fuse_conv_bn_eval(copy.deepcopy(model.block.conv[0]), model.block.conv[1])
        y = torch.relu(nn.functional.conv2d(_int8(xt, calib.activations["stem.input"]),
                                            _fake_weight("int8", model.stem.weight), model.stem.bias, padding=1))
        b = nn.functional.conv2d(_int8(y, calib.activations["block.conv.0.input"]),
                                 _fake_weight("int8", folded.weight), folded.bias, padding=1)
        want = _int8(y, calib.activations["relu.output"]) + b
        fp32 = model(xt)
    assert (want - fp32).abs().max() > 1e-3  # quantization shows
    torch.testing.assert_close(got, want, atol=1e-5 * float(fp32.abs().max()), rtol=0)


def test_planned_add_refuses_an_add_whose_inputs_the_graph_cannot_tell_apart():
    from trtbuild.quant import QuantPlan, calibrate

    model = _MobileBlock().eval()
    calib = calibrate(model, [torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(0))], "max",
                      model_name="mobile")
    with pytest.raises(ValueError) as e:
        _mobile_network(model, QuantPlan.build(calib, "int8"), names=("first", "second"))
    msg = str(e.value)
    assert msg.startswith("residual add 'block.add': the graph does not tell which of its inputs 'second' and "
                          "'mystery' is PyTorch's relu.output and which block.conv.output")
    assert "\n" not in msg and msg.count(". ") == 0


def test_int8_resnet18_quantizes_each_shortcut_as_the_identity(calib_file):
    """Downsampling blocks have a convolution on both inputs: the identity is the shortcut (the
    calibrated second operand of ``out += identity``), found by the layer names."""
    layers = _network("resnet18", "int8", quant_plan("resnet18", "int8", calib_file("resnet18"), small=True))
    for s in (1, 2, 3, 4):
        for b in (0, 1):
            shortcut = (f"layer{s}.0.downsample" if s > 1 and b == 0 else "maxpool" if s == 1 and b == 0
                        else f"layer{s}.0")
            assert layers[f"layer{s}.{b}.add/residual_q/quantize"].get_input(0).name == shortcut

# --- ONNX export (QuantizeLinear / DequantizeLinear) -----------------------------------------------

@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_quantized_zoo_model_exports_to_onnx_and_onnxruntime_agrees(precision, calib_file):
    import onnxruntime  # noqa: F401  (the test extra installs it: its absence fails here, never skips)
    from trtbuild.onnx_export.reference_network import build_reference_network
    from trtbuild.onnx_export.verify import export_and_run

    quant = quant_plan("resnet18", precision, calib_file("resnet18"), small=True, module=torch_model("resnet18"))
    weights = WeightMap.from_module(torch_model("resnet18"))
    network, _ = build_reference_network("resnet18", weights, precision=precision, small=True, quant=quant)
    model, ref, got = export_and_run(network, seed=1)
    assert model.opset_import[0].version == (19 if precision == "fp8" else 17)  # FP8 Q/DQ need opset 19
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") >= 29 and "Conv" in ops  # 20 convs + fc inputs, 8 residual inputs
    scale = np.abs(ref["logits"]).max()
    np.testing.assert_allclose(got["logits"], ref["logits"], atol=1e-4 * scale, rtol=0)
    from helpers.refnet import import_rtx

    from trtbuild.onnx_export.rtx_parse import output_differences, parse_with_tensorrt_rtx

    # NVIDIA's ONNX parser reads the QDQ export and builds it (FP8: sm89 and newer)
    result = parse_with_tensorrt_rtx(model, import_rtx(), targets=("8.9", "12.0"))
    assert result.ok, result.reason()
    assert not output_differences(result, model, network)


def test_cli_export_onnx_int8_needs_the_calibration(tmp_path, monkeypatch, capsys, calib_file):
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(capsys, "export-onnx", "alexnet", "--small", "--precision", "int8", "-o", "a.onnx")
    assert code == 1 and "--precision int8 needs a calibration file" in err and not (tmp_path / "a.onnx").exists()
    code, out, err = _cli(capsys, "export-onnx", "alexnet", "--small", "--precision", "int8", "--calibration",
                          str(calib_file("alexnet")), "-o", "a.onnx")
    assert code == 0, err
    assert "model 'alexnet' int8, opset 17" in out and "QuantizeLinear x" in out


@pytest.mark.parametrize("name, precision, keep", [
    ("resnet18", "int8", ["fp16:layer4.*", "fp32:conv1"]),   # quantized, some modules kept in fp16/fp32 by casts
    ("vgg16_ssd", "fp16", ["fp32:L2Norm,features.0"]),        # fp16, the L2Norm and the first conv kept in fp32
])
def test_tensorrt_rtx_builds_networks_with_kept_modules(rtx, name, precision, keep, calib_file):
    """The casts --keep places around kept modules (and the Q/DQ around the others) are accepted by
    TensorRT-RTX, which agrees with the reference on every tensor's shape and dtype."""
    calib = calib_file(name) if precision == "int8" else None
    plan = build_plan(ref_trt, _spec(name), weights=WeightMap.from_module(torch_model(name)), precision=precision,
                      small=True, quant=quant_plan(name, precision, calib, keep, small=True), progress=False,
                      cross_check=True)
    cross = plan.info["cross_check"]
    assert cross["tensors_compared"] > 20 and cross["rtx_engine_bytes"] > 0

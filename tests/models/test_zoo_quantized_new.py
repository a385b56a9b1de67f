"""INT8 and FP8 for the zoo's newer models (yolov8n, unet, unet_gn_deconv, vit_tiny, crnn), --small, on the
reference backend: parity against the fp32 PyTorch model within the default int8/fp8 budget, a much tighter
match against a PyTorch fake-quant model written here with the same scales (the strong test: it places the
Q/DQ by hand, so a misplaced or mis-scaled Q/DQ in the builders shows), a Q/DQ pair on the inputs of every
convolution / transposed convolution / matmul the placement quantizes (counted against the PyTorch model),
the builds accepted by TensorRT-RTX's builder with the cross-check, and ``trtbuild debug precision``."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

import trtbuild.reference as ref_trt
from trtbuild.engine import Engine, build_model, quant_plan
from trtbuild.engine.build import build_plan, definition_step

from helpers.refnet import concrete
from helpers.zoo_quant import fake_quant_errors, torch_model
from trtbuild.models import registry
from trtbuild.parity.check import check_model_parity, make_inputs
from trtbuild.quant import load_calibration, random_source
from trtbuild.weights import WeightMap

MODELS = ["yolov8n", "unet", "unet_gn_deconv", "vit_tiny", "crnn"]
#: cosine similarity to the fp32 PyTorch outputs every int8 build reaches (measured: >= 0.998)
MIN_COSINE = 0.99
#: modules with weights that the placement leaves float (the DFL's fixed 0..15 expectation is box decode)
FLOAT_CONVS = {"yolov8n": {"model.22.dfl.conv"}}
#: the modules running residual adds the builders quantize, and which operand is the identity (PyTorch's
#: ``x + self.cv2(self.cv1(x))`` and timm's ``x = x + self.attn(...)``: the first); yolov8's decode add
#: (``model.22.add``, anchors + distances) is no residual
RESIDUAL_MODULES = {"yolov8n": "Bottleneck", "vit_tiny": "Block"}

def _plan(name, precision, calib_file):
    return quant_plan(name, precision, calib_file(name), small=True, module=torch_model(name))


@pytest.mark.parametrize("precision", ["int8", pytest.param("fp8", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", MODELS)
def test_new_zoo_model_passes_parity_quantized(name, precision, calib_file):
    report = check_model_parity(name, ref_trt, precision=precision, small=True, seed=1,
                                quant=_plan(name, precision, calib_file), module=torch_model(name))
    assert report.passed, report.to_table()
    for stats in report.outputs:
        if stats.name != "labels":  # crnn's argmax path: compared with its near-tie forgiveness
            assert stats.cosine > (MIN_COSINE if precision == "int8" else 0.98), (stats.name, stats.cosine)
    q = report.meta["quantization"]
    assert q["precision"] == precision and q["quantized_layers"]


# --- the strong test: a PyTorch fake-quant model with the same scales ---------------------------

def _fake(dtype, x, amax):
    if dtype == "int8":
        return torch.fake_quantize_per_tensor_affine(x, float(amax) / 127, 0, -128, 127)
    scale = float(amax) / 448
    return torch.clamp(x / scale, -448, 448).to(torch.float8_e4m3fn).to(torch.float32) * scale


def _fake_weight(dtype, w, axis=0):
    """Per-channel fake quantization of a weight along `axis` (its output channels)."""
    wt = w.movedim(axis, 0)
    amax = wt.abs().reshape(wt.shape[0], -1).amax(1)
    scale = torch.where(amax > 0, amax, torch.ones_like(amax)) / (127 if dtype == "int8" else 448)
    if dtype == "int8":
        q = torch.fake_quantize_per_channel_affine(wt, scale, torch.zeros(len(scale), dtype=torch.int32), 0,
                                                   -128, 127)
    else:
        s = scale.reshape(-1, *[1] * (wt.dim() - 1))
        q = torch.clamp(wt / s, -448, 448).to(torch.float8_e4m3fn).to(torch.float32) * s
    return q.movedim(0, axis)


def _fold_bn(model):
    """Fold every BatchNorm2d into the Conv2d just before it among its parent's children (the builders'
    conv+BN layers), BN -> Identity: w * s and beta + (b - mean) * s, s = gamma / sqrt(var + eps), in float64
    (as PyTorch's fuse_conv_bn_eval does in float32: a last-bit difference in a folded bias flips an int8
    rounding now and then, and deep networks carry such flips to their outputs)."""
    for parent in list(model.modules()):
        children = list(parent.named_children())
        for (cname, conv), (bname, bn) in zip(children, children[1:]):
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                fused = copy.deepcopy(conv)
                s = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
                b = conv.bias.double() if conv.bias is not None else torch.zeros_like(s)
                fused.weight = nn.Parameter((conv.weight.double() * s.reshape(-1, 1, 1, 1)).float())
                fused.bias = nn.Parameter((bn.bias.double() + (b - bn.running_mean.double()) * s).float())
                setattr(parent, cname, fused)
                setattr(parent, bname, nn.Identity())


class _FakeQuantOps(TorchFunctionMode):
    """Fake-quantize what no Conv/Linear hook sees: attention (``F.scaled_dot_product_attention`` computed by
    hand with its four matmul inputs quantized: the scaled query, the key, the softmax output with amax 1 and
    the value) and the identity (first) operand of each add run directly by a module in `residual` (a stack
    of (module name, runs residual adds) kept by hooks)."""

    def __init__(self, calib, dtype, stack):
        super().__init__()
        self.calib, self.dtype, self.stack = calib, dtype, stack
        self.adds = {}
        self.sdpa = {}

    def _next(self, counts, kind):
        module = self.stack[-1][0]
        n = counts.get(module, 0)
        counts[module] = n + 1
        return f"{module}.{kind}" + (f"_{n}" if n else "")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        acts = self.calib.activations
        if func is F.scaled_dot_product_attention and self.stack:
            call = self._next(self.sdpa, "sdpa")
            q, k, v = args[:3]
            scale = 1 / math.sqrt(q.shape[-1])
            qs = _fake(self.dtype, q * scale, acts[f"{call}.query"] * scale)
            scores = qs @ _fake(self.dtype, k, acts[f"{call}.key"]).transpose(-2, -1)
            probs = _fake(self.dtype, scores.softmax(-1), 1.0)
            return probs @ _fake(self.dtype, v, acts[f"{call}.value"])
        if (func in (torch.add, torch.Tensor.add, torch.Tensor.__add__) and self.stack and self.stack[-1][1]
                and isinstance(args[1], torch.Tensor) and args[0].shape == args[1].shape):
            add = self._next(self.adds, "add")
            identity = self.calib.adds[add][0]
            return func(_fake(self.dtype, args[0], acts[identity]), *args[1:], **kwargs)
        return func(*args, **kwargs)


def _fake_quant_forward(name, model, calib, dtype, x):
    m = copy.deepcopy(model)
    _fold_bn(m)
    stack = []  # (module name, runs quantized residual adds) of the modules running now
    for mod_name, module in m.named_modules():
        if isinstance(module, (nn.Conv2d, nn.Linear, nn.ConvTranspose2d)) and mod_name not in FLOAT_CONVS.get(name,
                                                                                                              ()):
            with torch.no_grad():
                module.weight.copy_(_fake_weight(dtype, module.weight, 1 if isinstance(module, nn.ConvTranspose2d)
                                                 else 0))
            amax = calib.activations[f"{mod_name}.input"]
            module.register_forward_pre_hook(lambda mod, args, a=amax: (_fake(dtype, args[0], a), *args[1:]))
        residual = type(module).__name__ == RESIDUAL_MODULES.get(name)
        if residual or type(module).__name__ == "Attention":
            module.register_forward_pre_hook(lambda mod, args, n=mod_name, r=residual: stack.append((n, r)))
            module.register_forward_hook(lambda mod, args, out: stack.pop() and None)  # None: keep the output
    mode = _FakeQuantOps(calib, dtype, stack)
    with torch.no_grad(), mode:
        y = m(x)
    return y, mode


def _engine_outputs(name, precision, calib_file, x):
    spec = registry.get(name)
    plan = build_model(spec, WeightMap.from_module(torch_model(name)), ref_trt, precision, small=True, progress=False,
                       quant=_plan(name, precision, calib_file))
    return Engine(plan, ref_trt, sidecar=plan.info)(input=x)


#: the models whose placement has more than convs and Linears (residual adds, attention, transposed convs) run
#: by default; unet and crnn (convs and Linears only, as the older zoo models) with the slow tests
_SLOW = pytest.mark.slow


@pytest.mark.parametrize("precision", ["int8", pytest.param("fp8", marks=_SLOW)])
@pytest.mark.parametrize("name", ["yolov8n", "unet_gn_deconv", "vit_tiny", pytest.param("unet", marks=_SLOW),
                                  pytest.param("crnn", marks=_SLOW)])
def test_engine_matches_a_pytorch_fake_quant_model_with_the_same_scales(name, precision, calib_file):
    spec = registry.get(name)
    model = torch_model(name)
    calib = load_calibration(calib_file(name), spec, small=True, module=model)
    x = make_inputs({"input": spec.input_shape(True)}, seed=1, value_range=spec.value_range)["input"]
    outputs = _engine_outputs(name, precision, calib_file, x)
    fakes, mode = _fake_quant_forward(name, model, calib, precision, x)
    assert sum(mode.adds.values()) == {"yolov8n": 6, "vit_tiny": 4}.get(name, 0)  # every residual add seen
    assert sum(mode.sdpa.values()) == (2 if name == "vit_tiny" else 0)
    with torch.no_grad():
        fp32s = model(x)
    if isinstance(fp32s, torch.Tensor):
        fakes, fp32s = [fakes], [fp32s]
    for out_name, fake, fp32 in zip(spec.output_names, fakes, fp32s):
        if out_name == "labels":
            continue
        quant_error, engine_vs_fake = fake_quant_errors(outputs[out_name], fake, fp32)
        assert quant_error > 1e-4, out_name  # the fake-quant model really quantizes
        assert engine_vs_fake < quant_error / 10, (out_name, float(engine_vs_fake), float(quant_error))


# --- placement: a Q/DQ pair on both inputs of every convolution / deconvolution / matmul ---------

def _float_layer(name, layer):
    """The conv/matmul layers the placement leaves float: yolov8's DFL expectation and box decode, crnn's
    LSTM (its loops: trtbuild.models.crnn's docstring says why)."""
    if name == "yolov8n":
        return layer in ("model.22.dfl.conv", "model.22/decode/matmul")
    return name == "crnn" and layer.startswith("rnn/")


def _expected_quantized(name):
    """Conv2d / ConvTranspose2d / Linear modules of the PyTorch model (less the float ones), plus two matmuls
    per attention module: how many layers must take quantized inputs."""
    model = torch_model(name)
    layers = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear))
              and n not in FLOAT_CONVS.get(name, ())]
    return len(layers) + 2 * sum(type(m).__name__ == "Attention" for m in model.modules())


@pytest.mark.parametrize("name", MODELS)
def test_every_conv_deconv_and_matmul_takes_quantized_inputs(name, calib_file):
    quant = _plan(name, "int8", calib_file)
    net = definition_step(registry.get(name), weights=WeightMap.from_module(torch_model(name)), precision="int8",
                          small=True, quant=quant)(ref_trt).network
    layers = [concrete(net.get_layer(i)) for i in range(net.num_layers)]
    producer = {layer.get_output(j).name: layer for layer in layers for j in range(layer.num_outputs)}

    def dequantized(tensor):  # through the shuffles a Linear puts between its Q/DQ and its matmul
        layer = producer.get(tensor.name)
        while layer is not None and type(layer).__name__ == "IShuffleLayer":
            layer = producer.get(layer.get_input(0).name)
        return layer is not None and type(layer).__name__ == "IDequantizeLayer"

    kinds = ("IConvolutionLayer", "IDeconvolutionLayer", "IMatrixMultiplyLayer")
    compute = [layer for layer in layers if type(layer).__name__ in kinds]
    quantized = [layer.name for layer in compute if dequantized(layer.get_input(0)) and dequantized(layer.get_input(1))]
    plain = [layer.name for layer in compute if layer.name not in quantized]
    assert [n for n in plain if not _float_layer(name, n)] == [], name  # nothing else left float
    assert len(quantized) == _expected_quantized(name), (name, len(quantized))
    if name == "unet_gn_deconv":  # the transposed convs: weight per output channel, axis 1 of [in, out, kh, kw]
        deconvs = [layer for layer in compute if type(layer).__name__ == "IDeconvolutionLayer"]
        assert len(deconvs) == 3 and all(producer[d.get_input(1).name].axis == 1 for d in deconvs)
    if name == "vit_tiny":  # attention's two matmuls, the softmax output quantized with amax 1 (scale 1/127)
        for b in range(2):
            p = f"blocks.{b}.attn/attention"
            assert {f"{p}/scores", p} <= set(quantized)
            scale = producer[f"{p}/input_q/scale"]
            assert float(scale.weights.numpy().reshape(-1)[0]) == pytest.approx(1 / 127)
    if name == "yolov8n":  # each Bottleneck's shortcut quantizes x of x + cv2(cv1(x)), not the conv branch
        for add in ("model.2.m.0", "model.4.m.1", "model.8.m.0"):
            assert producer[f"{add}/residual_q/quantize"].get_input(0).name != f"{add}.cv2"


# --- NVIDIA's builder -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_tensorrt_rtx_builds_the_int8_networks(rtx, name, calib_file):
    plan = build_plan(ref_trt, registry.get(name), weights=WeightMap.from_module(torch_model(name)), precision="int8",
                      small=True, quant=_plan(name, "int8", calib_file), progress=False, cross_check=True)
    cross = plan.info["cross_check"]  # CrossCheckError otherwise: TensorRT-RTX refused it or disagreed
    assert cross["tensors_compared"] > 100 and cross["rtx_engine_bytes"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_tensorrt_rtx_builds_the_fp8_networks(rtx, name, calib_file):
    plan = build_plan(ref_trt, registry.get(name), weights=WeightMap.from_module(torch_model(name)), precision="fp8",
                      small=True, quant=_plan(name, "fp8", calib_file), progress=False, cross_check=True,
                      targets=("8.9", "12.0"))
    assert plan.info["cross_check"]["rtx_engine_bytes"] > 0


# --- trtbuild debug precision ---------------------------------------------------------------------

#: a module of each model the search must name among its candidates
_CANDIDATE = {"yolov8n": "model.22.cv3.2.2", "unet": "outc.conv", "unet_gn_deconv": "up1.up",
              "vit_tiny": "blocks.1.attn", "crnn": "fc"}


@pytest.mark.parametrize("name", ["unet_gn_deconv", "vit_tiny", "crnn", pytest.param("yolov8n", marks=_SLOW),
                                  pytest.param("unet", marks=_SLOW)])
def test_debug_precision_runs_on_the_int8_model(name, calib_file, capsys):
    from trtbuild.cli import main

    code = main(["debug", "precision", name, "--small", "--precision", "int8", "--calibration",
                 str(calib_file(name)), "--backend", "reference"])
    out = capsys.readouterr().out
    assert code == 0, out
    candidates = out.split("candidates", 1)[1].split("\n", 1)[0]
    assert _CANDIDATE[name] in candidates.split(": ", 1)[1].split(", ")
    assert "passes parity with nothing kept" in out


# --- what calibration records for them ------------------------------------------------------------

def _amax_by_hand(name, modules, calib_file):
    """max |x| per (module, what) over the calibration batches, from PyTorch forward hooks."""
    spec = registry.get(name)
    model = torch_model(name)
    seen = {}
    mods = dict(model.named_modules())

    def hook(module_name, pick):
        def record(mod, args, out):
            for key, t in pick(module_name, args, out):
                seen[key] = max(seen.get(key, 0.0), float(t.abs().max()))
        return record

    handles = [mods[m].register_forward_hook(hook(m, pick)) for m, pick in modules.items()]
    try:
        with torch.no_grad():
            for batch in random_source(spec.input_shape(True)[1:], 2, 4, spec.value_range, seed=0).batches():
                model(batch)
    finally:
        for h in handles:
            h.remove()
    return seen, load_calibration(calib_file(name), spec, small=True, module=model)


def test_calibration_records_attention_operands_and_transposed_conv_inputs(calib_file):
    def qkv(module_name, args, out):  # timm's reshape: (B, N, 3, heads, 64), then q, k, v
        b, n, _ = out.shape
        parts = out.reshape(b, n, 3, -1, 64).permute(2, 0, 3, 1, 4)
        attn = module_name.rpartition(".")[0]
        return [(f"{attn}.sdpa.{w}", parts[i]) for i, w in enumerate(("query", "key", "value"))]

    seen, calib = _amax_by_hand("vit_tiny", {"blocks.0.attn.qkv": qkv, "blocks.1.attn.qkv": qkv}, calib_file)
    assert len(seen) == 6
    for key, amax in seen.items():
        assert calib.activations[key] == pytest.approx(amax, rel=1e-6), key
    seen, calib = _amax_by_hand("unet_gn_deconv", {f"up{k}.up": lambda m, args, out: [(f"{m}.input", args[0])]
                                                   for k in (1, 2, 3)}, calib_file)
    for key, amax in seen.items():
        assert calib.activations[key] == pytest.approx(amax, rel=1e-6), key
    weight = torch_model("unet_gn_deconv").up1.up.weight
    assert calib.weights["up1.up.weight"] == pytest.approx(weight.abs().amax(dim=(1, 2, 3)).tolist())  # file: axis 0


def test_planned_deconv_refuses_a_weight_that_does_not_fit_its_input():
    from helpers.refnet import RefNet

    from trtbuild.layers.common import BuilderError
    from trtbuild.layers.planned import planned_deconv

    refnet = RefNet()
    x = refnet.input("x", (1, 4, 3, 3))
    with pytest.raises(BuilderError) as e:
        planned_deconv(refnet.network, x, torch.ones(8, 2, 2, 2).numpy(), None, "up1.up", stride=2)
    assert str(e.value) == ("layer 'up1.up': a transposed-conv weight of shape (8, 2, 2, 2) ([in, out, *kernel], "
                            "2-D or 3-D) does not fit the input 'x' (1, 4, 3, 3)")

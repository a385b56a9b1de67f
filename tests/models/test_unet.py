"""unet and unet_gn_deconv: the networks against the PyTorch models on the reference (fp32 layerwise,
fp16), the variants the weights select (BatchNorm folded, GroupNorm and transposed convolutions), the
align_corners option, dynamic H and W through an optimization profile (build_plan's profile, the
CLI's --profile) run at several sizes, TensorRT-RTX building them, and the refusals. Tolerances as in
tests/models/test_zoo_parity.py (helpers.model_checks)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as ref_trt
from trtbuild.engine import Engine, build_plan
from trtbuild.engine.build import check_profile, new_network
from trtbuild.engine.quick import build_spec_network, run_spec
from trtbuild.layers.common import BuilderError
from trtbuild.layers.resize import interpolate
from trtbuild.models import registry
from trtbuild.models.pytorch import randomize_bn_, unet
from trtbuild.weights import WeightMap

from helpers.refnet import concrete
from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32

VARIANTS = ["unet", "unet_gn_deconv"]
_MODELS = {}


def _model(name):
    if name not in _MODELS:
        _MODELS[name] = registry.get_torch_model(name, small=True)
    return _MODELS[name]


def _x(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 2 - 1


@pytest.mark.parametrize("name", VARIANTS)
def test_fp32_output_and_every_mapped_tensor_match_torch(name):
    spec, model, x = registry.get(name), _model(name), _x(1, 3, 64, 64)
    modules = dict(model.named_modules())
    assert set(spec.layer_map.values()) <= set(modules)
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: model(x))
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x, "fp32", small=True, extra_outputs=[t for t in spec.layer_map if t != "logits"])
    assert [k for k in wm.unused() if not k.endswith("num_batches_tracked")] == []
    # depth 3: 7 DoubleConvs x (2 convs+BN or norms, the inner ReLU, the last ReLU = the DoubleConv's output)
    # + 3 pools [+ 3 transposed convs] + logits
    assert len(spec.layer_map) == 7 * 4 + 3 + (3 if name == "unet_gn_deconv" else 0) + 1
    for tname, mname in spec.layer_map.items():
        assert len(captured[mname]) == 1, f"module {mname} ran {len(captured[mname])} times"
        check_fp32(out[tname], captured[mname][0], f"{name}: tensor {tname} vs module {mname}")


@pytest.mark.parametrize("name", VARIANTS)
def test_small_model_matches_torch_in_fp16(name):
    model, x = _model(name), _x(1, 3, 64, 64)
    with torch.no_grad():
        ref = model(x)
    check_fp16(run_spec(registry.get(name), WeightMap.from_module(model), x, "fp16", small=True)["logits"], ref,
               f"{name} fp16")


def _layers(name):
    net = new_network(ref_trt)[1]
    build_spec_network(net, registry.get(name), WeightMap.from_module(_model(name)), "fp32", small=True)
    return [concrete(net.get_layer(i)) for i in range(net.num_layers)]


def test_the_weights_choose_the_variant():
    """Counted by hand for depth 3 (7 DoubleConvs of 2 convs, 3 ups): BatchNorm folds into the 14 convs (+ outc);
    GroupNorm keeps 14 normalization layers, and the transposed variant has 3 deconvolutions, no resize."""
    bn, gn = _layers("unet"), _layers("unet_gn_deconv")
    count = lambda layers, cls: sum(isinstance(layer, cls) for layer in layers)
    assert count(bn, ref_trt.IConvolutionLayer) == 15 and count(bn, ref_trt.IResizeLayer) == 3
    assert count(bn, ref_trt.IScaleLayer) == count(bn, ref_trt.INormalizationLayer) == 0
    assert count(bn, ref_trt.IDeconvolutionLayer) == 0
    assert count(gn, ref_trt.INormalizationLayer) == 14 and count(gn, ref_trt.IDeconvolutionLayer) == 3
    assert count(gn, ref_trt.IResizeLayer) == 0 and count(gn, ref_trt.IConvolutionLayer) == 15
    resize = next(layer for layer in bn if isinstance(layer, ref_trt.IResizeLayer))
    assert resize.coordinate_transformation == ref_trt.ResizeCoordinateTransformation.HALF_PIXEL


def test_align_corners_option_matches_a_torch_model_made_with_it():
    model = randomize_bn_(unet(base=8, depth=3, align_corners=True, seed=3), 3).eval()
    x = _x(1, 3, 64, 64)
    with torch.no_grad():
        ref = model(x)
    spec = registry.get("unet").with_options(align_corners="true")
    check_fp32(run_spec(spec, WeightMap.from_module(model), x, "fp32", small=True)["logits"], ref, "align_corners")
    default = run_spec(registry.get("unet"), WeightMap.from_module(model), x, "fp32", small=True)["logits"]
    assert (default - ref).abs().max() > 10 * (1e-5 + 1e-4 * ref.abs().max())  # the option matters


# -- dynamic H and W ---------------------------------------------------------------------------------------------

PROFILE = ((1, 3, 32, 32), (1, 3, 64, 64), (2, 3, 96, 128))


@pytest.mark.parametrize("name", VARIANTS)
def test_one_engine_runs_every_size_in_its_profile(name):
    model = _model(name)
    plan = build_plan(ref_trt, registry.get(name), weights=WeightMap.from_module(model), small=True, progress=False,
                      profile=PROFILE)
    assert plan.info["inputs"] == [{"name": "input", "shape": [-1, 3, -1, -1], "dtype": "FLOAT"}]
    assert plan.info["profile"] == {"input": {"min": [1, 3, 32, 32], "opt": [1, 3, 64, 64], "max": [2, 3, 96, 128]}}
    engine = Engine(plan, ref_trt)
    for i, shape in enumerate([(1, 3, 32, 32), (2, 3, 96, 128), (1, 3, 48, 40)]):
        x = _x(*shape, seed=i)
        with torch.no_grad():
            ref = model(x)
        check_fp32(engine(x)["logits"], ref, f"{name} at {shape}")
    with pytest.raises(Exception, match="profile"):  # outside the profile: refused by name
        engine(_x(1, 3, 128, 128))


@pytest.mark.parametrize("name", VARIANTS)
def test_tensorrt_rtx_builds_the_dynamic_profile(rtx, name):
    plan = build_plan(ref_trt, registry.get(name), weights=WeightMap.from_module(_model(name)), small=True,
                      progress=False, profile=PROFILE, cross_check=True)
    cross = plan.info["cross_check"]  # CrossCheckError otherwise: TensorRT-RTX refused it or disagreed
    assert cross["tensors_compared"] > 30 and cross["rtx_engine_bytes"] > 0
    assert plan.info["outputs"] == [{"name": "logits", "shape": [-1, 2, -1, -1], "dtype": "FLOAT"}]


@pytest.mark.parametrize("profile,batch,match", [
    (((1, 3, 32, 32), (1, 3, 16, 64), (1, 3, 64, 64)), None, r"1 <= min <= opt <= max in every dim"),
    (((1, 3, 32), (1, 3, 32), (1, 3, 32)), None, r"must all have the input's rank 4"),
    ((1, 2, 3), None, r"profile must be \(min, opt, max\) shapes"),
    (PROFILE, (1, 1, 2), r"either batch or profile, not both"),
])
def test_profile_refusals(profile, batch, match):
    with pytest.raises(ValueError, match=match):
        build_plan(ref_trt, registry.get("unet"), weights=WeightMap.from_module(_model("unet")), small=True,
                   progress=False, profile=profile, batch=batch)


def test_check_profile_declares_only_the_dims_that_vary():
    from trtbuild.engine.build import profile_input_shape

    assert profile_input_shape(check_profile(PROFILE)) == (-1, 3, -1, -1)
    assert profile_input_shape(check_profile(((1, 3, 32, 64),) * 3)) == (1, 3, 32, 64)


def test_interpolate_scales_dynamic_spatial_dims_by_whole_factors():
    net = new_network(ref_trt)[1]
    x = net.add_input("x", ref_trt.float32, (1, 2, -1, -1))
    y = interpolate(net, x, "up", scale_factor=2, mode="bilinear", align_corners=False)
    assert tuple(y.shape) == (1, 2, -1, -1)
    for kw, match in ((dict(size=(8, 8)), "must be known at build time, unless every scale_factor is a whole"),
                      (dict(scale_factor=1.5), "must be known at build time"),
                      (dict(scale_factor=0.5), "must be known at build time")):
        with pytest.raises(BuilderError, match=f"layer 'bad': .*{match}"):
            interpolate(net, x, "bad", mode="bilinear", **kw)
    for shape in ((1, 2, 3, 5), (1, 2, 6, 4)):
        v = _x(*shape)

        def define(network):
            t = network.add_input("x", ref_trt.float32, (1, 2, -1, -1))
            return {"y": interpolate(network, t, "up", scale_factor=(2, 3), mode="bilinear")}
        got = _run_dynamic(define, v)
        want = F.interpolate(v, scale_factor=(2, 3), mode="bilinear", align_corners=False)
        assert got.shape == want.shape and torch.allclose(got, want, atol=1e-6), shape


def _run_dynamic(define, v):
    """Build ``define`` with a profile covering ``v`` on the reference and run it."""
    builder, network, logger = new_network(ref_trt)
    outs = define(network)
    for n, t in outs.items():
        t.name = n
        network.mark_output(t)
    from trtbuild.engine.build import serialize_network

    shape = tuple(v.shape)
    plan = serialize_network(ref_trt, builder, network, logger, progress=False,
                             profile_shapes={"x": ((1, 2, 1, 1), shape, (1, 2, 16, 16))})
    return Engine(plan, ref_trt)(v)["y"]


def test_unet_refusals():
    wm = WeightMap.from_module(_model("unet"))
    net = new_network(ref_trt)[1]
    with pytest.raises(BuilderError, match=r"unet: input 'x' \(1, 3, 60, 64\) needs H and W multiples of "
                                           r"2\*\*depth = 8"):
        registry.get("unet").build_network(net, wm, net.add_input("x", ref_trt.float32, (1, 3, 60, 64)))
    with pytest.raises(ValueError, match="UNet: input H and W must be multiples of 2\\*\\*depth = 8"):
        _model("unet")(torch.zeros(1, 3, 60, 64))
    with pytest.raises(ValueError, match="model 'unet': align_corners='yes' is not one of 'false', 'true'"):
        registry.get("unet").with_options(align_corners="yes")


def test_cli_builds_a_dynamic_profile(tmp_path, monkeypatch, capsys):
    from trtbuild.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["build", "unet", "--small", "--backend", "reference", "--no-progress",
                 "--profile", "1x3x32x32,1x3x64x64,1x3x96x96"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "profile input: min [1, 3, 32, 32] opt [1, 3, 64, 64] max [1, 3, 96, 96]" in out
    side = json.load(open("engines/unet-small-fp32.engine.json"))
    assert side["inputs"][0]["shape"] == [1, 3, -1, -1]
    for bad, match in (("1x3x32x32,1x3x64x64", "expected 3 comma-separated shapes"),
                       ("1x3x32x32,1x3xHx64,1x3x64x64", "dims separated by 'x'")):
        assert main(["build", "unet", "--small", "--backend", "reference", "--profile", bad]) != 0
        assert match in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_full_size_matches_torch(name):
    spec, model = registry.get(name), registry.get_torch_model(name)
    x = _x(1, 3, 256, 256)
    with torch.no_grad():
        ref = model(x)
    wm = WeightMap.from_module(model)
    check_fp32(run_spec(spec, wm, x, "fp32")["logits"], ref, f"{name} fp32")
    check_fp16(run_spec(spec, wm, x, "fp16")["logits"], ref, f"{name} fp16")


@pytest.mark.parametrize("name", VARIANTS)
def test_layerwise_parity_with_the_automatic_map(name):
    """Without a layer_map, layerwise parity maps tensors to modules by name (trtbuild.parity.automap);
    only the bilinear upsamplings (F.interpolate, no module) stay unmapped."""
    import dataclasses

    from trtbuild.parity.check import check_model_parity

    spec = dataclasses.replace(registry.get(name), layer_map={})
    report = check_model_parity(spec, ref_trt, small=True, layerwise=True, module=_model(name))
    assert report.passed, report.to_table()
    assert report.meta["unmapped_layers"] == ([] if name == "unet_gn_deconv" else ["up1.up", "up2.up", "up3.up"])
    compared = {row.name for row in report.layers}
    assert set(registry.get(name).layer_map) <= compared  # every tensor the hand-written map compares


@pytest.mark.parametrize("name", VARIANTS)
def test_spec_fields(name):
    spec = registry.get(name)
    assert name in registry.names() and spec.output_names == ["logits"] and spec.value_range == (-1.0, 1.0)
    assert spec.input_shape(True) == (1, 3, 64, 64) and spec.input_shape(False) == (1, 3, 256, 256)
    a, b = registry.get_torch_model(name, seed=0), registry.get_torch_model(name, seed=1)
    assert not a.training and not torch.equal(a.inc.double_conv[0].weight, b.inc.double_conv[0].weight)
    norm = a.inc.double_conv[1]
    if name == "unet":
        assert isinstance(norm, torch.nn.BatchNorm2d) and not torch.all(norm.running_var == 1)
    else:
        assert isinstance(norm, torch.nn.GroupNorm) and norm.num_groups == 8 and hasattr(a.up1, "up")


@pytest.mark.parametrize("name", VARIANTS)
def test_bf16_builds_and_tensorrt_rtx_agrees(rtx, name):
    """bf16 end to end (tests/models/test_bf16.py's tolerance); TensorRT-RTX has no BF16 deconvolution, so the
    transposed convolutions run in FLOAT between casts, and TensorRT-RTX builds the network."""
    spec, model, x = registry.get(name), _model(name), _x(1, 3, 64, 64)
    plan = build_plan(ref_trt, spec, weights=WeightMap.from_module(model), precision="bf16", small=True,
                      progress=False, cross_check=True)
    assert plan.info["cross_check"]["rtx_engine_bytes"] > 0
    y = Engine(plan, ref_trt).run({"input": x})["logits"].float()
    with torch.no_grad():
        ref = model(x)
    rel = float((y - ref).abs().max() / ref.abs().max())
    assert rel < 3e-2 and F.cosine_similarity(y.flatten(), ref.flatten(), dim=0) > 0.999, rel

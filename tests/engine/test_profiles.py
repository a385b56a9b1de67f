"""Several optimization profiles in one engine: built (reference and TensorRT-RTX), recorded in the
sidecar, switched between by Engine.run (or pinned with Engine(profile=k)), each checked for parity.
Expected values come from the PyTorch models; profile rules from TensorRT's documentation (one
profile active per context, the same tensor names in every profile)."""

from __future__ import annotations

import json

import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import (BatchProfile, BuildOptions, Engine, EngineInputError, ShapeProfile, Sidecar,
                             build_plan, load_engine)
from trtbuild.engine.build import build_spec_plan
from trtbuild.engine.records import TensorRecord
from trtbuild.models import registry
from trtbuild.weights import WeightMap

BATCHES = (BatchProfile(1, 2, 4), BatchProfile(8, 8, 16))
HW = (ShapeProfile((1, 3, 32, 32), (1, 3, 32, 32), (2, 3, 64, 64)),
      ShapeProfile((1, 3, 96, 96), (1, 3, 128, 128), (1, 3, 128, 128)))


def _seeded(name):
    module = registry.get_torch_model(name, seed=0, small=True).eval()
    return module, WeightMap.from_module(module)


@pytest.fixture(scope="module")
def resnet():
    module, wm = _seeded("resnet18")
    plan = build_spec_plan(registry.get("resnet18"), wm, trt, BuildOptions(small=True, profiles=BATCHES,
                                                                           progress=False))
    return module, plan


@pytest.fixture(scope="module")
def unet():
    module, wm = _seeded("unet")
    plan = build_spec_plan(registry.get("unet"), wm, trt, BuildOptions(small=True, profiles=HW, progress=False))
    return module, plan


def _logits(module, x):
    with torch.no_grad():
        out = module(x)
    return out if isinstance(out, torch.Tensor) else out["logits"]


# -- options -----------------------------------------------------------------------------------

@pytest.mark.parametrize("profiles, message", [
    ((BatchProfile(1, 2, 4), ShapeProfile((1, 3, 8, 8), (1, 3, 8, 8), (2, 3, 8, 8))),
     r"optimization profiles must all be batch ranges \(BatchProfile, --batch\) or all input shapes "
     r"\(ShapeProfile, --profile\), got BatchProfile, ShapeProfile"),
    ((ShapeProfile((1, 3, 8, 8), (1, 3, 8, 8), (2, 3, 8, 8)), ShapeProfile((1, 8, 8), (1, 8, 8), (2, 8, 8))),
     r"optimization profiles must all have the input's rank, got ranks \[4, 3\]"),
])
def test_profiles_of_one_kind_and_rank(profiles, message):
    with pytest.raises(ValueError, match=message):
        BuildOptions(profiles=profiles)


def test_each_shape_profile_is_checked_against_the_input():
    wrong = ShapeProfile((1, 8, 8), (1, 8, 8), (2, 8, 8))
    with pytest.raises(ValueError, match=r"profile shapes \(1, 8, 8\), \(1, 8, 8\), \(2, 8, 8\) must all have the "
                       r"input's rank 4"):
        BuildOptions(input_shape=(1, 3, 8, 8), profiles=(wrong, wrong))


# -- build and record --------------------------------------------------------------------------

def test_every_profile_is_in_the_engine_and_its_record(resnet):
    _, plan = resnet
    engine = Engine(plan, trt)
    assert engine._engine.num_optimization_profiles == 2
    got = [[tuple(d) for d in engine._engine.get_tensor_profile_shape("input", k)] for k in range(2)]
    assert got == [[(1, 3, 64, 64), (2, 3, 64, 64), (4, 3, 64, 64)], [(8, 3, 64, 64), (8, 3, 64, 64), (16, 3, 64, 64)]]
    assert plan.info["inputs"] == [{"name": "input", "shape": [-1, 3, 64, 64], "dtype": "FLOAT"}]
    assert plan.info.inputs == (TensorRecord("input", (-1, 3, 64, 64), "FLOAT"),)
    assert plan.info.profile == {"input": {"min": [1, 3, 64, 64], "opt": [2, 3, 64, 64], "max": [4, 3, 64, 64]}}
    assert [p["input"]["max"] for p in plan.info.all_profiles] == [[4, 3, 64, 64], [16, 3, 64, 64]]
    assert engine.describe().splitlines()[-2:] == ["profile 0: input 1x3x64x64..4x3x64x64",
                                                   "profile 1: input 8x3x64x64..16x3x64x64"]


def test_sidecar_round_trips_every_profile_and_old_ones_still_read(resnet, tmp_path):
    from trtbuild.engine import make_sidecar, save_engine

    _, plan = resnet
    path = tmp_path / "r.engine"
    save_engine(path, plan, make_sidecar(trt, plan))
    side = json.loads((tmp_path / "r.engine.json").read_text())
    assert [p["input"]["min"][0] for p in side["profiles"]] == [1, 8] and side["profile"]["input"]["max"][0] == 4
    read = Sidecar.from_json((tmp_path / "r.engine.json").read_text())
    assert read.build.all_profiles == side["profiles"] and read.to_dict() == side
    del side["profiles"]  # as a trtbuild from before several profiles wrote it
    old = Sidecar.from_dict(side)
    assert old.build.all_profiles == [side["profile"]] and "profiles" not in old.to_dict()
    assert load_engine(path, trt).profiles[1] == {"input": ((8, 3, 64, 64), (16, 3, 64, 64))}


# -- running: automatic selection and pinning --------------------------------------------------

@pytest.mark.parametrize("batch, profile", [(1, 0), (4, 0), (8, 1), (13, 1)])
def test_batches_from_both_ranges_run_and_match_pytorch(resnet, batch, profile):
    module, plan = resnet
    engine = Engine(plan, trt)
    x = torch.rand(batch, 3, 64, 64) * 2 - 1
    out = engine(x)["logits"]
    assert engine.context.active_optimization_profile == profile
    torch.testing.assert_close(out, _logits(module, x), rtol=1e-4, atol=1e-4)


def test_switching_back_and_forth_keeps_results(resnet):
    module, plan = resnet
    engine = Engine(plan, trt)
    for batch in (16, 2, 9, 1):
        x = torch.rand(batch, 3, 64, 64)
        torch.testing.assert_close(engine(x)["logits"], _logits(module, x), rtol=1e-4, atol=1e-4)


def test_a_batch_between_the_ranges_is_refused_naming_every_profile(resnet):
    engine = Engine(resnet[1], trt, name="r18")
    with pytest.raises(EngineInputError) as e:
        engine(torch.rand(6, 3, 64, 64))
    assert str(e.value) == ("input 'input' has shape (6, 3, 64, 64), which no optimization profile of r18 takes: "
                            "profile 0 1x3x64x64..4x3x64x64; profile 1 8x3x64x64..16x3x64x64")


def test_a_pinned_profile_refuses_the_other_range(resnet):
    module, plan = resnet
    engine = Engine(plan, trt, name="r18", profile=1)
    x = torch.rand(9, 3, 64, 64)
    torch.testing.assert_close(engine(x)["logits"], _logits(module, x), rtol=1e-4, atol=1e-4)
    with pytest.raises(EngineInputError, match=r"^input 'input' has shape \(2, 3, 64, 64\), outside "
                       r"optimization profile 1 8x3x64x64\.\.16x3x64x64 that r18 is pinned to "
                       r"\(Engine\(profile=1\)\)"):
        engine(torch.rand(2, 3, 64, 64))
    with pytest.raises(EngineInputError, match=r"r18 has 2 optimization profile\(s\) \(0 to 1\); "
                       r"Engine\(profile=2\) names none of them"):
        Engine(plan, trt, name="r18", profile=2)


def test_unet_hw_ranges_of_both_profiles_match_pytorch(unet):
    module, plan = unet
    engine = Engine(plan, trt, name="unet")
    assert plan.info.inputs[0]["shape"] == [-1, 3, -1, -1]  # batch and H/W vary across the profiles
    for shape, profile in (((2, 3, 48, 40), 0), ((1, 3, 32, 32), 0), ((1, 3, 112, 128), 1)):
        x = torch.rand(*shape)
        out = engine(x)
        assert engine.context.active_optimization_profile == profile
        with torch.no_grad():
            want = module(x)
        got = next(iter(out.values()))
        want = want if isinstance(want, torch.Tensor) else next(iter(want.values()))
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(EngineInputError, match=r"input 'input' has shape \(1, 3, 80, 80\), which no optimization "
                       r"profile of unet takes: profile 0 1x3x32x32\.\.2x3x64x64; profile 1 "
                       r"1x3x96x96\.\.1x3x128x128"):
        engine(torch.rand(1, 3, 80, 80))


# -- the reference context follows TensorRT's rules --------------------------------------------

def test_reference_context_checks_shapes_against_the_active_profile(resnet):
    engine = trt.Runtime(trt.Logger()).deserialize_cuda_engine(bytes(resnet[1]))
    ctx = engine.create_execution_context()
    assert ctx.active_optimization_profile == 0
    assert ctx.set_input_shape("input", (4, 3, 64, 64)) and not ctx.set_input_shape("input", (8, 3, 64, 64))
    assert ctx.set_optimization_profile_async(1, 0) and ctx.active_optimization_profile == 1
    assert not ctx.all_binding_shapes_specified  # shapes are set again after a switch
    assert ctx.set_input_shape("input", (8, 3, 64, 64)) and not ctx.set_input_shape("input", (4, 3, 64, 64))
    assert not ctx.set_optimization_profile_async(2, 0) and ctx.active_optimization_profile == 1


def test_network_function_with_several_batch_profiles():
    def define(network, x):
        return {"y": network.add_activation(x, trt.ActivationType.RELU).get_output(0)}

    plan = build_plan(trt, define, input_shape=(1, 4), progress=False,
                      profiles=(BatchProfile(1, 1, 2), BatchProfile(3, 3, 5)))
    engine = Engine(plan, trt)
    for n in (2, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(engine(x)["y"], torch.relu(x))


# -- parity per profile ------------------------------------------------------------------------

def test_parity_reports_each_profile_at_its_opt_shape(unet):
    from trtbuild.parity import check_model_parity_profiles

    module, plan = unet
    engine = Engine(plan, trt, sidecar=plan.info, name="unet two-profile")
    reports = check_model_parity_profiles("unet", trt, engine=engine, small=True, module=module)
    assert [r.meta["profile"] for r in reports] == [0, 1] and all(r.passed for r in reports)
    # each at its profile's opt shape: 1x3x32x32 and 1x3x128x128, so unet's output has those H and W
    assert [tuple(r.outputs[0].shape)[-2:] for r in reports] == [(32, 32), (128, 128)]
    assert [r.meta["batch"] for r in reports] == [1, 1]
    assert engine.profile is None  # the pin is undone after each report


# -- TensorRT-RTX builds the two-profile network (its builder needs no GPU) ---------------------

def test_tensorrt_rtx_builds_every_profile(monkeypatch):
    pytest.importorskip("tensorrt_rtx")
    from trtbuild.engine import network

    configs = []
    real = network._add_profile
    monkeypatch.setattr(network, "_add_profile", lambda b, config, s: configs.append(config) or real(b, config, s))
    _, wm = _seeded("resnet18")
    plan = build_spec_plan(registry.get("resnet18"), wm, trt,
                           BuildOptions(small=True, profiles=BATCHES, progress=False, cross_check=True))
    rtx = [c for c in configs if "tensorrt_rtx" in type(c).__module__]
    assert rtx and all(c.num_optimization_profiles == 2 for c in rtx)  # every profile added on TensorRT-RTX too
    assert plan.info.cross_check["notes"] == [] and len(bytes(plan.rtx_plan)) > 0
    assert plan.rtx_plan.info.all_profiles == plan.info.all_profiles


def test_inspect_from_the_sidecar_lists_every_profile(resnet):
    from trtbuild.engine.inspect import _sidecar_io

    _, plan = resnet
    (tensor, _) = _sidecar_io(plan.info.to_dict())  # as for a TensorRT-RTX engine that cannot be opened here
    assert [(r.min[0], r.opt[0], r.max[0]) for r in tensor.profiles] == [(1, 2, 4), (8, 8, 16)]
    old = {k: v for k, v in plan.info.to_dict().items() if k != "profiles"}  # a one-profile sidecar
    assert [(r.min[0], r.max[0]) for r in _sidecar_io(old)[0].profiles] == [(1, 4)]


def test_a_sidecar_whose_profiles_are_not_the_engines_is_refused(resnet, tmp_path):
    from trtbuild.engine import EngineFileError, make_sidecar, save_engine

    _, plan = resnet
    path = tmp_path / "r.engine"
    save_engine(path, plan, make_sidecar(trt, plan))
    side = json.loads((tmp_path / "r.engine.json").read_text())
    side["profiles"] = side["profiles"][:1]  # edited by hand: one profile of two
    (tmp_path / "r.engine.json").write_text(json.dumps(side))
    with pytest.raises(EngineFileError, match=r"the sidecar of .*r\.engine records 1 optimization profile\(s\) "
                       r"\(input 1x3x64x64\.\.4x3x64x64\) but the engine has 2 \(.*\), so the sidecar "
                       r"belongs to another engine; rebuild it"):
        load_engine(path, trt)

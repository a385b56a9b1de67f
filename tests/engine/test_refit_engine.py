"""Refittable and weight-stripped engines: BuildOptions.refit / strip_weights, the RefitRecord in plan.info and
the sidecar, Engine.refit from a state_dict (folds and RepVGG fusions recomputed) and its one-sentence refusals.
Expected outputs come from an engine built from the new weights and from PyTorch."""

from __future__ import annotations

import hashlib

import pytest
import torch

from trtbuild.backend import load_trt
from trtbuild.engine import load_engine
from trtbuild.engine.errors import BuildError, EngineError
from trtbuild.engine.model import build_model
from trtbuild.engine.options import BuildOptions
from trtbuild.engine.refit import RefitError, save_refit_engine
from trtbuild.engine.refit_record import RefitRecord
from trtbuild.engine.runner import Engine
from trtbuild.engine.serialize import make_sidecar, save_engine
from trtbuild.models import registry
from trtbuild.weights import WeightMap

trt = load_trt("reference")


def _torch(model: str, seed: int):
    return registry.get_torch_model(model, seed=seed, small=True).eval()


def _engine(model: str, module, **options) -> Engine:
    return Engine(build_model(model, WeightMap.from_module(module), trt, small=True, progress=False, **options))


def _x(model: str) -> torch.Tensor:
    return torch.rand(registry.get(model).input_shape(True), generator=torch.Generator().manual_seed(3))


def _out(engine: Engine, x) -> torch.Tensor:
    return next(iter(engine(x).values()))


def test_refit_options_map_to_modes():
    assert BuildOptions(refit=True).refit == "identical"
    assert BuildOptions(refit=False).refit == "off"
    assert BuildOptions(refit="any").refit == "any"
    assert BuildOptions(strip_weights=True).refit == "identical"  # a stripped plan must be refit to run
    assert BuildOptions(strip_weights=True, refit="any").refit == "any"


@pytest.mark.parametrize("model", ["resnet18", "repvgg_a0"])
def test_refit_with_new_weights_equals_an_engine_built_from_them(model):
    old, new = _torch(model, 0), _torch(model, 1)
    engine = _engine(model, old, refit="any")
    rebuilt = _engine(model, new)
    x = _x(model)
    before = _out(engine, x)
    assert not torch.equal(before, _out(rebuilt, x))  # the two seeds give different outputs
    assert engine.refit(new.state_dict()) is engine
    after = _out(engine, x)
    assert torch.equal(after, _out(rebuilt, x))
    with torch.no_grad():
        torch.testing.assert_close(after, new(x), rtol=1e-4, atol=1e-4)


def test_every_weight_of_resnet_and_repvgg_is_named_after_its_keys():
    for model in ("resnet18", "repvgg_a0"):
        module = _torch(model, 0)
        info = build_model(model, WeightMap.from_module(module), trt, small=True, progress=False, refit=True).info
        record = RefitRecord.from_dict(info.refit)
        assert record.mode == "identical" and not record.stripped and record.baked == {}
        keys = {k for s in record.weights for k in s.keys}
        wanted = {k for k in module.state_dict() if not k.endswith("num_batches_tracked")}
        assert keys == wanted, (model, wanted - keys)
    fused = next(s for s in record.weights if s.name == "stage1.0.rbr_dense.conv.weight")
    assert fused.fold == "repvgg_weight" and "stage1.0.rbr_1x1.conv.weight" in fused.keys


def test_a_stripped_engine_refuses_to_run_until_refit():
    module = _torch("resnet18", 0)
    full_plan = build_model("resnet18", WeightMap.from_module(module), trt, small=True, progress=False)
    stripped_plan = build_model("resnet18", WeightMap.from_module(module), trt, small=True, progress=False,
                                strip_weights=True)
    assert len(stripped_plan) < len(full_plan) / 10  # the weights are not in it
    full = Engine(full_plan)
    engine = Engine(stripped_plan)
    x = _x("resnet18")
    with pytest.raises(EngineError, match="weight-stripped"):
        engine(x)
    engine.refit(module.state_dict())
    assert torch.equal(_out(engine, x), _out(full, x))
    assert engine.sidecar.refit["stripped"] is False


def test_refusals_name_the_key_and_leave_the_engine_as_it_was():
    old, new = _torch("resnet18", 0), _torch("resnet18", 1)
    engine = _engine("resnet18", old, refit="any")
    x = _x("resnet18")
    before = _out(engine, x)
    state = dict(new.state_dict())
    wrong = {**state, "layer1.0.conv1.weight": torch.zeros(8, 8, 5, 5)}
    with pytest.raises(RefitError, match=r"^state_dict key 'layer1.0.conv1.weight' has shape \(8, 8, 5, 5\), but "
                                         r"engine weights 'layer1.0.conv1.weight' were built from it with shape "
                                         r"\(8, 8, 3, 3\) \(the state_dict\)$"):
        engine.refit(wrong)
    missing = {k: v for k, v in state.items() if k != "layer2.0.bn1.running_var"}
    with pytest.raises(RefitError, match=r"^'layer2.0.bn1.running_var' is missing from the state_dict, and engine "
                                         r"weights 'layer2.0.conv1.weight' are computed from it$"):
        engine.refit(missing)
    assert torch.equal(_out(engine, x), before)


def _doubled_spec():
    """A model whose first conv kernel is computed from its key (baked) and whose second is the key's values."""
    from trtbuild.layers.basic import conv
    from trtbuild.models.registry import ModelSpec

    def build(network, wm, x):
        y = conv(network, x, wm.get("a.weight") * 2, None, "a")
        return {"y": conv(network, y, wm.get("b.weight"), wm.get("b.bias"), "b")}

    return ModelSpec("doubled", "a computed kernel", None, build, lambda small: (1, 2, 5, 5), ["y"])


def _doubled_state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"a.weight": torch.randn(3, 2, 3, 3, generator=g), "b.weight": torch.randn(4, 3, 1, 1, generator=g),
            "b.bias": torch.randn(4, generator=g)}


def test_a_changed_baked_in_weight_is_refused_and_the_same_one_accepted():
    spec, old, new = _doubled_spec(), _doubled_state(0), _doubled_state(1)
    plan = build_model(spec, WeightMap.from_state_dict(old), trt, progress=False, refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert set(record.baked) == {"a.weight"} and {s.name for s in record.weights} == {"b.weight", "b.bias"}
    engine = Engine(plan)
    with pytest.raises(RefitError, match=r"^'a.weight' in the state_dict differs from the build's, but the "
                                         r"build baked it into the engine \(its values went into weights no name "
                                         r"covers\), so a "
                                         r"refit cannot change it: rebuild the engine$"):
        engine.refit(new)
    x = torch.rand(1, 2, 5, 5, generator=torch.Generator().manual_seed(3))
    engine.refit({**new, "a.weight": old["a.weight"]})  # the build's own values of the baked key: accepted
    direct = Engine(build_model(spec, WeightMap.from_state_dict({**new, "a.weight": old["a.weight"]}), trt,
                                progress=False))
    assert torch.equal(_out(engine, x), _out(direct, x))


def test_an_engine_built_without_refit_is_refused():
    engine = _engine("resnet18", _torch("resnet18", 0))
    with pytest.raises(RefitError, match=r"^the engine was not built refittable \(its sidecar has no refit "
                                         r"record\): rebuild it with --refit"):
        engine.refit(_torch("resnet18", 1).state_dict())


def test_a_refit_engine_file_loads_with_the_new_weights_recorded(tmp_path):
    old, new = _torch("repvgg_a0", 0), _torch("repvgg_a0", 1)
    weights0, weights1 = tmp_path / "w0.safetensors", tmp_path / "w1.pt"
    WeightMap.from_module(old).save(weights0)
    torch.save(new.state_dict(), weights1)
    plan = build_model("repvgg_a0", weights0, trt, small=True, progress=False, refit="any", strip_weights=True)
    path = save_engine(tmp_path / "s.engine", plan, make_sidecar(trt, plan, weights_path=weights0))
    engine = load_engine(path)
    assert engine.sidecar.build.refit["stripped"] is True
    engine.refit(weights1)
    out = save_refit_engine(engine, tmp_path / "r.engine", weights_path=weights1)
    again = load_engine(out)
    x = _x("repvgg_a0")
    assert torch.equal(_out(again, x), _out(_engine("repvgg_a0", new), x))
    assert again.sidecar.weights == {"path": str(weights1),
                                     "sha256": hashlib.sha256(weights1.read_bytes()).hexdigest()}
    assert again.sidecar.build.refit["stripped"] is False and again.sidecar.build.refit["mode"] == "any"
    assert load_engine(path).sidecar.build.refit["stripped"] is True  # the input engine is untouched


@pytest.mark.parametrize("strip", [False, True])
def test_tensorrt_rtx_names_the_weights_and_builds_refittable_plans_where_it_can(strip):
    """TensorRT-RTX accepts every set_weights_name call of the builders (a name is recorded only when
    set_weights_name returned True). Its refittable and stripped builds need the CUDA driver even ahead of time:
    without a GPU the builder fails with a CUDA error, and the test says so."""
    rtx = pytest.importorskip("tensorrt_rtx")
    from trtbuild.engine.build import define_spec
    from trtbuild.layers.weight_names import weight_sources

    module = _torch("resnet18", 0)
    options = BuildOptions(small=True, refit="any", strip_weights=strip, progress=False, targets=("8.6",))
    ref_names = set(weight_sources(define_spec(registry.get("resnet18"), WeightMap.from_module(module),
                                               options)(trt).network))
    defined = define_spec(registry.get("resnet18"), WeightMap.from_module(module), options)(load_trt("tensorrt-rtx"))
    assert set(weight_sources(defined.network)) == ref_names and len(ref_names) == 42
    try:
        plan = build_model("resnet18", WeightMap.from_module(module), load_trt("tensorrt-rtx"), options=options)
    except BuildError as e:
        if "CUDA_SUCCESS" in str(e):
            pytest.skip(f"TensorRT-RTX {rtx.__version__} needs the CUDA driver for a refittable build: {e}")
        raise
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.mode == "any" and record.stripped is strip and {s.name for s in record.weights} == ref_names


def test_refit_identical_takes_the_build_weights_only():
    """TensorRT: REFIT_IDENTICAL "different weights during refits yield unpredictable behavior"."""
    old, new = _torch("repvgg_a0", 0), _torch("repvgg_a0", 1)
    engine = _engine("repvgg_a0", old, refit=True)
    x = _x("repvgg_a0")
    before = _out(engine, x)
    with pytest.raises(RefitError, match=r"^engine weights 'stage0.rbr_dense.conv.weight' from the state_dict differ "
                                         r"from the build's, but the engine was built with --refit identical "
                                         r"\(BuilderFlag.REFIT_IDENTICAL\), where TensorRT's results with other "
                                         r"weights are unpredictable: rebuild it with --refit any$"):
        engine.refit(new.state_dict())
    engine.refit(old.state_dict())
    assert torch.equal(_out(engine, x), before)


def test_a_refit_record_that_is_not_one_is_refused_naming_the_sidecar():
    with pytest.raises(ValueError, match=r"^x.json names an unknown refit mode 'sometimes'$"):
        RefitRecord.from_dict({"mode": "sometimes", "weights": []}, "x.json")
    with pytest.raises(ValueError, match=r"^x.json has a 'refit' record that trtbuild cannot read \(.*fold"):
        RefitRecord.from_dict({"mode": "any", "weights": [{"name": "w", "keys": ["w"], "fold": "magic"}]}, "x.json")

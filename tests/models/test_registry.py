"""trtbuild.models.registry: names, ModelSpec contract, torch factories, lazy loading."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from trtbuild.models import registry
from trtbuild.models.registry import ModelSpec, UnknownModelError

ZOO = ["alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0"]


def test_zoo_names_are_registered():
    names = registry.names()
    assert set(ZOO) <= set(names)
    assert set(ZOO) <= set(registry.MODELS)
    assert all(isinstance(registry.MODELS[n], ModelSpec) for n in names)


def test_unknown_model_lists_known_names():
    with pytest.raises(UnknownModelError, match=r"unknown model 'resnet51'.*resnet50"):
        registry.get("resnet51")


def test_register_rejects_duplicates_and_non_specs():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("resnet18"))
    with pytest.raises(TypeError, match="ModelSpec"):
        registry.register({"name": "x"})


@pytest.mark.parametrize("name", ZOO)
def test_spec_fields(name):
    spec = registry.get(name)
    assert spec.name == name and spec.description
    for small in (True, False):
        shape = spec.input_shape(small)
        assert len(shape) == 4 and shape[0] == 1 and shape[1] == 3
    assert spec.input_shape(True)[2] < spec.input_shape(False)[2]
    assert spec.output_names and len(set(spec.output_names)) == len(spec.output_names)
    assert spec.input_name == "input" and spec.value_range == (-1.0, 1.0) and spec.uses_plugins is False
    # every output is in the layer map, pointing at the module that produces it
    assert set(spec.output_names) <= set(spec.layer_map)


@pytest.mark.parametrize("name", ZOO)
def test_torch_model_is_eval_seeded_and_bn_randomized(name):
    a = registry.get_torch_model(name, seed=0, small=True)
    b = registry.get_torch_model(name, seed=0, small=True)
    c = registry.get_torch_model(name, seed=1, small=True)
    assert not a.training and all(not m.training for m in a.modules())
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if sa[k].is_floating_point())
    bns = [m for m in a.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for bn in bns:  # randomize_bn_ moved the statistics away from the (0, 1) defaults
        assert not torch.all(bn.running_var == 1) and not torch.all(bn.running_mean == 0)
    assert bool(bns) == (name in ("resnet18", "resnet50", "repvgg_a0"))


def test_small_models_run_at_their_input_shape():
    for name in ZOO:
        spec = registry.get(name)
        model = registry.get_torch_model(name, small=True)
        with torch.no_grad():
            out = model(torch.zeros(spec.input_shape(True)))
        outs = out if isinstance(out, tuple) else (out,)
        assert len(outs) == len(spec.output_names)


def test_model_modules_are_imported_lazily():
    code = ("import sys, trtbuild.models.registry as r\n"
            "assert 'trtbuild.models.resnet' not in sys.modules, 'imported eagerly'\n"
            "assert 'resnet50' in r.MODELS\n"
            "assert 'trtbuild.models.resnet' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)

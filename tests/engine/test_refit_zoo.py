"""Every zoo model refits from a state_dict: each weight is named after the state_dict key(s) it comes from, nothing
is baked, and an engine built from one model's weights (seed 0) and refit with another's (seed 1) computes exactly
what an engine built from the other's computes (torch.equal: the reference backend builds and runs
deterministically, and the refit hands it the values a build would compute from the same keys).

Also: a .wts-built engine refit from a .pt state_dict and the reverse (flat rows against N-D tensors), fp16 and
bf16 builds, and TensorRT-RTX accepting every name.
"""

from __future__ import annotations

import pytest
import torch

from trtbuild.backend import load_trt
from trtbuild.engine.model import build_model
from trtbuild.engine.refit_record import RefitRecord
from trtbuild.engine.runner import Engine
from trtbuild.models import registry
from trtbuild.weights import WeightMap

trt = load_trt("reference")


def _torch(model: str, seed: int):
    return registry.get_torch_model(model, seed=seed, small=True).eval()


def _x(model: str) -> torch.Tensor:
    spec = registry.get(model)
    lo, hi = spec.value_range
    return lo + (hi - lo) * torch.rand(spec.input_shape(True), generator=torch.Generator().manual_seed(3))


def _build(model: str, weights, **options):
    return build_model(model, weights, trt, small=True, progress=False, **options)


def _check_refit(model: str, old_weights, new_weights, new_state, **options) -> RefitRecord:
    """Build refittable from `old_weights`, refit with `new_state`, compare with a build from `new_weights`."""
    plan = _build(model, old_weights, refit="any", **options)
    engine, direct = Engine(plan), Engine(_build(model, new_weights, **options))
    x = _x(model)
    before, want = engine(x), direct(x)
    assert any(not torch.equal(before[k], want[k]) for k in want)  # the two weight sets differ in their outputs
    engine.refit(new_state)
    after = engine(x)
    for k in want:
        assert torch.equal(after[k], want[k]), (model, k, float((after[k].float() - want[k].float()).abs().max()))
    return RefitRecord.from_dict(plan.info.refit)


@pytest.mark.parametrize("model", registry.names())
def test_every_zoo_model_refits_to_exactly_a_build_from_the_new_weights(model):
    old, new = _torch(model, 0), _torch(model, 1)
    wm = WeightMap.from_module(old)
    record = _check_refit(model, wm, WeightMap.from_module(new), new.state_dict())
    assert record.baked == {}
    named_keys = {k for s in record.weights for k in s.keys}
    assert named_keys == set(wm.used())  # every key the build read is in a named weight
    assert len({s.name for s in record.weights}) == len(record.weights)


def test_a_wts_built_engine_refits_from_a_pt_state_dict_and_the_reverse(tmp_path):
    """.wts files store every tensor flat: the record keeps the shape the builder read each key with, so a
    PyTorch state_dict's N-D tensors fit an engine built from .wts rows, and .wts rows fit one built from .pt."""
    model = "vit_tiny"  # linears read with (out, -1), cls_token with (1, 1, D), pos_embed reshaped by the builder
    old, new = _torch(model, 0), _torch(model, 1)
    paths = {}
    for seed, module in ((0, old), (1, new)):
        for ext in ("wts", "pt"):
            paths[seed, ext] = tmp_path / f"w{seed}.{ext}"
            WeightMap.from_module(module).save(paths[seed, ext])
    record = _check_refit(model, paths[0, "wts"], paths[1, "wts"], paths[1, "pt"])
    shapes = {s.name: s.shapes[0] for s in record.weights}
    assert shapes["cls_token"] == tuple(old.cls_token.shape)
    assert shapes["blocks.0.attn.qkv.weight"] == tuple(old.blocks[0].attn.qkv.weight.shape)
    assert shapes["pos_embed"] == tuple(old.pos_embed.shape)
    _check_refit(model, paths[0, "pt"], paths[1, "pt"], paths[1, "wts"])


@pytest.mark.parametrize("model, precision", [("yolov8n", "fp16"), ("crnn", "fp16"), ("vit_tiny", "bf16")])
def test_fp16_and_bf16_engines_refit_to_exactly_a_build_from_the_new_weights(model, precision):
    """The refit casts the values as the build did (BF16: the bit patterns rounded to nearest even)."""
    old, new = _torch(model, 0), _torch(model, 1)
    record = _check_refit(model, WeightMap.from_module(old), WeightMap.from_module(new), new.state_dict(),
                          precision=precision)
    assert record.baked == {}


@pytest.mark.parametrize("model", ["crnn", "unet_gn_deconv"])
def test_tensorrt_rtx_accepts_every_name_of_the_zoo_builders(model):
    """TensorRT-RTX's network takes every set_weights_name call (a False return would log an error, and the
    definition would fail); its names and sources are the reference's. Its refittable build itself needs the
    CUDA driver (tests/engine/test_refit_engine.py)."""
    pytest.importorskip("tensorrt_rtx")
    from trtbuild.engine.build import define_spec
    from trtbuild.engine.options import BuildOptions
    from trtbuild.layers.weight_names import weight_sources

    wm = WeightMap.from_module(_torch(model, 0))
    options = BuildOptions(small=True, refit="any", progress=False)
    ours = weight_sources(define_spec(registry.get(model), wm, options)(trt).network)
    defined = define_spec(registry.get(model), wm, options)(load_trt("tensorrt-rtx"))
    theirs = weight_sources(defined.network)
    assert theirs == ours and {k for s in theirs.values() for k in s.keys} == set(wm.used())
    assert defined.network.mark_weights_refittable(next(iter(theirs)))  # a name TensorRT-RTX knows


@pytest.mark.slow
@pytest.mark.parametrize("model", registry.names())
def test_every_full_size_zoo_model_names_every_key_it_reads(model):
    """The full-size networks (defined, not built: their weights are what matters) name every key they read."""
    from trtbuild.engine.build import define_spec
    from trtbuild.engine.options import BuildOptions
    from trtbuild.layers.weight_names import baked_keys, weight_sources

    wm = WeightMap.from_module(registry.get_torch_model(model, seed=0, small=False))
    network = define_spec(registry.get(model), wm, BuildOptions(small=False, refit="any", progress=False))(trt).network
    keys = {k for s in weight_sources(network).values() for k in s.keys}
    assert keys == set(wm.used()) and baked_keys(network) == {}

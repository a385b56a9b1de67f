"""nn.MultiheadAttention's weights are named after their state_dict keys (the query, key and value rows of
``in_proj_weight`` / ``in_proj_bias`` as slices, ``q/k/v_proj_weight`` and ``out_proj`` as copies), so that an
engine built with trtbuild.layers.attention.multi_head_attention refits from another state_dict.

Expected outputs come from an engine built directly from the new weights (torch.equal on the reference backend)
and from PyTorch's modules; TensorRT-RTX's network says whether NVIDIA accepts the names.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from helpers.tiny_vit import BATCH, IMG, TinyViT, vit_network
from trtbuild.backend import load_trt
from trtbuild.engine.build import build_plan, definition_step
from trtbuild.engine.refit import RefitError
from trtbuild.engine.refit_record import RefitRecord
from trtbuild.engine.runner import Engine
from trtbuild.layers.attention import AttentionWeights, multi_head_attention
from trtbuild.layers.weight_names import SLICE, WeightSource, slice_source, source_values, weight_sources
from trtbuild.weights import WeightMap

trt = load_trt("reference")
VIT_SHAPE = (BATCH, 3, IMG, IMG)
SLICES = {f"attn.in_proj_{p}[{a}:{b}]" for p in ("weight", "bias") for a, b in ((0, 32), (32, 64), (64, 96))}


def _vit(seed: int) -> TinyViT:
    torch.manual_seed(seed)
    return TinyViT().eval()


def _vit_plan(state, **options):
    wm = WeightMap.from_state_dict(state)
    return build_plan(trt, lambda n, x: vit_network(n, x, wm), input_shape=VIT_SHAPE, progress=False, **options)


def _image() -> torch.Tensor:
    return torch.rand(VIT_SHAPE, generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_vit_with_multihead_attention_refits_exactly(precision):
    old, new = _vit(0), _vit(1)
    plan = _vit_plan(old.state_dict(), refit="any", precision=precision)
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.baked == {}
    names = {s.name: s for s in record.weights}
    assert SLICES | {"attn.out_proj.weight", "attn.out_proj.bias"} <= set(names)
    assert names["attn.in_proj_weight[32:64]"] == WeightSource("attn.in_proj_weight[32:64]", ("attn.in_proj_weight",),
                                                               SLICE, shapes=((96, 32),), start=32, stop=64)
    assert {k for s in record.weights for k in s.keys} == set(old.state_dict())
    engine = Engine(plan)
    engine.refit(new.state_dict())
    x = _image()
    direct = Engine(_vit_plan(new.state_dict(), precision=precision))
    assert torch.equal(engine(x)["output"], direct(x)["output"])
    with torch.no_grad():
        want = new(x)
    tol = 1e-4 if precision == "fp32" else 3e-2
    torch.testing.assert_close(engine(x)["output"], want, rtol=tol, atol=tol)


def test_a_state_dict_of_another_attention_shape_is_refused_naming_the_key():
    engine = Engine(_vit_plan(_vit(0).state_dict(), refit="any"))
    state = dict(_vit(1).state_dict())
    state["attn.in_proj_weight"] = state["attn.in_proj_weight"][:64]
    with pytest.raises(RefitError, match=r"^state_dict key 'attn.in_proj_weight' has shape \(64, 32\), but engine "
                                         r"weights 'attn.in_proj_weight\[0:32\]' were built from it with shape "
                                         r"\(96, 32\) \(the state_dict\)$"):
        engine.refit(state)


E, KDIM, VDIM, L, S, N = 8, 6, 5, 3, 4, 2


def _kv_module(seed: int) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    return nn.MultiheadAttention(E, 2, kdim=KDIM, vdim=VDIM, batch_first=True).eval()


def _kv_plan(state, **options):
    """A network function with its own inputs, reading the weights under a WeightMap prefix view."""
    wm = WeightMap.from_state_dict({f"enc.attn.{k}": v for k, v in state.items()})

    def define(network):
        q, k, v = (network.add_input(n, trt.DataType.FLOAT, s)
                   for n, s in (("q", (N, L, E)), ("k", (N, S, KDIM)), ("v", (N, S, VDIM))))
        w = AttentionWeights.from_state_dict(wm.prefix("enc"), "attn.")
        return {"y": multi_head_attention(network, q, k, v, w, 2, "mha", batch_first=True)}

    return build_plan(trt, define, progress=False, **options)


def test_separate_query_key_value_projections_are_named_as_copies_and_refit():
    old, new = _kv_module(0), _kv_module(1)
    plan = _kv_plan(old.state_dict(), refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    names = {s.name: (s.fold, s.keys, s.shapes) for s in record.weights}
    assert names["enc.attn.k_proj_weight"] == ("copy", ("enc.attn.k_proj_weight",), ((E, KDIM),))
    assert {"enc.attn.q_proj_weight", "enc.attn.v_proj_weight", "enc.attn.in_proj_bias[8:16]"} <= set(names)
    assert record.baked == {}
    engine = Engine(plan)
    engine.refit({f"enc.attn.{k}": v for k, v in new.state_dict().items()})
    g = torch.Generator().manual_seed(2)
    feeds = {"q": torch.randn(N, L, E, generator=g), "k": torch.randn(N, S, KDIM, generator=g),
             "v": torch.randn(N, S, VDIM, generator=g)}
    direct = Engine(_kv_plan(new.state_dict()))
    got = engine(**feeds)["y"]
    assert torch.equal(got, direct(**feeds)["y"])
    with torch.no_grad():
        want = new(feeds["q"], feeds["k"], feeds["v"], need_weights=False)[0]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_one_attention_applied_twice_builds_and_bakes_its_keys():
    """Its weights (float64 arrays converted for each use) are new memory at every use, and TensorRT takes one name
    for one set of weights: the first use is named, the keys are baked, and a refit changing them is refused."""
    module = nn.MultiheadAttention(E, 2, batch_first=True)
    wm = WeightMap.from_module(module)

    def define(network, x):
        w = AttentionWeights.from_state_dict(wm)
        y = multi_head_attention(network, x, x, x, w, 2, "first", batch_first=True)
        return multi_head_attention(network, y, y, y, w, 2, "second", batch_first=True)

    plan = build_plan(trt, define, input_shape=(N, L, E), progress=False, refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert set(record.baked) == set(module.state_dict())
    with pytest.raises(RefitError, match=r"^'out_proj.weight' in the state_dict differs from the build's"):
        Engine(plan).refit({**module.state_dict(), "out_proj.weight": torch.zeros(E, E)})
    Engine(plan).refit(module.state_dict())  # the build's values: accepted


def test_tensorrt_rtx_takes_the_slice_names():
    """TensorRT-RTX's network accepts ``key[start:stop]`` as a weights name (a refused name logs an error, and the
    definition fails) and knows it afterwards; its names and sources are the reference's."""
    pytest.importorskip("tensorrt_rtx")
    state = _vit(0).state_dict()

    def define(backend):
        wm = WeightMap.from_state_dict(state)
        return definition_step(lambda n, x: vit_network(n, x, wm), input_shape=VIT_SHAPE, refit="any",
                               progress=False)(load_trt(backend)).network

    network = define("tensorrt-rtx")
    theirs = weight_sources(network)
    assert theirs == weight_sources(define("reference")) and SLICES <= set(theirs)
    assert network.mark_weights_refittable("attn.in_proj_weight[64:96]")


def test_a_slice_source_round_trips_and_computes_its_rows():
    source = slice_source("attn.in_proj_bias", 4, 8, (12,))
    assert source.name == "attn.in_proj_bias[4:8]"
    assert WeightSource.from_dict(source.to_dict()) == source
    values = np.arange(12, dtype=np.float64) / 3
    np.testing.assert_array_equal(source_values(source, {"attn.in_proj_bias": values}),
                                  (np.arange(4, 8) / 3).astype(np.float32))
    with pytest.raises(ValueError, match=r"^named weight 'x\[4:2\]' is a slice but does not give one key and rows "
                                         r"start < stop$"):
        WeightSource.from_dict({**source.to_dict(), "name": "x[4:2]", "start": 4, "stop": 2})
    with pytest.raises(ValueError, match=r"^named weight 'x' is a slice but does not give one key"):
        WeightSource.from_dict({"name": "x", "keys": ["attn.in_proj_bias"], "fold": "slice"})
    flat_short = slice_source("attn.in_proj_bias", 4, 8, (6,))
    with pytest.raises(ValueError, match=r"^state_dict key 'attn.in_proj_bias' has 6 rows, but engine weights "
                                         r"'attn.in_proj_bias\[4:8\]' were built from its rows 4:8$"):
        source_values(flat_short, {"attn.in_proj_bias": np.zeros(6)})

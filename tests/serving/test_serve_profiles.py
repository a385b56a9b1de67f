"""`trtbuild serve` with an engine of several optimization profiles, without starting Triton: the
layout (max_batch_size and the batch range come from every profile) and the inference function
PyTriton calls (a batch no profile takes is zero-padded to one that a profile takes, or refused with
Engine.run's sentence listing every profile). The engine: resnet18 --small with profile 0 at 32x32,
batch 1..4, and profile 1 at 64x64, batch 8..16. Expected outputs come from the PyTorch model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import BuildOptions, Engine, EngineInputError, ShapeProfile
from trtbuild.engine.build import build_spec_plan
from trtbuild.models import registry
from trtbuild.serving.pyt_serve import padded_batch, triton_layout
from trtbuild.weights import WeightMap

PROFILES = (ShapeProfile((1, 3, 32, 32), (2, 3, 32, 32), (4, 3, 32, 32)),
            ShapeProfile((8, 3, 64, 64), (8, 3, 64, 64), (16, 3, 64, 64)))
EVERY_PROFILE = "profile 0 1x3x32x32..4x3x32x32; profile 1 8x3x64x64..16x3x64x64"


@pytest.fixture(scope="module")
def served():
    module = registry.get_torch_model("resnet18", seed=0, small=True).eval()
    plan = build_spec_plan(registry.get("resnet18"), WeightMap.from_module(module), trt,
                           BuildOptions(small=True, profiles=PROFILES, progress=False))
    return module, Engine(plan, trt, name="two.engine")


def test_the_layout_takes_every_profile(served):
    _, engine = served
    layout = triton_layout(engine)
    assert (layout.triton_max_batch, layout.min_batch, layout.profile) == (16, 1, (1, 16))
    assert layout.batch_ranges == ((1, 4), (8, 16))
    assert [t.dims for t in layout.inputs] == [(3, -1, -1)]
    assert layout.describe().endswith("engine profiles 1..4, 8..16); executions of 5..7 (between profiles) are "
                                      "zero-padded to the next profile's min")
    assert triton_layout(engine, max_batch=12).triton_max_batch == 12  # above profile 0's max: profile 1 takes it


def test_max_batch_beyond_every_profile_is_refused(served):
    with pytest.raises(ValueError, match=r"^--max-batch 17: engine two.engine runs batches of 1 to 16 \(its profiles "
                       r"1..4, 8..16\), so the largest batch Triton may form must be 1 to 16$"):
        triton_layout(served[1], max_batch=17)


@pytest.mark.parametrize("shape, batch", [
    ((3, 3, 32, 32), 3),    # profile 0 takes it
    ((6, 3, 32, 32), 6),    # no profile takes 32x32 at batch 6: left for Engine.run to refuse
    ((2, 3, 64, 64), 8),    # 64x64 only in profile 1: padded to its min
    ((12, 3, 64, 64), 12),  # profile 1 takes it
    ((1, 3, 48, 48), 1),    # no profile takes 48x48
])
def test_padded_batch(served, shape, batch):
    assert padded_batch(served[1], {"input": shape}) == batch


def _infer(engine, monkeypatch):
    """PyTriton's call, with the batches the engine ran recorded."""
    from pytriton.proxy.types import Request

    from trtbuild.serving.pyt_serve import infer_function

    ran, run = [], engine.run

    def recording(feeds, **kw):
        ran.append({k: v.clone() for k, v in feeds.items()})
        return run(feeds, **kw)
    monkeypatch.setattr(engine, "run", recording)
    infer = infer_function(engine, triton_layout(engine))
    return (lambda *arrays: infer([Request({"input": a}) for a in arrays])), ran


def test_requests_merged_into_a_batch_between_profiles_are_padded(served, monkeypatch):
    module, engine = served
    infer, ran = _infer(engine, monkeypatch)
    rng = np.random.default_rng(0)
    first, second = (rng.standard_normal((b, 3, 64, 64)).astype(np.float32) for b in (2, 3))
    answers = infer(first, second)  # Triton merged them into 5 rows: profile 1 runs 8..16
    assert [tuple(r["input"].shape) for r in ran] == [(8, 3, 64, 64)]
    assert torch.equal(ran[0]["input"][5:], torch.zeros(3, 3, 64, 64))
    for x, answer in zip((first, second), answers):
        with torch.no_grad():
            want = module(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(answer["logits"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(6, 3, 32, 32), (1, 3, 48, 48)])
def test_a_request_no_profile_takes_is_refused_naming_every_profile(served, monkeypatch, shape):
    infer, ran = _infer(served[1], monkeypatch)
    with pytest.raises(EngineInputError) as refused:
        infer(np.zeros(shape, np.float32))
    assert str(refused.value) == (f"input 'input' has shape {shape}, which no optimization profile of two.engine "
                                  f"takes: {EVERY_PROFILE}")
    assert tuple(ran[0]["input"].shape) == shape

"""Weights a user's own network function builds with trtbuild.layers from a WeightMap are named after their
state_dict keys, so its engine refits; keys whose uses a name cannot all cover stay baked.

Expected outputs come from an engine built directly from the new weights (torch.equal on the reference backend)
and from PyTorch.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trtbuild.backend import load_trt
from trtbuild.engine.build import build_plan
from trtbuild.engine.model import build_model
from trtbuild.engine.refit import RefitError
from trtbuild.engine.refit_record import RefitRecord
from trtbuild.engine.runner import Engine
from trtbuild.layers.basic import conv, conv_bn
from trtbuild.layers.normalization import layer_norm
from trtbuild.models.registry import ModelSpec
from trtbuild.weights import WeightMap

trt = load_trt("reference")
SHAPE = (1, 4, 5, 5)


def _state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(4, 4, 1, 1, generator=g), "b": torch.randn(4, generator=g),
            "ln.weight": torch.randn(5, generator=g), "ln.bias": torch.randn(5, generator=g),
            "bn.weight": torch.rand(4, generator=g) + 0.5, "bn.bias": torch.randn(4, generator=g),
            "bn.running_mean": torch.randn(4, generator=g), "bn.running_var": torch.rand(4, generator=g) + 0.5}


def _x() -> torch.Tensor:
    return torch.rand(SHAPE, generator=torch.Generator().manual_seed(3))


def _twice(state):
    """The same conv (one key pair) applied twice, then a LayerNorm over W: every weight is a key's values."""
    wm = WeightMap.from_state_dict(state)

    def define(network, x):
        y = conv(network, x, wm.get("w"), wm.get("b"), "c1")
        y = conv(network, y, wm.get("w"), wm.get("b"), "c2")
        return layer_norm(network, y, 5, wm.get("ln.weight"), wm.get("ln.bias"), 1e-5, "ln")

    return define


def _plan(define, **options):
    return build_plan(trt, define, input_shape=SHAPE, progress=False, **options)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_user_network_function_gets_its_weights_named_and_refits(precision):
    """In fp16 each key is converted once per network, so both convs hold the same memory and one name covers
    them: a refit changes both."""
    old, new = _state(0), _state(1)
    plan = _plan(_twice(old), refit="any", precision=precision)
    record = RefitRecord.from_dict(plan.info.refit)
    assert {s.name: s.keys for s in record.weights} == {k: (k,) for k in ("w", "b", "ln.weight", "ln.bias")}
    assert {s.name: s.shapes for s in record.weights}["w"] == ((4, 4, 1, 1),)
    engine, direct = Engine(plan), Engine(_plan(_twice(new), precision=precision))
    x = _x()
    engine.refit(new)
    assert torch.equal(engine(x)["output"], direct(x)["output"])
    if precision == "fp32":
        y = F.conv2d(F.conv2d(x, new["w"], new["b"]), new["w"], new["b"])
        want = F.layer_norm(y, (5,), new["ln.weight"], new["ln.bias"], 1e-5)
        torch.testing.assert_close(engine(x)["output"], want, rtol=1e-5, atol=1e-5)


def _spec(build):
    return ModelSpec("user", "a user model", None, build, lambda small: SHAPE, ["y"])


def test_a_key_also_read_into_a_computed_weight_stays_baked():
    """`w` is used whole by one conv and read again into `w * 2` for another: naming the whole use would let a
    refit change one conv and not the other, so `w` is baked (a refit changing it is refused)."""
    def build(network, wm, x):
        y = conv(network, x, wm.get("w"), wm.get("b"), "whole")
        return {"y": conv(network, y, wm.get("w") * 2, None, "doubled")}

    old, new = _state(0), _state(1)
    state = {k: old[k] for k in ("w", "b")}
    plan = build_model(_spec(build), WeightMap.from_state_dict(state), trt, progress=False, refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert set(record.baked) == {"w"} and [s.name for s in record.weights] == ["b"]
    engine = Engine(plan)
    with pytest.raises(RefitError, match=r"^'w' in the state_dict differs from the build's, but the build baked it"):
        engine.refit({"w": new["w"], "b": new["b"]})
    engine.refit({"w": old["w"], "b": new["b"]})
    direct = Engine(build_model(_spec(build), WeightMap.from_state_dict({"w": old["w"], "b": new["b"]}), trt,
                                progress=False))
    assert torch.equal(engine(_x())["y"], direct(_x())["y"])


def test_a_key_named_by_a_fold_and_used_whole_names_the_whole_use_apart():
    """conv_bn names its folded kernel after the conv's weight key; the same key used whole by another conv takes
    ``<key>/copy``, so a refit recomputes both."""
    def build(network, wm, x):
        folded = conv_bn(network, x, wm, "conv", "bn", "folded")
        return {"y": conv(network, folded, wm.get("conv.weight"), None, "plain")}

    def state(seed):
        s = _state(seed)
        return {"conv.weight": s["w"], **{k: v for k, v in s.items() if k.startswith("bn.")}}

    old, new = state(0), state(1)
    plan = build_model(_spec(build), WeightMap.from_state_dict(old), trt, progress=False, refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    names = {s.name: (s.fold, s.keys) for s in record.weights}
    assert names["conv.weight/copy"] == ("copy", ("conv.weight",)) and names["conv.weight"][0] == "conv_bn_weight"
    assert record.baked == {}
    engine = Engine(plan)
    engine.refit(new)
    direct = Engine(build_model(_spec(build), WeightMap.from_state_dict(new), trt, progress=False))
    assert torch.equal(engine(_x())["y"], direct(_x())["y"])


def test_a_network_function_records_the_keys_its_layers_hold_without_a_name_as_baked():
    """A plain network function has no WeightMap in the record, but a key its layers hold unchanged and that no
    name covers (here read again into `w * 2`) is still recorded baked, so a refit changing it is refused."""
    old, new = _state(0), _state(1)
    wm = WeightMap.from_state_dict({"w": old["w"], "b": old["b"]})

    def define(network, x):
        y = conv(network, x, wm.get("w"), wm.get("b"), "whole")
        return conv(network, y, wm.get("w") * 2, None, "doubled")

    record = RefitRecord.from_dict(_plan(define, refit="any").info.refit)
    assert list(record.baked) == ["w"] and [s.name for s in record.weights] == ["b"]
    from trtbuild.engine.refit_record import values_sha256

    assert record.baked["w"] == values_sha256(old["w"])
    engine = Engine(_plan(define, refit="any"))
    with pytest.raises(RefitError, match=r"^'w' in the state_dict differs from the build's, but the build baked it"):
        engine.refit({"w": new["w"], "b": new["b"]})

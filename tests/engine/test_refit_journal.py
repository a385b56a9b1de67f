"""A network definition notes the weights it reads (trtbuild.weights.provenance.Journal), so that a plain network
function's keys read only into computed weights are baked (a refit changing them is refused instead of leaving
the engine with the old values), and so that two networks defined from one WeightMap do not share read counts.

Expected outputs come from an engine built directly from the weights a refit gives (torch.equal on the reference
backend) and from PyTorch; expected hashes from hashlib over the float32 values.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trtbuild.backend import load_trt
from trtbuild.engine.build import build_plan
from trtbuild.engine.refit import RefitError
from trtbuild.engine.refit_record import RefitRecord
from trtbuild.engine.runner import Engine
from trtbuild.layers.basic import conv, conv_bn
from trtbuild.weights import WeightMap

trt = load_trt("reference")
SHAPE = (1, 4, 5, 5)


def _state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"a": torch.randn(4, 4, 1, 1, generator=g), "b": torch.randn(4, generator=g),
            "bn.weight": torch.rand(4, generator=g) + 0.5, "bn.bias": torch.randn(4, generator=g),
            "bn.running_mean": torch.randn(4, generator=g), "bn.running_var": torch.rand(4, generator=g) + 0.5}


def _x() -> torch.Tensor:
    return torch.rand(SHAPE, generator=torch.Generator().manual_seed(3))


def _sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.numpy().astype(np.float32).tobytes()).hexdigest()


def _plan(define, **options):
    return build_plan(trt, define, input_shape=SHAPE, progress=False, **options)


def _doubled(wm):
    """`a` only goes into a computed weight (``a * 2``); `b` is used whole."""
    def define(network, x):
        return conv(network, x, wm.get("a") * 2, wm.get("b"), "c")

    return define


def test_a_key_a_network_function_read_only_into_a_computed_weight_is_baked():
    old, new = _state(0), _state(1)
    wm = WeightMap.from_state_dict({k: old[k] for k in ("a", "b")})
    plan = _plan(_doubled(wm), refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.baked == {"a": _sha(old["a"])} and [s.name for s in record.weights] == ["b"]
    engine = Engine(plan)
    with pytest.raises(RefitError, match=r"^'a' in the state_dict differs from the build's, but the build baked it "
                                         r"into the engine \(its values went into weights no name covers\), so a "
                                         r"refit cannot "
                                         r"change it: rebuild the engine$"):
        engine.refit({"a": new["a"], "b": new["b"]})
    x = _x()
    torch.testing.assert_close(engine(x)["output"], F.conv2d(x, old["a"] * 2, old["b"]))  # left as it was
    engine.refit({"a": old["a"], "b": new["b"]})  # `a` unchanged: the refit goes through
    direct = Engine(_plan(_doubled(WeightMap.from_state_dict({"a": old["a"], "b": new["b"]}))))
    assert torch.equal(engine(x)["output"], direct(x)["output"])
    torch.testing.assert_close(engine(x)["output"], F.conv2d(x, old["a"] * 2, new["b"]))


def test_a_raw_read_into_a_computed_weight_is_baked_too():
    old = _state(0)
    wm = WeightMap.from_state_dict({k: old[k] for k in ("a", "b")})

    def define(network, x):
        return conv(network, x, wm.raw("a").astype(np.float64) + 1, wm.get("b"), "c")

    record = RefitRecord.from_dict(_plan(define, refit="any").info.refit)
    assert record.baked == {"a": _sha(old["a"])}


def test_two_networks_defined_from_one_weightmap_count_their_own_reads():
    """The first network reads `a` into ``a * 2`` and bakes it; the second, from the same WeightMap, uses `a`
    whole, names it and refits it (with one count over the WeightMap's life, its read in the first network
    would have baked `a` in the second too)."""
    old, new = _state(0), _state(1)
    wm = WeightMap.from_state_dict({k: old[k] for k in ("a", "b")})

    def whole(network, x):
        return conv(network, x, wm.get("a"), wm.get("b"), "c")

    first = RefitRecord.from_dict(_plan(_doubled(wm), refit="any").info.refit)
    plan = _plan(whole, refit="any")
    second = RefitRecord.from_dict(plan.info.refit)
    assert set(first.baked) == {"a"} and second.baked == {}
    assert sorted(s.name for s in second.weights) == ["a", "b"]
    engine = Engine(plan)
    engine.refit({"a": new["a"], "b": new["b"]})
    x = _x()
    torch.testing.assert_close(engine(x)["output"], F.conv2d(x, new["a"], new["b"]), rtol=1e-5, atol=1e-6)


def test_a_key_read_before_the_definition_into_a_computed_weight_stays_baked():
    """`a` is used whole inside the network function, and read before build_plan into ``a * 2``, which the
    function uses too: a read outside any definition counts for every one, so `a` is baked, not named."""
    old = _state(0)
    wm = WeightMap.from_state_dict({k: old[k] for k in ("a", "b")})
    doubled = wm.get("a") * 2

    def define(network, x):
        y = conv(network, x, wm.get("a"), wm.get("b"), "whole")
        return conv(network, y, doubled, None, "doubled")

    record = RefitRecord.from_dict(_plan(define, refit="any").info.refit)
    assert set(record.baked) == {"a"} and [s.name for s in record.weights] == ["b"]


def test_refit_identical_of_a_network_function_takes_the_build_weights_only():
    old, new = _state(0), _state(1)
    wm = WeightMap.from_state_dict({k: old[k] for k in ("a", "b")})

    def define(network, x):
        return conv(network, x, wm.get("a"), wm.get("b"), "c")

    engine = Engine(_plan(define, refit="identical"))
    with pytest.raises(RefitError, match=r"^engine weights 'a' from the state_dict differ from the build's, but the "
                                         r"engine was built with --refit identical"):
        engine.refit({"a": new["a"], "b": old["b"]})
    engine.refit({"a": old["a"], "b": old["b"]})


def test_a_fold_built_twice_keeps_its_name_once_and_bakes_its_keys():
    """TensorRT refuses one name for two sets of weights, and a Conv+BN fold built twice computes new memory each
    time: the second is not named (the network is defined), and its keys are baked."""
    old, new = _state(0), _state(1)

    def state(s):
        return {"conv.weight": s["a"], **{k: v for k, v in s.items() if k.startswith("bn.")}}

    wm = WeightMap.from_state_dict(state(old))

    def define(network, x):
        y = conv_bn(network, x, wm, "conv", "bn", "first")
        return conv_bn(network, y, wm, "conv", "bn", "second")

    plan = _plan(define, refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert set(record.baked) == set(state(old)) and record.baked["conv.weight"] == _sha(old["a"])
    engine = Engine(plan)
    with pytest.raises(RefitError, match=r"^'bn.bias' in the state_dict differs from the build's"):
        engine.refit({**state(old), "bn.bias": new["bn.bias"]})
    engine.refit(state(old))


def test_one_named_key_given_to_two_layers_keeps_its_name_and_refits():
    """planned_linear names its weights explicitly; used twice with the key's own values (one array per network),
    both layers hold the same memory, which the name already covers: nothing is baked, and a refit changes both."""
    from trtbuild.layers.planned import planned_linear

    def state(seed):
        g = torch.Generator().manual_seed(seed)
        return {"fc.weight": torch.randn(5, 5, generator=g), "fc.bias": torch.randn(5, generator=g)}

    def define_from(s):
        wm = WeightMap.from_state_dict(s)

        def define(network, x):
            keys = ("fc.weight", "fc.bias")
            y = planned_linear(network, x, wm.get("fc.weight"), wm.get("fc.bias"), "l1", weight_keys=keys)
            return planned_linear(network, y, wm.get("fc.weight"), wm.get("fc.bias"), "l2", weight_keys=keys)

        return define

    old, new = state(0), state(1)
    plan = _plan(define_from(old), refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.baked == {} and sorted(s.name for s in record.weights) == ["fc.bias", "fc.weight"]
    engine = Engine(plan)
    engine.refit(new)
    x = _x()
    assert torch.equal(engine(x)["output"], Engine(_plan(define_from(new)))(x)["output"])
    want = F.linear(F.linear(x, new["fc.weight"], new["fc.bias"]), new["fc.weight"], new["fc.bias"])
    torch.testing.assert_close(engine(x)["output"], want, rtol=1e-5, atol=1e-5)

"""A refit is never accepted and then computes with stale or wrong weights: a refittable build defines the
network again from perturbed weights and checks every name slot by slot (trtbuild.engine.refit_verify), reads
outside the definition and through WeightMap.items()/arrays() count, WeightMap.get's arrays are read-only, an
engine naming no weights (or defined without a WeightMap) is not refit, and a stripped plan with baked keys is
not built. Each case is one a reviewer found accepted and then silently wrong.

The safe outcome is either a refit refused in one sentence naming the key, or an engine equal (torch.equal, on
the reference backend) to one built directly from the new weights.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from trtbuild.backend import load_trt
from trtbuild.engine import refit_verify
from trtbuild.engine.build import build_plan
from trtbuild.engine.errors import BuildError
from trtbuild.engine.refit import RefitError
from trtbuild.engine.refit_record import RefitRecord
from trtbuild.engine.runner import Engine
from trtbuild.layers.attention import AttentionWeights, multi_head_attention
from trtbuild.layers.basic import conv, conv_bn
from trtbuild.weights import WeightMap

trt = load_trt("reference")
SHAPE = (1, 4, 5, 5)
X = torch.rand(SHAPE, generator=torch.Generator().manual_seed(3))


def _state(seed: int, keys=("a", "b")) -> dict:
    g = torch.Generator().manual_seed(seed)
    full = {"a": torch.randn(4, 4, 1, 1, generator=g), "b": torch.randn(4, generator=g),
            "bn.weight": torch.rand(4, generator=g) + 0.5, "bn.bias": torch.randn(4, generator=g),
            "bn.running_mean": torch.randn(4, generator=g), "bn.running_var": torch.rand(4, generator=g) + 0.5}
    full["c.weight"] = full["a"]
    return {k: full[k] for k in keys}


def _plan(define, **options):
    options.setdefault("refit", "any")
    return build_plan(trt, define, input_shape=SHAPE, progress=False, **options)


def _refused(make, old: dict, new: dict, key: str, **options) -> RefitRecord:
    """Build `make(WeightMap(old))` refittable; a refit with `new` is refused naming `key`."""
    plan = _plan(make(WeightMap.from_state_dict(old)), **options)
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.verified and key in record.baked
    with pytest.raises(RefitError, match=rf"^'{key}' in the state_dict differs from the build's, but the build "
                                         r"baked it into the engine \(its values went into weights no name covers\)"):
        Engine(plan).refit(new)
    return record


def _refits_exactly(make, old: dict, new: dict, **options) -> RefitRecord:
    """A refit of `make(WeightMap(old))` with `new` computes what a build from `new` computes."""
    plan = _plan(make(WeightMap.from_state_dict(old)), **options)
    engine = Engine(plan)
    engine.refit(new)
    want = Engine(_plan(make(WeightMap.from_state_dict(new)), refit="off"))(X)["output"]
    assert torch.equal(engine(X)["output"], want)
    return RefitRecord.from_dict(plan.info.refit)


def _whole_and(computed):
    """`a` read once, used whole in one conv and as `computed(a)` in another."""
    def make(wm):
        def define(network, x):
            a = wm.get("a")
            y = conv(network, x, a, wm.get("b"), "whole")
            return conv(network, y, computed(a), None, "computed")
        return define
    return make


@pytest.mark.parametrize("computed", [lambda a: a * 2, lambda a: np.ascontiguousarray(a.reshape(4, 4).T)
                                      .reshape(4, 4, 1, 1), lambda a: a.astype(np.float32)],
                         ids=["doubled", "transposed", "astype_copy"])
def test_a_key_used_whole_and_in_a_computed_weight_is_baked_and_its_other_keys_refit(computed):
    old, new = _state(0), _state(1)
    record = _refused(_whole_and(computed), old, new, "a")
    assert record.baked.keys() == {"a"}
    _refits_exactly(_whole_and(computed), old, {"a": old["a"], "b": new["b"]})  # b alone refits


def test_a_key_read_before_the_definition_into_a_computed_weight_is_baked():
    def make(wm):
        doubled = wm.get("a") * 2  # read before build_plan: the definition itself never reads `a`

        def define(network, x):
            return conv(network, x, doubled, wm.get("b"), "c")
        return define

    old, new = _state(0), _state(1)
    _refused(make, old, {"a": new["a"], "b": old["b"]}, "a")
    _refused(make, old, {"a": new["a"], "b": old["b"]}, "a", refit="identical")


def test_a_key_a_named_fold_reads_and_a_computed_weight_also_reads_is_baked():
    keys = ("c.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var")

    def make(wm):
        def define(network, x):
            y = conv_bn(network, x, wm, "c", "bn", "cbn")
            return conv(network, y, wm.get("c.weight") * 2, None, "doubled")
        return define

    _refused(make, _state(0, keys), _state(1, keys), "c.weight")


def test_a_named_slice_the_builder_changed_loses_its_name_and_bakes_its_key():
    """dataclasses.replace(AttentionWeights, q_weight=q * 0.5) keeps the slice's source, not its values."""
    embed, heads, shape = 8, 2, (1, 3, 8)

    def state(seed):
        torch.manual_seed(seed)
        mha = torch.nn.MultiheadAttention(embed, heads, batch_first=True)
        return {f"attn.{k}": v for k, v in mha.state_dict().items()}

    def define_from(wm):
        def define(network, x):
            w = AttentionWeights.from_state_dict(wm, "attn.")
            w = dataclasses.replace(w, q_weight=w.q_weight * 0.5, q_bias=w.q_bias * 0.5)
            return multi_head_attention(network, x, x, x, w, heads, "attn", batch_first=True)
        return define

    plan = build_plan(trt, define_from(WeightMap.from_state_dict(state(0))), input_shape=shape, progress=False,
                      refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    names = {s.name for s in record.weights}
    assert "attn.in_proj_weight[0:8]" not in names and "attn.in_proj_bias[0:8]" not in names
    assert {"attn.in_proj_weight", "attn.in_proj_bias"} <= record.baked.keys()
    assert "attn.out_proj.weight" in names
    with pytest.raises(RefitError, match=r"^'attn.in_proj_(weight|bias)' in the state_dict differs"):
        Engine(plan).refit(state(1))


@pytest.mark.parametrize("read", ["arrays", "items"])
def test_reads_through_items_and_arrays_count_as_reads(read):
    def make(wm):
        def define(network, x):
            arrays = wm.arrays() if read == "arrays" else dict(wm.items())
            return conv(network, x, arrays["a"] * 2, arrays["b"], "c")
        return define

    old, new = _state(0), _state(1)
    plan = _plan(make(WeightMap.from_state_dict(old)))
    assert RefitRecord.from_dict(plan.info.refit).baked.keys() == {"a", "b"}
    with pytest.raises(RefitError, match=r"^the engine names no weights, so nothing in it can be refit from a "
                                         "state_dict; "):
        Engine(plan).refit(new)


def test_a_network_of_plain_numpy_arrays_is_not_refit():
    old, new = _state(0), _state(1)
    arrays = {k: v.numpy() for k, v in old.items()}
    plan = _plan(lambda network, x: conv(network, x, arrays["a"], arrays["b"], "c"))
    engine = Engine(plan, name="plain.engine")
    with pytest.raises(RefitError, match=r"^engine plain.engine names no weights, so nothing in it can be refit"):
        engine.refit(new)


def test_a_network_that_read_no_weightmap_in_its_definition_and_holds_unnamed_weights_is_untraced():
    """`a` read whole before the definition is named; `b` comes from a plain array: which key it holds is unknown."""
    old, new = _state(0), _state(1)
    a = WeightMap.from_state_dict(old).get("a")
    b = old["b"].numpy()
    plan = _plan(lambda network, x: conv(network, x, a, b, "c"))
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.untraced and [s.name for s in record.weights] == ["a"]
    with pytest.raises(RefitError, match=r"^engine untraced.engine was defined without reading a WeightMap and holds "
                                         "unnamed weights, so trtbuild cannot tell"):
        Engine(plan, name="untraced.engine").refit(new)


def test_weightmap_get_arrays_are_read_only_so_a_builder_cannot_change_the_map():
    wm = WeightMap.from_state_dict(_state(0))
    b = wm.get("b")
    with pytest.raises(ValueError, match="read-only"):
        b *= 2
    assert np.array_equal(wm.raw("b"), _state(0)["b"].numpy())
    copy = wm.get("b", copy=True)
    copy *= 2  # a copy is the caller's
    assert np.array_equal(copy, 2 * _state(0)["b"].numpy())


@pytest.mark.parametrize("mode", ["identical", "any"])
def test_a_stripped_plan_with_baked_keys_is_refused_at_build_time(mode):
    def make(wm):
        def define(network, x):
            y = conv(network, x, wm.get("a"), wm.get("b"), "c")
            return conv(network, y, wm.get("a") * 2, None, "d")
        return define

    with pytest.raises(BuildError, match=r"^network 'trtbuild' cannot be built with --strip-weights: it bakes 'a' "
                                         "into weights no name covers, so the stripped plan could never be refit; "
                                         "build it without --strip-weights$"):
        _plan(make(WeightMap.from_state_dict(_state(0))), refit=mode, strip_weights=True)


def test_bisection_bakes_only_the_key_that_also_went_into_a_computed_weight():
    """Eight named convs; key k3's array also goes into an unnamed conv: k3 alone is baked, the others refit."""
    keys = [f"k{i}" for i in range(8)]

    def state(seed):
        g = torch.Generator().manual_seed(seed)
        return {k: torch.randn(4, 4, 1, 1, generator=g) for k in keys}

    def make(wm):
        def define(network, x):
            for k in keys:
                x = conv(network, x, wm.get(k), None, k)
            return conv(network, x, wm.get("k3") + 1, None, "k3_plus_one")
        return define

    calls = []
    real = refit_verify.slots

    def counting(network):
        calls.append(1)
        return real(network)

    old, new = state(0), state(1)
    refit_verify.slots = counting
    try:
        record = _refused(make, old, new, "k3")
    finally:
        refit_verify.slots = real
    assert record.baked.keys() == {"k3"}
    # the network, the first perturbed definition, two halves at each of log2(8) levels, the record's own look
    assert len(calls) <= 1 + 1 + 2 * 3 + 1
    _refits_exactly(make, old, {**new, "k3": old["k3"]})


def test_a_builder_that_chooses_layers_by_values_bakes_every_named_key():
    """`a` is zero and the definition adds no bias; perturbed, `a` is nonzero and the conv gets one: the two
    networks cannot be compared slot by slot, so `a`, though named, is baked (`b`, read and unused, is too)."""
    def make(wm):
        def define(network, x):
            a, b = wm.get("a"), wm.get("b")
            return conv(network, x, a, b if a.any() else None, "c")
        return define

    old = {"a": torch.zeros(4, 4, 1, 1), "b": _state(0)["b"]}
    record = RefitRecord.from_dict(_plan(make(WeightMap.from_state_dict(old))).info.refit)
    assert [s.name for s in record.weights] == ["a"] and record.baked.keys() == {"a", "b"}


def test_the_verification_leaves_the_weightmap_as_it_was():
    state = _state(0, ("c.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"))
    wm = WeightMap.from_state_dict(state)
    before = dict(wm.arrays())
    plan = _plan(lambda network, x: conv_bn(network, x, wm, "c", "bn", "cbn"))
    assert RefitRecord.from_dict(plan.info.refit).verified
    after = wm.arrays()
    assert all(after[k] is before[k] and np.array_equal(after[k], state[k].numpy()) for k in state)


def test_an_lstm_bias_the_builder_changed_loses_its_sum_name_and_bakes_its_keys():
    """dataclasses.replace(LSTMDirection, bias=bias * 0.5) keeps bias_keys, not the values they name."""
    from trtbuild.layers.recurrent import _direction, read_lstm

    def state(seed):
        torch.manual_seed(seed)
        return {f"rnn.{k}": v for k, v in torch.nn.LSTM(4, 3, batch_first=True).state_dict().items()}

    def define_from(wm):
        def define(network, x):
            (d,), = read_lstm(wm, "rnn", "rnn")
            return _direction(network, x, dataclasses.replace(d, bias=d.bias * 0.5), "rnn", 1)
        return define

    plan = build_plan(trt, define_from(WeightMap.from_state_dict(state(0))), input_shape=(1, 2, 4), progress=False,
                      refit="any")
    record = RefitRecord.from_dict(plan.info.refit)
    assert "rnn.bias_ih_l0" not in {s.name for s in record.weights}
    assert {"rnn.bias_ih_l0", "rnn.bias_hh_l0"} <= record.baked.keys()
    assert {"rnn.weight_ih_l0", "rnn.weight_hh_l0"} <= {s.name for s in record.weights}
    with pytest.raises(RefitError, match=r"^'rnn.bias_(ih|hh)_l0' in the state_dict differs from the build's"):
        Engine(plan).refit(state(1))


def test_a_record_from_before_verification_is_not_refit():
    """An engine whose refit record was not verified (built by a trtbuild that did not define the network again
    from other weights) may hold names that a refit would leave stale: refused in one sentence, before the
    refitter is touched."""
    old, new = _state(0), _state(1)

    def make(wm):
        def define(network, x):
            return conv(network, x, wm.get("a"), wm.get("b"), "c")
        return define

    plan = _plan(make(WeightMap.from_state_dict(old)))
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.verified
    verified_info = plan.info
    plan.info = verified_info.replace(refit={k: v for k, v in verified_info.refit.items() if k != "verified"})
    engine = Engine(plan, name="old")
    with pytest.raises(RefitError, match=r"^engine old was built by a trtbuild that did not check its weight names "
                                         r"by defining the network again from other weights"):
        engine.refit(new)
    plan.info = verified_info
    Engine(plan).refit(new)  # the verified record of the same plan refits

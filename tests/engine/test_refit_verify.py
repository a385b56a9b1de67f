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
    with pytest.raises(RefitError, match=r"^the engine names no weights: the build baked every key it read "
                                         r"\('a', 'b'\) into weights no name covers"):
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


def test_a_build_in_another_thread_reads_the_weightmap_s_own_values_while_one_verifies():
    """The perturbed values are a context-local overlay: build B, defined while build A's second (perturbed)
    definition runs, from the same WeightMap, equals a build made alone."""
    import threading

    wm = WeightMap.from_state_dict(_state(0))
    perturbing, b_done = threading.Event(), threading.Event()
    calls = []

    def define_a(network, x):
        calls.append(1)
        y = conv(network, x, wm.get("a"), wm.get("b"), "c")
        if len(calls) == 2:  # the verification's perturbed definition
            perturbing.set()
            b_done.wait(30)
        return y

    def define_b(network, x):
        return conv(network, x, wm.get("a"), wm.get("b"), "c")

    out = {}

    def run_b():
        perturbing.wait(30)
        out["b"] = _plan(define_b, refit="off")
        b_done.set()

    thread = threading.Thread(target=run_b)
    thread.start()
    _plan(define_a)
    thread.join()
    assert perturbing.is_set() and "b" in out
    assert torch.equal(Engine(out["b"])(X)["output"], Engine(_plan(define_b, refit="off"))(X)["output"])


def test_a_weightmap_made_inside_the_network_function_is_verified_and_refits():
    """The overlay is keyed by state_dict key, so a WeightMap the function makes (WeightMap.load in it, say)
    reads the perturbed values too: its names are checked, nothing is baked."""
    def make(wm):
        arrays = wm.stored_arrays()

        def define(network, x):
            inner = WeightMap.from_state_dict(arrays)
            return conv(network, x, inner.get("a"), inner.get("b"), "c")
        return define

    record = _refits_exactly(make, _state(0), _state(1))
    assert record.verified and not record.baked and {s.name for s in record.weights} == {"a", "b"}


@pytest.mark.parametrize("read", ["arrays", "items"])
def test_items_and_arrays_read_before_the_definition_are_loose_reads(read):
    def make(wm):
        arrays = wm.arrays() if read == "arrays" else dict(wm.items())
        doubled = arrays["a"] * 2  # before build_plan, into a computed weight; `a` also used whole in it

        def define(network, x):
            y = conv(network, x, wm.get("a"), wm.get("b"), "whole")
            return conv(network, y, doubled, None, "doubled")
        return define

    old, new = _state(0), _state(1)
    plan = _plan(make(WeightMap.from_state_dict(old)))
    assert "a" in RefitRecord.from_dict(plan.info.refit).baked
    with pytest.raises(RefitError, match=r"^the engine names no weights: the build baked every key it read \('a'"):
        Engine(plan).refit(new)


def test_keys_that_change_a_weight_only_together_are_baked_after_bisection():
    """`joint` changes only when k1 and k3 both change; k2 alone dirties another unnamed conv, so bisection
    keeps only k2's half and would drop k1 & k3: the final check perturbs every key left and bakes them all
    (k4 with them: which of the keys left act together is not searched)."""
    eye = np.eye(4, dtype=np.float32).reshape(4, 4, 1, 1)
    ones = np.ones(4, np.float32)

    def make(wm):
        def define(network, x):
            k = {n: wm.get(n) for n in ("k1", "k2", "k3", "k4")}
            for n, v in k.items():  # each key used whole: named
                x = conv(network, x, eye.copy(), v, n)
            joint = float(np.array_equal(k["k1"], ones) or np.array_equal(k["k3"], ones)) * ones
            x = conv(network, x, eye.copy(), joint, "joint")
            return conv(network, x, eye.copy(), k["k2"] * 2, "k2x2")
        return define

    old = {n: torch.ones(4) for n in ("k1", "k2", "k3", "k4")}
    record = _refused(make, old, {**old, "k1": torch.full((4,), 2.0), "k3": torch.full((4,), 2.0)}, "k1")
    assert record.baked.keys() == {"k1", "k2", "k3", "k4"}


def test_a_slot_python_cannot_read_bakes_every_key_names_cover(monkeypatch):
    """TensorRT's BF16 weights have no numpy view: a slot whose values cannot be read is not passed unchecked."""
    real = refit_verify._values
    monkeypatch.setattr(refit_verify, "_values", lambda w: (None, "BF16") if real(w)[1] == "FLOAT" else real(w))
    wm = WeightMap.from_state_dict(_state(0))
    plan = _plan(lambda network, x: conv(network, x, wm.get("a"), wm.get("b"), "c"))
    record = RefitRecord.from_dict(plan.info.refit)
    assert record.baked.keys() == {"a", "b"}


def test_tensorrt_rtx_bf16_weights_bake_the_keys_a_computed_weight_reads():
    """The real case: TensorRT-RTX's builder (its definition, no GPU needed) with BF16 weights, `a` whole and
    `a * 2`: `a` (and every key names cover, as their BF16 slots cannot be read) is baked."""
    pytest.importorskip("tensorrt_rtx")
    from trtbuild.engine.define import definition_step
    from trtbuild.engine.options import BuildOptions

    kw = dict(input_shape=SHAPE, refit="any", precision="bf16")
    defined = definition_step(_whole_and(lambda a: a * 2)(WeightMap.from_state_dict(_state(0))), **kw)(
        load_trt("tensorrt-rtx"))
    record = RefitRecord.of_build(BuildOptions.from_kwargs(**kw), defined.network)
    assert record.verified and {"a", "b"} <= record.baked.keys()


def test_a_key_value_used_as_a_layer_attribute_is_baked():
    """A leaky-ReLU's alpha read from `a` is no weight slot: the two definitions' layer attributes differ."""
    def make(wm):
        def define(network, x):
            a = wm.get("a")
            y = conv(network, x, a, wm.get("b"), "c")
            layer = network.add_activation(y, trt.ActivationType.LEAKY_RELU)
            layer.alpha = float(abs(a.flat[0]))
            layer.name = "act"
            return layer.get_output(0)
        return define

    old, new = _state(0), _state(1)
    _refused(make, old, new, "a")


_MINUS_ONE = {"a": -torch.ones(4, 4, 1, 1), "b": _state(0)["b"]}
_POSITIVE = {"a": _state(0)["a"].abs() + 0.5, "b": _state(0)["b"]}
_MIXED = _state(0)


@pytest.mark.parametrize("old, computed, options", [
    (_MINUS_ONE, lambda a: a * 2, {}),  # v = -1: a fixed point of an affine map that raises every value
    (_POSITIVE, lambda a: np.minimum(a, 0.5), {}),  # a clamp that an increase does not move
    (_POSITIVE, lambda a: np.sign(a), {}),
    (_MIXED, lambda a: np.sign(a), {}),
    (_MIXED, lambda a: (a > -1).astype(np.float32), {}),
    ({**_MINUS_ONE, "a": _MINUS_ONE["a"] + 1e-4}, lambda a: a * 2, {"precision": "fp16"}),  # rounds to -1 in fp16
], ids=["minus-one", "clamp", "sign-positive", "sign-mixed", "mask", "fp16-near-minus-one"])
def test_perturbation_blind_spots_are_seen(old, computed, options):
    new = {**old, "a": old["a"] * 1.5 - 0.25}
    _refused(_whole_and(computed), old, new, "a", **options)


@pytest.mark.parametrize("key, old, new", [
    ("start", torch.tensor([2 ** 25], dtype=torch.int64), torch.tensor([2 ** 25 + 1], dtype=torch.int64)),
    ("offset", torch.tensor([1e8 + 0.5], dtype=torch.float64), torch.tensor([1e8 + 2.0], dtype=torch.float64)),
])
def test_a_baked_key_is_compared_in_its_stored_type(key, old, new):
    """An int64 step above 2**24 or a float64 change below float32's resolution is a change of a baked key."""
    def make(wm):
        def define(network, x):
            shift = np.float32(float(wm.raw(key)[0]) % 7)
            return conv(network, x, wm.get("a"), wm.get("b") + shift, "c")
        return define

    state = _state(0)
    _refused(make, {**state, key: old}, {**state, key: new}, key)

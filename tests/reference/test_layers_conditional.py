"""trtbuild.reference: IIfConditional (IConditionLayer, IIfConditionalInputLayer, IIfConditionalOutputLayer)
against the same computation in torch (float64); each construction also built by TensorRT-RTX (the `refnet`
twin), which judges acceptance, shapes and types."""

from __future__ import annotations

import re

import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import concrete
from trtbuild.reference import NetworkError
from trtbuild.reference.ops import op_for
from helpers.refnet import add_profile, close

gen = torch.Generator().manual_seed(53)
U = trt.UnaryOperation


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def unary(refnet, x, op):
    return refnet.network.add_unary(x, op).get_output(0)


def if_else(refnet, shape=(2, 3), dtype=trt.float32):
    """x -> if c: exp(x) else: abs(x); returns (conditional, output layer)."""
    x, c = refnet.input("x", shape, dtype), refnet.input("c", (), trt.bool)
    cond = refnet.network.add_if_conditional()
    cond.set_condition(c)
    xi = cond.add_input(x).get_output(0)
    return cond, cond.add_output(unary(refnet, xi, U.EXP), unary(refnet, xi, U.ABS))


@pytest.mark.parametrize("taken", [True, False])
def test_if_else_runs_the_chosen_branch(refnet, taken):
    x = randn(2, 3)
    _, out = if_else(refnet)
    assert tuple(out.get_output(0).shape) == (2, 3) and out.get_output(0).dtype == trt.float32
    y = refnet.run({"x": x, "c": torch.tensor(taken)}, y=out.get_output(0))["y"]
    close(y, x.double().exp() if taken else x.double().abs())


def test_only_the_taken_branch_is_evaluated(refnet, monkeypatch):
    """Lazy evaluation: with the condition false, the true branch's unary layers never run."""
    op = op_for(trt.LayerType.UNARY)
    seen = []
    real = op.run
    monkeypatch.setattr(op, "run", lambda p, w, inputs, plugin: seen.append(p["op"]) or real(p, w, inputs, plugin))
    x, c = refnet.input("x", (4,)), refnet.input("c", (), trt.bool)
    cond = refnet.network.add_if_conditional()
    cond.set_condition(c)
    xi = cond.add_input(x).get_output(0)
    t = unary(refnet, unary(refnet, xi, U.EXP), U.SQRT)
    out = cond.add_output(t, unary(refnet, xi, U.NEG))
    x0 = randn(4)
    y = refnet.run({"x": x0, "c": torch.tensor(False)}, y=out.get_output(0))["y"]
    close(y, -x0.double())
    assert seen == [int(U.NEG)]


def test_condition_computed_in_the_network(refnet):
    """The predicate is any 0-D BOOL tensor: here sum(x) > 0, so the branch follows the data."""
    net = refnet.network
    x = refnet.input("x", (5,))
    total = net.add_reduce(x, trt.ReduceOperation.SUM, 1, False).get_output(0)
    zero = net.add_constant((), trt.Weights(torch.zeros(()).numpy())).get_output(0)
    positive = net.add_elementwise(total, zero, trt.ElementWiseOperation.GREATER).get_output(0)
    cond = net.add_if_conditional()
    cond.set_condition(positive)
    xi = cond.add_input(x).get_output(0)
    out = cond.add_output(unary(refnet, xi, U.NEG), xi).get_output(0)
    for sign in (1.0, -1.0):
        x0 = sign * randn(5).abs()
        y = _run_again(refnet, out, {"x": x0})
        close(y, -x0.double() if sign > 0 else x0.double())


def _run_again(refnet, out, feeds):
    """Build once (the first call marks `out`), then run the same plan with other inputs."""
    from helpers.refnet import run_plan

    if not getattr(refnet, "_plan", None):
        out.name = "y"
        refnet.network.mark_output(out)
        refnet._plan = refnet.build()
        assert refnet._plan is not None, refnet.logger.errors
    return run_plan(refnet._plan, feeds)["y"]


def test_two_outputs_integer_types_and_scalars(refnet):
    """Several output layers share one condition; INT32 and 0-D tensors pass through unchanged."""
    net = refnet.network
    x, s, c = refnet.input("x", (4,), trt.int32), refnet.input("s", ()), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    xi, si = cond.add_input(x).get_output(0), cond.add_input(s).get_output(0)
    o1 = cond.add_output(unary(refnet, xi, U.ABS), xi).get_output(0)
    o2 = cond.add_output(si, unary(refnet, si, U.NEG)).get_output(0)
    assert (o1.dtype, tuple(o1.shape), o2.dtype, tuple(o2.shape)) == (trt.int32, (4,), trt.float32, ())
    x0 = torch.tensor([-3, 1, -2, 5], dtype=torch.int32)
    for taken in (True, False):
        out = _run_again(refnet, o1, {"x": x0, "s": torch.tensor(2.5), "c": torch.tensor(taken)})
        assert torch.equal(out, x0.abs() if taken else x0)


def test_outputs_may_read_tensors_from_outside(refnet):
    """add_output of two outside tensors selects between them; a branch may read an outside tensor
    directly (TensorRT: "The subgraphs may directly use tensors defined outside of the IIfConditional")."""
    net = refnet.network
    x, z, c = refnet.input("x", (3,)), refnet.input("z", (3,)), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    picked = cond.add_output(x, z).get_output(0)
    direct = cond.add_output(unary(refnet, x, U.EXP), unary(refnet, z, U.NEG)).get_output(0)
    x0, z0 = randn(3), randn(3)
    outs = _both(refnet, {"x": x0, "z": z0}, p=picked, d=direct)
    close(outs[True]["p"], x0)
    close(outs[False]["p"], z0)
    close(outs[True]["d"], x0.double().exp())
    close(outs[False]["d"], -z0.double())


def _both(refnet, feeds, **outputs):
    """{taken: outputs} for c = True and c = False, from one plan."""
    from helpers.refnet import run_plan

    for name, t in outputs.items():
        t.name = name
        refnet.network.mark_output(t)
    plan = refnet.build()
    assert plan is not None, refnet.logger.errors
    return {taken: run_plan(plan, {**feeds, "c": torch.tensor(taken)}) for taken in (True, False)}


def test_an_input_layer_feeds_both_branches(refnet):
    net = refnet.network
    x, c = refnet.input("x", (2, 2)), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    xi = cond.add_input(x).get_output(0)
    out = cond.add_output(xi, unary(refnet, xi, U.NEG)).get_output(0)
    x0 = randn(2, 2)
    outs = _both(refnet, {"x": x0}, y=out)
    close(outs[True]["y"], x0)
    close(outs[False]["y"], -x0)


def test_nested_conditional(refnet):
    """if a: (if b: exp(x) else: x) else: -x, for the four combinations."""
    from helpers.refnet import run_plan

    net = refnet.network
    x, a, b = refnet.input("x", (3,)), refnet.input("a", (), trt.bool), refnet.input("b", (), trt.bool)
    outer = net.add_if_conditional()
    outer.set_condition(a)
    xi = outer.add_input(x).get_output(0)
    inner = net.add_if_conditional()
    inner.set_condition(b)
    xj = inner.add_input(xi).get_output(0)
    o_inner = inner.add_output(unary(refnet, xj, U.EXP), xj).get_output(0)
    out = outer.add_output(o_inner, unary(refnet, xi, U.NEG)).get_output(0)
    assert (outer.name, inner.name) == ("(Unnamed IfConditional* 0)", "(Unnamed IfConditional* 1)")
    out.name = "y"
    net.mark_output(out)
    plan = refnet.build()
    assert plan is not None, refnet.logger.errors
    x0 = randn(3)
    for av in (True, False):
        for bv in (True, False):
            y = run_plan(plan, {"x": x0, "a": torch.tensor(av), "b": torch.tensor(bv)})["y"]
            close(y, (x0.double().exp() if bv else x0) if av else -x0.double())


def test_dynamic_shapes(refnet):
    _, out = if_else(refnet, shape=(-1, 3))
    add_profile(refnet, {"x": ((1, 3), (2, 3), (4, 3))})
    assert tuple(out.get_output(0).shape) == (-1, 3)
    x0 = randn(4, 3)
    y = refnet.run({"x": x0, "c": torch.tensor(True)}, y=out.get_output(0))["y"]
    close(y, x0.double().exp())


def test_layers_names_and_attributes(refnet):
    net = refnet.network
    cond, out = if_else(refnet)
    layers = [net.get_layer(i) for i in range(net.num_layers)]
    assert [la.name for la in layers] == ["(Unnamed Layer* 0) [IfCondition]", "(Unnamed Layer* 1) [Input]",
                                          "(Unnamed Layer* 2) [Unary]", "(Unnamed Layer* 3) [Unary]",
                                          "(Unnamed Layer* 4) [Output]"]
    assert [la.type for la in layers] == [trt.LayerType.CONDITION, trt.LayerType.CONDITIONAL_INPUT, trt.LayerType.UNARY,
                                          trt.LayerType.UNARY, trt.LayerType.CONDITIONAL_OUTPUT]
    assert (layers[0].num_inputs, layers[0].num_outputs, layers[4].num_inputs, layers[4].num_outputs) == (1, 0, 2, 1)
    assert isinstance(concrete(layers[0].ref), trt.IIfConditionalBoundaryLayer)
    assert all(concrete(la.ref).conditional is cond.ref for la in (layers[0], layers[1], layers[4]))
    cond.name = "choose"
    assert cond.name == "choose"
    again = cond.set_condition(net.get_input(1)).ref  # a second call returns the same layer, adding none
    assert again.name == layers[0].ref.name and again._self is layers[0].ref._self and net.num_layers == 5


# -- refusals ----------------------------------------------------------------------------------------------------
def _expect_build_error(refnet, *patterns):
    assert refnet.build() is None
    assert any(all(p in m for p in patterns) for m in refnet.logger.errors), refnet.logger.errors


@pytest.mark.parametrize("shape, dtype, why", [((1,), trt.bool, "has shape (1,)"),
                                               ((), trt.int32, "has type INT32")])
def test_condition_must_be_a_0d_bool(refnet, shape, dtype, why):
    """Checked at build, as TensorRT-RTX checks it."""
    net = refnet.network
    x = refnet.input("x", (3,))
    cond = net.add_if_conditional()
    cond.set_condition(refnet.input("c", shape, dtype))
    xi = cond.add_input(x).get_output(0)
    net.mark_output(cond.add_output(xi, unary(refnet, xi, U.NEG)).get_output(0))
    _expect_build_error(refnet, "IfCondition]': the condition " + why, "takes a 0-D BOOL tensor")


@pytest.mark.parametrize("fshape, dtype, why", [
    ((6,), trt.float32, "need equal ranks"),
    ((2, 3), trt.float16, "gives FLOAT and the false branch HALF"),
])
def test_branch_outputs_must_agree(refnet, fshape, dtype, why):
    net = refnet.network
    x, z, c = refnet.input("x", (2, 3)), refnet.input("z", fshape, dtype), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    with pytest.raises(NetworkError, match=re.escape(why)):
        cond.add_output(unary(refnet, cond.add_input(x).get_output(0), U.ABS), cond.add_input(z).get_output(0))


def test_branch_shapes_must_be_equal(refnet):
    """TensorRT-RTX accepts (2, 3) against (1, 3) and gives (-1, 3); the reference keeps TensorRT's documented
    rule (an entry of REFERENCE_STRICTER)."""
    net = refnet.network
    x, z, c = refnet.input("x", (2, 3)), refnet.input("z", (1, 3)), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    with pytest.raises(NetworkError, match="requires the same shape in both branches"):
        cond.add_output(cond.add_input(x).get_output(0), cond.add_input(z).get_output(0))


def test_a_branch_tensor_cannot_be_a_network_output(refnet):
    net = refnet.network
    cond, out = if_else(refnet)
    net.mark_output(out.get_output(0))
    net.mark_output(net.get_layer(2).get_output(0))
    _expect_build_error(refnet, "(Unnamed Layer* 2) [Unary]", "inside conditional '(Unnamed IfConditional* 0)'",
                        "network output")


def test_a_branch_tensor_used_outside_is_refused(refnet):
    net = refnet.network
    cond, out = if_else(refnet)
    net.mark_output(out.get_output(0))
    leak = net.add_elementwise(net.get_layer(2).get_output(0), net.get_input(0), trt.ElementWiseOperation.SUM)
    net.mark_output(leak.get_output(0))
    _expect_build_error(refnet, "ElementWise", "network output")


def test_a_body_layer_feeds_one_branch_only(refnet):
    net = refnet.network
    x, c = refnet.input("x", (3,)), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    shared = unary(refnet, cond.add_input(x).get_output(0), U.ABS)
    net.mark_output(cond.add_output(unary(refnet, shared, U.EXP), unary(refnet, shared, U.NEG)).get_output(0))
    _expect_build_error(refnet, "(Unnamed Layer* 2) [Unary]", "feeds both branches")


def test_a_conditional_needs_its_condition(refnet):
    net = refnet.network
    x = refnet.input("x", (3,))
    cond = net.add_if_conditional()
    xi = cond.add_input(x).get_output(0)
    net.mark_output(cond.add_output(xi, unary(refnet, xi, U.NEG)).get_output(0))
    _expect_build_error(refnet, "conditional '(Unnamed IfConditional* 0)' has no condition")


def test_the_condition_comes_from_outside(refnet):
    net = refnet.network
    x, c = refnet.input("x", (3,)), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(cond.add_input(c).get_output(0))
    xi = cond.add_input(x).get_output(0)
    net.mark_output(cond.add_output(xi, unary(refnet, xi, U.NEG)).get_output(0))
    _expect_build_error(refnet, "IfCondition", "input 0 is computed inside conditional", "outside the construct")



def test_an_unused_conditional_still_needs_its_condition(refnet):
    """TensorRT-RTX checks every conditional at build, used or not."""
    net = refnet.network
    net.mark_output(unary(refnet, refnet.input("x", (3,)), U.NEG))
    net.add_if_conditional()
    _expect_build_error(refnet, "conditional '(Unnamed IfConditional* 0)' has no condition")

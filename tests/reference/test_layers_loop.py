"""trtbuild.reference: ILoop (ITripLimitLayer, IRecurrenceLayer, IIteratorLayer, ILoopOutputLayer) against the
same computation written as a Python loop over torch tensors (float64); each construction also built by
TensorRT-RTX (the `refnet` twin), which judges acceptance, shapes and types."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.reference import NetworkError
from helpers.refnet import close, run_plan

gen = torch.Generator().manual_seed(59)
E, U = trt.ElementWiseOperation, trt.UnaryOperation
COUNT, WHILE = trt.TripLimit.COUNT, trt.TripLimit.WHILE
LAST, CONCAT, REVERSE = trt.LoopOutput.LAST_VALUE, trt.LoopOutput.CONCATENATE, trt.LoopOutput.REVERSE


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def const(refnet, value, dtype=np.int32):
    arr = np.array(value, dtype)
    return refnet.network.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def ew(refnet, a, b, op):
    return refnet.network.add_elementwise(a, b, op).get_output(0)


def scan(loop, refnet, tensor, kind, axis, length):
    out = loop.add_loop_output(tensor, kind, axis)
    out.set_input(1, const(refnet, length))
    return out.get_output(0)


def test_cumulative_product_by_recurrence(refnet):
    """rec <- rec * x[i] over the 5 rows: LAST_VALUE is the product, CONCATENATE each partial product."""
    net = refnet.network
    x = refnet.input("x", (5, 3))
    loop = net.add_loop()
    loop.add_trip_limit(const(refnet, 5), COUNT)
    row = loop.add_iterator(x).get_output(0)
    rec = loop.add_recurrence(const(refnet, np.ones(3), np.float32))
    prod = ew(refnet, rec.get_output(0), row, E.PROD)
    rec.set_input(1, prod)
    last = loop.add_loop_output(rec.get_output(0), LAST)
    partial = scan(loop, refnet, prod, CONCAT, 0, 5)
    assert (tuple(last.get_output(0).shape), tuple(partial.shape)) == ((3,), (5, 3))
    x0 = randn(5, 3)
    out = refnet.run({"x": x0}, last=last.get_output(0), partial=partial)
    expected, acc = [], torch.ones(3, dtype=torch.float64)
    for i in range(5):
        acc = acc * x0[i].double()
        expected.append(acc)
    close(out["last"], acc)
    close(out["partial"], torch.stack(expected))


def test_rnn_cell_with_iterator_and_concatenate(refnet):
    """h <- tanh(W x[t] + U h + b) over a sequence of 4 steps, hidden states stacked on axis 1."""
    net = refnet.network
    T, N, H = 4, 3, 2
    x = refnet.input("x", (T, 1, N))
    w, u, b = randn(N, H), randn(H, H), randn(1, H)
    loop = net.add_loop()
    loop.add_trip_limit(const(refnet, T), COUNT)
    xt = loop.add_iterator(x, 0).get_output(0)  # (1, N)
    h = loop.add_recurrence(const(refnet, np.zeros((1, H)), np.float32))
    wx = net.add_matrix_multiply(xt, trt.MatrixOperation.NONE, const(refnet, w.numpy(), np.float32),
                                 trt.MatrixOperation.NONE).get_output(0)
    uh = net.add_matrix_multiply(h.get_output(0), trt.MatrixOperation.NONE, const(refnet, u.numpy(), np.float32),
                                 trt.MatrixOperation.NONE).get_output(0)
    pre = ew(refnet, ew(refnet, wx, uh, E.SUM), const(refnet, b.numpy(), np.float32), E.SUM)
    h_next = net.add_activation(pre, trt.ActivationType.TANH).get_output(0)
    h.set_input(1, h_next)
    states = scan(loop, refnet, h_next, CONCAT, 1, T)
    final = loop.add_loop_output(h.get_output(0), LAST).get_output(0)
    assert tuple(states.shape) == (1, T, H)
    x0 = randn(T, 1, N)
    out = refnet.run({"x": x0}, states=states, final=final)
    hs, hv = [], torch.zeros(1, H, dtype=torch.float64)
    for t in range(T):
        hv = torch.tanh(x0[t].double() @ w.double() + hv @ u.double() + b.double())
        hs.append(hv)
    close(out["states"], torch.stack(hs, 1))
    close(out["final"], hv)


def test_while_loop_counts_until_a_condition(refnet):
    """i <- i + 1 while i < limit; the WHILE condition is computed from the recurrence each iteration."""
    net = refnet.network
    limit = refnet.input("limit", (), trt.int32)
    loop = net.add_loop()
    i = loop.add_recurrence(const(refnet, 0))
    total = loop.add_recurrence(const(refnet, 0.0, np.float32))
    loop.add_trip_limit(ew(refnet, i.get_output(0), limit, E.LESS), WHILE)
    i.set_input(1, ew(refnet, i.get_output(0), const(refnet, 1), E.SUM))
    as_float = net.add_cast(i.get_output(0), trt.float32).get_output(0)
    total.set_input(1, ew(refnet, total.get_output(0), as_float, E.SUM))
    count = loop.add_loop_output(i.get_output(0), LAST).get_output(0)
    sums = loop.add_loop_output(total.get_output(0), LAST).get_output(0)
    for name, t in (("count", count), ("sum", sums)):
        t.name = name
        net.mark_output(t)
    plan = refnet.build()
    assert plan is not None, refnet.logger.errors
    for n in (0, 1, 7):
        out = run_plan(plan, {"limit": torch.tensor(n, dtype=torch.int32)})
        assert int(out["count"]) == n
        close(out["sum"], sum(range(n)))


def test_count_and_while_together_stop_at_the_first(refnet):
    net = refnet.network
    m = refnet.input("m", (), trt.int32)
    loop = net.add_loop()
    i = loop.add_recurrence(const(refnet, 0))
    loop.add_trip_limit(m, COUNT)
    loop.add_trip_limit(ew(refnet, i.get_output(0), const(refnet, 4), E.LESS), WHILE)
    i.set_input(1, ew(refnet, i.get_output(0), const(refnet, 1), E.SUM))
    out = loop.add_loop_output(i.get_output(0), LAST).get_output(0)
    out.name = "n"
    net.mark_output(out)
    plan = refnet.build()
    assert plan is not None, refnet.logger.errors
    for m0, expected in ((2, 2), (9, 4), (0, 0)):
        assert int(run_plan(plan, {"m": torch.tensor(m0, dtype=torch.int32)})["n"]) == expected


@pytest.mark.parametrize("axis", [0, 1])
def test_reverse_output_and_reverse_iterator(refnet, axis):
    """REVERSE stacks the iterations last first; an iterator with reverse=True reads slice M-1-i."""
    net = refnet.network
    x = refnet.input("x", (4, 4, 2))
    loop = net.add_loop()
    loop.add_trip_limit(const(refnet, 4), COUNT)
    fwd = loop.add_iterator(x, axis).get_output(0)
    back_layer = loop.add_iterator(x, axis, True)
    assert (back_layer.axis, back_layer.reverse) == (axis, True)
    back = back_layer.get_output(0)
    rev = scan(loop, refnet, fwd, REVERSE, 0, 4)
    cat_back = scan(loop, refnet, back, CONCAT, 0, 4)
    x0 = randn(4, 4, 2)
    out = refnet.run({"x": x0}, rev=rev, cat_back=cat_back)
    slices = [x0.select(axis, i) for i in range(4)]
    close(out["rev"], torch.stack(slices[::-1]))
    close(out["cat_back"], torch.stack(slices[::-1]))


def test_loop_invariant_tensors_and_a_conditional_in_the_body(refnet):
    """acc <- (acc + x[i]) if x[i].sum() > 0 else acc * 2: a conditional nested in the loop body, reading an
    outside tensor directly (`two`)."""
    net = refnet.network
    x = refnet.input("x", (6, 3))
    loop = net.add_loop()
    loop.add_trip_limit(const(refnet, 6), COUNT)
    row = loop.add_iterator(x).get_output(0)
    acc = loop.add_recurrence(const(refnet, np.zeros(3), np.float32))
    two = const(refnet, np.full(3, 2.0), np.float32)
    total = net.add_reduce(row, trt.ReduceOperation.SUM, 1, False).get_output(0)
    positive = ew(refnet, total, const(refnet, 0.0, np.float32), E.GREATER)
    cond = net.add_if_conditional()
    cond.set_condition(positive)
    a_in = cond.add_input(acc.get_output(0)).get_output(0)
    nxt = cond.add_output(ew(refnet, a_in, row, E.SUM), ew(refnet, a_in, two, E.PROD)).get_output(0)
    acc.set_input(1, nxt)
    out = loop.add_loop_output(acc.get_output(0), LAST).get_output(0)
    x0 = randn(6, 3)
    y = refnet.run({"x": x0}, y=out)["y"]
    a = torch.zeros(3, dtype=torch.float64)
    for i in range(6):
        a = a + x0[i].double() if x0[i].sum() > 0 else a * 2
    close(y, a)


def test_names_and_attributes(refnet):
    net = refnet.network
    loop = net.add_loop()
    assert loop.name == "(Unnamed Loop* 0)"
    limit = loop.add_trip_limit(const(refnet, 3), COUNT)
    it = loop.add_iterator(refnet.input("x", (3, 2)), 0)
    rec = loop.add_recurrence(const(refnet, np.zeros(2), np.float32))
    rec.set_input(1, ew(refnet, rec.get_output(0), it.get_output(0), E.SUM))
    out = loop.add_loop_output(rec.get_output(0), LAST)
    assert [la.name for la in (limit, it, rec, out)] == ["(Unnamed Layer* 1) [TripLimit]",
                                                         "(Unnamed Layer* 2) [Iterator]",
                                                         "(Unnamed Layer* 4) [Recurrence]",
                                                         "(Unnamed Layer* 6) [LoopOutput]"]
    assert (limit.kind, out.kind, out.axis, it.axis, it.reverse) == (COUNT, LAST, 0, 0, False)
    assert (limit.num_outputs, rec.num_inputs, out.num_inputs) == (0, 2, 1)
    assert all(la.ref.loop is loop.ref for la in (limit, it, rec, out))
    assert isinstance(rec.ref, trt.ILoopBoundaryLayer)
    it.axis = 1
    assert tuple(it.get_output(0).shape) == (3,)
    loop.name = "scan"
    assert loop.name == "scan"


# -- refusals ----------------------------------------------------------------------------------------------------
def _cumsum_loop(refnet, limit=True, next_value=True):
    net = refnet.network
    x = refnet.input("x", (4, 3))
    loop = net.add_loop()
    if limit:
        loop.add_trip_limit(const(refnet, 4), COUNT)
    row = loop.add_iterator(x).get_output(0)
    rec = loop.add_recurrence(const(refnet, np.zeros(3), np.float32))
    s = ew(refnet, rec.get_output(0), row, E.SUM)
    if next_value:
        rec.set_input(1, s)
    net.mark_output(loop.add_loop_output(rec.get_output(0), LAST).get_output(0))
    return loop, row, rec, s


def _expect_build_error(refnet, *patterns):
    assert refnet.build() is None
    assert any(all(p in m for p in patterns) for m in refnet.logger.errors), refnet.logger.errors


def test_a_loop_needs_a_trip_limit(refnet):
    _cumsum_loop(refnet, limit=False)
    _expect_build_error(refnet, "loop '(Unnamed Loop* 0)' has no trip limit")


def test_a_loop_has_one_count_limit(refnet):
    loop, *_ = _cumsum_loop(refnet)
    loop.add_trip_limit(const(refnet, 2), COUNT)
    _expect_build_error(refnet, "more than one COUNT trip limit")


def test_a_recurrence_needs_its_next_value(refnet):
    _cumsum_loop(refnet, next_value=False)
    _expect_build_error(refnet, "[Recurrence]", "has no next value: call set_input(1, tensor)")


def test_the_next_value_has_the_initial_shape(refnet):
    net = refnet.network
    loop, row, rec, s = _cumsum_loop(refnet, next_value=False)
    sh = net.add_shuffle(s)
    sh.reshape_dims = (1, 3)
    with pytest.raises(NetworkError, match=r"the next value \(input 1\) has shape \(1, 3\)"):
        rec.set_input(1, sh.get_output(0))
        refnet.network.get_output(0).shape  # noqa: B018 - the check runs when shapes are read


@pytest.mark.parametrize("leak", ["body", "iterator"])
def test_a_body_tensor_leaves_only_through_a_loop_output(refnet, leak):
    net = refnet.network
    loop, row, rec, s = _cumsum_loop(refnet)
    net.mark_output(net.add_unary(s, U.ABS).get_output(0) if leak == "body" else row)
    _expect_build_error(refnet, "inside loop '(Unnamed Loop* 0)'", "network output")


def test_last_value_takes_a_recurrence(refnet):
    loop, row, rec, s = _cumsum_loop(refnet)
    refnet.network.mark_output(loop.add_loop_output(s, LAST).get_output(0))
    _expect_build_error(refnet, "a LAST_VALUE loop output takes the output of an IRecurrenceLayer")


@pytest.mark.parametrize("kind, value, dtype, why", [
    (COUNT, [4], np.int32, "a COUNT trip limit takes a 0-D tensor"),
    (COUNT, 4.0, np.float32, "a COUNT trip limit takes a 0-D INT32 or INT64 tensor, got FLOAT"),
    (WHILE, 1, np.int32, "a WHILE trip limit takes a 0-D BOOL tensor, got INT32")])
def test_trip_limit_types_and_shapes(refnet, kind, value, dtype, why):
    """Checked at build, as TensorRT-RTX checks it."""
    loop, *_ = _cumsum_loop(refnet, limit=False)
    loop.add_trip_limit(const(refnet, value, dtype), kind)
    _expect_build_error(refnet, "[TripLimit]", why)


def test_iterator_axis_in_range(refnet):
    loop = refnet.network.add_loop()
    with pytest.raises(NetworkError, match="axis 2 is out of range for a rank-2 input; an IIteratorLayer needs"):
        loop.add_iterator(refnet.input("x", (3, 2)), 2)


def test_a_concatenation_needs_its_length(refnet):
    loop, row, rec, s = _cumsum_loop(refnet)
    out = loop.add_loop_output(s, CONCAT, 0)
    with pytest.raises(NetworkError, match=r"a CONCATENATE loop output needs its length: set_input\(1, "):
        out.get_output(0).shape  # noqa: B018


def test_running_past_the_iterated_axis_fails_at_run_time():
    """A trip count from a network input is only known when the engine runs: 5 iterations over 3 rows fail
    then, naming the iterator (nothing TensorRT-RTX builds can be run here to compare)."""
    from helpers.refnet import RefNet

    r = RefNet()
    net = r.network
    m = r.input("m", (), trt.int32)
    loop = net.add_loop()
    loop.add_trip_limit(m, COUNT)
    row = loop.add_iterator(r.input("x", (3, 2))).get_output(0)
    acc = loop.add_recurrence(net.add_constant((2,), trt.Weights(np.zeros(2, np.float32))).get_output(0))
    acc.set_input(1, net.add_elementwise(acc.get_output(0), row, E.SUM).get_output(0))
    out = loop.add_loop_output(acc.get_output(0), LAST).get_output(0)
    x0 = randn(3, 2)
    close(r.run({"m": torch.tensor(3, dtype=torch.int32), "x": x0}, y=out)["y"], x0.double().sum(0))
    with pytest.raises(NetworkError, match=r"\[Iterator\]': iteration 3 reads slice 3 of an axis of length 3"):
        run_plan(r.build(), {"m": torch.tensor(5, dtype=torch.int32), "x": x0})


def test_concatenation_axis_and_length(refnet):
    loop, row, rec, s = _cumsum_loop(refnet)
    with pytest.raises(NetworkError, match="axis -1 is refused"):
        loop.add_loop_output(s, CONCAT, -1)
    out = loop.add_loop_output(s, CONCAT, 2)
    out.set_input(1, const(refnet, 4))
    with pytest.raises(NetworkError, match="axis 2 is out of range for a rank-1 input"):
        out.get_output(0).shape  # noqa: B018


def test_an_unused_loop_still_needs_a_trip_limit(refnet):
    """TensorRT-RTX checks every loop at build, used or not."""
    net = refnet.network
    net.mark_output(net.add_unary(refnet.input("x", (3,)), U.NEG).get_output(0))
    net.add_loop()
    _expect_build_error(refnet, "loop '(Unnamed Loop* 0)' has no trip limit")


def test_a_reverse_iterator_needs_a_count_limit(refnet):
    """TensorRT-RTX builds it; TensorRT documents M as "the trip count computed from TripLimits of kind COUNT",
    so the reference refuses it (an entry of REFERENCE_STRICTER)."""
    net = refnet.network
    loop = net.add_loop()
    i = loop.add_recurrence(const(refnet, 0))
    loop.add_trip_limit(ew(refnet, i.get_output(0), const(refnet, 3), E.LESS), WHILE)
    i.set_input(1, ew(refnet, i.get_output(0), const(refnet, 1), E.SUM))
    row = loop.add_iterator(refnet.input("x", (3, 2)), 0, True).get_output(0)
    acc = loop.add_recurrence(const(refnet, np.zeros(2), np.float32))
    acc.set_input(1, ew(refnet, acc.get_output(0), row, E.SUM))
    net.mark_output(loop.add_loop_output(acc.get_output(0), LAST).get_output(0))
    _expect_build_error(refnet, "a reverse iterator counts from the COUNT trip limit, which the loop lacks")


def test_nested_loops(refnet):
    """For each row r of x (outer loop), the inner loop sums r[j] * j over its 4 columns; outer results stacked."""
    net = refnet.network
    x = refnet.input("x", (3, 4))
    outer = net.add_loop()
    outer.add_trip_limit(const(refnet, 3), COUNT)
    row = outer.add_iterator(x).get_output(0)
    inner = net.add_loop()
    inner.add_trip_limit(const(refnet, 4), COUNT)
    v = inner.add_iterator(row).get_output(0)
    j = inner.add_recurrence(const(refnet, 0.0, np.float32))
    j.set_input(1, ew(refnet, j.get_output(0), const(refnet, 1.0, np.float32), E.SUM))
    acc = inner.add_recurrence(const(refnet, 0.0, np.float32))
    acc.set_input(1, ew(refnet, acc.get_output(0), ew(refnet, v, j.get_output(0), E.PROD), E.SUM))
    dot = inner.add_loop_output(acc.get_output(0), LAST).get_output(0)
    out = scan(outer, refnet, dot, CONCAT, 0, 3)
    x0 = randn(3, 4)
    y = refnet.run({"x": x0}, y=out)["y"]
    close(y, [sum(float(x0[r, c]) * c for c in range(4)) for r in range(3)])


def test_a_loop_inside_a_conditional_branch(refnet):
    """if c: cumulative sum of the rows by a loop else: x[0]."""
    net = refnet.network
    x, c = refnet.input("x", (4, 3)), refnet.input("c", (), trt.bool)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    xi = cond.add_input(x).get_output(0)
    loop = net.add_loop()
    loop.add_trip_limit(const(refnet, 4), COUNT)
    row = loop.add_iterator(xi).get_output(0)
    acc = loop.add_recurrence(const(refnet, np.zeros(3), np.float32))
    acc.set_input(1, ew(refnet, acc.get_output(0), row, E.SUM))
    total = loop.add_loop_output(acc.get_output(0), LAST).get_output(0)
    first = net.add_slice(xi, (0, 0), (1, 3), (1, 1))
    flat = net.add_shuffle(first.get_output(0))
    flat.reshape_dims = (3,)
    out = cond.add_output(total, flat.get_output(0)).get_output(0)
    out.name = "y"
    net.mark_output(out)
    plan = refnet.build()
    assert plan is not None, refnet.logger.errors
    x0 = randn(4, 3)
    close(run_plan(plan, {"x": x0, "c": torch.tensor(True)})["y"], x0.double().sum(0))
    close(run_plan(plan, {"x": x0, "c": torch.tensor(False)})["y"], x0[0])


def test_a_recurrence_whose_next_value_shares_body_layers_with_another(refnet):
    """s = a + b; a <- s * x[i]; b <- s + 1 (an LSTM's h and c share their gates this way): the plan must order s
    before b's next value although the walk reaches b (a's companion) while s waits for its inputs."""
    net = refnet.network
    x = refnet.input("x", (4, 2))
    loop = net.add_loop()
    loop.add_trip_limit(const(refnet, 4), COUNT)
    row = loop.add_iterator(x).get_output(0)
    a = loop.add_recurrence(const(refnet, np.ones(2), np.float32))
    b = loop.add_recurrence(const(refnet, np.zeros(2), np.float32))
    s = ew(refnet, a.get_output(0), b.get_output(0), E.SUM)
    a_next = ew(refnet, s, row, E.PROD)
    a.set_input(1, a_next)
    b.set_input(1, ew(refnet, s, const(refnet, np.ones(2), np.float32), E.SUM))
    steps = scan(loop, refnet, a_next, CONCAT, 0, 4)
    x0 = randn(4, 2)
    out = refnet.run({"x": x0}, steps=steps)
    av, bv, expected = torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), []
    for i in range(4):
        sv = av + bv
        av, bv = sv * x0[i].double(), sv + 1
        expected.append(av)
    close(out["steps"], torch.stack(expected))

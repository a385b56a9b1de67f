"""ILoop: reference vs onnxruntime (ONNX Loop: trip count M, carried values for the recurrences, Gather for the
iterators, scan outputs for CONCATENATE/REVERSE); every export is parsed and built by TensorRT-RTX's parser."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_and_run

from helpers.onnx_layer_check import BOTH, build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

E = trt.ElementWiseOperation
LAST, CONCAT, REVERSE = trt.LoopOutput.LAST_VALUE, trt.LoopOutput.CONCATENATE, trt.LoopOutput.REVERSE


def const(net, value, dtype=np.int32):
    arr = np.array(value, dtype)
    return net.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def scan(net, loop, tensor, kind, axis, length):
    out = loop.add_loop_output(tensor, kind, axis)
    out.set_input(1, const(net, length))
    return out.get_output(0)


def _cumprod(count_type):
    def define(net, dt):
        x = net.add_input("x", dt, (4, 3))
        loop = net.add_loop()
        loop.add_trip_limit(const(net, 4, count_type), trt.TripLimit.COUNT)
        row = loop.add_iterator(x).get_output(0)
        back = loop.add_iterator(x, 0, True).get_output(0)
        rec = loop.add_recurrence(const(net, np.ones(3), trt.nptype(dt)))
        prod = net.add_elementwise(rec.get_output(0), row, E.PROD).get_output(0)
        rec.set_input(1, prod)
        return {"last": loop.add_loop_output(rec.get_output(0), LAST).get_output(0),
                "partial": scan(net, loop, prod, CONCAT, 1, 4),
                "rows_reversed": scan(net, loop, row, REVERSE, 0, 4),
                "back": scan(net, loop, back, CONCAT, 0, 4)}
    return define


@BOTH
def test_cumulative_product_loop(dt):
    check(_cumprod(np.int32), dt, expect_ops=("Loop",))


def test_int64_trip_count():
    check(_cumprod(np.int64), trt.float32, expect_ops=("Loop",))


def test_rnn_cell_with_a_conditional_in_the_body():
    """h <- tanh(x[t] W + h U) if t-th row sums > 0 else h; states stacked on axis 1."""
    rng = np.random.default_rng(5)

    def define(net, dt):
        x = net.add_input("x", dt, (5, 1, 3))
        loop = net.add_loop()
        loop.add_trip_limit(const(net, 5), trt.TripLimit.COUNT)
        xt = loop.add_iterator(x).get_output(0)
        h = loop.add_recurrence(const(net, np.zeros((1, 2)), np.float32))
        mm = trt.MatrixOperation.NONE
        w, u = const(net, rng.normal(size=(3, 2)), np.float32), const(net, rng.normal(size=(2, 2)), np.float32)
        wx = net.add_matrix_multiply(xt, mm, w, mm).get_output(0)
        uh = net.add_matrix_multiply(h.get_output(0), mm, u, mm).get_output(0)
        pre = net.add_elementwise(wx, uh, E.SUM).get_output(0)
        total = net.add_reduce(xt, trt.ReduceOperation.SUM, 3, False).get_output(0)
        cond = net.add_if_conditional()
        cond.set_condition(net.add_elementwise(total, const(net, 0.0, np.float32), E.GREATER).get_output(0))
        new = net.add_activation(cond.add_input(pre).get_output(0), trt.ActivationType.TANH).get_output(0)
        nxt = cond.add_output(new, cond.add_input(h.get_output(0)).get_output(0)).get_output(0)
        h.set_input(1, nxt)
        return {"states": scan(net, loop, nxt, CONCAT, 1, 5),
                "final": loop.add_loop_output(h.get_output(0), LAST).get_output(0)}
    check(define, trt.float32, expect_ops=("Loop",))


@pytest.mark.parametrize("limit", [0, 1, 5])
@pytest.mark.parametrize("with_count", [False, True])
def test_while_loop(limit, with_count):
    """s <- s + i, i <- i + 1 while i < limit (and, with a COUNT of 3, at most 3 times)."""
    def define(net, dt):
        loop = net.add_loop()
        i = loop.add_recurrence(const(net, 0))
        total = loop.add_recurrence(const(net, 0))
        loop.add_trip_limit(net.add_elementwise(i.get_output(0), const(net, limit), E.LESS).get_output(0),
                            trt.TripLimit.WHILE)
        if with_count:
            loop.add_trip_limit(const(net, 3), trt.TripLimit.COUNT)
        i.set_input(1, net.add_elementwise(i.get_output(0), const(net, 1), E.SUM).get_output(0))
        total.set_input(1, net.add_elementwise(total.get_output(0), i.get_output(0), E.SUM).get_output(0))
        return {"n": loop.add_loop_output(i.get_output(0), LAST).get_output(0),
                "s": loop.add_loop_output(total.get_output(0), LAST).get_output(0)}
    n = min(limit, 3) if with_count else limit
    model, ref, got = export_and_run(build(define, trt.float32), {})
    assert [n.op_type for n in model.graph.node].count("Loop") == 1
    for out in (ref, got):
        assert (int(out["n"]), int(out["s"])) == (n, sum(range(n)))  # s adds i before its update


def test_a_loop_layer_alone_has_no_lowering():
    from trtbuild.onnx_export.graph import GraphBuilder
    from trtbuild.onnx_export.lower import lower_layer

    net = build(_cumprod(np.int32), trt.float32)
    rec = next(layer for layer in net if layer.type == trt.LayerType.RECURRENCE)
    g = GraphBuilder(17)
    for t in (rec.get_input(0), rec.get_input(1), rec.get_output(0)):
        g.bind(t)
    with pytest.raises(OnnxExportError, match=r"a loop's recurrence is lowered with its loop \(an ONNX Loop\), not "
                                              r"on its own"):
        lower_layer(g, rec)


def _nested(net, dt):
    """A loop over the rows of x, each summed by an inner loop; and the same loop inside an If branch."""
    x, c = net.add_input("x", dt, (3, 4)), net.add_input("c", trt.bool, ())
    outer = net.add_loop()
    outer.add_trip_limit(const(net, 3), trt.TripLimit.COUNT)
    row = outer.add_iterator(x).get_output(0)
    inner = net.add_loop()
    inner.add_trip_limit(const(net, 4), trt.TripLimit.COUNT)
    acc = inner.add_recurrence(const(net, 0.0, trt.nptype(dt)))
    acc.set_input(1, net.add_elementwise(acc.get_output(0), inner.add_iterator(row).get_output(0), E.SUM)
                  .get_output(0))
    sums = scan(net, outer, inner.add_loop_output(acc.get_output(0), LAST).get_output(0), CONCAT, 0, 3)
    cond = net.add_if_conditional()
    cond.set_condition(c)
    xi = cond.add_input(x).get_output(0)
    loop = net.add_loop()
    loop.add_trip_limit(const(net, 3), trt.TripLimit.COUNT)
    first = loop.add_recurrence(net.add_unary(xi, trt.UnaryOperation.NEG).get_output(0))
    first.set_input(1, net.add_elementwise(first.get_output(0), xi, E.SUM).get_output(0))
    picked = cond.add_output(loop.add_loop_output(first.get_output(0), LAST).get_output(0), xi).get_output(0)
    return {"sums": sums, "picked": picked}


@pytest.mark.parametrize("taken", [True, False])
def test_nested_loops_and_a_loop_in_a_branch(taken):
    model = check(_nested, trt.float32, feeds=lambda net: {"x": np.arange(12, dtype=np.float32).reshape(3, 4),
                                                           "c": np.array(taken)}, expect_ops=("Loop", "If"))
    assert [n.op_type for n in model.graph.node].count("Loop") == 1  # the inner loop is in the outer one's body

"""IIfConditional: reference vs onnxruntime (ONNX If with then/else subgraphs), for both values of the
condition; every export is parsed and built by TensorRT-RTX's ONNX parser."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError
from trtbuild.onnx_export.graph import GraphBuilder
from trtbuild.onnx_export.lower import lower_layer

from helpers.onnx_layer_check import BOTH, build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

U = trt.UnaryOperation
RNG = np.random.default_rng(61)


def feeds(**conditions):
    def make(net):
        out = {name: np.array(v) for name, v in conditions.items()}
        for i in range(net.num_inputs):
            t = net.get_input(i)
            if t.name not in out:
                out[t.name] = RNG.uniform(-2, 2, tuple(t.shape)).astype(trt.nptype(t.dtype))
        return out
    return make


def _if_else(net, dt):
    x, z, c = net.add_input("x", dt, (2, 3)), net.add_input("z", dt, (2, 3)), net.add_input("c", trt.bool, ())
    cond = net.add_if_conditional()
    cond.set_condition(c)
    xi = cond.add_input(x).get_output(0)
    t = net.add_unary(net.add_unary(xi, U.EXP).get_output(0), U.NEG).get_output(0)
    f = net.add_elementwise(net.add_unary(xi, U.ABS).get_output(0), z, trt.ElementWiseOperation.SUM).get_output(0)
    return {"y": cond.add_output(t, f).get_output(0), "picked": cond.add_output(x, z).get_output(0)}


@BOTH
@pytest.mark.parametrize("taken", [True, False])
def test_if_else(dt, taken):
    model = check(_if_else, dt, feeds=feeds(c=taken), expect_ops=("If",))
    node = next(n for n in model.graph.node if n.op_type == "If")
    branches = {a.name: [m.op_type for m in a.g.node] for a in node.attribute}
    assert branches["then_branch"][:2] == ["Exp", "Neg"] and "Abs" in branches["else_branch"]


def _nested(net, dt):
    x, a, b = net.add_input("x", dt, (4,)), net.add_input("a", trt.bool, ()), net.add_input("b", trt.bool, ())
    outer = net.add_if_conditional()
    outer.set_condition(a)
    xi = outer.add_input(x).get_output(0)
    inner = net.add_if_conditional()
    inner.set_condition(b)
    xj = inner.add_input(xi).get_output(0)
    o = inner.add_output(net.add_unary(xj, U.EXP).get_output(0), xj).get_output(0)
    return {"y": outer.add_output(o, net.add_unary(xi, U.NEG).get_output(0)).get_output(0)}


@pytest.mark.parametrize("a, b", [(True, True), (True, False), (False, True)])
def test_nested_if(a, b):
    check(_nested, trt.float32, feeds=feeds(a=a, b=b), expect_ops=("If",))


def test_int32_and_scalar_outputs():
    def define(net, dt):
        x, s, c = net.add_input("x", trt.int32, (5,)), net.add_input("s", dt, ()), net.add_input("c", trt.bool, ())
        cond = net.add_if_conditional()
        cond.set_condition(c)
        xi, si = cond.add_input(x).get_output(0), cond.add_input(s).get_output(0)
        return {"i": cond.add_output(net.add_unary(xi, U.ABS).get_output(0), xi).get_output(0),
                "s2": cond.add_output(si, net.add_unary(si, U.NEG).get_output(0)).get_output(0)}
    for taken in (True, False):
        check(define, trt.float32, feeds=feeds(c=taken), expect_ops=("If",))


def test_an_output_layer_alone_has_no_lowering():
    net = build(_if_else, trt.float32)
    out = next(layer for layer in net if layer.type == trt.LayerType.CONDITIONAL_OUTPUT)
    g = GraphBuilder(17)
    for t in [out.get_input(0), out.get_input(1)] + [out.get_output(0)]:
        g.bind(t)
    with pytest.raises(OnnxExportError, match=r"a conditional's output layer is lowered with its conditional \(an "
                                              r"ONNX If\), not on its own"):
        lower_layer(g, out)


def test_every_layer_output_leaves_out_the_branches():
    """export_onnx(all_outputs=True) makes every layer output a graph output, except those computed inside the
    conditional (they live in its subgraphs)."""
    from trtbuild.onnx_export import export_onnx

    net = build(_if_else, trt.float32)
    names = {o.name for o in export_onnx(net, all_outputs=True).graph.output}
    layers = list(net)
    inside = {la.get_output(0).name for la in layers
              if la.type in (trt.LayerType.UNARY, trt.LayerType.ELEMENTWISE, trt.LayerType.CONDITIONAL_INPUT)}
    assert len(inside) == 5 and {"y", "picked"} <= names and not names & inside

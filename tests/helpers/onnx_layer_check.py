"""Build a small network on the reference backend, export it to ONNX, run it in onnxruntime and
compare with the reference: fp32 within 1e-5, fp16 within a few fp16 ulps. Shared by the ONNX
layer tests; `w` draws weights from one seeded generator."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import export_and_run, random_feeds

F32, F16 = trt.float32, trt.float16
NP = {F32: np.float32, F16: np.float16}
TOL = {F32: dict(rtol=1e-5, atol=1e-5), F16: dict(rtol=4e-3, atol=4e-3)}
RNG = np.random.default_rng(1234)


def w(shape, dt, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(NP[dt])


def build(define, dt):
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    outs = define(net, dt)
    for name, t in outs.items():
        t.name = name
        net.mark_output(t)
    return net


def check(define, dt=F32, feeds=None, low=-2.0, high=2.0, tol=None, expect_ops=()):
    net = build(define, dt)
    feeds = feeds(net) if callable(feeds) else random_feeds(net, seed=7, low=low, high=high)
    model, ref, got = export_and_run(net, feeds)
    for name in ref:
        r, g = ref[name], got[name]
        assert g.shape == r.shape, f"{name}: onnxruntime {g.shape} vs reference {r.shape}"
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r, err_msg=name)
        else:
            np.testing.assert_allclose(g, r, equal_nan=True, err_msg=name, **(tol or TOL.get(dt, TOL[F32])))
    ops = [n.op_type for n in model.graph.node]
    for op in expect_ops:
        assert op in ops, f"expected an ONNX {op} node, got {ops}"
    return model


def one(net, dt, shape, add):
    x = net.add_input("x", dt, shape)
    return {"y": add(net, x).get_output(0)}


BOTH = pytest.mark.parametrize("dt", [F32, F16], ids=["fp32", "fp16"])

"""The normalization builders (trtbuild.layers.l2norm/lrn/batchnorm/normalization), exported to
ONNX and run by onnxruntime, against PyTorch: the builder tests' cases and tolerances, with
onnxruntime as the engine instead of the reference backend.

- fp32 (tests/layers/test_{l2norm,lrn,batchnorm,normalization}.py): elementwise, an element fails
  only if its error exceeds both 1e-6 and 1e-5 * |expected| (float64 torch).
- fp16/bf16 (tests/layers/test_fp16_robustness.py): the "safe" strategies stay finite and within
  rel_error 1e-2 of float64 torch for |x| from 1e-3 to 6e4 and on zeros.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.builder_cases import GROUP_SHAPES
from helpers.layer_harness import random_affine
import trtbuild.reference as trt
from trtbuild.onnx_export import export_onnx, run_onnxruntime
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

import trtbuild.layers.batchnorm as bn_mod
import trtbuild.layers.l2norm as l2norm_mod
import trtbuild.layers.lrn as lrn_mod
import trtbuild.layers.normalization as norm_mod
from trtbuild.models.pytorch import L2Norm

TRT_OF = {torch.float32: trt.float32, torch.float16: trt.float16, torch.bfloat16: trt.bfloat16}


def through_onnxruntime(build, x: torch.Tensor, input_shape=None):
    """Build `build(network, input)` on the reference backend, export, run onnxruntime on x."""
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    inp = net.add_input("x", TRT_OF[x.dtype], tuple(input_shape or x.shape))
    y = build(net, inp)
    net.mark_output(y)
    model = export_onnx(net)
    return torch.from_numpy(run_onnxruntime(model, {"x": x})[y.name]).double(), model


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what=""):
    a, e = actual.double(), expected.double()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert torch.isfinite(a).all(), f"{what}: non-finite outputs"
    err = (a - e).abs()
    bad = (err > atol) & (err > rtol * e.abs())
    assert not bad.any(), f"{what}: {int(bad.sum())}/{bad.numel()} elements off; max abs err {err.max().item():.3g}"


def rel_error(actual, expected, dtype) -> float:
    """max |a - r| / max(|r|, 1e-2 * max|r|, tiny(dtype)); inf if `actual` has non-finite values."""
    a, r = actual.double(), expected.double()
    if not torch.isfinite(a).all():
        return float("inf")
    floor = max(1e-2 * r.abs().max().item(), torch.finfo(dtype).tiny, 1e-30)
    return ((a - r).abs() / r.abs().clamp_min(floor)).max().item()


def _x(shape, seed=0, scale=1.0, shift=0.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale + shift


# ---------------------------------------------------------------- fp32: the builder tests' cases
@pytest.mark.parametrize("strategy", ["safe", "naive"])
@pytest.mark.parametrize("shape", [(1, 512, 5, 5), (2, 16, 3, 7), (3, 1, 2, 2)])
def test_l2norm(shape, strategy):
    x = _x(shape, sum(shape), 3.0)
    w = np.random.RandomState(0).uniform(5, 25, shape[1])
    m = L2Norm(shape[1], 1.0).double()
    m.weight.data = torch.tensor(w)
    y, _ = through_onnxruntime(lambda n, t: l2norm_mod.l2norm(n, t, w, "conv4_3_norm", strategy=strategy), x.float())
    assert_close(y, m(x), what=f"l2norm {shape} {strategy}")


LRN_SHAPES = [(2, 7, 5), (2, 9, 3, 4), (1, 6, 2, 3, 4)]


@pytest.mark.parametrize("shape", LRN_SHAPES)
@pytest.mark.parametrize("impl,sizes,params,scale", [("native", [1, 3, 5, 15], (1e-2, 0.75, 1.0), 1.0),
                                                     ("composed", [1, 2, 4, 5, 6, 16, 21], (0.5, 0.6, 2.0), 2.0)])
def test_lrn(shape, impl, sizes, params, scale):
    for size in sizes:
        x = _x(shape, size, scale)
        y, model = through_onnxruntime(lambda n, t, size=size: lrn_mod.lrn(n, t, size, *params, "norm1", impl=impl),
                                       x.float())
        assert_close(y, F.local_response_norm(x, size, *params), what=f"{impl} {shape} size {size}")
        if impl == "native":
            assert "LRN" in [node.op_type for node in model.graph.node]


BN_CASES = [((4, 6), nn.BatchNorm1d), ((3, 6, 5), nn.BatchNorm1d), ((2, 6, 4, 5), nn.BatchNorm2d),
            ((2, 6, 3, 4, 2), nn.BatchNorm3d)]


def _bn(cls, seed=0):
    g = torch.Generator().manual_seed(seed)
    m = cls(6).double()
    with torch.no_grad():
        m.weight.copy_(torch.rand(6, generator=g, dtype=torch.float64) + 0.5)
        m.bias.copy_(torch.randn(6, generator=g, dtype=torch.float64))
        m.running_mean.copy_(torch.randn(6, generator=g, dtype=torch.float64))
        m.running_var.copy_(torch.rand(6, generator=g, dtype=torch.float64) + 0.3)
    return m


@pytest.mark.parametrize("shape, cls", BN_CASES)
def test_batchnorm_eval_and_batch_stats(shape, cls):
    m = _bn(cls).eval()
    x = _x(shape, 1, 2.0, 0.5)
    params = (m.weight.detach().numpy(), m.bias.detach().numpy(), m.running_mean.numpy(), m.running_var.numpy(), m.eps)
    y, _ = through_onnxruntime(lambda n, t: bn_mod.batchnorm(n, t, *params, "bn1"), x.float())
    assert_close(y, m(x), what=f"eval {shape}")
    m.train()
    y, _ = through_onnxruntime(lambda n, t: bn_mod.batchnorm_batch_stats(n, t, params[0], params[1], m.eps, "bn1"),
                               x.float())
    assert_close(y, m(x), what=f"train {shape}")


@pytest.mark.parametrize("impl", ["native", "composed"])
@pytest.mark.parametrize("shape, cls", [((2, 6, 7), nn.InstanceNorm1d), ((2, 6, 4, 5), nn.InstanceNorm2d),
                                        ((2, 6, 3, 4, 2), nn.InstanceNorm3d)])
def test_instance_norm(shape, cls, impl):
    m = cls(6, affine=True).double()
    gamma, beta = random_affine(m)
    x = _x(shape, 0, 3.0, 1.0)
    y, _ = through_onnxruntime(lambda n, t: norm_mod.instance_norm(n, t, gamma, beta, m.eps, "in1", impl=impl),
                               x.float())
    assert_close(y, m(x), what=f"instance {shape} {impl}")


# TensorRT's group normalization needs spatial dims: the builder refuses impl='native' on (N, C)
@pytest.mark.parametrize("shape, groups, impl",
                         [(s, g, i) for s, g in GROUP_SHAPES for i in ("auto", "native", "composed")
                          if not (len(s) == 2 and i == "native")])
def test_group_norm(shape, groups, impl):
    m = nn.GroupNorm(groups, shape[1], eps=1e-4).double()
    gamma, beta = random_affine(m, seed=groups)
    x = _x(shape, groups, 3.0, 1.0)
    y, _ = through_onnxruntime(lambda n, t: norm_mod.group_norm(n, t, groups, gamma, beta, m.eps, "gn1", impl=impl),
                               x.float())
    assert_close(y, m(x), what=f"group {shape} G={groups} {impl}")


@pytest.mark.parametrize("impl", ["auto", "composed"])
@pytest.mark.parametrize("shape, normalized", [((2, 6, 7), (7,)), ((2, 6, 4, 5), (6, 4, 5)), ((2, 6, 4, 5), (4, 5)),
                                               ((3, 8), 8)])
def test_layer_norm(shape, normalized, impl):
    m = nn.LayerNorm(normalized).double()
    gamma, beta = random_affine(m)
    x = _x(shape, 0, 3.0, 1.0)
    y, model = through_onnxruntime(lambda n, t: norm_mod.layer_norm(n, t, normalized, gamma, beta, m.eps, "ln",
                                                                    impl=impl),
                                   x.float())
    assert_close(y, m(x), what=f"layer {shape} {normalized} {impl}")


@pytest.mark.parametrize("impl", ["native", "composed"])
def test_group_norm_dynamic_batch(impl):
    m = nn.GroupNorm(2, 4).double()
    gamma, beta = random_affine(m)
    x = _x((3, 4, 2, 3))
    y, model = through_onnxruntime(lambda n, t: norm_mod.group_norm(n, t, 2, gamma, beta, m.eps, "gn", impl=impl),
                                   x.float(), input_shape=(-1, 4, 2, 3))
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    assert_close(y, m(x), what=impl)


_G6, _B6 = np.random.RandomState(2).uniform(0.5, 1.5, 6), np.random.RandomState(3).uniform(-0.5, 0.5, 6)
_T6 = [torch.tensor(v) for v in (_G6, _B6)]
_CH = [torch.tensor(v) for v in (_B6, _G6 + 0.2)]  # running mean, var
DYNAMIC_BUILDS = {  # label: (build(network, x), torch reference on float64)
    "l2norm": (lambda n, t: l2norm_mod.l2norm(n, t, _G6, "l2"),
               lambda x: x / (x.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
               * _T6[0].reshape(1, -1, *[1] * (x.dim() - 2))),
    "lrn composed 4": (lambda n, t: lrn_mod.lrn(n, t, 4, 1e-2, 0.75, 1.0, "lrn", impl="composed"),
                       lambda x: F.local_response_norm(x, 4, 1e-2, 0.75, 1.0)),
    "lrn auto 3": (lambda n, t: lrn_mod.lrn(n, t, 3, 1e-2, 0.75, 1.0, "lrn"),
                   lambda x: F.local_response_norm(x, 3, 1e-2, 0.75, 1.0)),
    "batchnorm": (lambda n, t: bn_mod.batchnorm(n, t, _G6, _B6, _B6, _G6 + 0.2, 1e-5, "bn"),
                  lambda x: F.batch_norm(x, _CH[0], _CH[1], _T6[0], _T6[1], training=False, eps=1e-5)),
    "batchnorm_batch_stats": (lambda n, t: bn_mod.batchnorm_batch_stats(n, t, _G6, _B6, 1e-5, "bs"),
                              lambda x: F.batch_norm(x, None, None, _T6[0], _T6[1], training=True, eps=1e-5)),
    **{f"instance_norm {impl}": (lambda n, t, impl=impl: norm_mod.instance_norm(n, t, _G6, _B6, 1e-5, "in", impl=impl),
                                 lambda x: F.instance_norm(x, weight=_T6[0], bias=_T6[1], eps=1e-5))
       for impl in ("native", "composed")},
    **{f"group_norm {impl}": (lambda n, t, impl=impl: norm_mod.group_norm(n, t, 3, _G6, _B6, 1e-5, "gn", impl=impl),
                              lambda x: F.group_norm(x, 3, _T6[0], _T6[1], eps=1e-5))
       for impl in ("native", "composed")},
}
DYNAMIC_SIZES = {(-1, 6, -1, -1): [(1, 6, 5, 7), (3, 6, 8, 3)], (-1, 6, -1, -1, -1): [(1, 6, 3, 5, 4), (2, 6, 2, 3, 6)],
                 (2, 6, -1, 5): [(2, 6, 3, 5), (2, 6, 7, 5)]}


@pytest.mark.parametrize("shape", DYNAMIC_SIZES, ids=["NxCxHxW", "NxCxDxHxW", "H only"])
@pytest.mark.parametrize("label", DYNAMIC_BUILDS)
def test_dynamic_batch_and_spatial_dims(label, shape):
    """One export of a network with dynamic N/H/W (tests/layers/test_dynamic_shapes.py's shapes) keeps
    those dims symbolic and runs at two sizes in onnxruntime, as PyTorch computes."""
    build, expected = DYNAMIC_BUILDS[label]
    net = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    y = build(net, net.add_input("x", trt.float32, shape))
    net.mark_output(y)
    model = export_onnx(net)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.HasField("dim_value") for d in dims] == [d >= 0 for d in shape]
    for size in DYNAMIC_SIZES[shape]:
        x = _x(size)
        got = torch.from_numpy(run_onnxruntime(model, {"x": x.float()})[y.name]).double()
        assert_close(got, expected(x.float().double()), what=f"{label} at {size}")


# ---------------------------------------------------------------- fp16/bf16: the robustness cases
MAGNITUDES = [1e-3, 1.0, 11.0, 64.0, 1e3, 6e4, 0.0]
R = np.random.RandomState(0)
G16, B16 = R.uniform(0.5, 1.5, 16), R.uniform(-0.5, 0.5, 16)
W512 = R.uniform(10, 30, 512)


def _bn_params(M):
    r = np.random.RandomState(1)
    s = M if M > 0 else 1.0
    gamma, beta = G16.copy(), B16.copy()
    gamma[:2], beta[:2] = 1e-3, 0.0
    return gamma, beta, 0.1 * s * r.uniform(-1, 1, 16), s * s * r.uniform(0.2, 0.5, 16), 1e-5


def _robust_case(label, M):
    """(input shape, build(network, x), float64 reference(x)) with strategy='safe'."""
    if label == "l2norm":
        m = L2Norm(512, 1.0).double()
        m.weight.data = torch.tensor(W512)
        return (1, 512, 3, 3), lambda n, x: l2norm_mod.l2norm(n, x, W512, "l2"), m
    if label.startswith("lrn"):
        impl = label.split("_")[1]
        return ((2, 32, 3, 3), lambda n, x: lrn_mod.lrn(n, x, 5, 1e-4, 0.75, 2.0, "lrn", impl=impl),
                lambda x: F.local_response_norm(x, 5, 1e-4, 0.75, 2.0))
    if label == "batchnorm":
        p = _bn_params(M)
        m = nn.BatchNorm2d(16, eps=p[4]).double().eval()
        m.weight.data, m.bias.data = torch.tensor(p[0]), torch.tensor(p[1])
        m.running_mean.data, m.running_var.data = torch.tensor(p[2]), torch.tensor(p[3])
        return (2, 16, 3, 3), lambda n, x: bn_mod.batchnorm(n, x, *p, "bn"), m
    if label == "batch_stats":
        m = nn.BatchNorm2d(16).double().train()
        m.weight.data, m.bias.data = torch.tensor(G16), torch.tensor(B16)
        return (4, 16, 3, 3), lambda n, x: bn_mod.batchnorm_batch_stats(n, x, G16, B16, 1e-5, "bnt"), m
    kind, impl = label.split("_")
    if kind == "instance":
        m = nn.InstanceNorm2d(16, affine=True).double()
        fn = lambda n, x: norm_mod.instance_norm(n, x, G16, B16, 1e-5, "in", impl=impl)
    elif kind == "group":
        m = nn.GroupNorm(4, 16).double()
        fn = lambda n, x: norm_mod.group_norm(n, x, 4, G16, B16, 1e-5, "gn", impl=impl)
    else:
        m = nn.LayerNorm(16).double()
        fn = lambda n, x: norm_mod.layer_norm(n, x, 16, G16, B16, 1e-5, "ln", impl=impl)
    m.weight.data, m.bias.data = torch.tensor(G16), torch.tensor(B16)
    return ((2, 16, 8, 8) if kind != "layer" else (2, 8, 16)), fn, m


ROBUST = ["l2norm", "lrn_native", "lrn_composed", "batchnorm", "batch_stats", "instance_native", "instance_composed",
          "group_native", "group_composed", "layer_native", "layer_composed"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("label", ROBUST)
def test_safe_strategy_stays_within_1e_2(label, dtype):
    for M in MAGNITUDES:
        shape, build, reference = _robust_case(label, M)
        x = ((torch.rand(shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1) * M).to(dtype)
        y, model = through_onnxruntime(build, x)
        assert model.graph.output[0].type.tensor_type.elem_type == {torch.float16: 10, torch.bfloat16: 16}[dtype]
        with torch.no_grad():
            expected = reference(x.double())
        err = rel_error(y, expected, dtype)
        assert err <= 1e-2, f"{label} {dtype} M={M}: rel err {err:.3g}"

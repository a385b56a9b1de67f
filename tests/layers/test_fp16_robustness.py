"""fp16/bf16 robustness of the normalization builders: the safe strategies stay finite and within
1e-2 (metric: layer_harness.rel_error) of float64 torch from |x| ~ 1e-3 to 6e4 and on zeros; the
naive compositions fail on inputs chosen to break them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trtbuild.reference as trt
import trtbuild.reference
from helpers.layer_harness import new_network, real_trt_or_skip, rel_error, run_builder
from trtbuild.layers.batchnorm import batchnorm, batchnorm_batch_stats
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.lrn import lrn
from trtbuild.layers.normalization import group_norm, instance_norm, layer_norm
from trtbuild.models.pytorch import L2Norm

MAGNITUDES = [1e-3, 1.0, 11.0, 64.0, 1e3, 6e4, 0.0]
DTYPES = [torch.float16, torch.bfloat16]
R = np.random.RandomState(0)
G16, B16 = R.uniform(0.5, 1.5, 16), R.uniform(-0.5, 0.5, 16)
W512 = R.uniform(10, 30, 512)


def _l2(strategy):
    m = L2Norm(512, 1.0).double()
    m.weight.data = torch.tensor(W512)
    return (lambda n, x: l2norm(n, x, W512, "l2", strategy=strategy)), m


def _bn_params(M, dead=False):
    r = np.random.RandomState(1)
    s = M if M > 0 else 1.0
    gamma, beta = G16.copy(), B16.copy()
    gamma[:2], beta[:2] = 1e-3, 0.0  # nearly pruned channels
    mean, var, eps = 0.1 * s * r.uniform(-1, 1, 16), s * s * r.uniform(0.2, 0.5, 16), 1e-5
    if dead:
        mean[2], var[2], eps = 0.0, 0.0, 1e-12
    return gamma, beta, mean, var, eps


def _bn_module(params):
    gamma, beta, mean, var, eps = params
    m = nn.BatchNorm2d(16, eps=eps).double().eval()
    m.weight.data, m.bias.data = torch.tensor(gamma), torch.tensor(beta)
    m.running_mean.data, m.running_var.data = torch.tensor(mean), torch.tensor(var)
    return m


def _case(label, strategy, M):
    """(input shape, build(network, x) -> ITensor, float64 reference(x))."""
    if label == "l2norm":
        build, m = _l2(strategy)
        return (1, 512, 3, 3), build, m
    if label.startswith("lrn"):
        impl = label.split("_")[1]
        return ((2, 32, 3, 3), lambda n, x: lrn(n, x, 5, 1e-4, 0.75, 2.0, "lrn", impl=impl, strategy=strategy),
                lambda x: F.local_response_norm(x, 5, 1e-4, 0.75, 2.0))
    if label in ("batchnorm", "batchnorm_dead"):
        params = _bn_params(M, dead=label == "batchnorm_dead")
        return (2, 16, 3, 3), lambda n, x: batchnorm(n, x, *params, "bn", strategy=strategy), _bn_module(params)
    if label == "batch_stats":
        m = nn.BatchNorm2d(16).double().train()
        m.weight.data, m.bias.data = torch.tensor(G16), torch.tensor(B16)
        return (4, 16, 3, 3), lambda n, x: batchnorm_batch_stats(n, x, G16, B16, 1e-5, "bnt", strategy=strategy), m
    kind, impl = label.split("_")
    if kind == "instance":
        m = nn.InstanceNorm2d(16, affine=True).double()
        fn = lambda n, x: instance_norm(n, x, G16, B16, 1e-5, "in", impl=impl, strategy=strategy)
    elif kind == "group":
        m = nn.GroupNorm(4, 16).double()
        fn = lambda n, x: group_norm(n, x, 4, G16, B16, 1e-5, "gn", impl=impl, strategy=strategy)
    else:
        m = nn.LayerNorm(16).double()
        fn = lambda n, x: layer_norm(n, x, 16, G16, B16, 1e-5, "ln", impl=impl, strategy=strategy)
    m.weight.data, m.bias.data = torch.tensor(G16), torch.tensor(B16)
    return ((2, 16, 8, 8) if kind != "layer" else (2, 8, 16)), fn, m


LABELS = ["l2norm", "lrn_native", "lrn_composed", "batchnorm", "batchnorm_dead", "batch_stats", "instance_native",
          "instance_composed", "group_native", "group_composed", "layer_native", "layer_composed"]


def _input(shape, M, dtype, label):
    x = (torch.rand(shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1) * M
    if label == "batchnorm_dead":
        x[:, 2] = 0.0  # the dead channel's input
    return x.to(dtype)


def _run(label, strategy, M, dtype, trt_module=trtbuild.reference):
    shape, build, reference = _case(label, strategy, M)
    x = _input(shape, M, dtype, label)
    y, _ = run_builder(lambda n, t: build(n, t), x, trt_module=trt_module)
    with torch.no_grad():
        expected = reference(x.double())
    return y, expected


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("label", LABELS)
def test_safe_is_finite_and_within_1e_2(label, dtype):
    for M in MAGNITUDES:
        y, expected = _run(label, "safe", M, dtype)
        assert y.dtype == dtype
        assert torch.isfinite(y).all(), f"{label} M={M}: {int((~torch.isfinite(y)).sum())} non-finite"
        err = rel_error(y, expected)
        assert err <= 1e-2, f"{label} {dtype} M={M}: rel err {err:.3g}"


# (label, magnitude, dtype): inputs on which the naive composition breaks, and why
NAIVE_BREAKS = [
    ("l2norm", 64.0, torch.float16),          # sum of 512 squares ~ 7e5 > 65504 -> x / inf = 0
    ("l2norm", 6e4, torch.float16),           # x^2 itself overflows
    ("l2norm", 0.0, torch.float16),           # eps = 1e-10 rounds to 0 in fp16 -> 0 / 0 = NaN
    ("lrn_composed", 1e3, torch.float16),     # x^2 > 65504 -> (k + alpha * inf)^-beta = 0
    ("lrn_composed", 6e4, torch.float16),
    ("batchnorm", 6e4, torch.float16),        # pruned channels: folded scale 1e-3 / 3e4 ~ 3e-8 is 0 in fp16 weights
    ("batchnorm_dead", 1.0, torch.float16),   # folded scale 1e6 -> inf in fp16 weights, inf * 0 = NaN
    ("batchnorm_dead", 0.0, torch.float16),
    ("batch_stats", 1e3, torch.float16),      # (x - mean)^2 overflows -> var = inf
    ("batch_stats", 6e4, torch.float16),
    ("instance_composed", 1e3, torch.float16),
    ("group_composed", 6e4, torch.float16),
    ("layer_composed", 1e3, torch.float16),
    ("batch_stats", 1.0, torch.bfloat16),     # bf16: mean, d and var rounded to 8 bits
    ("layer_composed", 1.0, torch.bfloat16),
]


@pytest.mark.parametrize("label, M, dtype", NAIVE_BREAKS)
def test_naive_breaks_where_safe_holds(label, M, dtype):
    naive, expected = _run(label, "naive", M, dtype)
    failed = (not torch.isfinite(naive).all()) or rel_error(naive, expected) > 1e-2
    assert failed, f"naive {label} M={M} unexpectedly passed (rel err {rel_error(naive, expected):.3g})"
    safe, expected = _run(label, "safe", M, dtype)
    assert torch.isfinite(safe).all() and rel_error(safe, expected) <= 1e-2


def test_naive_l2norm_is_fine_below_the_overflow():
    # the naive composition is not wrong in range: at |x| <= 1 it matches as well as the safe one
    naive, expected = _run("l2norm", "naive", 1.0, torch.float16)
    assert rel_error(naive, expected) <= 1e-2


def test_l2norm_safe_fp16_stays_in_fp16_and_lrn_safe_uses_an_fp32_island():
    _, network = new_network()
    x = network.add_input("x", trt.DataType.HALF, (1, 512, 2, 2))
    l2norm(network, x, W512, "l2")
    types = {network.get_layer(i).name: network.get_layer(i).get_output(0).dtype for i in range(network.num_layers)}
    assert types["l2/prescaled"] == types["l2/sumsq"] == types["l2/div"] == trt.DataType.HALF
    assert types["l2/eps_scaled_f32"] == trt.DataType.FLOAT  # only eps / m is computed in fp32
    _, network = new_network()
    x = network.add_input("x", trt.DataType.HALF, (1, 32, 2, 2))
    lrn(network, x, 5, 1e-4, 0.75, 2.0, "lrn", impl="composed")
    types = {network.get_layer(i).name: network.get_layer(i).get_output(0).dtype for i in range(network.num_layers)}
    assert types["lrn/sq"] == types["lrn/window_avg"] == trt.DataType.FLOAT
    assert types["lrn/from_f32"] == trt.DataType.HALF


@pytest.mark.tensorrt
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("label", LABELS)
def test_safe_on_real_tensorrt(label, dtype):
    """The same builders on real TensorRT (skipped without tensorrt and a CUDA GPU)."""
    real = real_trt_or_skip()
    limit = 1e-4 if dtype == torch.float32 else 1e-2
    for M in MAGNITUDES:
        y, expected = _run(label, "safe", M, dtype, trt_module=real)
        assert torch.isfinite(y).all(), f"{label} M={M}: non-finite outputs on TensorRT"
        err = rel_error(y, expected)
        assert err <= limit, f"{label} {dtype} M={M}: rel err {err:.3g} on TensorRT {real.__version__}"

"""The reference backend's pessimistic arithmetic model (trtbuild/reference/arithmetic.py): fp16/bf16
layers round every step and accumulate sequentially in their own type. Hand-computed cases, the
plan round trip, fp32 bit-identity, and the builders' safe strategies under the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trtbuild.reference as trt
from trtbuild.engine.quick import run_builder
from trtbuild.layers.batchnorm import batchnorm_batch_stats
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.lrn import lrn
from trtbuild.layers.normalization import group_norm, layer_norm
from trtbuild.models.pytorch import L2Norm
from trtbuild.parity.compare import robust_rel_error
from trtbuild.reference import arithmetic
from trtbuild.reference.core import NetworkError

PESS, DEFAULT = arithmetic.PESSIMISTIC, arithmetic.DEFAULT


def _run(fn, x, model):
    with arithmetic.using(model):
        return run_builder(fn, x)


def _reduce(op, axes=1 << 1):
    return lambda net, x: net.add_reduce(x, op, axes, False).get_output(0)


def test_sequential_fp16_sum_rounds_after_each_add():
    x = torch.tensor([[2048.0, 1, 1, 1, 1]], dtype=torch.float16)
    f = _reduce(trt.ReduceOperation.SUM)
    assert _run(f, x, DEFAULT).item() == 2052.0  # fp32 sum 2052, exact in fp16
    assert _run(f, x, PESS).item() == 2048.0  # 2048 + 1 = 2049 rounds to 2048 (ties to even), four times
    # order matters under the model: the ones first add up to 4 exactly, then 2052
    assert _run(f, x.flip(-1), PESS).item() == 2052.0


def test_many_small_values_stagnate():
    # 4096 ones: an fp16 accumulator stops at 2048 (2048 + 1 rounds back to 2048)
    x = torch.ones(1, 4096, dtype=torch.float16)
    assert _run(_reduce(trt.ReduceOperation.SUM), x, PESS).item() == 2048.0
    assert _run(_reduce(trt.ReduceOperation.SUM), x, DEFAULT).item() == 4096.0
    assert _run(_reduce(trt.ReduceOperation.AVG), x, PESS).item() == 0.5  # 2048 / 4096
    # bf16: 8 bits of mantissa, the accumulator stops at 256
    xb = torch.ones(1, 1000, dtype=torch.bfloat16)
    assert _run(_reduce(trt.ReduceOperation.SUM), xb, PESS).item() == 256.0


def test_reduction_over_several_axes_is_row_major_sequential():
    x = torch.tensor([[[2048.0, 1.0], [1.0, 1.0]]], dtype=torch.float16)
    assert _run(_reduce(trt.ReduceOperation.SUM, 0b110), x, PESS).item() == 2048.0
    assert _run(_reduce(trt.ReduceOperation.SUM, 0b110), x, DEFAULT).item() == 2052.0  # 2051 rounded once


def _layernorm(net, x):
    n = x.shape[-1]
    scale = net.add_constant((1, 1, n), trt.Weights(np.ones((1, 1, n), np.float16))).get_output(0)
    bias = net.add_constant((1, 1, n), trt.Weights(np.zeros((1, 1, n), np.float16))).get_output(0)
    layer = net.add_normalization(x, scale, bias, 1 << 2)
    layer.epsilon = 0.0
    return layer.get_output(0)


def test_normalization_mean_is_accumulated_in_fp16():
    # x = [2048, 1 x 7, 0 x 8]: fp32 mean 2055/16 = 128.4375; the fp16 running sum stays at 2048,
    # so the pessimistic mean is 128 exactly, and so is every subsequent difference of the zeros
    row = [2048.0] + [1.0] * 7 + [0.0] * 8
    x = torch.tensor([[row]], dtype=torch.float16)
    x64 = x.double()
    ref = (x64 - x64.mean(-1, keepdim=True)) / x64.var(-1, unbiased=False, keepdim=True).sqrt()
    y_def, y_pess = _run(_layernorm, x, DEFAULT).double(), _run(_layernorm, x, PESS).double()
    assert torch.allclose(y_def, ref.to(torch.float16).double(), atol=0, rtol=2e-3)
    # pessimistic: mean 128, d = x - 128 exact; d^2 of 1920 is 3686400 > 65504: the variance is inf
    # and every output collapses to 0 (d / inf), a failure the fp32-then-round model cannot show
    assert torch.equal(y_pess, torch.zeros_like(y_pess))


def test_normalization_statistics_rounded_small_case():
    x = torch.tensor([[[1025.0, 1025.0, 1025.0, 1026.0]]], dtype=torch.float16)
    y = _run(_layernorm, x, PESS).double().flatten()
    # fp16 running sum: 1025, 2050, 3075 -> 3076 (spacing 2, tie to even), 4102 -> 4104 (spacing 4,
    # tie to even); mean 4104 / 4 = 1026 (fp32: 1025.25). d = [-1, -1, -1, 0]; d^2 sums to 3;
    # var 0.75; sqrt(0.75) = 0.8660 rounds to 0.86572265625 in fp16; y = d / std rounded
    std = torch.tensor(0.75).sqrt().half().float()
    expect = (torch.tensor([-1.0, -1.0, -1.0, 0.0]) / std).half().double()
    assert torch.equal(y, expect)
    y_def = _run(_layernorm, x, DEFAULT).double().flatten()
    assert torch.equal(y_def, torch.tensor([-0.57735, -0.57735, -0.57735, 1.73205]).half().double())


def test_lrn_window_sum_is_rounded():
    # one channel carries 300 (square 90000 > fp16 max): the pessimistic window sum overflows, the
    # default one computes it in fp32 and only the (finite) output is rounded
    def f(net, x):
        return net.add_lrn(x, 3, 1e-4, 0.75, 2.0).get_output(0)

    x = torch.zeros(1, 4, 1, 1, dtype=torch.float16)
    x[0, 1] = 300.0
    # TensorRT's LRN takes FLOAT only in the reference, so drive the pessimistic body directly
    r = arithmetic.rounder(torch.float16)
    p = {"window_size": 3, "alpha": 1e-4, "beta": 0.75, "k": 2.0}
    y = arithmetic.lrn(p, x.float(), r)
    assert y[0, 1].item() == 0.0 and y[0, 0].item() == 0.0  # 300 / inf
    x32 = x.float()
    assert torch.isfinite(F.local_response_norm(x32, 3, 1e-4, 0.75, 2.0)).all()
    # ...and in a network: the layer's output is FLOAT (the reference's LRN takes FLOAT only), so
    # both models agree there; the builders' native LRN casts to FLOAT for that reason
    assert torch.equal(_run(f, x32, DEFAULT), _run(f, x32, PESS))


def test_average_pooling_window_sum_is_sequential():
    def f(net, x):
        return net.add_pooling_nd(x, trt.PoolingType.AVERAGE, trt.Dims((2, 2))).get_output(0)

    x = torch.tensor([[[[2048.0, 1.0], [1.0, 1.0]]]], dtype=torch.float16)
    assert _run(f, x, PESS).item() == 512.0  # fp16 window sum stays 2048
    assert _run(f, x, DEFAULT).item() == 513.0  # 2051 / 4 = 512.75, rounded once (tie to even)


def test_option_round_trips_through_the_plan():
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    plans = {}
    for model in (DEFAULT, PESS):
        net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
        x = net.add_input("x", trt.DataType.HALF, (1, 5))
        y = net.add_reduce(x, trt.ReduceOperation.SUM, 1 << 1, False).get_output(0)
        y.name = "y"
        net.mark_output(y)
        config = builder.create_builder_config()
        arithmetic.set_model(config, model)
        assert arithmetic.model_of(config) == model
        plans[model] = bytes(builder.build_serialized_network(net, config))
        engine = trt.Runtime(logger).deserialize_cuda_engine(plans[model])
        assert arithmetic.model_of(engine) == model
        # and the engine runs that way
        xs = torch.tensor([[2048.0, 1, 1, 1, 1]], dtype=torch.float16)
        out = torch.empty(1, dtype=torch.float16)
        ctx = engine.create_execution_context()
        ctx.set_tensor_address("x", xs.data_ptr())
        ctx.set_tensor_address("y", out.data_ptr())
        assert ctx.execute_async_v3(0)
        assert out.item() == (2048.0 if model == PESS else 2052.0)
    assert b'"arithmetic"' not in plans[DEFAULT]  # default plans are unchanged
    assert b'"arithmetic":"pessimistic"' in plans[PESS]
    with arithmetic.using(PESS):
        assert arithmetic.model_of(builder.create_builder_config()) == PESS
    assert arithmetic.model_of(builder.create_builder_config()) == DEFAULT
    with pytest.raises(NetworkError, match="arithmetic"):
        arithmetic.set_model(builder.create_builder_config(), "fp16-everywhere")


def test_unknown_model_in_a_plan_is_refused():
    import hashlib
    import json
    import struct

    from trtbuild.reference.plan import MAGIC

    net_plan = None
    with arithmetic.using(PESS):
        net_plan = _plan_of(lambda net, x: net.add_reduce(x, trt.ReduceOperation.SUM, 2, False).get_output(0))
    body = net_plan[:-32]
    (hlen,) = struct.unpack_from("<Q", body, len(MAGIC))
    pos = len(MAGIC) + 8
    header = json.loads(body[pos:pos + hlen])
    header["arithmetic"] = "optimistic"
    hj = json.dumps(header).encode()
    body = MAGIC + struct.pack("<Q", len(hj)) + hj + body[pos + hlen:]
    messages = []

    class Log(trt.ILogger):
        def log(self, severity, msg):
            messages.append(msg)

    assert trt.Runtime(Log()).deserialize_cuda_engine(body + hashlib.sha256(body).digest()) is None
    assert any("'arithmetic' is 'optimistic'" in m for m in messages), messages


def _plan_of(fn):
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    y = fn(net, net.add_input("x", trt.DataType.HALF, (1, 5)))
    net.mark_output(y)
    return bytes(builder.build_serialized_network(net, builder.create_builder_config()))


FP32_CASES = [
    lambda n, x: l2norm(n, x, np.linspace(1, 2, 16), "l2", strategy="naive"),
    lambda n, x: group_norm(n, x, 4, np.ones(16), np.zeros(16), 1e-5, "gn", impl="native", strategy="naive"),
    lambda n, x: lrn(n, x, 5, 1e-4, 0.75, 2.0, "lrn", impl="composed", strategy="naive"),
    lambda n, x: n.add_softmax(x).get_output(0),
    lambda n, x: n.add_activation(x, trt.ActivationType.GELU_TANH).get_output(0),
]


@pytest.mark.parametrize("k", range(len(FP32_CASES)))
def test_fp32_networks_are_bit_identical_under_both_models(k):
    x = torch.randn(2, 16, 4, 4, generator=torch.Generator().manual_seed(k)) * 100
    assert torch.equal(_run(FP32_CASES[k], x, DEFAULT), _run(FP32_CASES[k], x, PESS))


def test_fp16_composites_differ_under_the_models():
    # the switch is live for fp16 (else the bit-identity test above would prove nothing)
    x = (torch.randn(2, 16, 4, 4, generator=torch.Generator().manual_seed(0)) * 100).half()
    f = FP32_CASES[1]
    assert not torch.equal(_run(f, x, DEFAULT), _run(f, x, PESS))


# -- the builders' safe strategies under the pessimistic model (a representative subset of
# scripts/robustness_table.py; the full table is docs/robustness.md) ---------------------------

R = np.random.RandomState(0)
W512, G16, B16, G64, B64 = (R.uniform(10, 30, 512), R.uniform(0.5, 1.5, 16), R.uniform(-0.5, 0.5, 16),
                            R.uniform(0.5, 1.5, 64), R.uniform(-0.5, 0.5, 64))


def _l2(s):
    m = L2Norm(512, 20.0).double()
    m.weight.data = torch.tensor(W512)
    return (1, 512, 4, 4), (lambda n, x: l2norm(n, x, W512, "l2", strategy=s)), m


def _lrn(s):
    return ((2, 32, 4, 4), (lambda n, x: lrn(n, x, 5, 1e-4, 0.75, 2.0, "lrn", impl="composed", strategy=s)),
            lambda x: F.local_response_norm(x, 5, 1e-4, 0.75, 2.0))


def _gn(s):
    m = nn.GroupNorm(4, 16).double()
    m.weight.data, m.bias.data = torch.tensor(G16), torch.tensor(B16)
    return (2, 16, 8, 8), (lambda n, x: group_norm(n, x, 4, G16, B16, 1e-5, "gn", impl="native", strategy=s)), m


def _ln(s):
    m = nn.LayerNorm(64).double()
    m.weight.data, m.bias.data = torch.tensor(G64), torch.tensor(B64)
    return (2, 16, 64), (lambda n, x: layer_norm(n, x, (64,), G64, B64, 1e-5, "ln", impl="composed", strategy=s)), m


def _bnt(s):
    m = nn.BatchNorm2d(16).double().train()
    m.weight.data, m.bias.data = torch.tensor(G16), torch.tensor(B16)
    return (4, 16, 4, 4), (lambda n, x: batchnorm_batch_stats(n, x, G16, B16, 1e-5, "bnt", strategy=s)), m


BUILDERS = {"l2norm": _l2, "lrn": _lrn, "group_norm": _gn, "layer_norm": _ln, "bn_batch_stats": _bnt}


def _err(name, strategy, dtype, M):
    shape, fn, ref = BUILDERS[name](strategy)
    g = torch.Generator().manual_seed(7)
    x = ((torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * M).to(dtype)
    y = _run(fn, x, PESS)
    with torch.no_grad():
        r = ref(x.double())
    return y, robust_rel_error(y, r)


@pytest.mark.parametrize("name", BUILDERS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_safe_strategies_pass_under_the_pessimistic_model(name, dtype):
    for M in (1e-3, 1.0, 1e3, 6e4, 0.0):
        y, err = _err(name, "safe", dtype, M)
        assert torch.isfinite(y).all() and err <= 1e-2, (name, dtype, M, err)


@pytest.mark.parametrize("name, dtype, M", [("l2norm", torch.float16, 1e3), ("l2norm", torch.bfloat16, 1.0),
                                            ("group_norm", torch.float16, 1.0), ("layer_norm", torch.bfloat16, 1.0),
                                            ("bn_batch_stats", torch.float16, 6e4)])
def test_naive_strategies_fail_under_the_pessimistic_model(name, dtype, M):
    """The threshold can fail: the naive compositions break it under the same model."""
    y, err = _err(name, "naive", dtype, M)
    assert not (torch.isfinite(y).all() and err <= 1e-2), (name, dtype, M, err)

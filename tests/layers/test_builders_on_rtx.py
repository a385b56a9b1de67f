"""Every builder of trtbuild.layers, built on the reference backend and on TensorRT-RTX: the same
call must be accepted (builder, every layer, build_serialized_network) or rejected by both, and,
walking the layers in order, both networks must hold the same layers (name, type) with the same
inputs (names) and outputs (name, shape, dtype).

Configurations reuse the lists of the existing tests and of scripts/robustness_table.py (imported,
not copied): robustness_table.CASES (every normalization builder) x strategy x dtype, then each
builder over the input shapes / options its own tests use, in fp32, fp16 and bf16. Involution is
left out (being reworked). TensorRT-RTX engines need an RTX GPU, so only the reference runs: in fp32
every configuration's reference engine is run on a seeded input and its values compared with PyTorch
(the config's `expect`, in float64), so that a reference that builds the right shapes but computes
something else (a convolution that drops its bias) fails here too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as ref
from trtbuild.layers import basic
from trtbuild.layers.batchnorm import batchnorm, batchnorm_batch_stats
from trtbuild.layers.common import BuilderError
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.lrn import lrn
from trtbuild.layers.normalization import group_norm, instance_norm, layer_norm
from trtbuild.layers.repvgg import repvgg_block, repvgg_block_unfused
from trtbuild.weights import WeightMap

from helpers.builder_cases import BATCHNORM_CASES as BN_CASES, GROUP_SHAPES, LRN_SHAPES, POOL_CASES, REPVGG_CASES
from helpers.builder_cases import DYNAMIC_LAYER_SHAPES as DYN_LAYER_SHAPES, DYNAMIC_LRN_CASES as DYN_LRN_CASES
from helpers.builder_cases import DYNAMIC_SHAPES as DYN_SHAPES, make_repvgg_block, repvgg_weights
from helpers.refnet import RefNet, RtxNet, run_plan
from helpers.twin import _NOISE

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import robustness_table

DTYPES = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16"}
STRATEGIES = ("safe", "naive")


@dataclass(frozen=True)
class Config:
    """build(network, x, strategy) -> ITensor on an input of `shape` (-1: dynamic); expect(x) -> what PyTorch
    computes for the float64 input x (the values the reference's fp32 engine must give)."""

    id: str
    shape: tuple
    build: Callable
    expect: Callable
    marks: tuple = ()
    profile: tuple | None = None  # (min, max) shapes of the optimization profile; None: 1..2 for each -1
    mask: object = None  # multiplies the input (robustness_table's dead channel)


def _rng(seed):
    return np.random.RandomState(seed)


def _vec(n, seed=0, low=0.5, high=1.5):
    return _rng(seed).uniform(low, high, n)


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, np.float64))


def _chan(v, x) -> torch.Tensor:
    """A per-channel vector shaped to broadcast along dim 1 of `x`."""
    return _t(v).reshape(1, -1, *([1] * (x.dim() - 2)))


def _l2norm_torch(x, w, eps=1e-10):
    return x / (x.pow(2).sum(1, keepdim=True).sqrt() + eps) * _chan(w, x)


def _table_config(c):
    build, reference, mask = c.make(1.0)
    return Config(f"table: {c.label}", c.shape, build, reference, mask=mask)


# -- normalization builders: scripts/robustness_table.py's cases, then each builder's test shapes --
NORM_CONFIGS = [_table_config(c) for c in robustness_table.CASES]

L2NORM_SHAPES = [(1, 512, 5, 5), (2, 16, 3, 7), (3, 1, 2, 2), (-1, 16, 3, 3)]  # tests/layers/test_l2norm.py
NORM_CONFIGS += [Config(f"l2norm {s}", s,
                        lambda n, x, st, c=s[1]: l2norm(n, x, _vec(c, 1, 5, 25), "l2", strategy=st),
                        lambda x, c=s[1]: _l2norm_torch(x, _vec(c, 1, 5, 25)))
                 for s in L2NORM_SHAPES]

LRN_SIZES = {"native": [1, 3, 5, 15], "composed": [1, 2, 4, 5, 6, 16, 21], "auto": [3, 4, 17]}  # test_layers_lrn.py
_LRN_SHAPES = LRN_SHAPES + [(-1, 7, 5)]  # each size on one shape, in turn: every shape meets every impl
NORM_CONFIGS += [Config(f"lrn {impl} {size} {s}", s,
                        lambda n, x, st, size=size, impl=impl: lrn(n, x, size, 1e-2, 0.75, 1.0, "lrn", impl=impl,
                                                                   strategy=st),
                        lambda x, size=size: F.local_response_norm(x, size, 1e-2, 0.75, 1.0))
                 for impl, sizes in LRN_SIZES.items() for j, size in enumerate(sizes)
                 for s in [_LRN_SHAPES[j % len(_LRN_SHAPES)]]]


def _bn_eval(c):
    r = _rng(c)
    return (r.uniform(0.5, 1.5, c), r.uniform(-0.5, 0.5, c), r.uniform(-1, 1, c), r.uniform(0.2, 2.0, c), 1e-5)


def _batchnorm_torch(x, gamma, beta, mean, var, eps):
    return F.batch_norm(x, _t(mean), _t(var), _t(gamma), _t(beta), False, 0.0, eps)


def _batch_stats_torch(x, gamma, beta, eps):
    return F.batch_norm(x, None, None, _t(gamma), _t(beta), True, 0.0, eps)


NORM_CONFIGS += [Config(f"batchnorm {s}", s,
                        lambda n, x, st, c=s[1]: batchnorm(n, x, *_bn_eval(c), "bn", strategy=st),
                        lambda x, c=s[1]: _batchnorm_torch(x, *_bn_eval(c)))
                 for s, _ in BN_CASES + [((-1, 6), None)]]
NORM_CONFIGS += [Config(f"batchnorm_batch_stats {s}", s,
                        lambda n, x, st, c=s[1]: batchnorm_batch_stats(n, x, _vec(c), _vec(c, 1, -0.5, 0.5), 1e-5,
                                                                       "bnt", strategy=st),
                        lambda x, c=s[1]: _batch_stats_torch(x, _vec(c), _vec(c, 1, -0.5, 0.5), 1e-5))
                 for s, _ in BN_CASES]

IMPLS = ("native", "composed", "auto")
INSTANCE_SHAPES = [(2, 6, 7), (2, 6, 4, 5), (2, 6, 3, 4, 2)]  # tests/layers/test_normalization.py
NORM_CONFIGS += [Config(f"instance_norm {impl} {s}", s,
                        lambda n, x, st, impl=impl: instance_norm(n, x, _vec(6), _vec(6, 1), 1e-5, "in", impl=impl,
                                                                  strategy=st),
                        lambda x: F.instance_norm(x, weight=_t(_vec(6)), bias=_t(_vec(6, 1)), eps=1e-5))
                 for s in INSTANCE_SHAPES for impl in IMPLS]
NORM_CONFIGS += [Config(f"group_norm G={g} {impl} {s}", s,
                        lambda n, x, st, g=g, impl=impl, c=s[1]: group_norm(n, x, g, _vec(c), _vec(c, 1), 1e-4, "gn",
                                                                           impl=impl, strategy=st),
                        lambda x, g=g, c=s[1]: F.group_norm(x, g, _t(_vec(c)), _t(_vec(c, 1)), 1e-4))
                 for s, g in GROUP_SHAPES + [((-1, 4, 2, 3), 2)] for impl in IMPLS]
LAYER_SHAPES = [((2, 6, 7), (7,)), ((2, 6, 4, 5), (6, 4, 5)), ((2, 6, 4, 5), (4, 5)), ((3, 8), (8,)), ((6,), (6,))]
NORM_CONFIGS += [Config(f"layer_norm {impl} {s} over {ns}", s,
                        lambda n, x, st, ns=ns, impl=impl: layer_norm(n, x, ns, _vec(ns).reshape(ns),
                                                                      _vec(ns, 1).reshape(ns), 1e-5, "ln", impl=impl,
                                                                      strategy=st),
                        lambda x, ns=ns: F.layer_norm(x, ns, _t(_vec(ns).reshape(ns)), _t(_vec(ns, 1).reshape(ns)),
                                                      1e-5))
                 for s, ns in LAYER_SHAPES for impl in IMPLS]


# -- dynamic batch and spatial dims: tests/layers/test_dynamic_shapes.py's shapes and profiles ----
def _span(sizes):
    """(min, max) shapes over `sizes`: the profile the reference test builds with."""
    return tuple(tuple(f(s[i] for s in sizes) for i in range(len(sizes[0]))) for f in (min, max))


def _dyn(label, shape, build, expect, sizes=None):
    return Config(f"dynamic {label} {shape}", shape, build, expect, profile=_span(sizes or DYN_SHAPES[shape]))


DYN_C = 6
DYNAMIC_CONFIGS = [_dyn("l2norm", s, lambda n, x, st: l2norm(n, x, _vec(DYN_C, 1, 5, 25), "l2", strategy=st),
                        lambda x: _l2norm_torch(x, _vec(DYN_C, 1, 5, 25)))
                   for s in DYN_SHAPES]
DYNAMIC_CONFIGS += [_dyn(f"lrn {impl} {size}", s,
                         lambda n, x, st, size=size, impl=impl: lrn(n, x, size, 1e-2, 0.75, 1.0, "lrn", impl=impl,
                                                                    strategy=st),
                         lambda x, size=size: F.local_response_norm(x, size, 1e-2, 0.75, 1.0))
                    for impl, size in DYN_LRN_CASES for s in DYN_SHAPES]
DYNAMIC_CONFIGS += [_dyn("batchnorm", s, lambda n, x, st: batchnorm(n, x, *_bn_eval(DYN_C), "bn", strategy=st),
                         lambda x: _batchnorm_torch(x, *_bn_eval(DYN_C)),
                         sizes=[(1, DYN_C), (5, DYN_C)] if s == (-1, DYN_C) else None)
                    for s in list(DYN_SHAPES) + [(-1, DYN_C)]]
DYNAMIC_CONFIGS += [_dyn("batchnorm_batch_stats", s,
                         lambda n, x, st: batchnorm_batch_stats(n, x, _vec(DYN_C), _vec(DYN_C, 1, -0.5, 0.5), 1e-5,
                                                                "bnt", strategy=st),
                         lambda x: _batch_stats_torch(x, _vec(DYN_C), _vec(DYN_C, 1, -0.5, 0.5), 1e-5))
                    for s in DYN_SHAPES]
DYNAMIC_CONFIGS += [_dyn(f"instance_norm {impl}", s,
                         lambda n, x, st, impl=impl: instance_norm(n, x, _vec(DYN_C), _vec(DYN_C, 1), 1e-5, "in",
                                                                   impl=impl, strategy=st),
                         lambda x: F.instance_norm(x, weight=_t(_vec(DYN_C)), bias=_t(_vec(DYN_C, 1)), eps=1e-5))
                    for impl in IMPLS for s in DYN_SHAPES]
DYNAMIC_CONFIGS += [_dyn(f"group_norm G={g} {impl}", s,
                         lambda n, x, st, g=g, impl=impl: group_norm(n, x, g, _vec(DYN_C), _vec(DYN_C, 1), 1e-4, "gn",
                                                                     impl=impl, strategy=st),
                         lambda x, g=g: F.group_norm(x, g, _t(_vec(DYN_C)), _t(_vec(DYN_C, 1)), 1e-4))
                    for g in (1, 3) for impl in IMPLS for s in DYN_SHAPES]
DYNAMIC_CONFIGS += [_dyn(f"layer_norm {impl} over {ns}", s,
                         lambda n, x, st, ns=ns, impl=impl: layer_norm(n, x, ns, _vec(ns).reshape(ns),
                                                                       _vec(ns, 1).reshape(ns), 1e-5, "ln", impl=impl,
                                                                       strategy=st),
                         lambda x, ns=ns: F.layer_norm(x, ns, _t(_vec(ns).reshape(ns)), _t(_vec(ns, 1).reshape(ns)),
                                                       1e-5),
                         sizes=sizes)
                    for (s, ns), sizes in DYN_LAYER_SHAPES.items() for impl in IMPLS]


# -- basic builders and RepVGG (no strategy) ------------------------------------------------------
def _w(*shape, seed=0):
    return _rng(seed).standard_normal(shape)


CONV_TORCH = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
POOL_TORCH = {("max_pool", 1): F.max_pool1d, ("max_pool", 2): F.max_pool2d, ("max_pool", 3): F.max_pool3d,
              ("avg_pool", 1): F.avg_pool1d, ("avg_pool", 2): F.avg_pool2d}
CONV_CASES = [  # tests/layers/test_basic.py::test_conv_matches_torch
    (1, 2, 1, 1, 1), (2, 1, 1, 1, 1), (2, 2, 2, 2, 2), (2, (2, 1), (1, 0), 1, 4), (3, 1, 1, 1, 2), (2, 4, 2, 1, 1)]
#: 1-D conv and pooling: basic.conv / max_pool run them as 2-D ones on (N, C, L, 1) (TensorRT has no 1-D kernels)
BASIC_CONFIGS = [Config(f"conv {nsp}d s{st} p{p} d{d} g{g}", (2, 8) + (9,) * nsp,
                        lambda n, x, _, nsp=nsp, st=st, p=p, d=d, g=g: basic.conv(
                            n, x, _w(12, 8 // g, *([3] * nsp)), _w(12, seed=1), "c", st, p, d, g),
                        lambda x, nsp=nsp, st=st, p=p, d=d, g=g: CONV_TORCH[nsp](
                            x, _t(_w(12, 8 // g, *([3] * nsp))), _t(_w(12, seed=1)), st, p, d, g))
                 for nsp, st, p, d, g in CONV_CASES]
BASIC_CONFIGS += [Config("conv no bias", (1, 4, 10, 10),
                         lambda n, x, _: basic.conv(n, x, _w(6, 4, 3, 3), None, "c", padding=1),
                         lambda x: F.conv2d(x, _t(_w(6, 4, 3, 3)), None, padding=1))]
BASIC_CONFIGS += [Config(f"{kind} {hw} k{k} s{s} p{p} ceil={ceil}", (2, 3) + hw,
                         lambda n, x, _, k=k, s=s, p=p, ceil=ceil, kind=kind:
                             getattr(basic, kind)(n, x, k, s, p, "pool", ceil_mode=ceil),
                         lambda x, k=k, s=s, p=p, ceil=ceil, kind=kind: POOL_TORCH[kind, 2](x, k, s, p, ceil_mode=ceil))
                  for kind in ("max_pool", "avg_pool") for hw, k, s, p, ceil in POOL_CASES
                  if not (kind == "avg_pool" and k == (2, 3))]
BASIC_CONFIGS += [Config("avg_pool count_include_pad=False", (1, 3, 9, 9),
                         lambda n, x, _: basic.avg_pool(n, x, 3, 2, 1, "pool", count_include_pad=False),
                         lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
                  Config("max_pool 1d", (2, 3, 11),
                         lambda n, x, _: basic.max_pool(n, x, 3, None, 1, "p", ceil_mode=True),
                         lambda x: F.max_pool1d(x, 3, None, 1, ceil_mode=True)),
                  Config("avg_pool 1d", (2, 3, 11),
                         lambda n, x, _: basic.avg_pool(n, x, 3, 2, 1, "p", count_include_pad=False),
                         lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False)),
                  Config("max_pool 3d", (1, 2, 5, 6, 7), lambda n, x, _: basic.max_pool(n, x, (2, 2, 3), 2, 0, "p",
                                                                                         ceil_mode=True),
                         lambda x: F.max_pool3d(x, (2, 2, 3), 2, 0, ceil_mode=True))]
ADAPTIVE = [((7, 7), (3, 3)), ((2, 2), (6, 6)), ((12, 12), (6, 6)), ((5, 9), (1, 1)), ((13, 10), (6, 4)), ((6, 6), 6)]
BASIC_CONFIGS += [Config(f"adaptive_avg_pool {hw}->{o}", (2, 3) + hw,
                         lambda n, x, _, o=o: basic.adaptive_avg_pool(n, x, o, "ap"),
                         lambda x, o=o: F.adaptive_avg_pool2d(x, o)) for hw, o in ADAPTIVE]
BASIC_CONFIGS += [
    Config("global_avg_pool", (2, 5, 4, 6), lambda n, x, _: basic.global_avg_pool(n, x, "gap"),
           lambda x: F.adaptive_avg_pool2d(x, 1)),
    Config("linear rank 4", (2, 3, 2, 2), lambda n, x, _: basic.linear(n, x, _w(5, 12), _w(5, seed=1), "fc"),
           lambda x: F.linear(x.flatten(1), _t(_w(5, 12)), _t(_w(5, seed=1)))),
    Config("linear rank 2 no bias", (3, 16), lambda n, x, _: basic.linear(n, x, _w(4, 16), None, "fc"),
           lambda x: F.linear(x, _t(_w(4, 16)))),
    Config("linear dynamic batch", (-1, 16), lambda n, x, _: basic.linear(n, x, _w(4, 16), _w(4), "fc"),
           lambda x: F.linear(x, _t(_w(4, 16)), _t(_w(4)))),
    Config("flatten", (2, 3, 4, 5), lambda n, x, _: basic.flatten(n, x, "f"), lambda x: x.flatten(1)),
    Config("relu + add", (2, 3, 4, 5), lambda n, x, _: basic.add(n, basic.relu(n, x, "r"), x, "sum"),
           lambda x: F.relu(x) + x),
]


def _conv_bn_module(c_in, c_out, groups, stride=1, relu=False):
    conv = torch.nn.Conv2d(c_in, c_out, 3, stride, 1, groups=groups, bias=False)
    bn = torch.nn.BatchNorm2d(c_out)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        conv.weight.normal_(generator=gen)
        bn.running_var.uniform_(0.5, 2.0, generator=gen)
        bn.running_mean.uniform_(-0.5, 0.5, generator=gen)
        bn.bias.uniform_(-0.5, 0.5, generator=gen)
    return torch.nn.Sequential(conv, bn, *([torch.nn.ReLU()] if relu else [])).eval()


def _conv_bn_wm(c_in, c_out, groups):
    return WeightMap.from_module(_conv_bn_module(c_in, c_out, groups))


def _torch_of(module):
    """expect(x): the module itself, in float64."""
    module = module.double().eval()
    return lambda x: module(x).detach()


BASIC_CONFIGS += [
    Config("conv_bn", (1, 4, 9, 9),
           lambda n, x, _: basic.conv_bn(n, x, _conv_bn_wm(4, 6, 2), "0", "1", "conv", stride=2, padding=1),
           _torch_of(_conv_bn_module(4, 6, 2, stride=2))),
    Config("conv_bn_relu", (1, 3, 8, 8),
           lambda n, x, _: basic.conv_bn_relu(n, x, _conv_bn_wm(3, 5, 1), "0", "1", "conv", padding=1),
           _torch_of(_conv_bn_module(3, 5, 1, relu=True))),
]
BASIC_CONFIGS += [Config(f"repvgg {form} {c_in}->{c_out} s{s} g{g}", (2, c_in, 9, 9),
                         lambda n, x, _, fn=fn, s=s, g=g, blk=(c_in, c_out, s, g):
                             fn(n, x, repvgg_weights(make_repvgg_block(*blk)), "blk", s, g, "b"),
                         _torch_of(make_repvgg_block(c_in, c_out, s, g)))
                  for c_in, c_out, s, g in REPVGG_CASES
                  for form, fn in (("fused", repvgg_block), ("unfused", repvgg_block_unfused))]


# -- building one configuration on both backends -------------------------------------------------
@dataclass
class Side:
    """One backend's attempt: the network, the builder's result and why it was rejected (or None)."""

    network: object
    result: object = None
    rejected: str | None = None
    owner: object = None  # what must outlive the network (TensorRT's builder)


def _attempt(trt, net, errors: Callable[[], list], config: Config, dtype: str, strategy: str) -> Side:
    """Run the builder on `net` (a RefNet or an RtxNet), mark its result and build."""
    side = Side(net.network)
    x = net.network.add_input("x", getattr(trt.DataType, dtype), config.shape)
    try:
        side.result = config.build(net.network, x, strategy)
    except (BuilderError, ref.NetworkError) as e:
        side.rejected = f"{type(e).__name__}: {e}"
        return side
    errs = [m for m in errors() if not _NOISE.search(m)]
    if errs:
        side.rejected = f"logged: {errs[0]}"
        return side
    net.network.mark_output(side.result)
    if -1 in tuple(config.shape):  # dynamic dims: the config's profile, or one from 1 to 2
        profile = net.builder.create_optimization_profile()
        lo, hi = config.profile or (tuple(1 if d < 0 else d for d in config.shape),
                                    tuple(2 if d < 0 else d for d in config.shape))
        profile.set_shape("x", lo, hi, hi)
        net.config.add_optimization_profile(profile)
    if net.builder.build_serialized_network(net.network, net.config) is None:
        errs = [m for m in errors() if not _NOISE.search(m)]
        side.rejected = f"build failed: {errs[-1] if errs else 'no message'}"
    return side


def both(rtx, config: Config, dtype: str, strategy: str) -> tuple[Side, Side]:
    refnet, rtxnet = RefNet(), RtxNet(rtx)
    rtxnet.logger.clear()  # one logger per TensorRT-RTX module (trtbuild.engine.logging_bridge): drop old errors
    r = _attempt(ref, refnet, lambda: refnet.logger.errors, config, dtype, strategy)
    x = _attempt(rtx, rtxnet, lambda: rtxnet.logger.errors, config, dtype, strategy)
    x.owner = rtxnet  # the builder and its logger live as long as the network is looked at
    r.owner = refnet
    return r, x


def run_shape(config: Config) -> tuple:
    """The input shape the reference engine runs at: the profile's largest (dynamic dims), else the static shape."""
    if config.profile is not None:
        return tuple(config.profile[1])
    return tuple(2 if d < 0 else d for d in config.shape)


def assert_values(r: Side, config: Config, what: str):
    """The reference's fp32 engine computes what PyTorch computes (config.expect, in float64) on a seeded input."""
    if r.rejected is not None:
        return
    x = torch.randn(run_shape(config), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    if config.mask is not None:
        x = x * config.mask
    got = run_plan(r.owner.build(), {"x": x.float()})[r.result.name].double()
    with torch.no_grad():
        want = config.expect(x)
    scale = max(1.0, float(want.abs().max()))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * scale, msg=lambda m: f"{what}: {m}")


def _tensor(t) -> tuple:
    return (t.name, tuple(t.shape), t.dtype.name)


def layer_kind(layer) -> str:
    """The LayerType name: get_layer returns a plain ILayer on both backends, whose `.type` is the LayerType."""
    return layer.type.name


def layer_walk(network) -> list[tuple]:
    """(name, type, input names, outputs (name, shape, dtype)) of every layer, in order."""
    rows = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        inputs = tuple(getattr(layer.get_input(j), "name", None) for j in range(layer.num_inputs))
        outputs = tuple(_tensor(layer.get_output(j)) for j in range(layer.num_outputs))
        rows.append((layer.name, layer_kind(layer), inputs, outputs))
    return rows


def assert_same(r: Side, x: Side, what: str):
    if (r.rejected is None) != (x.rejected is None):
        raise AssertionError(f"{what}: the reference {'rejects: ' + r.rejected if r.rejected else 'accepts'}; "
                             f"TensorRT-RTX {'rejects: ' + x.rejected if x.rejected else 'accepts'}")
    if r.rejected is not None:
        return
    ref_rows, rtx_rows = layer_walk(r.network), layer_walk(x.network)
    for i, (a, b) in enumerate(zip(ref_rows, rtx_rows)):
        assert a == b, f"{what}: layer {i} differs:\n  reference {a}\n  RTX       {b}"
    assert len(ref_rows) == len(rtx_rows), f"{what}: {len(ref_rows)} layers vs RTX {len(rtx_rows)}"
    assert _tensor(r.result) == _tensor(x.result)


def _cases(configs, strategies):
    return [pytest.param(c, d, s, id=f"{c.id}-{d}" + (f"-{s}" if len(strategies) > 1 else ""), marks=c.marks)
            for c in configs for d in DTYPES for s in strategies]


@pytest.mark.parametrize("config, dtype, strategy", _cases(NORM_CONFIGS, STRATEGIES))
def test_normalization_builders_agree(rtx, config, dtype, strategy):
    r, x = both(rtx, config, DTYPES[dtype], strategy)
    assert_same(r, x, f"{config.id} {dtype} {strategy}")
    if dtype == "fp32":
        assert_values(r, config, f"{config.id} {strategy}")


@pytest.mark.parametrize("config, dtype, strategy", _cases(DYNAMIC_CONFIGS, STRATEGIES))
def test_normalization_builders_agree_on_dynamic_shapes(rtx, config, dtype, strategy):
    """Dynamic batch and H/W (profile min..max of the shapes the reference runs at): TensorRT-RTX builds
    every one of them, with the same layers as the reference; only the one path the builder refuses (a
    native LRN on rank 5 with two or more dynamic spatial dims) is refused, by the builder, on both."""
    r, x = both(rtx, config, DTYPES[dtype], strategy)
    assert_same(r, x, f"{config.id} {dtype} {strategy}")
    if dtype == "fp32":
        assert_values(r, config, f"{config.id} {strategy}")
    refused = "lrn native" in config.id and len(config.shape) == 5 and sum(d < 0 for d in config.shape[2:]) > 1
    if refused:
        assert r.rejected.startswith("BuilderError: layer 'lrn': input 'x' has shape"), r.rejected
    else:
        assert r.rejected is None, r.rejected


@pytest.mark.parametrize("config, dtype, strategy", _cases(BASIC_CONFIGS, ("safe",)))
def test_basic_builders_agree(rtx, config, dtype, strategy):
    r, x = both(rtx, config, DTYPES[dtype], strategy)
    assert_same(r, x, f"{config.id} {dtype}")
    if dtype == "fp32":
        assert_values(r, config, config.id)


def test_a_planted_shape_difference_is_caught(rtx, monkeypatch):
    """The comparison itself: a reference that got one pooling output size wrong must fail."""
    import trtbuild.reference.infer as infer

    real = infer.infer_layer

    def planted(ltype, p, w, shapes, dtypes, name, plugin=None, **values_and_keys):
        out_shapes, out_dtypes = real(ltype, p, w, shapes, dtypes, name, plugin=plugin, **values_and_keys)
        if ltype == ref.LayerType.POOLING:
            out_shapes = [tuple(s[:-1]) + (s[-1] + 1,) for s in out_shapes]
        return out_shapes, out_dtypes

    monkeypatch.setattr(infer, "infer_layer", planted)
    config = next(c for c in BASIC_CONFIGS if c.id.startswith("max_pool (9, 9)"))
    with pytest.raises(AssertionError, match=r"layer 0 differs"):
        assert_same(*both(rtx, config, "FLOAT", "safe"), config.id)

"""The normalization builders on dynamic batch and spatial dims: an input of shape
(-1, C, -1, -1), as a detector or segmentation net deployed at several resolutions has, built ONCE
with an optimization profile spanning two sizes and run at both, must match PyTorch at each.

Every builder x strategy x impl path that takes dynamic dims is here (the paths that still refuse
them are written out in tests/layers/test_refusals.py), on rank 3, 4 and 5 inputs, with two or more
dynamic spatial dims (the 0-copy/transpose routes of composed LRN and group norm) and with exactly
one (their flatten-and-restore routes). Expected values are PyTorch's (torch.nn.functional) in
float64 on the same float32 inputs; tolerances as the neighbouring fp32 tests (1e-5 rel, 1e-6 abs).
TensorRT-RTX builds the same networks with the same profiles in tests/layers/test_builders_on_rtx.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers.layer_harness import assert_close, assert_named_under, layer_names, rel_error, run_builder_at
from trtbuild.layers.batchnorm import batchnorm, batchnorm_batch_stats
from trtbuild.layers.common import BuilderError
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.lrn import lrn
from trtbuild.layers.normalization import group_norm, instance_norm, layer_norm

from helpers.builder_cases import C, DYNAMIC_LAYER_SHAPES as LAYER_SHAPES, DYNAMIC_LRN_CASES as LRN_CASES
from helpers.builder_cases import DYNAMIC_SHAPES as SHAPES
def _id(shape) -> str:
    return "x".join("?" if d < 0 else str(d) for d in shape)


SHAPE_IDS = [_id(s) for s in SHAPES]
TWO_OR_MORE = [s for s in SHAPES if sum(d < 0 for d in s[2:]) >= 2]
STRATEGIES = ("safe", "naive")
IMPLS = ("native", "composed", "auto")


def _inputs(sizes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) * 2 + 0.5 for s in sizes]


def _vec(seed, low=0.5, high=1.5):
    return np.random.RandomState(seed).uniform(low, high, C)


def _channel(v, x):
    return torch.tensor(v, dtype=torch.float64).reshape([1, -1] + [1] * (x.dim() - 2))


#: the input type of every test here: fp32 (1e-5 elementwise) and fp16/bf16: the safe strategy within robust
#: relative error TOLERANCE (the metric of docs/robustness.md) of PyTorch in float64 on the same rounded inputs;
#: the naive one (which computes in the input type, up to 1.4e-2 off in fp16 here) only finite
_DTYPE = {"now": torch.float32}
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 1e-2}


@pytest.fixture(params=[torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"], autouse=True)
def input_dtype(request):
    _DTYPE["now"] = request.param
    yield request.param
    _DTYPE["now"] = torch.float32


def _check(build, expected, shape, what, sizes=None):
    """Build once on `shape`, run at its two sizes (SHAPES[shape] unless given), compare each with
    `expected(x in float64)`."""
    dtype = _DTYPE["now"]
    xs = [x.to(dtype) for x in _inputs(sizes or SHAPES[shape])]
    ys, network = run_builder_at(build, xs, input_shape=shape)
    out = network.get_output(0)
    assert tuple(out.shape) == shape, f"{what}: output shape {tuple(out.shape)} at build time, not {shape}"
    assert_named_under(network, out.name, out)  # the dynamic-shape routes name every layer too
    for x, y in zip(xs, ys):
        assert y.dtype == dtype, f"{what}: output {y.dtype} for a {dtype} input"
        if dtype == torch.float32:
            assert_close(y, expected(x.double()), 1e-5, 1e-6, f"{what} at {tuple(x.shape)}")
        elif "naive" in what.split():  # computes in the input type to show where that fails: finite here
            assert torch.isfinite(y).all(), f"{what} {dtype} at {tuple(x.shape)}: non-finite outputs"
        else:
            err = rel_error(y, expected(x.double()))
            assert err <= TOLERANCE[dtype], f"{what} {dtype} at {tuple(x.shape)}: relative error {err:.3g}"
    return network


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_l2norm(shape, strategy):
    w = _vec(1, 5, 25)
    _check(lambda n, t: l2norm(n, t, w, "l2", strategy=strategy),
           lambda x: x / (x.pow(2).sum(1, keepdim=True).sqrt() + 1e-10) * _channel(w, x), shape, f"l2norm {strategy}")


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("impl, size", LRN_CASES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_lrn(shape, impl, size, strategy):
    if impl == "native" and len(shape) == 5 and shape in TWO_OR_MORE:  # the one refusal (message: test_layers_refusals)
        with pytest.raises(BuilderError, match=r"impl='native' needs all but one of dims 2\.\.4 known at build time"):
            run_builder_at(lambda n, t: lrn(n, t, size, 1e-2, 0.75, 1.0, "lrn", impl=impl, strategy=strategy),
                           _inputs(SHAPES[shape]), input_shape=shape)
        return
    network = _check(lambda n, t: lrn(n, t, size, 1e-2, 0.75, 1.0, "lrn", impl=impl, strategy=strategy),
                     lambda x: F.local_response_norm(x, size, 1e-2, 0.75, 1.0), shape, f"lrn {impl} {size} {strategy}")
    native = "lrn/lrn" in layer_names(network)
    assert native == (impl == "native" or (impl == "auto" and size <= 15 and not (len(shape) == 5 and
                                                                                  shape in TWO_OR_MORE)))


def test_lrn_auto_takes_composed_where_native_is_refused():
    shape = (-1, C, -1, -1, -1)
    network = _check(lambda n, t: lrn(n, t, 3, 1e-2, 0.75, 1.0, "lrn"),
                     lambda x: F.local_response_norm(x, 3, 1e-2, 0.75, 1.0), shape, "lrn auto rank 5")
    assert "lrn/window_avg" in layer_names(network) and "lrn/lrn" not in layer_names(network)


@pytest.mark.parametrize("shape", list(SHAPES) + [(-1, C)], ids=SHAPE_IDS + [_id((-1, C))])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_batchnorm_eval(shape, strategy):
    r = np.random.RandomState(3)
    gamma, beta, mean, var = r.uniform(0.5, 1.5, C), r.uniform(-0.5, 0.5, C), r.uniform(-1, 1, C), r.uniform(0.2, 2, C)
    t = [torch.tensor(v, dtype=torch.float64) for v in (mean, var, gamma, beta)]
    _check(lambda n, t_: batchnorm(n, t_, gamma, beta, mean, var, 1e-5, "bn", strategy=strategy),
           lambda x: F.batch_norm(x, t[0], t[1], t[2], t[3], training=False, eps=1e-5), shape, f"batchnorm {strategy}",
           sizes=[(1, C), (5, C)] if shape == (-1, C) else None)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_batchnorm_batch_stats(shape, strategy):
    gamma, beta = _vec(4), _vec(5, -0.5, 0.5)
    g, b = torch.tensor(gamma), torch.tensor(beta)
    _check(lambda n, t: batchnorm_batch_stats(n, t, gamma, beta, 1e-5, "bs", strategy=strategy),
           lambda x: F.batch_norm(x, None, None, g, b, training=True, eps=1e-5), shape, f"batch stats {strategy}")


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_instance_norm(shape, impl, strategy):
    gamma, beta = _vec(6), _vec(7, -0.5, 0.5)
    g, b = torch.tensor(gamma), torch.tensor(beta)
    _check(lambda n, t: instance_norm(n, t, gamma, beta, 1e-5, "in", impl=impl, strategy=strategy),
           lambda x: F.instance_norm(x, weight=g, bias=b, eps=1e-5), shape, f"instance {impl} {strategy}")


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_group_norm(shape, groups, impl, strategy):
    gamma, beta = _vec(8), _vec(9, -0.5, 0.5)
    g, b = torch.tensor(gamma), torch.tensor(beta)
    network = _check(lambda n, t: group_norm(n, t, groups, gamma, beta, 1e-4, "gn", impl=impl, strategy=strategy),
                     lambda x: F.group_norm(x, groups, g, b, eps=1e-4), shape, f"group G={groups} {impl} {strategy}")
    assert ("gn/to_groups" in layer_names(network)) == (impl == "composed")


@pytest.mark.parametrize("shape, normalized", LAYER_SHAPES, ids=[f"{_id(s)}-over-{_id(n)}" for s, n in LAYER_SHAPES])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_layer_norm(shape, normalized, impl, strategy):
    n_el = int(np.prod(normalized))
    gamma = np.random.RandomState(10).uniform(0.5, 1.5, n_el).reshape(normalized)
    beta = np.random.RandomState(11).uniform(-0.5, 0.5, n_el).reshape(normalized)
    _check(lambda n, t: layer_norm(n, t, normalized, gamma, beta, 1e-5, "ln", impl=impl, strategy=strategy),
           lambda x: F.layer_norm(x, normalized, torch.tensor(gamma), torch.tensor(beta), eps=1e-5), shape,
           f"layer {normalized} {impl} {strategy}", sizes=LAYER_SHAPES[shape, normalized])

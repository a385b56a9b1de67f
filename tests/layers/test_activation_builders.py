"""trtbuild.layers.activation against torch.nn.functional in float64, in fp32, fp16 and bf16 (inputs from -8
to 8 and beyond the kinks of hardsigmoid, relu6 and mish), each built by TensorRT-RTX with the same layers;
the layers are named and GELU, hardsigmoid and relu6 are single TensorRT activation layers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from trtbuild.layers import activation as A

from helpers.builder_pair import assert_close, build_pair, np_weights, refused, rounded, seeded

DTYPES = ["fp32", "fp16", "bf16"]
SHAPE = (2, 3, 5, 7)

#: label -> (builder, PyTorch, layer names, type of the single layer or None)
CASES = {
    "gelu": (lambda n, x: A.gelu(n, x, "act"), F.gelu, ["act"], trt.ActivationType.GELU_ERF),
    "gelu tanh": (lambda n, x: A.gelu(n, x, "act", approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"),
                  ["act"], trt.ActivationType.GELU_TANH),
    "silu": (lambda n, x: A.silu(n, x, "act"), F.silu, ["act/sigmoid", "act"], None),
    "hardsigmoid": (lambda n, x: A.hardsigmoid(n, x, "act"), F.hardsigmoid, ["act"], trt.ActivationType.HARD_SIGMOID),
    "hardswish": (lambda n, x: A.hardswish(n, x, "act"), F.hardswish, ["act/hardsigmoid", "act"], None),
    "relu6": (lambda n, x: A.relu6(n, x, "act"), F.relu6, ["act"], trt.ActivationType.CLIP),
    "mish": (lambda n, x: A.mish(n, x, "act"), F.mish, ["act/softplus", "act/tanh", "act"], None),
}


def _input(dtype):
    x = seeded(*SHAPE, scale=4.0)
    x.view(-1)[:6] = torch.tensor([-3.0, 3.0, 0.0, 6.0, 25.0, -25.0], dtype=torch.float64)  # kinks and tails
    return rounded(x, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("label", CASES)
def test_activation_matches_torch(label, dtype):
    build, torch_fn, names, single = CASES[label]
    pair = build_pair({"x": (SHAPE, dtype)}, build)
    x = _input(dtype)
    (got,) = pair.run(x=x)
    assert_close(got, torch_fn(x), dtype, scale=1 if dtype == "fp32" else 2)
    assert pair.names == names and pair.outputs[0].name == "act"
    if single is not None:
        layer = pair.refnet.network.get_layer(0)
        layer.__class__ = trt.IActivationLayer  # get_layer gives an ILayer view (its .type a LayerType), as TensorRT
        assert layer.type == single


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,slopes", [((2, 3, 5, 7), 3), ((2, 3, 5, 7), 1), ((4, 6), 6), ((5,), 1),
                                          ((2, 4, 9), 4)], ids=str)
def test_prelu_per_channel(shape, slopes, dtype):
    w = np_weights(slopes, scale=0.3)
    pair = build_pair({"x": (shape, dtype)}, lambda n, x: A.prelu(n, x, w, "pr"))
    x = rounded(seeded(*shape), dtype)
    wt = torch.from_numpy(w)
    if dtype != "fp32":
        wt = rounded(wt, dtype)  # the slopes are constants of the input's type
    assert_close(pair.run(x=x)[0], F.prelu(x, wt), dtype)
    assert pair.names == ["pr/slopes", "pr"]


def test_refusals_name_the_layer():
    assert refused({"x": (SHAPE, "fp32")}, lambda n, x: A.gelu(n, x, "g", approximate="fast")) == (
        "layer 'g': approximate='fast' is not 'none' or 'tanh' (as in F.gelu)")
    assert refused({"x": (SHAPE, "fp32")}, lambda n, x: A.prelu(n, x, [0.1, 0.2], "p")) == (
        "layer 'p': 2 slopes for 'x' (2, 3, 5, 7): give 1, or one per channel (dim 1: 3)")

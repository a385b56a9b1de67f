"""trtbuild.layers.basic.linear, planned_linear and qlinear keep an input's leading dims as nn.Linear does
(rank 1 to 4, bias or not, fp32/fp16/bf16), against nn.Linear in float64; the flattening of a pooled
(N, C, 1, 1) map stays; every construction is built by TensorRT-RTX with the same layers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trtbuild.layers.basic import linear
from trtbuild.layers.planned import planned_linear
from trtbuild.layers.quantize import qlinear

from helpers.builder_pair import assert_close, build_pair, np_weights, refused, rounded, seeded

SHAPES = [(7,), (3, 8), (2, 5, 8), (2, 3, 4, 8)]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_keeps_leading_dims(shape, bias, dtype):
    k = shape[-1]
    w, b = np_weights(6, k), (np_weights(6, seed=2) if bias else None)
    pair = build_pair({"x": (shape, dtype)}, lambda n, x: linear(n, x, w, b, "fc"))
    x = seeded(*shape)
    (got,) = pair.run(x=x)
    want = F.linear(rounded(x, dtype), torch.from_numpy(w), None if b is None else torch.from_numpy(b))
    assert tuple(got.shape) == shape[:-1] + (6,)
    assert_close(got, want, dtype, scale=3)
    assert pair.names == (["fc/weight", "fc/matmul", "fc/bias", "fc"] if bias else ["fc/weight", "fc"])
    assert pair.outputs[0].name == "fc"


def test_linear_dynamic_leading_dims():
    w, b = np_weights(4, 8), np_weights(4, seed=2)
    pair = build_pair({"x": ((-1, -1, 8), "fp32")}, lambda n, x: linear(n, x, w, b, "fc"),
                      profile={"x": ((1, 1, 8), (2, 3, 8), (4, 6, 8))})
    x = seeded(3, 5, 8)
    close = F.linear(x, torch.from_numpy(w), torch.from_numpy(b))
    assert_close(pair.run(x=x)[0], close, "fp32")


def test_pooled_map_is_flattened_as_before():
    """(N, C, 1, 1) with in = C: nn.Linear(torch.flatten(x, 1)), the zoo's classifier heads."""
    w, b = np_weights(5, 12), np_weights(5, seed=2)
    pair = build_pair({"x": ((2, 12, 1, 1), "fp32")}, lambda n, x: linear(n, x, w, b, "fc"))
    x = seeded(2, 12, 1, 1)
    assert_close(pair.run(x=x)[0], F.linear(x.flatten(1), torch.from_numpy(w), torch.from_numpy(b)), "fp32")
    assert pair.names[0] == "fc/flatten"


def test_flatten_argument_forces_and_forbids():
    w = np_weights(5, 4)
    # (2, 3, 4): last dim is in, so nn.Linear's rule; flatten=True wants 12 features and refuses
    assert "dims after the first make 12 features but the weight (5, 4) expects 4" in refused(
        {"x": ((2, 3, 4), "fp32")}, lambda n, x: linear(n, x, w, None, "fc", flatten=True))
    w12 = np_weights(5, 12)
    assert "its last dim has 4 features but the weight (5, 12) expects 12" in refused(
        {"x": ((2, 3, 4), "fp32")}, lambda n, x: linear(n, x, w12, None, "fc", flatten=False))
    assert refused({"x": ((2, 3, 5), "fp32")}, lambda n, x: linear(n, x, w, None, "fc")) == (
        "layer 'fc': input 'x' (2, 3, 5): its last dim has 5 features but the weight (5, 4) expects 4")
    pair = build_pair({"x": ((2, 3, 4), "fp32")}, lambda n, x: linear(n, x, w12, None, "fc", flatten=True))
    x = seeded(2, 3, 4)
    assert_close(pair.run(x=x)[0], x.flatten(1) @ torch.from_numpy(w12).T, "fp32")


class _Plan:
    """The two methods of trtbuild.quant.QuantPlan that planned_linear uses: quantized int8 or kept fp32."""

    def __init__(self, quantized: bool):
        self.quantized = quantized

    def layer(self, module):
        from trtbuild.quant.plan import LayerPlan

        if self.quantized:
            return LayerPlan(module, "int8", True, 2.0, (1.0,) * 6)
        return LayerPlan(module, "fp32", False, reason="kept")


def _fake_int8(x, amax, axis=None):
    if axis is None:
        s = amax / 127
        return torch.clamp(torch.round(x / s), -128, 127) * s
    s = (x.abs().amax(dim=1, keepdim=True) / 127)
    return torch.clamp(torch.round(x / s), -128, 127) * s


def test_planned_linear_quantized_rank3():
    w, b = np_weights(6, 8, scale=0.5), np_weights(6, seed=2)
    pair = build_pair({"x": ((2, 5, 8), "fp32")}, lambda n, x: planned_linear(n, x, w, b, "fc", _Plan(True)))
    x = seeded(2, 5, 8)
    want = F.linear(_fake_int8(x.float(), 2.0).double(), _fake_int8(torch.from_numpy(w).float(), None, 0).double(),
                    torch.from_numpy(b))
    assert_close(pair.run(x=x)[0], want, "fp32", scale=10)
    # the dequantized weight feeds the matrix multiply directly, shaped (1, out, in)
    assert pair.names == ["fc/input_q/scale", "fc/input_q/quantize", "fc/input_q", "fc/weight_q/scale",
                          "fc/weight_q/int8", "fc/weight_q", "fc/matmul", "fc/bias", "fc"]
    assert tuple(pair.refnet.network.get_layer(5).get_output(0).shape) == (1, 6, 8)


def test_planned_linear_kept_fp32_in_fp16_network():
    w, b = np_weights(6, 8), np_weights(6, seed=2)
    pair = build_pair({"x": ((2, 5, 8), "fp16")}, lambda n, x: planned_linear(n, x, w, b, "fc", _Plan(False)))
    x = seeded(2, 5, 8)
    assert_close(pair.run(x=x)[0], F.linear(rounded(x, "fp16"), torch.from_numpy(w), torch.from_numpy(b)), "fp16")
    assert pair.names[0] == "fc/keep_fp32" and pair.names[-1] == "fc"


def test_qlinear_rank4_and_flat_weight_tensor_view():
    w = np_weights(3, 8)
    pair = build_pair({"x": ((1, 2, 3, 8), "fp32")}, lambda n, x: qlinear(n, x, w, None, "fc", 3.0))
    x = seeded(1, 2, 3, 8)
    want = _fake_int8(x.float(), 3.0).double() @ _fake_int8(torch.from_numpy(w).float(), None, 0).double().T
    assert_close(pair.run(x=x)[0], want, "fp32", scale=10)


def test_weight_tensor_of_weight_shape_is_viewed():
    """A [out, in] weight tensor given to a rank-3 linear is reshaped (name/weight_view) to (1, out, in)."""
    w = np_weights(3, 4)

    def build(n, x):
        from trtbuild.layers.common import constant
        return linear(n, x, w, None, "fc", weight_tensor=constant(n, w * 2, x, "w2"))

    pair = build_pair({"x": ((2, 5, 4), "fp32")}, build)
    x = seeded(2, 5, 4)
    assert_close(pair.run(x=x)[0], x @ torch.from_numpy(w * 2).T, "fp32")
    assert pair.names == ["w2", "fc/weight_view", "fc"]
    assert np.shape(w) == (3, 4)

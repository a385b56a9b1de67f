"""A real INT8/FP8 accuracy number, no download: a small CNN trained here on
scikit-learn's bundled digits, calibrated on its training split, built fp32 / int8 / fp8 on the
reference backend, and judged on the held-out split against sklearn's labels.

Expected values come from PyTorch and sklearn only: the fp32 PyTorch model's top-1 on the held-out
labels. Targets: the fp32 engine predicts exactly PyTorch's classes; int8 and fp8 (max calibration,
percentile and mse: so also "the better of percentile/mse") lose at most 1.0 point of top-1. The
int8 and fp8 networks are also built by TensorRT-RTX's builder (sm89 and sm120: FP8 needs sm89+).
The model is trained once per module (a few seconds).
"""

from __future__ import annotations

import pytest
import sklearn  # noqa: F401  (the test extra installs scikit-learn: its absence fails here, never skips)
import torch
import torch.nn.functional as F
from helpers.digits_model import TOLERANCE_POINTS, calibrate_model, engine_logits, load_split, mean_cosine, top1, train


@pytest.fixture(scope="module")
def digits():
    data = load_split()
    model = train(data)
    with torch.no_grad():
        logits = model(data.x_test)
    calibs = {}

    def calib(method):
        if method not in calibs:
            calibs[method] = calibrate_model(model, data, method)
        return calibs[method]

    return data, model, logits, calib


def test_split_is_stratified_and_the_model_learned(digits):
    data, _, logits, _ = digits
    assert len(data.y_train) + len(data.y_test) == 1797 and len(data.y_test) == 360
    assert torch.bincount(data.y_test, minlength=10).min() >= 35  # every class held out (stratified)
    assert float(data.x_train.min()) == 0.0 and float(data.x_train.max()) == 1.0
    assert top1(logits, data.y_test) >= 95.0  # a trained classifier, not chance (10%)


def test_fp32_engine_predicts_pytorchs_classes(digits):
    data, model, want, _ = digits
    got, _ = engine_logits(model, data.x_test)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert torch.equal(got.argmax(1), want.argmax(1))  # hence the same top-1, sample for sample
    assert top1(got, data.y_test) == top1(want, data.y_test)


@pytest.mark.parametrize("precision", ["int8", "fp8"])
@pytest.mark.parametrize("method", ["max", "percentile", "mse"])
def test_quantized_top1_within_one_point_of_fp32(digits, precision, method):
    data, model, fp32, calib = digits
    got, _ = engine_logits(model, data.x_test, calib(method), precision)
    assert top1(got, data.y_test) >= top1(fp32, data.y_test) - TOLERANCE_POINTS
    assert mean_cosine(got, fp32) > 0.99
    # the engine really quantized: its logits are not the fp32 ones
    assert (got - fp32).abs().max() > 1e-3


@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_quantized_network_is_built_by_tensorrt_rtx(rtx, digits, precision):
    data, model, fp32, calib = digits
    got, info = engine_logits(model, data.x_test, calib("max"), precision, cross_check=True,
                              targets=("8.9", "12.0"))
    check = info["cross_check"]
    assert check["rtx_version"] == rtx.__version__ and check["targets"] == ["8.9", "12.0"]
    assert check["outputs"] == [{"name": "logits", "shape": [360, 10], "dtype": "FLOAT"}]
    assert check["tensors_compared"] >= 40, check  # 5 qconv + qlinear + qadd: their Q/DQ tensors too
    assert top1(got, data.y_test) >= top1(fp32, data.y_test) - TOLERANCE_POINTS


def _fake_quant(x: torch.Tensor, amax, axis: int | None = None) -> torch.Tensor:
    """Symmetric INT8 quantize-dequantize as TensorRT's Q/DQ layers compute it: scale = float32(amax / 127),
    clamp(round_half_even(x * (1 / scale)), -128, 127) * scale in float32; per tensor, or per channel on `axis`."""
    scale = (torch.as_tensor(amax, dtype=torch.float64) / 127).float()
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero channel keeps its zeros
    if axis is not None:
        scale = scale.reshape([-1 if d == axis else 1 for d in range(x.dim())])
    return torch.clamp(torch.round(x * torch.reciprocal(scale)), -128, 127) * scale


def _folded(conv, bn) -> tuple[torch.Tensor, torch.Tensor]:
    """Conv+BatchNorm folded into one convolution, in float64: w * g / sqrt(var + eps), beta - mean * g / sqrt(...)."""
    k = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
    w = conv.weight.double() * k.reshape(-1, 1, 1, 1)
    return w.float(), (bn.bias.double() - bn.running_mean.double() * k).float()


def _fake_quant_logits(model, x: torch.Tensor, calib) -> torch.Tensor:
    """DigitsNet in PyTorch with the int8 build's quantization at the same scales: every Conv+BN (folded) and the
    linear head with their input quantized per tensor (the calibrated `<module>.input` amax) and their weight
    per output channel (its own amax), and the block's identity input of the residual add per tensor."""
    act = calib.activations

    def qconv(y, conv, bn, module, stride=1):
        w, b = _folded(conv, bn)
        w = _fake_quant(w, w.abs().amax(dim=(1, 2, 3)), axis=0)
        return F.conv2d(_fake_quant(y, act[f"{module}.input"]), w, b, stride=stride, padding=1)

    with torch.no_grad():
        y = F.relu(qconv(x, model.conv1, model.bn1, "conv1"))
        y = F.relu(qconv(y, model.conv2, model.bn2, "conv2", stride=2))
        blk = model.block
        b = qconv(F.relu(qconv(y, blk.conv1, blk.bn1, "block.conv1")), blk.conv2, blk.bn2, "block.conv2")
        y = F.relu(b + _fake_quant(y, act["relu2.output"]))  # the identity (skip) input of the add
        y = y.mean(dim=(2, 3))
        w = _fake_quant(model.fc.weight, model.fc.weight.abs().amax(dim=1), axis=0)
        return F.linear(_fake_quant(y, act["fc.input"]), w, model.fc.bias)


@pytest.mark.parametrize("method", ["max", "percentile", "mse"])
def test_int8_engine_equals_a_fake_quant_pytorch_model(digits, method):
    """Accuracy within a point cannot tell 8 bits from 6; equality with PyTorch fake quantization at the same
    scales can. The logits agree to float32 accumulation order (a value that lands within that of a rounding
    tie may quantize one step apart, so a bound, not bit equality), far below one quantization step's effect."""
    data, model, fp32, calib = digits
    got, _ = engine_logits(model, data.x_test, calib(method), "int8")
    want = _fake_quant_logits(model, data.x_test, calib(method))
    scale = float(want.abs().max())
    err = (got - want).abs()
    assert float(err.max()) <= 1e-3 * scale, f"max |engine - fake quant| {float(err.max()):.3g}, max|logit| {scale:.3g}"
    assert float(err.mean()) <= 1e-5 * scale, f"mean |engine - fake quant| {float(err.mean()):.3g}"
    assert torch.equal(got.argmax(1), want.argmax(1))
    assert float((want - fp32).abs().max()) > 1e-2 * scale  # the fake-quant model does differ from fp32


def test_the_accuracy_check_catches_ranges_too_small(digits):
    """The targets above can fail: activation ranges 0.3x the calibrated ones (saturating) cost far
    more than 1.0 point."""
    from dataclasses import replace

    data, model, fp32, calib = digits
    small = replace(calib("max"), activations={k: 0.3 * v for k, v in calib("max").activations.items()})
    got, _ = engine_logits(model, data.x_test, small, "int8")
    assert top1(got, data.y_test) < top1(fp32, data.y_test) - 10 * TOLERANCE_POINTS

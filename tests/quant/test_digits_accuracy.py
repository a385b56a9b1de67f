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


def test_the_accuracy_check_catches_ranges_too_small(digits):
    """The targets above can fail: activation ranges 0.3x the calibrated ones (saturating) cost far
    more than 1.0 point."""
    from dataclasses import replace

    data, model, fp32, calib = digits
    small = replace(calib("max"), activations={k: 0.3 * v for k, v in calib("max").activations.items()})
    got, _ = engine_logits(model, data.x_test, small, "int8")
    assert top1(got, data.y_test) < top1(fp32, data.y_test) - 10 * TOLERANCE_POINTS

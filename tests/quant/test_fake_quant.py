"""The calibrated ranges do what they are for: ResNet-18 (small) with every Conv/Linear input
fake-quantized per tensor and every weight per output channel (INT8, torch's own fake-quant ops)
with the calibrated amax stays close to fp32; ranges ten times too small do not."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from trtbuild.models import registry
from trtbuild.quant import calibrate_data, random_source


def _fake_quantized(model, activations, weights, shrink=1.0):
    m = copy.deepcopy(model)
    for name, module in m.named_modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            w = torch.tensor(weights[f"{name}.weight"]) / 127
            with torch.no_grad():
                module.weight.copy_(torch.fake_quantize_per_channel_affine(
                    module.weight, w, torch.zeros(len(w), dtype=torch.int32), 0, -128, 127))
            scale = activations[f"{name}.input"] / shrink / 127
            module.register_forward_pre_hook(
                lambda mod, args, s=scale: (torch.fake_quantize_per_tensor_affine(args[0], s, 0, -128, 127),))
    return m


@pytest.mark.parametrize("method", ["max", "percentile"])
def test_int8_fake_quant_with_the_calibrated_ranges_stays_close_to_fp32(method):
    model = registry.get_torch_model("resnet18", small=True)
    shape = registry.get("resnet18").input_shape(True)[1:]
    calib = calibrate_data(model, random_source(shape, 4, 4, (-1, 1), seed=0), method)
    x = torch.rand(8, *shape, generator=torch.Generator().manual_seed(1)) * 2 - 1  # not the calibration data
    with torch.no_grad():
        ref = model(x)
        good = _fake_quantized(model, calib.activations, calib.weights)(x)
        bad = _fake_quantized(model, calib.activations, calib.weights, shrink=10.0)(x)
    cosine = torch.nn.functional.cosine_similarity
    assert cosine(good.flatten(), ref.flatten(), dim=0) > 0.999
    assert (good.argmax(1) == ref.argmax(1)).all()
    assert cosine(bad.flatten(), ref.flatten(), dim=0) < 0.99

"""IResizeLayer exported as ONNX Resize (opset >= 13, explicit sizes): onnxruntime equals the reference in
every mode, coordinate transformation, rounding mode and selector; TensorRT-RTX's parser builds each export."""

from __future__ import annotations

import pytest

import trtbuild.reference as trt

from helpers.onnx_layer_check import BOTH, F32, check, one
from helpers.resize_layer import add_resize
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse: TensorRT-RTX parses every export)

IM = trt.InterpolationMode
CT = trt.ResizeCoordinateTransformation
RS = trt.ResizeSelector
RM = trt.ResizeRoundMode


def resized(shape=None, scales=None, **attrs):
    return lambda net, x: add_resize(net, x, shape, scales, **attrs)


@pytest.mark.parametrize("rounding", list(RM))
@pytest.mark.parametrize("ct", list(CT))
@pytest.mark.parametrize("size", [(7, 10), (3, 4), (1, 1)])
def test_nearest(rounding, ct, size):
    model = check(lambda net, dt: one(net, dt, (1, 2, 5, 6), resized(
        shape=(1, 2) + size, coordinate_transformation=ct, nearest_rounding=rounding)), expect_ops=["Resize"])
    assert model.opset_import[0].version >= 13


@pytest.mark.parametrize("ct", list(CT))
@pytest.mark.parametrize("sel", list(RS))
@pytest.mark.parametrize("size", [(7, 10), (3, 4), (1, 2)])
def test_linear(ct, sel, size):
    check(lambda net, dt: one(net, dt, (1, 2, 5, 6), resized(
        shape=(1, 2) + size, resize_mode=IM.LINEAR, coordinate_transformation=ct, selector_for_single_pixel=sel)),
        expect_ops=["Resize"])


@pytest.mark.parametrize("ct", list(CT))
@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize("coeff", [-0.75, -0.5])
def test_cubic(ct, exclude, coeff):
    check(lambda net, dt: one(net, dt, (1, 2, 5, 6), resized(
        shape=(1, 2, 9, 4), resize_mode=IM.CUBIC, coordinate_transformation=ct, cubic_coeff=coeff,
        exclude_outside=exclude)), expect_ops=["Resize"])


@BOTH
def test_scales_in_fp32_and_fp16(dt):
    check(lambda net, d: one(net, d, (1, 3, 4, 5), resized(
        scales=[1, 1, 2, 1.5], resize_mode=IM.LINEAR, coordinate_transformation=CT.HALF_PIXEL)), dt=dt,
        expect_ops=["Resize"])


def test_trilinear():
    check(lambda net, dt: one(net, dt, (1, 2, 3, 4, 5), resized(
        shape=(1, 2, 5, 7, 4), resize_mode=IM.LINEAR, coordinate_transformation=CT.ALIGN_CORNERS)), dt=F32)


@pytest.mark.parametrize("mode", list(IM))
@pytest.mark.parametrize("ishape,scales", [((2, 3, 4, 5), [1, 2, 1, 1]), ((2, 3, 4, 5), [1, 2, 1, 2]), ((4,), [2.0]),
                                           ((3, 4), [2, 2]), ((2, 3, 4), [1, 2, 2]), ((2, 3, 4, 5), [1, 2, 2, 2]),
                                           ((1, 2, 3, 4, 5, 6), [1, 1, 1, 2, 2, 2])])
def test_any_dims(mode, ishape, scales):
    """Layouts onnxruntime does not interpolate in one Resize are exported one resized dim at a time."""
    check(lambda net, dt: one(net, dt, ishape, resized(scales=scales, resize_mode=mode,
                                                          coordinate_transformation=CT.HALF_PIXEL)), dt=F32,
          expect_ops=["Resize"])


def test_onnxruntime_nearest_rounds_its_float32_coordinate():
    """The documented difference (docs/onnx.md): 20 -> 12, output 9 maps to 9 * 20 / 12 = 15 exactly (the
    reference and F.interpolate take 15); onnxruntime divides by the float32 scale 0.6 and takes 14."""
    import torch
    import torch.nn.functional as F

    from trtbuild.onnx_export import export_and_run
    from helpers.onnx_layer_check import build

    net = build(lambda n, dt: one(n, dt, (1, 1, 1, 20), resized(shape=(1, 1, 1, 12))), F32)
    x = torch.arange(20, dtype=torch.float32).reshape(1, 1, 1, 20)
    _, ref, got = export_and_run(net, {"x": x})
    assert ref["y"][0, 0, 0, 9] == 15 == F.interpolate(x, size=(1, 12))[0, 0, 0, 9]
    assert got["y"][0, 0, 0, 9] == 14

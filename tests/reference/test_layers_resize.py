"""IResizeLayer: attributes and defaults as TensorRT has them, output shapes from `shape` or `scales`, and the
values of every mode, coordinate transformation, rounding mode and selector, checked against F.interpolate
where PyTorch has the mode and against onnxruntime's Resize (ONNX's formulas, which TensorRT follows) for the
others. The `refnet` fixture twins every construction on TensorRT-RTX (acceptance, shapes, dtypes)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

import trtbuild.reference as trt
from trtbuild.reference import NetworkError

from helpers.refnet import RefNet, close
from helpers.resize_layer import add_resize

IM = trt.InterpolationMode
CT = trt.ResizeCoordinateTransformation
RS = trt.ResizeSelector
RM = trt.ResizeRoundMode
gen = torch.Generator().manual_seed(5)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def resize(refnet, x: torch.Tensor, shape=None, scales=None, **attrs) -> torch.Tensor:
    """Run one resize layer on `x` (shape or scales, attributes by name), checking the inferred shape."""
    layer = add_resize(refnet.network, refnet.input("x", tuple(x.shape)), shape, scales, **attrs)
    out = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert tuple(out.shape) == tuple(layer.get_output(0).shape)
    return out


# -- attributes -------------------------------------------------------------------------------------------
def test_defaults_are_tensorrts(refnet):
    layer = refnet.network.add_resize(refnet.input("x", (1, 2, 3, 4)))
    assert tuple(layer.shape) == (1, 2, 3, 4)
    assert layer.scales == []
    assert layer.resize_mode == IM.NEAREST
    assert layer.coordinate_transformation == CT.ASYMMETRIC
    assert layer.selector_for_single_pixel == RS.FORMULA
    assert layer.nearest_rounding == RM.FLOOR
    assert layer.cubic_coeff == -0.75
    assert layer.exclude_outside is False
    assert tuple(layer.get_output(0).shape) == (1, 2, 3, 4)


def test_scales_and_shape_replace_each_other(refnet):
    layer = refnet.network.add_resize(refnet.input("x", (1, 2, 3, 4)))
    layer.scales = [1.0, 1.0, 2.0, 2.5]
    assert layer.shape is None
    assert tuple(layer.get_output(0).shape) == (1, 2, 6, 10)  # floor(dim * scale)
    layer.shape = (1, 2, 5, 7)
    assert layer.scales == []
    assert tuple(layer.get_output(0).shape) == (1, 2, 5, 7)


def test_enum_values_are_tensorrts():
    assert [int(m) for m in (IM.NEAREST, IM.LINEAR, IM.CUBIC)] == [0, 1, 2]
    assert [int(m) for m in (CT.ALIGN_CORNERS, CT.ASYMMETRIC, CT.HALF_PIXEL)] == [0, 1, 2]
    assert [int(m) for m in (RS.FORMULA, RS.UPPER)] == [0, 1]
    assert [int(m) for m in (RM.HALF_UP, RM.HALF_DOWN, RM.FLOOR, RM.CEIL)] == [0, 1, 2, 3]
    assert int(trt.LayerType.RESIZE) == 25


@pytest.mark.parametrize("ishape,scales,expected", [
    ((1, 1, 5, 5), [1, 1, 0.5, 1.5], (1, 1, 2, 7)),
    ((1, 1, 2, 2), [1, 1, 0, 2], (1, 1, 0, 4)),
    ((2, 2, 2, 2), [2, 2, 2, 2], (4, 4, 4, 4)),  # NEAREST resizes any number of dims, batch included
    ((3,), [2.0], (6,)),
])
def test_output_shape_from_scales(refnet, ishape, scales, expected):
    layer = refnet.network.add_resize(refnet.input("x", ishape))
    layer.scales = scales
    assert tuple(layer.get_output(0).shape) == expected


@pytest.mark.parametrize("dtype", [trt.float16, trt.bfloat16])
def test_half_types_keep_their_type(refnet, dtype):
    layer = refnet.network.add_resize(refnet.input("x", (1, 1, 2, 2), dtype))
    layer.scales = [1, 1, 2, 2]
    layer.resize_mode = IM.LINEAR
    assert layer.get_output(0).dtype == dtype
    assert tuple(layer.get_output(0).shape) == (1, 1, 4, 4)


@pytest.mark.parametrize("ishape,scales,mode,ok", [
    ((2, 2, 2, 2), [1, 2, 1, 1], IM.LINEAR, True),  # LINEAR reaches the innermost 3 dims, channel included
    ((2, 2, 2, 2), [2, 1, 1, 1], IM.LINEAR, False),  # ... not the 4th from the end
    ((2, 2, 2, 2, 2), [1, 2, 1, 1, 1], IM.LINEAR, False),
    ((2, 2, 2), [2, 2, 2], IM.LINEAR, True),
    ((2, 2, 2, 2), [2, 2, 2, 2], IM.CUBIC, True),  # TensorRT-RTX 1.7 resizes any dims in CUBIC
    ((2, 2, 2, 2), [2, 2, 2, 2], IM.NEAREST, True),
])
def test_which_dims_each_mode_resizes(refnet, ishape, scales, mode, ok):
    layer = refnet.network.add_resize(refnet.input("x", ishape))
    layer.scales, layer.resize_mode = scales, mode
    if ok:
        x = randn(*ishape)
        y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
        assert tuple(y.shape) == tuple(int(d * s) for d, s in zip(ishape, scales))
    else:
        with pytest.raises(NetworkError, match="innermost 3 dims"):
            tuple(layer.get_output(0).shape)


def test_empty_dims(refnet):
    x = randn(2, 3, 4)
    y = resize(refnet, x, shape=(2, 0, 4), resize_mode=IM.LINEAR)
    assert tuple(y.shape) == (2, 0, 4)


@pytest.mark.parametrize("what", ["int32", "rank_of_scales", "rank_of_shape", "negative_scale", "negative_dim",
                                  "linear_4_dims"])
def test_rejected(refnet, what):
    dt = trt.int32 if what == "int32" else trt.float32
    layer = refnet.network.add_resize(refnet.input("x", (2, 2, 2, 2), dt))
    with pytest.raises(NetworkError):
        if what == "int32":
            layer.scales = [1, 1, 2, 2]
        elif what == "rank_of_scales":
            layer.scales = [2.0, 2.0]
        elif what == "rank_of_shape":
            layer.shape = (4, 4)
        elif what == "negative_scale":
            layer.scales = [1, 1, -2, 2]
        elif what == "negative_dim":
            layer.shape = (2, 2, -1, 3)
        else:
            layer.resize_mode = IM.LINEAR
            layer.scales = [2, 2, 2, 2]
        tuple(layer.get_output(0).shape)


def test_a_shape_tensor_input_gives_the_output_shape():
    """Shape tensors: tests/reference/test_layers_shape_tensors.py; a network input read as the shape is one."""
    net = RefNet()
    layer = net.network.add_resize(net.input("x", (1, 1, 2, 2)))
    shape = net.input("s", (4,), trt.int64)
    layer.set_input(1, shape)
    assert tuple(layer.get_output(0).shape) == (-1, -1, -1, -1)


# -- values against PyTorch -----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(7, 10), (3, 4), (5, 3), (8, 12)])
def test_nearest_asymmetric_floor_is_torch_nearest(refnet, size):
    x = randn(2, 3, 5, 6)
    y = resize(refnet, x, shape=(2, 3) + size)
    close(y, F.interpolate(x, size=size, mode="nearest"), atol=0, rtol=0)


@pytest.mark.parametrize("size", [(7, 10), (3, 4), (5, 3), (8, 12), (10, 18)])
def test_nearest_half_pixel_half_up_is_torch_nearest_exact(refnet, size):
    x = randn(2, 3, 5, 6)
    y = resize(refnet, x, shape=(2, 3) + size, coordinate_transformation=CT.HALF_PIXEL, nearest_rounding=RM.HALF_UP)
    close(y, F.interpolate(x, size=size, mode="nearest-exact"), atol=0, rtol=0)


@pytest.mark.parametrize("size", [(7, 10), (3, 4), (1, 1), (8, 12)])
@pytest.mark.parametrize("align", [False, True])
def test_linear_is_torch_bilinear(refnet, size, align):
    """align_corners=True is ALIGN_CORNERS; False is HALF_PIXEL with the FORMULA selector: today's PyTorch
    maps a 1-pixel output of a 5-pixel input to coordinate 2, not 0 (UPPER, ONNX's pytorch_half_pixel)."""
    x = randn(2, 3, 5, 6)
    ct = CT.ALIGN_CORNERS if align else CT.HALF_PIXEL
    y = resize(refnet, x, shape=(2, 3) + size, resize_mode=IM.LINEAR, coordinate_transformation=ct)
    close(y, F.interpolate(x, size=size, mode="bilinear", align_corners=align))


@pytest.mark.parametrize("size", [(7, 10), (3, 4), (8, 12)])
@pytest.mark.parametrize("align", [False, True])
def test_cubic_is_torch_bicubic(refnet, size, align):
    x = randn(2, 3, 5, 6)
    ct = CT.ALIGN_CORNERS if align else CT.HALF_PIXEL
    y = resize(refnet, x, shape=(2, 3) + size, resize_mode=IM.CUBIC, coordinate_transformation=ct)
    close(y, F.interpolate(x, size=size, mode="bicubic", align_corners=align))


def test_trilinear_is_torch_trilinear(refnet):
    x = randn(1, 2, 3, 4, 5)
    y = resize(refnet, x, shape=(1, 2, 5, 7, 4), resize_mode=IM.LINEAR, coordinate_transformation=CT.HALF_PIXEL)
    close(y, F.interpolate(x, size=(5, 7, 4), mode="trilinear", align_corners=False))


def test_linear_1d_is_torch_linear(refnet):
    x = randn(2, 3, 7)
    y = resize(refnet, x, scales=[1, 1, 2.0], resize_mode=IM.LINEAR, coordinate_transformation=CT.ALIGN_CORNERS)
    close(y, F.interpolate(x, scale_factor=2.0, mode="linear", align_corners=True))


def test_channel_and_batch_dims_resize_too(refnet):
    """TensorRT resizes any dims: nearest doubling of the batch and channel dims repeats them."""
    x = randn(2, 3, 2, 2)
    y = resize(refnet, x, scales=[2, 2, 1, 1])
    close(y, x.repeat_interleave(2, 0).repeat_interleave(2, 1), atol=0, rtol=0)


def test_nearest_keeps_inf_and_nan(refnet):
    x = torch.tensor([[[[1.0, float("inf")], [float("nan"), -float("inf")]]]])
    y = resize(refnet, x, scales=[1, 1, 2, 2])
    close(y, F.interpolate(x, scale_factor=2, mode="nearest"), atol=0, rtol=0, equal_nan=True)


# -- values against onnxruntime's Resize --------------------------------------------------------------------
_ORT_TRANSFORM = {CT.ALIGN_CORNERS: "align_corners", CT.ASYMMETRIC: "asymmetric", CT.HALF_PIXEL: "half_pixel"}
_ORT_ROUND = {RM.HALF_UP: "round_prefer_ceil", RM.HALF_DOWN: "round_prefer_floor", RM.FLOOR: "floor",
              RM.CEIL: "ceil"}
_ORT_MODE = {IM.NEAREST: "nearest", IM.LINEAR: "linear", IM.CUBIC: "cubic"}


def ort_resize(x: np.ndarray, sizes, mode, ct, sel=RS.FORMULA, rounding=RM.FLOOR, cubic_coeff=-0.75,
               exclude_outside=False) -> np.ndarray:
    """onnxruntime's Resize (opset 13, explicit sizes), written here without the exporter."""
    import onnxruntime as ort

    transform = _ORT_TRANSFORM[ct]
    if ct == CT.HALF_PIXEL and sel == RS.UPPER:
        transform = "pytorch_half_pixel"
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=_ORT_MODE[mode],
                            coordinate_transformation_mode=transform, nearest_mode=_ORT_ROUND[rounding],
                            cubic_coeff_a=cubic_coeff, exclude_outside=int(exclude_outside))
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(sizes))],
        [helper.make_tensor("sizes", TensorProto.INT64, (len(sizes),), list(sizes))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


SIZES = [(7, 10), (3, 4), (1, 1), (9, 3), (2, 13)]


@pytest.mark.parametrize("rounding", list(RM))
@pytest.mark.parametrize("ct", list(CT))
@pytest.mark.parametrize("sel", list(RS))
@pytest.mark.parametrize("size", SIZES)
def test_nearest_matches_onnxruntime(refnet, rounding, ct, sel, size):
    x = randn(1, 2, 5, 6)
    y = resize(refnet, x, shape=(1, 2) + size, coordinate_transformation=ct, nearest_rounding=rounding,
               selector_for_single_pixel=sel)
    expected = ort_resize(x.numpy(), (1, 2) + size, IM.NEAREST, ct, sel, rounding)
    close(y, expected, atol=0, rtol=0)


@pytest.mark.parametrize("ct", list(CT))
@pytest.mark.parametrize("sel", list(RS))
@pytest.mark.parametrize("size", SIZES)
def test_linear_matches_onnxruntime(refnet, ct, sel, size):
    x = randn(1, 2, 5, 6)
    y = resize(refnet, x, shape=(1, 2) + size, resize_mode=IM.LINEAR, coordinate_transformation=ct,
               selector_for_single_pixel=sel)
    close(y, ort_resize(x.numpy(), (1, 2) + size, IM.LINEAR, ct, sel))


@pytest.mark.parametrize("ct", list(CT))
@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize("coeff", [-0.75, -0.5])
@pytest.mark.parametrize("size", [(7, 10), (3, 4), (9, 3), (2, 13)])
def test_cubic_matches_onnxruntime(refnet, ct, exclude, coeff, size):
    x = randn(1, 2, 5, 6)
    y = resize(refnet, x, shape=(1, 2) + size, resize_mode=IM.CUBIC, coordinate_transformation=ct,
               cubic_coeff=coeff, exclude_outside=exclude)
    close(y, ort_resize(x.numpy(), (1, 2) + size, IM.CUBIC, ct, cubic_coeff=coeff, exclude_outside=exclude),
          atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("sel", list(RS))
def test_cubic_single_pixel_selector_matches_onnxruntime(refnet, sel):
    x = randn(1, 2, 5, 6)
    y = resize(refnet, x, shape=(1, 2, 1, 4), resize_mode=IM.CUBIC, coordinate_transformation=CT.HALF_PIXEL,
               selector_for_single_pixel=sel)
    close(y, ort_resize(x.numpy(), (1, 2, 1, 4), IM.CUBIC, CT.HALF_PIXEL, sel), atol=1e-5, rtol=1e-5)


def test_linear_from_scales_uses_the_length_ratio(refnet):
    """Output floor(5 * 1.5) = 7; the coordinates use 5 / 7, the lengths' ratio (TensorRT's formula)."""
    x = randn(1, 1, 5, 5)
    y = resize(refnet, x, scales=[1, 1, 1.5, 1.5], resize_mode=IM.LINEAR, coordinate_transformation=CT.HALF_PIXEL)
    close(y, ort_resize(x.numpy(), (1, 1, 7, 7), IM.LINEAR, CT.HALF_PIXEL))


# ----------------------------------------------- the F.interpolate fast path against the documented formulas


def _resize_params(mode, ct=CT.HALF_PIXEL, rounding=trt.ResizeRoundMode.FLOOR, coeff=-0.75, exclude=False):
    return {"resize_mode": int(mode), "coordinate_transformation": int(ct), "nearest_rounding": int(rounding),
            "selector_for_single_pixel": int(trt.ResizeSelector.FORMULA), "cubic_coeff": coeff,
            "exclude_outside": exclude}


FAST_CASES = [  # (params, input shape, output shape, the F.interpolate call it must equal)
    (_resize_params(IM.NEAREST, CT.ASYMMETRIC), (2, 3, 5, 7), (2, 3, 10, 14), ("nearest", None)),
    (_resize_params(IM.NEAREST, CT.ASYMMETRIC), (2, 3, 9, 7), (2, 3, 4, 5), ("nearest", None)),
    (_resize_params(IM.NEAREST, CT.HALF_PIXEL, trt.ResizeRoundMode.HALF_UP), (1, 2, 5, 6), (1, 2, 8, 13),
     ("nearest-exact", None)),
    (_resize_params(IM.LINEAR, CT.HALF_PIXEL), (2, 5, 7, 3), (2, 9, 7, 6), ("trilinear", False)),  # one dim kept
    (_resize_params(IM.LINEAR, CT.HALF_PIXEL), (2, 3, 5, 7), (2, 3, 11, 4), ("bilinear", False)),
    (_resize_params(IM.LINEAR, CT.ALIGN_CORNERS), (2, 3, 5, 7), (2, 3, 11, 4), ("bilinear", True)),
    (_resize_params(IM.LINEAR, CT.HALF_PIXEL), (2, 3, 4, 5, 6), (2, 3, 7, 3, 9), ("trilinear", False)),
    (_resize_params(IM.LINEAR, CT.ALIGN_CORNERS), (3, 9), (3, 20), ("linear", True)),
    (_resize_params(IM.CUBIC, CT.HALF_PIXEL), (1, 2, 6, 5), (1, 2, 13, 9), ("bicubic", False)),
    (_resize_params(IM.CUBIC, CT.ALIGN_CORNERS), (1, 2, 6, 5), (1, 2, 3, 9), ("bicubic", True)),
]


@pytest.mark.parametrize("params,shape,out,call", FAST_CASES, ids=lambda v: str(v) if isinstance(v, tuple) else "p")
def test_the_formula_path_and_the_fast_path_equal_f_interpolate(params, shape, out, call):
    """resize_by_taps computes ONNX's formulas (float64 weights) and equals F.interpolate to float32 rounding;
    resize() takes the F.interpolate path for exactly these cases, and a NEAREST copy is then bit-identical."""
    from trtbuild.reference.ops import resize as R

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    mode, align = call
    k = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(mode, 2)  # nearest: the cases' 2
    lead = shape[:-k]
    expected = F.interpolate(x.reshape((1, -1) + shape[-k:]), size=out[-k:], mode=mode,
                             **({} if align is None else {"align_corners": align})).reshape(out)
    assert R.torch_equivalent(params, shape, out) == (mode, align, k)
    by_taps = R.resize_by_taps(params, x, out)
    assert by_taps.shape == expected.shape and lead == tuple(out[:-k])
    if mode.startswith("nearest"):
        assert torch.equal(by_taps, expected) and torch.equal(R.resize(params, x, out), expected)
    else:
        close(by_taps, expected, atol=2e-6, rtol=2e-6)
        close(R.resize(params, x, out), by_taps, atol=2e-6, rtol=2e-6)


@pytest.mark.parametrize("params,shape,out", [
    (_resize_params(IM.LINEAR, CT.ASYMMETRIC), (1, 2, 5, 7), (1, 2, 9, 3)),  # no PyTorch mode maps so
    (_resize_params(IM.CUBIC, CT.HALF_PIXEL, coeff=-0.5), (1, 2, 5, 7), (1, 2, 9, 3)),
    (_resize_params(IM.CUBIC, CT.HALF_PIXEL, exclude=True), (1, 2, 5, 7), (1, 2, 9, 3)),
    (_resize_params(IM.NEAREST, CT.HALF_PIXEL, trt.ResizeRoundMode.CEIL), (1, 2, 5, 7), (1, 2, 9, 3)),
    (_resize_params(IM.NEAREST, CT.HALF_PIXEL, trt.ResizeRoundMode.FLOOR), (1, 2, 5, 6), (1, 2, 8, 13)),
    (_resize_params(IM.LINEAR, CT.HALF_PIXEL), (2, 5, 7, 3, 4), (2, 9, 8, 6, 5)),  # 4 resized dims
])
def test_resizes_pytorch_lacks_take_the_formula_path(params, shape, out):
    from trtbuild.reference.ops import resize as R

    assert R.torch_equivalent(params, shape, out) is None
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(4))
    assert torch.equal(R.resize(params, x, out), R.resize_by_taps(params, x, out))


def build_and_run(refnet, layer, profile, x: torch.Tensor) -> torch.Tensor:
    """Build the network with `layer`'s output marked and input x's (min, opt, max) `profile`; run it on `x`."""
    from helpers.refnet import add_profile, run_plan

    add_profile(refnet, {"x": profile})
    refnet.network.mark_output(layer.get_output(0))
    plan = refnet.build()
    assert plan is not None
    return run_plan(plan, {"x": x})[layer.get_output(0).name]


def test_a_linear_resize_of_a_dynamic_batch_dim_builds_and_runs_as_tensorrt_rtx_builds_it(refnet):
    """TensorRT-RTX builds a LINEAR resize to a static shape whose batch dim is dynamic in the network: the rule that
    LINEAR reaches only the innermost 3 dims applies to the dims the build sees. The reference builds it too and, at
    run time, resizes the batch dim by the documented formula (half-pixel linear along dim 0)."""
    layer = add_resize(refnet.network, refnet.input("x", (-1, 1, 2, 2)), shape=(3, 1, 2, 2), resize_mode=IM.LINEAR,
                       coordinate_transformation=CT.HALF_PIXEL)
    assert tuple(layer.get_output(0).shape) == (3, 1, 2, 2)
    x = torch.tensor([0.0, 6.0]).reshape(2, 1, 1, 1).expand(2, 1, 2, 2).contiguous()
    y = build_and_run(refnet, layer, ((1, 1, 2, 2), (2, 1, 2, 2), (2, 1, 2, 2)), x)
    # output j reads input coordinate (j + 0.5) * 2/3 - 0.5: -1/6 (clamped to 0), 1/2, 7/6 (clamped to 1)
    close(y[:, 0, 0, 0], [0.0, 3.0, 6.0])


def test_a_zero_scale_makes_a_dynamic_dim_statically_empty_as_tensorrt_rtx_infers(refnet):
    """floor(N * 0) is 0 whatever N is: TensorRT-RTX infers a static 0 for a dynamic batch dim with scale 0 (the
    sweep's seeds 2 and 4 found the reference saying -1). The engine runs and gives an empty batch."""
    layer = add_resize(refnet.network, refnet.input("x", (-1, 3, 3, 1)), scales=[0.0, 2.0, 1.0, 1.0],
                       resize_mode=IM.CUBIC)
    assert tuple(layer.get_output(0).shape) == (0, 6, 3, 1)
    y = build_and_run(refnet, layer, ((1, 3, 3, 1), (2, 3, 3, 1), (4, 3, 3, 1)), torch.randn(2, 3, 3, 1))
    assert tuple(y.shape) == (0, 6, 3, 1)

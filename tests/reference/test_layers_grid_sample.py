"""trtbuild.reference: GridSample against torch.nn.functional.grid_sample in float64 (every interpolation mode,
sample mode and align_corners, rank 4 and 5), each construction also built by TensorRT-RTX (the `refnet` twin).

torch has no rank-5 bicubic: rank-5 CUBIC is checked against ONNX's reference evaluator (onnx.reference, GridSample
opset 20) for FILL and REFLECT. For CLAMP that evaluator's N-D path clamps the position before it takes the four
taps, unlike its own rank-4 path, PyTorch and onnxruntime, which clamp each tap; rank-5 CUBIC CLAMP is checked
instead on a depth-1 volume, where every tap along the depth reads the one slice and the result must be torch's
rank-4 bicubic border sampling of that slice.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import close

IM, SM = trt.InterpolationMode, trt.SampleMode
TORCH_MODE = {IM.NEAREST: "nearest", IM.LINEAR: "bilinear", IM.CUBIC: "bicubic"}
TORCH_PADDING = {SM.FILL: "zeros", SM.CLAMP: "border", SM.REFLECT: "reflection"}
gen = torch.Generator().manual_seed(42)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def grid(*shape, reach=1.4) -> torch.Tensor:
    """Normalized positions, some outside [-1, 1] so that the sample modes matter."""
    return (torch.rand(*shape, generator=gen) * 2 - 1) * reach


def sample(refnet, x, g, mode=None, sample_mode=None, align=None):
    layer = refnet.network.add_grid_sample(refnet.input("x", tuple(x.shape)), refnet.input("g", tuple(g.shape)))
    if mode is not None:
        layer.interpolation_mode = mode
    if sample_mode is not None:
        layer.sample_mode = sample_mode
    if align is not None:
        layer.align_corners = align
    return layer, refnet.run({"x": x, "g": g}, y=layer.get_output(0))["y"]


def test_defaults_are_tensorrts(refnet):
    """add_grid_sample: "a trt.InterpolationMode.LINEAR, unaligned corners, and trt.SampleMode.FILL"."""
    x, g = randn(2, 3, 4, 5), grid(2, 6, 7, 2)
    layer, y = sample(refnet, x, g)
    assert layer.interpolation_mode == IM.LINEAR and layer.align_corners is False and layer.sample_mode == SM.FILL
    assert layer.num_inputs == 2 and tuple(layer.get_output(0).shape) == (2, 3, 6, 7)
    close(y, F.grid_sample(x.double(), g.double(), "bilinear", "zeros", align_corners=False))


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("sample_mode", [SM.FILL, SM.CLAMP, SM.REFLECT])
@pytest.mark.parametrize("mode", [IM.NEAREST, IM.LINEAR, IM.CUBIC])
def test_rank4_is_torch_grid_sample(refnet, mode, sample_mode, align):
    x, g = randn(2, 3, 5, 6), grid(2, 4, 7, 2)
    layer, y = sample(refnet, x, g, mode, sample_mode, align)
    assert (layer.interpolation_mode, layer.sample_mode, layer.align_corners) == (mode, sample_mode, align)
    close(y, F.grid_sample(x.double(), g.double(), TORCH_MODE[mode], TORCH_PADDING[sample_mode],
                           align_corners=align))


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("sample_mode", [SM.FILL, SM.CLAMP, SM.REFLECT])
@pytest.mark.parametrize("mode", [IM.NEAREST, IM.LINEAR])
def test_rank5_is_torch_grid_sample(refnet, mode, sample_mode, align):
    x, g = randn(2, 2, 3, 4, 5), grid(2, 2, 3, 4, 3)
    _, y = sample(refnet, x, g, mode, sample_mode, align)
    torch_mode = "bilinear" if mode == IM.LINEAR else "nearest"  # torch's "bilinear" is trilinear at rank 5
    close(y, F.grid_sample(x.double(), g.double(), torch_mode, TORCH_PADDING[sample_mode], align_corners=align))


def _onnx_reference_grid_sample(x, g, padding: str, align: bool):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode="cubic", padding_mode=padding,
                            align_corners=int(align))
    io = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, None) for n in ("x", "g", "y")]
    model = helper.make_model(helper.make_graph([node], "gs", io[:2], io[2:]),
                              opset_imports=[helper.make_opsetid("", 20)])
    return ReferenceEvaluator(model).run(None, {"x": x.double().numpy(), "g": g.double().numpy()})[0]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("sample_mode", [SM.FILL, SM.REFLECT])
def test_rank5_cubic_is_onnx_tricubic(refnet, sample_mode, align):
    x, g = randn(1, 2, 3, 4, 5), grid(1, 2, 3, 2, 3)
    _, y = sample(refnet, x, g, IM.CUBIC, sample_mode, align)
    close(y, _onnx_reference_grid_sample(x, g, TORCH_PADDING[sample_mode], align))


@pytest.mark.parametrize("align", [False, True])
def test_rank5_cubic_clamp_on_one_slice_is_rank4_bicubic_border(refnet, align):
    x, g = randn(2, 3, 1, 4, 5), grid(2, 1, 3, 4, 3, reach=2.0)
    _, y = sample(refnet, x, g, IM.CUBIC, SM.CLAMP, align)
    expected = F.grid_sample(x[:, :, 0].double(), g[:, 0, ..., :2].double(), "bicubic", "border", align_corners=align)
    close(y, expected.unsqueeze(2))


def test_nearest_rounds_half_to_even(refnet):
    """Positions exactly between two pixels (align_corners: pixel x at -1 + 2x/3 of a width-4 row)."""
    x = torch.arange(4.0).reshape(1, 1, 1, 4)
    xs = torch.tensor([-1 + 2 * k / 3 for k in (0.5, 1.5, 2.5)])
    g = torch.stack([xs, torch.zeros(3)], -1).reshape(1, 1, 3, 2)
    _, y = sample(refnet, x, g, IM.NEAREST, SM.FILL, True)
    close(y, torch.tensor([0.0, 2.0, 2.0]).reshape(1, 1, 1, 3))


def test_half_types_keep_their_type(refnet):
    x, g = randn(1, 2, 3, 4).half(), grid(1, 2, 2, 2).half()
    layer = refnet.network.add_grid_sample(refnet.input("x", (1, 2, 3, 4), trt.float16),
                                           refnet.input("g", (1, 2, 2, 2), trt.float16))
    y = refnet.run({"x": x, "g": g}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.float16
    close(y, F.grid_sample(x.double(), g.double(), "bilinear", "zeros", align_corners=False), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("mode", [SM.STRICT_BOUNDS, SM.WRAP])
def test_the_setter_refuses_other_sample_modes(refnet, mode):
    layer = refnet.network.add_grid_sample(refnet.input("x", (1, 2, 3, 4)), refnet.input("g", (1, 2, 2, 2)))
    with pytest.raises(trt.NetworkError, match="CLAMP, FILL or REFLECT"):
        layer.sample_mode = mode
    assert layer.sample_mode == SM.FILL


@pytest.mark.parametrize("x_shape, g_shape, words", [
    ((2, 3, 4), (2, 5, 2), "rank 4 .* or 5"),
    ((1, 1, 2, 3, 4, 5), (1, 1, 6, 7, 8, 3), "rank 4 .* or 5"),
    ((1, 2, 3, 4), (1, 5, 6, 7, 2), "grid has rank 5 but the input has rank 4"),
    ((1, 2, 3, 4), (1, 5, 6, 3), "last dimension is 3 but a rank-4 input needs 2"),
    ((1, 2, 3, 4, 5), (1, 5, 6, 7, 2), "last dimension is 2 but a rank-5 input needs 3"),
    ((2, 2, 3, 4), (1, 5, 6, 2), "first dimension is 2 but the grid's is 1"),
])
def test_refused_shapes(refnet, x_shape, g_shape, words):
    with pytest.raises(trt.NetworkError, match=words):
        layer = refnet.network.add_grid_sample(refnet.input("x", x_shape), refnet.input("g", g_shape))
        layer.get_output(0).shape  # noqa: B018 - TensorRT-RTX checks some of these at shape query or build


@pytest.mark.parametrize("x_dt, g_dt, words", [
    (trt.float16, trt.float32, "grid has type FLOAT but the input has HALF"),
    (trt.float32, trt.bfloat16, "grid has type BF16 but the input has FLOAT"),
    (trt.int32, trt.int32, "needs FLOAT, HALF or BF16"),
    (trt.int8, trt.int8, "INT8, a quantized type"),
])
def test_refused_types(refnet, x_dt, g_dt, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_grid_sample(refnet.input("x", (1, 2, 3, 4), x_dt), refnet.input("g", (1, 2, 2, 2), g_dt))


def test_dynamic_batch_takes_the_grids(refnet):
    from helpers.refnet import add_profile

    layer = refnet.network.add_grid_sample(refnet.input("x", (-1, 2, 3, 4)), refnet.input("g", (-1, 5, 6, 2)))
    assert tuple(layer.get_output(0).shape) == (-1, 2, 5, 6)
    add_profile(refnet, {"x": ((1, 2, 3, 4), (2, 2, 3, 4), (3, 2, 3, 4)), "g": ((1, 5, 6, 2), (2, 5, 6, 2),
                                                                               (3, 5, 6, 2))})
    x, g = randn(3, 2, 3, 4), grid(3, 5, 6, 2)
    y = refnet.run({"x": x, "g": g}, y=layer.get_output(0))["y"]
    close(y, F.grid_sample(x.double(), g.double(), "bilinear", "zeros", align_corners=False))


def test_values_for_a_hand_computed_case(refnet):
    """A 2x2 image sampled at its centre (bilinear: the mean) and at the corner pixel centres (align_corners)."""
    x = torch.tensor([[[[1.0, 2.0], [3.0, 5.0]]]])
    g = torch.tensor([[[[0.0, 0.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]]]])
    _, y = sample(refnet, x, g, IM.LINEAR, SM.FILL, True)
    close(y, np.array([[[[2.75, 1.0, 5.0, 2.0]]]]))


def test_a_dynamic_input_batch_with_a_static_grid_batch(refnet):
    """The output keeps the input's (dynamic) batch, as TensorRT-RTX infers, though the grid's is static."""
    from helpers.refnet import add_profile

    layer = refnet.network.add_grid_sample(refnet.input("x", (-1, 2, 3, 4)), refnet.input("g", (2, 5, 6, 2)))
    assert tuple(layer.get_output(0).shape) == (-1, 2, 5, 6)
    add_profile(refnet, {"x": ((1, 2, 3, 4), (2, 2, 3, 4), (3, 2, 3, 4))})
    x, g = randn(2, 2, 3, 4), grid(2, 5, 6, 2)
    y = refnet.run({"x": x, "g": g}, y=layer.get_output(0))["y"]
    close(y, F.grid_sample(x.double(), g.double(), "bilinear", "zeros", align_corners=False))


@pytest.mark.parametrize("interp", ["NEAREST", "LINEAR", "CUBIC"])
@pytest.mark.parametrize("sample_mode", ["FILL", "CLAMP", "REFLECT"])
@pytest.mark.parametrize("align", [False, True])
def test_the_formula_path_is_torch_grid_sample_and_run_takes_torch_where_it_can(interp, sample_mode, align):
    """run_by_taps computes the documented formulas (checked here against F.grid_sample in float64); run() calls
    F.grid_sample in float32 for the modes PyTorch has and agrees with the formulas to float32 rounding."""
    from trtbuild.reference.ops.grid_sample import run, run_by_taps

    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 3, 5, 6, generator=g)
    grid = torch.rand(2, 4, 7, 2, generator=g) * 2.4 - 1.2  # some positions outside
    p = {"interpolation_mode": int(getattr(trt.InterpolationMode, interp)), "align_corners": align,
         "sample_mode": int(getattr(trt.SampleMode, sample_mode))}
    torch_mode = {"NEAREST": "nearest", "LINEAR": "bilinear", "CUBIC": "bicubic"}[interp]
    padding = {"FILL": "zeros", "CLAMP": "border", "REFLECT": "reflection"}[sample_mode]
    expected = F.grid_sample(x.double(), grid.double(), mode=torch_mode, padding_mode=padding, align_corners=align)
    (by_taps,) = run_by_taps(p, {}, [x, grid], None)
    (fast,) = run(p, {}, [x, grid], None)
    if interp == "NEAREST":  # a copy: the same element wherever no position lies within rounding of a half
        assert torch.equal(fast, by_taps)
    torch.testing.assert_close(by_taps.double(), expected, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(fast, by_taps, atol=2e-5, rtol=2e-5)

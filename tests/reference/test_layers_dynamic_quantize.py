"""trtbuild.reference: IDynamicQuantizeLayer (add_dynamic_quantize / _v2): TensorRT's attributes, shape and type
rules and what TensorRT-RTX 1.7 builds, judged by TensorRT-RTX for sm120 (the twin compares every shape and type
read, and every build): TensorRT-RTX refuses the layer for sm86 (FP4/FP8 are "HW-specific datatypes" there), so
this module's `refnet` twins an sm120 target. Its values: tests/reference/test_dynamic_quantize_run.py."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from helpers.refnet import RtxNet

FP4, FP8, E8M0 = trt.DataType.FP4, trt.DataType.FP8, trt.DataType.E8M0


@pytest.fixture
def refnet(rtx):
    """A reference network twinned with TensorRT-RTX building for sm120 (the only target that builds the layer)."""
    from helpers.twin import TwinRefNet

    net = TwinRefNet(rtx, targets=("12.0",))
    yield net
    net.twin.finish()


def double_scale(refnet, dtype=np.float32):
    arr = np.array(1.0, dtype)
    return refnet.network.add_constant((), trt.Weights(arr)).get_output(0)


def nvfp4(refnet, shape, axis, dtype=trt.float16, scale=True):
    x = refnet.input("x", shape, dtype)
    layer = refnet.network.add_dynamic_quantize(x, axis, 16, FP4, FP8)
    if scale:
        layer.set_input(1, double_scale(refnet))
    return layer


@pytest.mark.parametrize("shape,axis,scales", [((4, 32), 1, (4, 2)), ((32, 4), 0, (2, 4)),
                                               ((2, 4, 32), 2, (2, 4, 2)), ((2, 32, 4), 1, (2, 2, 4))])
@pytest.mark.parametrize("dtype", [trt.float32, trt.float16, trt.bfloat16])
def test_nvfp4_shapes_and_types(refnet, shape, axis, scales, dtype):
    layer = nvfp4(refnet, shape, axis, dtype)
    assert (layer.axis, layer.block_size, layer.to_type, layer.scale_type) == (axis, 16, FP4, FP8)
    data, scale = layer.get_output(0), layer.get_output(1)
    assert (tuple(data.shape), data.dtype) == (shape, FP4)
    assert (tuple(scale.shape), scale.dtype) == (scales, FP8)


@pytest.mark.parametrize("block_shape,scales", [((1, 16), (4, 2)), ((2, 16), (2, 2)), ((4, -1), (1, 1))])
def test_v2_block_shapes(refnet, block_shape, scales):
    x = refnet.input("x", (4, 32), trt.float16)
    layer = refnet.network.add_dynamic_quantize_v2(x, block_shape, FP4, FP8)
    layer.set_input(1, double_scale(refnet))
    assert tuple(layer.block_shape) == block_shape
    assert tuple(layer.get_output(1).shape) == scales and layer.get_output(1).dtype == FP8


def test_mxfp8_takes_no_double_scale(refnet):
    x = refnet.input("x", (4, 64), trt.float16)
    layer = refnet.network.add_dynamic_quantize(x, 1, 32, FP8, E8M0)
    assert tuple(layer.get_output(1).shape) == (4, 2) and layer.get_output(1).dtype == E8M0
    assert layer.get_output(0).dtype == FP8


@pytest.mark.parametrize("shape,axis,to,st,scale,match", [
    ((4, 32), 1, FP4, FP8, False, "needs the double quantization scale"),
    ((4, 64), 1, FP8, E8M0, True, "takes no double quantization scale"),
    ((32, 2, 4), 0, FP4, FP8, True, "last or second-to-last"),
    ((1, 2, 4, 32), 3, FP4, FP8, True, "2-D or 3-D"),
    ((32,), 0, FP4, FP8, True, "2-D or 3-D"),
    ((4, 24), 1, FP4, FP8, True, "does not divide"),
    ((4, 32), 1, trt.DataType.INT8, FP8, True, "FP4 .* or FP8"),
    ((4, 32), 1, trt.DataType.INT4, FP8, True, "FP4 .* or FP8"),
])
def test_refusals(refnet, shape, axis, to, st, scale, match):
    x = refnet.input("x", shape, trt.float16)
    layer = refnet.network.add_dynamic_quantize(x, axis, 16, to, st)
    if scale:
        layer.set_input(1, double_scale(refnet))
    with pytest.raises(trt.NetworkError, match=match) as info:
        layer.get_output(0).shape  # noqa: B018 - the shape query is what raises
    assert str(info.value).startswith("layer '(Unnamed Layer* ")


def test_block_size_is_16_or_32(refnet):
    with pytest.raises(trt.NetworkError, match="block_size 8 is refused"):
        refnet.network.add_dynamic_quantize(refnet.input("x", (4, 32), trt.float16), 1, 8, FP4, FP8)


def test_the_reference_builds_what_rtx_builds_for_sm120(refnet):
    layer = nvfp4(refnet, (4, 32), 1)
    refnet.network.mark_output(layer.get_output(0))
    refnet.network.mark_output(layer.get_output(1))
    assert refnet.build() is not None  # the twin builds it too, for sm120


def test_sm86_refuses_it(rtx):
    """TensorRT-RTX builds the layer for Blackwell only: its FP4/FP8 tensors are "HW-specific datatypes" on sm86."""
    net = RtxNet(rtx, targets=("8.6",))
    x = net.network.add_input("x", rtx.float16, (4, 32))
    layer = net.network.add_dynamic_quantize(x, 1, 16, rtx.DataType.FP4, rtx.DataType.FP8)
    layer.set_input(1, net.network.add_constant((), rtx.Weights(np.array(1.0, np.float32))).get_output(0))
    net.network.mark_output(layer.get_output(0))
    assert net.build() is None and "HW-specific datatypes" in net.errors


def test_rtx_builds_nvfp4_for_sm120(rtx):
    """Where the reference refuses to build, TensorRT-RTX does for Blackwell: the refusal is the reference's."""
    net = RtxNet(rtx, targets=("12.0",))
    x = net.network.add_input("x", rtx.float16, (4, 32))
    layer = net.network.add_dynamic_quantize(x, 1, 16, rtx.DataType.FP4, rtx.DataType.FP8)
    scale = np.array(1.0, np.float32)
    layer.set_input(1, net.network.add_constant((), rtx.Weights(scale)).get_output(0))
    net.network.mark_output(layer.get_output(0))
    net.network.mark_output(layer.get_output(1))
    assert net.build() is not None, net.errors


@pytest.mark.parametrize("axis,scales", [(-1, (32, 2)), (-2, (2, 32)), (0, (2, 32))])
def test_negative_axes_count_from_the_end(refnet, axis, scales):
    layer = nvfp4(refnet, (32, 32), axis)
    assert tuple(layer.get_output(1).shape) == scales


def test_a_block_shape_set_later_wins_over_axis_and_block_size(refnet):
    layer = nvfp4(refnet, (32, 32), 1)
    layer.block_shape = (16, 1)
    assert tuple(layer.get_output(1).shape) == (2, 32) and (layer.axis, layer.block_size) == (1, 16)
    x = refnet.network.get_input(0)
    v2 = refnet.network.add_dynamic_quantize_v2(x, (1, 16), FP4, FP8)
    assert (v2.axis, v2.block_size) == (-1, -1)
    v2.set_input(1, double_scale(refnet))
    v2.axis = 0
    assert tuple(v2.get_output(1).shape) == (32, 2)


@pytest.mark.parametrize("attribute,value", [("block_size", 8), ("block_size", 0), ("to_type", trt.DataType.INT8)])
def test_setters_refuse_what_tensorrt_refuses(refnet, attribute, value):
    layer = nvfp4(refnet, (4, 32), 1)
    with pytest.raises(trt.NetworkError, match="is refused"):
        setattr(layer, attribute, value)
    layer.block_size = 32  # accepted, as on TensorRT-RTX (which then refuses FP4 blocks of 32 at build)
    assert layer.block_size == 32


def test_axis_out_of_range(refnet):
    layer = nvfp4(refnet, (32, 32), 1)
    layer.axis = -3
    with pytest.raises(trt.NetworkError, match="axis -3 is refused"):
        layer.get_output(0).shape  # noqa: B018


def test_partial_blocks_stay_stricter(rtx):
    """The sweep's PARTIAL_BLOCK entry: the reference refuses a block_shape that does not divide the input;
    TensorRT-RTX builds it for sm120 with ceil-divided scales (3 rows in blocks of 4: one scale row)."""
    from helpers.refnet import RefNet
    from helpers.rtx_sweep_dynamic_quantize import PARTIAL_BLOCK

    with pytest.raises(trt.NetworkError, match=PARTIAL_BLOCK.pattern):
        PARTIAL_BLOCK.example(RefNet().network, trt).get_output(1).shape  # noqa: B018
    net = RtxNet(rtx, targets=("12.0",))
    layer = PARTIAL_BLOCK.example(net.network, rtx)
    assert tuple(layer.get_output(1).shape) == (1, 1)
    net.network.mark_output(layer.get_output(0))
    net.network.mark_output(layer.get_output(1))
    assert net.build() is not None, net.errors


def test_a_blocked_dimension_must_be_static(refnet):
    """TensorRT: "the extent of the blocked axis must be a compile-time constant" (TensorRT-RTX: no shape)."""
    x = refnet.input("x", (-1, 32), trt.float16)
    layer = refnet.network.add_dynamic_quantize(x, 0, 16, FP4, FP8)
    layer.set_input(1, double_scale(refnet))
    with pytest.raises(trt.NetworkError, match=r"dimension 0 of the input \(-1, 32\) is blocked but dynamic"):
        layer.get_output(1).shape  # noqa: B018


def test_a_4d_input_takes_a_2d_block_shape(refnet):
    x = refnet.input("x", (1, 4, 4, 32), trt.float16)
    layer = refnet.network.add_dynamic_quantize_v2(x, (1, 1, -1, 16), FP8, E8M0)
    assert tuple(layer.get_output(1).shape) == (1, 4, 1, 2)

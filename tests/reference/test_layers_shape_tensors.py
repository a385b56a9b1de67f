"""trtbuild.reference: shape tensors (add_shape; values flowing into shuffle, slice, resize and fill shape
inputs at build and run time; shape tensor network inputs) and IFillLayer. Each construction is also built by
TensorRT-RTX (the `refnet` twin), which judges acceptance, shapes and dtypes; values come from torch/numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import RefNet, add_profile, close
from trtbuild.reference.runtime import device

LIN, UNI, NORM = trt.FillOperation.LINSPACE, trt.FillOperation.RANDOM_UNIFORM, trt.FillOperation.RANDOM_NORMAL
gen = torch.Generator().manual_seed(7)


def const(net, values, dtype=np.int64):
    arr = np.array(values, dtype=dtype)
    return net.network.add_constant(arr.shape, trt.Weights(arr)).get_output(0)


def flatten_dims(net, x):
    """ONNX exporters' flatten: concat(shape(x)[0:1], [-1])."""
    s = net.network.add_shape(x).get_output(0)
    batch = net.network.add_gather(s, const(net, [0]), 0).get_output(0)
    return net.network.add_concatenation([batch, const(net, [-1])]).get_output(0)


# -- add_shape ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (4,), ()])
def test_shape_layer_gives_the_input_dims_as_int64(refnet, shape):
    x = refnet.input("x", shape)
    s = refnet.network.add_shape(x).get_output(0)
    assert s.dtype == trt.int64 and tuple(s.shape) == (len(shape),)
    out = refnet.run({"x": torch.zeros(shape)}, s=s)["s"]
    assert out.dtype == torch.int64 and out.tolist() == list(shape)


def test_flatten_by_shape_arithmetic_with_a_dynamic_batch(refnet):
    x = refnet.input("x", (-1, 3, 4, 4))
    sh = refnet.network.add_shuffle(x)
    sh.set_input(1, flatten_dims(refnet, x))
    assert tuple(sh.get_output(0).shape) == (-1, 48)
    add_profile(refnet, {"x": ((1, 3, 4, 4), (2, 3, 4, 4), (8, 3, 4, 4))})
    xv = torch.randn(5, 3, 4, 4, generator=gen)
    y = refnet.run({"x": xv}, y=sh.get_output(0))["y"]
    close(y, xv.double().reshape(5, 48))


def test_reshape_by_computed_dims_is_known_at_build_time(refnet):
    x = refnet.input("x", (2, 3, 4))
    s = refnet.network.add_shape(x).get_output(0)
    last = refnet.network.add_slice(s, (1,), (2,), (1,)).get_output(0)
    prod = refnet.network.add_reduce(last, trt.ReduceOperation.PROD, 1, True).get_output(0)
    first = refnet.network.add_slice(s, (0,), (1,), (1,)).get_output(0)
    dims = refnet.network.add_concatenation([first, prod]).get_output(0)
    sh = refnet.network.add_shuffle(x)
    sh.set_input(1, dims)
    assert tuple(sh.get_output(0).shape) == (2, 12)
    xv = torch.randn(2, 3, 4, generator=gen)
    close(refnet.run({"x": xv}, y=sh.get_output(0))["y"], xv.double().reshape(2, 12))


def test_shuffle_shape_input_zero_copies_an_input_dim(refnet):
    x = refnet.input("x", (2, 3, 4))
    sh = refnet.network.add_shuffle(x)
    sh.set_input(1, const(refnet, [0, 12], np.int32))
    assert tuple(sh.get_output(0).shape) == (2, 12)
    xv = torch.randn(2, 3, 4, generator=gen)
    close(refnet.run({"x": xv}, y=sh.get_output(0))["y"], xv.double().reshape(2, 12))


def test_shuffle_refuses_a_float_shape_input(refnet):
    sh = refnet.network.add_shuffle(refnet.input("x", (2, 6)))
    sh.set_input(1, const(refnet, [3.0, 4.0], np.float32))
    with pytest.raises(trt.NetworkError, match="shape input must be an INT32 or INT64 tensor"):
        _ = sh.get_output(0).shape


def test_slice_size_from_add_shape_with_a_dynamic_dim(refnet):
    x = refnet.input("x", (-1, 6))
    sl = refnet.network.add_slice(x, (0, 1), (1, 1), (1, 2))
    half = refnet.network.add_elementwise(refnet.network.add_shape(x).get_output(0), const(refnet, [1, 2]),
                                          trt.ElementWiseOperation.FLOOR_DIV).get_output(0)
    sl.set_input(2, half)
    assert tuple(sl.get_output(0).shape) == (-1, 3)
    add_profile(refnet, {"x": ((1, 6), (4, 6), (8, 6))})
    xv = torch.randn(4, 6, generator=gen)
    close(refnet.run({"x": xv}, y=sl.get_output(0))["y"], xv.double()[:, 1::2])


def test_slice_start_and_size_tensors(refnet):
    x = refnet.input("x", (4, 6))
    sl = refnet.network.add_slice(x, (0, 0), (1, 1), (1, 1))
    sl.set_input(1, const(refnet, [1, 2]))
    sl.set_input(2, const(refnet, [2, 3], np.int32))
    assert tuple(sl.get_output(0).shape) == (2, 3)
    xv = torch.randn(4, 6, generator=gen)
    close(refnet.run({"x": xv}, y=sl.get_output(0))["y"], xv.double()[1:3, 2:5])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_resize_to_a_shape_tensor(refnet, dtype):
    x = refnet.input("x", (1, 1, 2, 2))
    r = refnet.network.add_resize(x)
    r.set_input(1, const(refnet, [1, 1, 4, 6], dtype))
    assert tuple(r.get_output(0).shape) == (1, 1, 4, 6)
    xv = torch.randn(1, 1, 2, 2, generator=gen)
    expected = xv.double()[:, :, [0, 0, 1, 1]][:, :, :, [0, 0, 0, 1, 1, 1]]  # NEAREST, ASYMMETRIC, FLOOR
    close(refnet.run({"x": xv}, y=r.get_output(0))["y"], expected)


# -- fill ---------------------------------------------------------------------------------------------------------
def test_fill_defaults(refnet):
    f = refnet.network.add_fill((5,), LIN, trt.float32)
    assert (f.alpha, f.beta, f.is_alpha_beta_int64(), tuple(f.shape), f.to_type, f.operation) == (
        0.0, 1.0, False, (5,), trt.float32, LIN)
    assert f.num_inputs == 0
    close(refnet.run({}, y=f.get_output(0))["y"], np.arange(5.0))


@pytest.mark.parametrize("to", [trt.float32, trt.int32, trt.int64])
def test_linspace_1d_from_attributes(refnet, to):
    f = refnet.network.add_fill((6,), LIN, to)
    f.alpha, f.beta = (3, -2) if to == trt.int64 else (3.0, -2.0)
    assert f.is_alpha_beta_int64() == (to == trt.int64)
    y = refnet.run({}, y=f.get_output(0))["y"]
    assert y.dtype == {trt.float32: torch.float32, trt.int32: torch.int32, trt.int64: torch.int64}[to]
    close(y, 3.0 - 2.0 * np.arange(6))


def test_linspace_nd_from_tensors(refnet):
    f = refnet.network.add_fill((2, 3), LIN, trt.float32)
    f.set_input(1, const(refnet, 0.5, np.float32))
    f.set_input(2, const(refnet, [3.0, 1.0], np.float32))
    assert f.num_inputs == 3
    expected = 0.5 + 3.0 * np.arange(2)[:, None] + 1.0 * np.arange(3)[None, :]
    close(refnet.run({}, y=f.get_output(0))["y"], expected)


def test_linspace_int64_tensors_are_exact(refnet):
    f = refnet.network.add_fill((2, 3), LIN, trt.int64)
    f.set_input(1, const(refnet, 2 ** 40, np.int64))
    f.set_input(2, const(refnet, [10, 1], np.int64))
    y = refnet.run({}, y=f.get_output(0))["y"]
    assert y.tolist() == [[2 ** 40 + 10 * i + j for j in range(3)] for i in range(2)]


def test_range_sized_by_add_shape_with_a_dynamic_dim(refnet):
    x = refnet.input("x", (-1, 3))
    n = refnet.network.add_gather(refnet.network.add_shape(x).get_output(0), const(refnet, [0]), 0).get_output(0)
    f = refnet.network.add_fill((0,), LIN, trt.int64)
    f.set_input(0, n)
    assert tuple(f.get_output(0).shape) == (-1,) and f.get_output(0).dtype == trt.int64
    add_profile(refnet, {"x": ((1, 3), (2, 3), (9, 3))})
    y = refnet.run({"x": torch.zeros(7, 3)}, y=f.get_output(0))["y"]
    assert y.tolist() == list(range(7))


def test_fill_shape_from_a_constant_shape_tensor(refnet):
    f = refnet.network.add_fill((0,), LIN, trt.int32)
    f.set_input(0, const(refnet, [4], np.int32))
    assert tuple(f.get_output(0).shape) == (4,)
    assert refnet.run({}, y=f.get_output(0))["y"].tolist() == [0, 1, 2, 3]


def test_float_alpha_with_an_int_linspace_truncates(refnet):
    f = refnet.network.add_fill((4,), LIN, trt.int32)
    f.alpha, f.beta = 1.5, 0.75  # 1.5, 2.25, 3.0, 3.75
    assert refnet.run({}, y=f.get_output(0))["y"].tolist() == [1, 2, 3, 3]


@pytest.mark.parametrize("to", [trt.float32, trt.float16])
def test_random_uniform_statistics(refnet, to):
    f = refnet.network.add_fill((200, 200), UNI, to)
    f.alpha, f.beta = -2.0, 4.0
    y = refnet.run({}, y=f.get_output(0))["y"].double()
    assert y.dtype == torch.float64 and tuple(y.shape) == (200, 200)
    assert -2.0 <= y.min() and y.max() <= 4.0 and y.min() < -1.99 and y.max() > 3.99
    assert abs(y.mean() - 1.0) < 0.05 and abs(y.std() - 6 / 12 ** 0.5) < 0.05


def test_random_normal_statistics(refnet):
    f = refnet.network.add_fill((200, 200), NORM, trt.float32)
    f.alpha, f.beta = 3.0, 0.5
    y = refnet.run({}, y=f.get_output(0))["y"].double()
    assert abs(y.mean() - 3.0) < 0.02 and abs(y.std() - 0.5) < 0.02


def test_random_uniform_bounds_from_tensors(refnet):
    f = refnet.network.add_fill((100, 100), UNI, trt.float32)
    f.set_input(1, const(refnet, 5.0, np.float32))
    f.set_input(2, const(refnet, 7.0, np.float32))
    y = refnet.run({}, y=f.get_output(0))["y"]
    assert 5.0 <= y.min() and y.max() <= 7.0 and abs(y.double().mean() - 6.0) < 0.05


@pytest.mark.parametrize("op, to", [(LIN, trt.float16), (LIN, trt.bfloat16), (UNI, trt.int32), (NORM, trt.bfloat16)])
def test_fill_output_types_refused(refnet, op, to):
    f = refnet.network.add_fill((4,), op, to)
    with pytest.raises(trt.NetworkError, match=f"FillOperation.{op.name} gives .* outputs, not {to.name}"):
        _ = f.get_output(0).shape


def test_fill_with_only_alpha_as_a_tensor_is_refused(refnet):
    f = refnet.network.add_fill((4,), LIN, trt.float32)
    f.set_input(1, const(refnet, 5.0, np.float32))
    refnet.network.mark_output(f.get_output(0))
    assert refnet.build() is None
    assert any("both be tensors or both attributes" in e for e in refnet.logger.errors)


def test_nd_linspace_from_attributes_is_refused_by_the_reference():
    """TensorRT-RTX builds it, but TensorRT's kernel asserts "Alpha and beta tensor should be set when output an
    ND tensor": one static delta cannot step two dims."""
    net = RefNet()
    f = net.network.add_fill((2, 3), LIN, trt.float32)
    with pytest.raises(trt.NetworkError, match="needs alpha and beta tensors for an N-D output"):
        _ = f.get_output(0).shape


def test_alpha_kind_follows_python_type():
    net = RefNet()
    f = net.network.add_fill((4,), LIN, trt.int64)
    f.alpha = 5
    assert f.is_alpha_beta_int64() and f.alpha == 5 and f.beta == 1
    f.alpha = 2.0
    assert not f.is_alpha_beta_int64()
    with pytest.raises(TypeError, match="alpha and beta are double"):
        f.beta = 3
    with pytest.raises(TypeError, match="a number is needed"):
        f.beta = [1.0, 2.0]


def test_negative_fill_dims_are_refused():
    net = RefNet()
    with pytest.raises(trt.NetworkError, match="every dim must be >= 0"):
        net.network.add_fill((-1, 2), LIN, trt.float32)
    f = net.network.add_fill((2,), LIN, trt.float32)
    with pytest.raises(trt.NetworkError, match="every dim must be >= 0"):
        f.shape = (-1,)


# -- shape tensor network inputs ----------------------------------------------------------------------------------
def _reshape_by_input(net):
    x = net.input("x", (2, 6))
    s = net.input("s", (2,), trt.int32)
    sh = net.network.add_shuffle(x)
    sh.set_input(1, s)
    return x, s, sh


def test_shape_tensor_input_roles_and_build_time_shape(refnet):
    x, s, sh = _reshape_by_input(refnet)
    assert tuple(sh.get_output(0).shape) == (-1, -1)
    refnet.network.mark_output(sh.get_output(0))
    assert s.is_shape_tensor and not s.is_execution_tensor
    assert x.is_execution_tensor and not x.is_shape_tensor


def test_flatten_roles(refnet):
    x = refnet.input("x", (-1, 3, 4, 4))
    dims = flatten_dims(refnet, x)
    sh = refnet.network.add_shuffle(x)
    sh.set_input(1, dims)
    refnet.network.mark_output(sh.get_output(0))
    assert dims.is_shape_tensor and not dims.is_execution_tensor
    assert x.is_execution_tensor and not x.is_shape_tensor


def shape_input_profile(refnet, values: dict):
    """One optimization profile of set_shape_input values {input: (min, opt, max)} on the reference's config and,
    where `refnet` is twinned, on TensorRT-RTX's; the reference's profile is returned."""
    profiles = []
    for net in [refnet] + ([refnet.rtxnet] if hasattr(refnet, "rtxnet") else []):
        profile = net.builder.create_optimization_profile()
        for name, (mn, opt, mx) in values.items():
            profile.set_shape_input(name, mn, opt, mx)
        net.config.add_optimization_profile(profile)
        profiles.append(profile)
    return profiles[0]


def test_shape_tensor_input_needs_set_shape_input(refnet):
    _, _, sh = _reshape_by_input(refnet)
    refnet.network.mark_output(sh.get_output(0))
    assert refnet.build() is None
    assert "shape tensor" in refnet.logger.errors[-1]


def test_shape_tensor_input_opt_values_must_fit(refnet):
    _, _, sh = _reshape_by_input(refnet)
    refnet.network.mark_output(sh.get_output(0))
    p = shape_input_profile(refnet, {"s": ((1, 12), (3, 12), (12, 12))})
    assert p.get_shape_input("s") == [[1, 12], [3, 12], [12, 12]]
    assert refnet.build() is None
    assert "opt" in refnet.logger.errors[-1] and "cannot reshape (2, 6)" in refnet.logger.errors[-1]


def test_shape_tensor_input_builds_with_fitting_values(refnet):
    _, _, sh = _reshape_by_input(refnet)
    refnet.network.mark_output(sh.get_output(0))
    shape_input_profile(refnet, {"s": ((1, 1), (3, 4), (12, 12))})
    assert refnet.build() is not None


def test_set_shape_input_refuses_min_above_max():
    p = RefNet().builder.create_optimization_profile()
    with pytest.raises(ValueError, match="min <= opt <= max"):
        p.set_shape_input("s", (1, 12), (3, 4), (12, 1))


def test_shape_tensor_input_values_come_from_host_memory():
    net = RefNet()
    _, _, sh = _reshape_by_input(net)
    sh.get_output(0).name = "y"
    net.network.mark_output(sh.get_output(0))
    p = net.builder.create_optimization_profile()
    p.set_shape_input("s", (1, 1), (3, 4), (12, 12))
    net.config.add_optimization_profile(p)
    plan = net.build()
    assert plan is not None, net.logger.errors
    engine = trt.Runtime(net.logger).deserialize_cuda_engine(plan)
    assert engine.is_shape_inference_io("s") and not engine.is_shape_inference_io("x")
    assert engine.get_tensor_location("s") == trt.TensorLocation.HOST
    ctx = engine.create_execution_context()
    xv = torch.arange(12.0).reshape(2, 6).to(device())
    ctx.set_tensor_address("x", xv.data_ptr())
    assert ctx.infer_shapes() == ["s"]
    sv = torch.tensor([4, 3], dtype=torch.int32)  # host memory
    ctx.set_tensor_address("s", sv.data_ptr())
    assert ctx.infer_shapes() == [] and tuple(ctx.get_tensor_shape("y")) == (4, 3)
    y = torch.empty(4, 3, device=device())
    ctx.set_tensor_address("y", y.data_ptr())
    assert ctx.execute_async_v3(0)
    close(y.cpu(), np.arange(12.0).reshape(4, 3))
    sv[:] = torch.tensor([13, 1], dtype=torch.int32)
    with pytest.raises(trt.NetworkError, match="outside the optimization profile range"):
        ctx.infer_shapes()
    sv[:] = torch.tensor([5, 2], dtype=torch.int32)  # inside the profile, but 10 values for 12
    with pytest.raises(trt.NetworkError, match=r"cannot reshape \(2, 6\)"):
        ctx.infer_shapes()


# -- slice axes (input 5) -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("axes, start, size, stride, index", [
    ([1], [1], [2], [2], (slice(None), slice(1, 4, 2), slice(None))),
    ([-1, 0], [1, 2], [2, 2], [1, 1], (slice(2, 4), slice(None), slice(1, 3))),
])
def test_slice_axes_input(refnet, axes, start, size, stride, index):
    x = refnet.input("x", (4, 6, 5))
    sl = refnet.network.add_slice(x, start, size, stride)
    sl.set_input(5, const(refnet, axes, np.int32))
    xv = torch.randn(4, 6, 5, generator=gen)
    expected = xv.double()[index]
    assert tuple(sl.get_output(0).shape) == tuple(expected.shape)
    close(refnet.run({"x": xv}, y=sl.get_output(0))["y"], expected)


def test_slice_axes_with_start_and_size_tensors(refnet):
    x = refnet.input("x", (4, 6, 5))
    sl = refnet.network.add_slice(x, (0,), (1,), (2,))
    sl.set_input(1, const(refnet, [1]))
    sl.set_input(2, const(refnet, [2]))
    sl.set_input(5, const(refnet, [1]))
    assert tuple(sl.get_output(0).shape) == (4, 2, 5)
    xv = torch.randn(4, 6, 5, generator=gen)
    close(refnet.run({"x": xv}, y=sl.get_output(0))["y"], xv.double()[:, 1:4:2])


def test_slice_axes_of_the_wrong_count_are_refused(refnet):
    sl = refnet.network.add_slice(refnet.input("x", (4, 6, 5)), (0, 0, 0), (1, 1, 1), (1, 1, 1))
    sl.set_input(5, const(refnet, [1]))
    with pytest.raises(trt.NetworkError, match="start has 3 values but the axes input 1"):
        _ = sl.get_output(0).shape


def test_slice_axes_from_a_network_input_leave_every_dim_unknown(refnet):
    sl = refnet.network.add_slice(refnet.input("x", (4, 6, 5)), (1,), (2,), (1,))
    sl.set_input(5, refnet.input("axes", (1,), trt.int64))
    assert tuple(sl.get_output(0).shape) == (-1, -1, -1)


# -- build-time values: what is known of a computed shape -----------------------------------------------------------
def _reshape_by_first_dim(net, x, op, k):
    s = net.network.add_shape(x).get_output(0)
    first = net.network.add_slice(s, (0,), (1,), (1,)).get_output(0)
    d = net.network.add_elementwise(first, const(net, [k]), op).get_output(0)
    sh = net.network.add_shuffle(x)
    sh.set_input(1, net.network.add_concatenation([d, const(net, [-1])]).get_output(0))
    return sh.get_output(0)


@pytest.mark.parametrize("op, k, shape", [
    (trt.ElementWiseOperation.PROD, 1, (-1, 12)),  # N * 1 is still the batch dim: 12 follows
    (trt.ElementWiseOperation.SUM, 0, (-1, 12)),
    (trt.ElementWiseOperation.FLOOR_DIV, 1, (-1, 12)),
    (trt.ElementWiseOperation.PROD, 2, (-1, -1)),  # 2N is unknown, and so is the rest
])
def test_unknown_dims_keep_their_identity_through_neutral_arithmetic(refnet, op, k, shape):
    y = _reshape_by_first_dim(refnet, refnet.input("x", (-1, 3, 4)), op, k)
    assert tuple(y.shape) == shape


def test_a_shape_computation_dividing_by_zero_is_refused(refnet):
    y = _reshape_by_first_dim(refnet, refnet.input("x", (5, 3, 4)), trt.ElementWiseOperation.FLOOR_DIV, 0)
    with pytest.raises(trt.NetworkError, match="a shape computation divides by zero"):
        _ = y.shape


# -- shape outputs (mark_output_for_shapes) -------------------------------------------------------------------------
def test_mark_output_for_shapes_roles_and_repeats(refnet):
    x = refnet.input("x", (-1, 6))
    s = refnet.network.add_shape(x).get_output(0)
    assert refnet.network.mark_output_for_shapes(s)
    assert s.is_network_output and s.is_shape_tensor and not s.is_execution_tensor
    assert refnet.network.num_outputs == 1
    assert not refnet.network.mark_output_for_shapes(s)
    assert refnet.network.unmark_output_for_shapes(s) and refnet.network.num_outputs == 0
    assert not refnet.network.unmark_output_for_shapes(s)


def test_a_float_shape_output_is_refused_at_build(refnet):
    x = refnet.input("x", (2, 6))
    y = refnet.network.add_identity(x).get_output(0)
    refnet.network.mark_output_for_shapes(y)
    assert refnet.build() is None
    assert "output shape tensors must have type INT32 or INT64" in refnet.logger.errors[-1]


def test_infer_shapes_writes_shape_outputs_to_host_memory():
    net = RefNet()
    x = net.input("x", (-1, 6))
    s = net.network.add_cast(net.network.add_shape(x).get_output(0), trt.int32).get_output(0)
    s.name = "s"
    net.network.mark_output_for_shapes(s)
    y = net.network.add_identity(x).get_output(0)
    y.name = "y"
    net.network.mark_output(y)
    add_profile(net, {"x": ((1, 6), (2, 6), (8, 6))})
    plan = net.build()
    assert plan is not None, net.logger.errors
    engine = trt.Runtime(net.logger).deserialize_cuda_engine(plan)
    assert engine.is_shape_inference_io("s") and not engine.is_shape_inference_io("y")
    assert engine.get_tensor_location("s") == trt.TensorLocation.HOST
    ctx = engine.create_execution_context()
    ctx.set_input_shape("x", (5, 6))
    host = torch.zeros(2, dtype=torch.int32)
    ctx.set_tensor_address("s", host.data_ptr())
    assert ctx.infer_shapes() == [] and host.tolist() == [5, 6]


def test_get_tensor_profile_values_takes_the_profile_index_first():
    net = RefNet()
    _, _, sh = _reshape_by_input(net)
    net.network.mark_output(sh.get_output(0))
    p = net.builder.create_optimization_profile()
    p.set_shape_input("s", (1, 1), (3, 4), (12, 12))
    net.config.add_optimization_profile(p)
    engine = trt.Runtime(net.logger).deserialize_cuda_engine(net.build())
    assert engine.get_tensor_profile_values(0, "s") == [[1, 1], [3, 4], [12, 12]]
    with pytest.raises(trt.NetworkError, match="'x' is not a shape tensor input"):
        engine.get_tensor_profile_values(0, "x")


def test_plan_header_shape_values_are_checked():
    from trtbuild.reference.plan import PlanError, check_header, deserialize_plan

    net = RefNet()
    _, _, sh = _reshape_by_input(net)
    net.network.mark_output(sh.get_output(0))
    p = net.builder.create_optimization_profile()
    p.set_shape_input("s", (1, 1), (3, 4), (12, 12))
    net.config.add_optimization_profile(p)
    header, _ = deserialize_plan(net.build())
    assert header["shape_values"] == [{"s": [[1, 1], [3, 4], [12, 12]]}]
    for broken, message in ((dict(header, shape_values=[{}]), "no values for shape tensor input 's'"),
                            (dict(header, shape_values=[{"s": [[1, 1], [3, 4], [2, 2]]}]), "min <= opt <= max"),
                            (dict(header, shape_values=[{"s": [[1, 1], [3, 4], [12, 12]], "x": [[1], [1], [1]]}]),
                             "not a shape tensor input")):
        with pytest.raises(PlanError, match=message):
            check_header(broken)


def test_attributes_replaced_by_shape_tensors_read_as_tensorrt_rtx_reads_them():
    """TensorRT-RTX 1.7's getters: "getReshapeDimensions works only for static reshape dimensions" (None), and so
    for a slice's size, a resize's output shape and scales ([]), a fill's dims (None) and alpha/beta (-1.0)."""
    net = RefNet()
    x = net.input("x", (1, 1, 2, 2))
    sh = net.network.add_shuffle(x)
    sh.reshape_dims = (4,)
    sh.set_input(1, const(net, [2, 2]))
    assert sh.reshape_dims is None
    sl = net.network.add_slice(x, (0, 0, 0, 0), (1, 1, 1, 1), (1, 1, 1, 1))
    sl.set_input(2, const(net, [1, 1, 2, 2]))
    assert (tuple(sl.start), sl.shape, tuple(sl.stride)) == ((0, 0, 0, 0), None, (1, 1, 1, 1))
    r = net.network.add_resize(x)
    r.set_input(1, const(net, [1, 1, 4, 4]))
    assert (r.shape, r.scales) == (None, [])
    f = net.network.add_fill((3,), LIN, trt.float32)
    f.set_input(0, const(net, [4]))
    f.set_input(1, const(net, 1.0, np.float32))
    f.set_input(2, const(net, [2.0], np.float32))
    assert (f.shape, f.alpha, f.beta) == (None, -1.0, -1.0)


def test_one_engine_flattens_each_batch_size_it_runs_with():
    """ONNX exporters' classifier head: flatten by shape arithmetic, then a matmul; one context, two batch sizes."""
    net = RefNet()
    x = net.input("x", (-1, 2, 3))
    sh = net.network.add_shuffle(x)
    sh.set_input(1, flatten_dims(net, x))
    w = np.arange(12, dtype=np.float32).reshape(6, 2) / 10
    mm = net.network.add_matrix_multiply(sh.get_output(0), trt.MatrixOperation.NONE, const(net, w, np.float32),
                                         trt.MatrixOperation.NONE)
    mm.get_output(0).name = "y"
    net.network.mark_output(mm.get_output(0))
    add_profile(net, {"x": ((1, 2, 3), (2, 2, 3), (6, 2, 3))})
    engine = trt.Runtime(net.logger).deserialize_cuda_engine(net.build())
    ctx = engine.create_execution_context()
    for n in (1, 5):
        xv = torch.randn(n, 2, 3, generator=gen).to(device())
        assert ctx.set_input_shape("x", (n, 2, 3))
        assert tuple(ctx.get_tensor_shape("y")) == (n, 2)
        y = torch.empty(n, 2, device=device())
        ctx.set_tensor_address("x", xv.data_ptr())
        ctx.set_tensor_address("y", y.data_ptr())
        assert ctx.execute_async_v3(0)
        close(y.cpu(), xv.cpu().double().reshape(n, 6) @ torch.from_numpy(w).double())


@pytest.mark.parametrize("values", [[[2, 6]], 12], ids=["2-D", "0-D"])
def test_a_shape_input_must_be_1d(refnet, values):
    sh = refnet.network.add_shuffle(refnet.input("x", (2, 6)))
    sh.set_input(1, const(refnet, values))
    with pytest.raises(trt.NetworkError, match="a shape input must be a 1-D tensor"):
        _ = sh.get_output(0).shape


def test_a_shape_input_of_the_wrong_length_for_a_slice_is_refused(refnet):
    sl = refnet.network.add_slice(refnet.input("x", (4, 6)), (0, 0), (1, 1), (1, 1))
    sl.set_input(2, const(refnet, [2, 3, 1]))
    with pytest.raises(trt.NetworkError, match="must each have rank 2"):
        _ = sl.get_output(0).shape

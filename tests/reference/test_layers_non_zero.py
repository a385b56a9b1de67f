"""trtbuild.reference: NonZero against torch.nonzero(x).T / numpy.nonzero, its data-dependent output shape
(-1 until the run, as TensorRT-RTX reports it) and the IOutputAllocator protocol of the runtime; each
construction also made on TensorRT-RTX (the `refnet` twin), which defines NonZero but has no kernel to build
it (tests/helpers/twin.py RTX_NO_KERNEL)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import Allocator, CapturingLogger, STRONGLY_TYPED
from helpers.twin import RTX_NO_KERNEL, no_rtx_kernel

gen = torch.Generator().manual_seed(61)

TYPES = [(trt.float32, torch.float32), (trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16),
         (trt.int32, torch.int32), (trt.int64, torch.int64), (trt.bool, torch.bool)]


def sparse(shape, dtype=torch.float32, density=0.4) -> torch.Tensor:
    keep = torch.rand(shape, generator=gen) < density
    return torch.where(keep, torch.randint(1, 5, shape, generator=gen).float(), torch.zeros(shape)).to(dtype)


def expected(x: torch.Tensor) -> np.ndarray:
    """numpy's nonzero, stacked: row d holds the d-th coordinate of each non-zero element, row-major."""
    return np.stack(np.nonzero(x.double().numpy())) if x.dim() else np.zeros((0, int(x.item() != 0)), np.int64)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (2, 1, 3, 2)])
def test_non_zero_indices(refnet, shape):
    x = sparse(shape)
    layer = refnet.network.add_non_zero(refnet.input("x", shape))
    out = layer.get_output(0)
    assert tuple(out.shape) == (len(shape), -1) and out.dtype == trt.int32 and layer.indices_type == trt.int32
    y = refnet.run({"x": x}, y=out)["y"]
    assert y.dtype == torch.int32
    np.testing.assert_array_equal(y.numpy(), expected(x))
    np.testing.assert_array_equal(y.numpy(), torch.nonzero(x).T.numpy())


@pytest.mark.parametrize("dt, torch_dt", TYPES)
def test_non_zero_input_types(refnet, dt, torch_dt):
    x = sparse((3, 5), torch_dt)
    x[1, 2] = -3 if torch_dt != torch.bool else True  # negative values are non-zero too
    layer = refnet.network.add_non_zero(refnet.input("x", (3, 5), dt), trt.int64)
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.int64
    np.testing.assert_array_equal(y.numpy(), expected(x))


def test_non_zero_of_negative_zero_and_nan(refnet):
    """-0.0 equals zero; NaN does not, so it is non-zero."""
    x = torch.tensor([0.0, -0.0, float("nan"), 1e-30, 0.0])
    y = refnet.run({"x": x}, y=refnet.network.add_non_zero(refnet.input("x", (5,))).get_output(0))["y"]
    assert y.tolist() == [[2, 3]]


@pytest.mark.parametrize("value, count", [(0.0, 0), (2.5, 1)])
def test_non_zero_of_a_scalar(refnet, value, count):
    """A 0-D input: no coordinates, one column per non-zero element; TensorRT-RTX infers (0, -1) too."""
    layer = refnet.network.add_non_zero(refnet.input("x", ()))
    assert tuple(layer.get_output(0).shape) == (0, -1)
    y = refnet.run({"x": torch.tensor(value)}, y=layer.get_output(0))["y"]
    assert tuple(y.shape) == (0, count)


def test_non_zero_all_zero_gives_an_empty_output(refnet):
    layer = refnet.network.add_non_zero(refnet.input("x", (3, 4)))
    y = refnet.run({"x": torch.zeros(3, 4)}, y=layer.get_output(0))["y"]
    assert tuple(y.shape) == (2, 0)


def test_non_zero_indices_type_can_change(refnet):
    x = sparse((4, 4))
    layer = refnet.network.add_non_zero(refnet.input("x", (4, 4)))
    layer.indices_type = trt.int64
    assert layer.get_output(0).dtype == trt.int64
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.int64
    np.testing.assert_array_equal(y.numpy(), expected(x))


@pytest.mark.parametrize("dt", [trt.float32, trt.float16, trt.bool, trt.int8])
def test_non_zero_refuses_an_indices_type(refnet, dt):
    x = refnet.input("x", (3, 4))
    with pytest.raises(trt.NetworkError, match=f"indices type {dt.name}: the indices must be INT32 or INT64"):
        refnet.network.add_non_zero(x, dt)
    layer = refnet.network.add_non_zero(x)
    with pytest.raises(trt.NetworkError, match="indices_type .* is refused: the indices type must be INT32 or INT64"):
        layer.indices_type = dt


@pytest.mark.parametrize("dt", [trt.int8, trt.uint8])
def test_non_zero_refuses_input_types(refnet, dt):
    with pytest.raises(trt.NetworkError, match=f"NonZero\\]': input has type {dt.name}; a non-zero layer takes"):
        refnet.network.add_non_zero(refnet.input("x", (3, 4), dt))


def test_non_zero_output_feeds_other_layers(refnet):
    """A data-dependent shape flows on: a cast of the indices is (2, -1) as well, and runs."""
    x = sparse((3, 3))
    nz = refnet.network.add_non_zero(refnet.input("x", (3, 3))).get_output(0)
    cast = refnet.network.add_cast(nz, trt.float32).get_output(0)
    assert tuple(cast.shape) == (2, -1)
    y = refnet.run({"x": x}, y=cast)["y"]
    np.testing.assert_array_equal(y.numpy(), expected(x).astype(np.float32))


# -- the runtime: IOutputAllocator ------------------------------------------------------------------------------
def _engine(shape=(3, 4), indices_type=trt.int32, extra_static=False):
    logger = CapturingLogger()
    builder = trt.Builder(logger)
    network = builder.create_network(STRONGLY_TYPED)
    x = network.add_input("x", trt.float32, shape)
    y = network.add_non_zero(x, indices_type).get_output(0)
    y.name = "y"
    network.mark_output(y)
    if extra_static:
        z = network.add_identity(x).get_output(0)
        z.name = "z"
        network.mark_output(z)
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    return engine, logger


def _bind(context, x):
    context.set_input_shape("x", tuple(x.shape))
    context.set_tensor_address("x", x.data_ptr())


def test_engine_and_context_report_minus_one_until_the_run():
    engine, _ = _engine()
    assert tuple(engine.get_tensor_shape("y")) == (2, -1)
    context = engine.create_execution_context()
    x = torch.tensor([[0.0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 5, 0]])
    _bind(context, x)
    assert tuple(context.get_tensor_shape("y")) == (2, -1)
    allocator = Allocator()
    allocator.dtypes["y"] = torch.int32
    assert context.set_output_allocator("y", allocator)
    assert context.get_output_allocator("y") is allocator
    assert context.execute_async_v3(0)
    # TensorRT's protocol: the byte size first (4 indices x 2 coordinates x int32), then the real shape
    assert allocator.calls == [("reallocate_output", "y", 0, 32, 256), ("notify_shape", "y", (2, 4))]
    assert allocator.tensor("y").tolist() == [[0, 0, 1, 2], [1, 3, 0, 2]]
    assert tuple(context.get_tensor_shape("y")) == (2, 4)
    assert tuple(engine.get_tensor_shape("y")) == (2, -1)
    context.set_input_shape("x", (3, 4))  # new inputs: unknown again until the next run
    assert tuple(context.get_tensor_shape("y")) == (2, -1)


def test_output_allocator_async_is_preferred_and_sized_for_an_empty_output():
    calls = []

    class Async(trt.IOutputAllocator):
        def __init__(self):
            trt.IOutputAllocator.__init__(self)
            self.buf = torch.empty(64, dtype=torch.uint8)

        def reallocate_output(self, tensor_name, memory, size, alignment):
            calls.append("sync")
            return self.buf.data_ptr()

        def reallocate_output_async(self, tensor_name, memory, size, alignment, stream):
            calls.append(("async", tensor_name, size, alignment, stream))
            return self.buf.data_ptr()

        def notify_shape(self, tensor_name, shape):
            calls.append(("shape", tuple(shape)))

    engine, _ = _engine(indices_type=trt.int64)
    context = engine.create_execution_context()
    x = torch.zeros(3, 4)
    _bind(context, x)
    context.set_output_allocator("y", Async())
    assert context.execute_async_v3(0)
    assert calls == [("async", "y", 1, 256, 0), ("shape", (2, 0))]  # never 0 bytes, as TensorRT documents


def test_allocator_that_gives_no_memory_fails_the_run():
    class Refusing(trt.IOutputAllocator):
        def __init__(self):
            trt.IOutputAllocator.__init__(self)

        def reallocate_output(self, tensor_name, memory, size, alignment):
            return None

        def notify_shape(self, tensor_name, shape):
            raise AssertionError("not called after a failed allocation")

    engine, logger = _engine()
    context = engine.create_execution_context()
    x = torch.ones(3, 4)
    _bind(context, x)
    context.set_output_allocator("y", Refusing())
    assert context.execute_async_v3(0) is False
    assert logger.errors[-1] == ("IExecutionContext::enqueueV3: the IOutputAllocator of output 'y' returned no "
                                 "memory for 96 bytes")


def test_a_data_dependent_output_needs_an_allocator():
    engine, _ = _engine()
    context = engine.create_execution_context()
    x, y = torch.ones(3, 4), torch.empty(2, 12, dtype=torch.int32)
    _bind(context, x)
    context.set_tensor_address("y", y.data_ptr())
    with pytest.raises(trt.NetworkError, match=r"outputs \['y'\] have data-dependent shapes \[\(2, -1\)\], known only "
                                               "after the run: set an IOutputAllocator"):
        context.execute_async_v3(0)


def test_allocator_for_a_static_output_and_unsetting_it():
    engine, logger = _engine(extra_static=True)
    context = engine.create_execution_context()
    x = torch.arange(12.0).reshape(3, 4)
    _bind(context, x)
    allocator = Allocator()
    allocator.dtypes.update(y=torch.int32, z=torch.float32)
    assert context.set_output_allocator("y", allocator) and context.set_output_allocator("z", allocator)
    assert context.execute_async_v3(0)
    assert ("notify_shape", "z", (3, 4)) in allocator.calls
    torch.testing.assert_close(allocator.tensor("z"), x)
    assert allocator.tensor("y").shape == (2, 11)
    assert context.set_output_allocator("z", None) and context.get_output_allocator("z") is None
    assert context.set_output_allocator("x", allocator) is False  # an input
    assert "'x' is not an output tensor" in logger.errors[-1]
    assert context.get_output_allocator("nope") is None
    with pytest.raises(TypeError, match="an IOutputAllocator is needed, got object"):
        context.set_output_allocator("y", object())


def test_output_allocator_has_no_public_members_as_in_tensorrt():
    assert [m for m in vars(trt.IOutputAllocator) if not m.startswith("_")] == []


# -- TensorRT-RTX: shapes as the reference, but no kernel ----------------------------------------------------
def test_rtx_infers_minus_one_and_cannot_build_non_zero(rtxnet):
    """The exemption of tests/helpers/twin.py stays true: TensorRT-RTX 1.7 reports (rank, -1) and an INT32/INT64
    type, and its build fails only for want of a NonZero kernel."""
    rtx = rtxnet.trt
    x = rtxnet.network.add_input("x", rtx.float32, (2, 3, 4))
    layer = rtxnet.network.add_non_zero(x, rtx.int64)
    assert tuple(layer.get_output(0).shape) == (3, -1) and layer.get_output(0).dtype == rtx.int64
    rtxnet.network.mark_output(layer.get_output(0))
    assert rtxnet.build() is None
    assert not no_rtx_kernel([rtxnet.errors]) and "[NonZero] has no runners" in rtxnet.errors


@pytest.mark.parametrize("entry", RTX_NO_KERNEL, ids=lambda e: e.label)
def test_rtx_no_kernel_entries_still_hold(rtx, entry):
    from helpers.refnet import RtxNet

    net = RtxNet(rtx)
    entry.example(net.network, rtx)
    assert net.build() is None and f"[{entry.label}] has no runners" in net.errors
    ref_logger = CapturingLogger()
    builder = trt.Builder(ref_logger)
    network = builder.create_network(STRONGLY_TYPED)
    entry.example(network, trt)
    assert builder.build_serialized_network(network, builder.create_builder_config()) is not None, ref_logger.errors


def test_non_zero_then_gather_nd_picks_the_non_zero_values(refnet):
    """The masked-select pattern of exported detection models: NonZero, a transpose to (count, rank), GatherND.
    The count flows through both layers as -1 and the values come out in row-major order."""
    x = sparse((3, 4))
    xin = refnet.input("x", (3, 4))
    nz = refnet.network.add_non_zero(xin, trt.int64).get_output(0)
    shuffle = refnet.network.add_shuffle(nz)
    shuffle.first_transpose = (1, 0)
    idx = shuffle.get_output(0)
    assert tuple(idx.shape) == (-1, 2)
    gather = refnet.network.add_gather_v2(xin, idx, trt.GatherMode.ND)
    assert tuple(gather.get_output(0).shape) == (-1,)
    y = refnet.run({"x": x}, y=gather.get_output(0))["y"]
    np.testing.assert_array_equal(y.numpy(), x.numpy()[np.nonzero(x.numpy())])

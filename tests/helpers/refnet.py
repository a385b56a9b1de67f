"""Reference and TensorRT-RTX networks for tests: build a tiny strongly typed network with
trtbuild.reference and run it the way TensorRT code does (serialize, deserialize, raw addresses,
execute_async_v3), or build the same network ahead of time with TensorRT-RTX."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.reference.runtime import device

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)

#: torch dtype of each TensorRT DataType (written out here, not taken from the code under test).
TORCH_OF = {
    trt.DataType.FLOAT: torch.float32, trt.DataType.HALF: torch.float16, trt.DataType.BF16: torch.bfloat16,
    trt.DataType.INT32: torch.int32, trt.DataType.INT64: torch.int64, trt.DataType.BOOL: torch.bool,
    trt.DataType.INT8: torch.int8, trt.DataType.UINT8: torch.uint8, trt.DataType.FP8: torch.float8_e4m3fn,
    trt.DataType.E8M0: torch.float8_e8m0fnu,  # an exponent byte
    trt.DataType.FP4: torch.uint8,  # packed, two values a byte: run_plan's buffer of one byte a value is ample
}


class CapturingLogger(trt.ILogger):
    """Keeps every message, so tests can check what TensorRT-style failures logged."""

    def __init__(self):
        super().__init__()
        self.messages: list[tuple[int, str]] = []

    def log(self, severity, msg):
        self.messages.append((int(severity), str(msg)))

    @property
    def errors(self) -> list[str]:
        return [m for s, m in self.messages if s <= int(trt.ILogger.ERROR)]


def run_plan(plan, feeds: dict, logger: CapturingLogger | None = None) -> dict[str, torch.Tensor]:
    """Deserialize `plan`, bind `feeds` (name -> tensor, already in the engine's dtype) and the
    outputs by address, execute, and return the outputs on the CPU."""
    logger = logger or CapturingLogger()
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    assert engine is not None, logger.errors
    context = engine.create_execution_context()
    buffers = {}
    for name, value in feeds.items():
        buffers[name] = torch.as_tensor(value).to(device()).contiguous()
        context.set_input_shape(name, tuple(buffers[name].shape))
        context.set_tensor_address(name, buffers[name].data_ptr())
    outputs, allocator = {}, Allocator()
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) != trt.TensorIOMode.OUTPUT:
            continue
        shape, dtype = tuple(context.get_tensor_shape(name)), TORCH_OF[engine.get_tensor_dtype(name)]
        if any(d < 0 for d in shape):  # a data-dependent shape: memory is asked for during the run
            allocator.dtypes[name] = dtype
            assert context.set_output_allocator(name, allocator)
            continue
        outputs[name] = torch.empty(shape, dtype=dtype, device=device())
        context.set_tensor_address(name, outputs[name].data_ptr())
    assert context.execute_async_v3(0), logger.errors
    outputs.update((name, allocator.tensor(name)) for name in allocator.dtypes)
    return {k: v.cpu() for k, v in outputs.items()}


class Allocator(trt.IOutputAllocator):
    """An IOutputAllocator written out here (not trtbuild.engine's): fresh torch bytes for each request,
    recording every call so tests can check what the runtime asked and told."""

    def __init__(self):
        trt.IOutputAllocator.__init__(self)
        self.dtypes: dict[str, torch.dtype] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.calls: list[tuple] = []
        self.shapes: dict[str, tuple] = {}

    def reallocate_output(self, tensor_name, memory, size, alignment):
        self.calls.append(("reallocate_output", tensor_name, memory, size, alignment))
        self.buffers[tensor_name] = torch.empty(size, dtype=torch.uint8, device=device())
        return self.buffers[tensor_name].data_ptr()

    def notify_shape(self, tensor_name, shape):
        self.calls.append(("notify_shape", tensor_name, tuple(shape)))
        self.shapes[tensor_name] = tuple(shape)

    def tensor(self, name: str) -> torch.Tensor:
        shape, dtype = self.shapes[name], self.dtypes[name]
        count = int(np.prod(shape))
        return self.buffers[name][:count * dtype.itemsize].view(dtype).reshape(shape)


class RefNet:
    """A reference network under construction, with build and run helpers."""

    def __init__(self):
        self.logger = CapturingLogger()
        self.builder = trt.Builder(self.logger)
        self.network = self.builder.create_network(STRONGLY_TYPED)
        self.config = self.builder.create_builder_config()

    def input(self, name: str, shape, dtype=trt.float32):
        return self.network.add_input(name, dtype, shape)

    def build(self):
        """build_serialized_network: plan bytes, or None (with an error in self.logger)."""
        return self.builder.build_serialized_network(self.network, self.config)

    def run(self, feeds: dict, **outputs) -> dict[str, torch.Tensor]:
        """Name and mark each `outputs` tensor (keyword = output name), build and run."""
        for name, tensor in outputs.items():
            tensor.name = name
            self.network.mark_output(tensor)
        plan = self.build()
        assert plan is not None, f"build failed: {self.logger.errors}"
        return run_plan(plan, feeds, self.logger)


def close(actual: torch.Tensor, expected, atol: float = 1e-5, rtol: float = 1e-5, equal_nan: bool = False):
    """Shapes equal, then torch.testing.assert_close in float64 (`expected`: tensor or array-like)."""
    expected = torch.as_tensor(np.asarray(expected))
    assert tuple(actual.shape) == tuple(expected.shape), (tuple(actual.shape), tuple(expected.shape))
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=equal_nan)


#: whether the `refnet` twin judges against TensorRT-RTX (for marks that only apply then)
RTX_INSTALLED = importlib.util.find_spec("tensorrt_rtx") is not None
#: the start of the skip reason where TensorRT-RTX is absent; tests/conftest.py counts these skips in its summary
RTX_MISSING = "TensorRT-RTX (tensorrt_rtx) is not installed"
#: the distributions through which the `test` extra installs TensorRT-RTX
RTX_DISTRIBUTIONS = ("tensorrt-rtx-cu13", "tensorrt-rtx-cu13-bindings", "tensorrt-rtx-cu13-libs")


def rtx_distributions() -> list[str]:
    """The TensorRT-RTX distributions pip has installed here, as 'name version'."""
    from importlib import metadata

    found = []
    for name in RTX_DISTRIBUTIONS:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return found


def import_rtx():
    """`tensorrt_rtx`. Where it does not import, the calling test never passes without it: it fails under
    CI (CI=true) and wherever the `test` extra installed TensorRT-RTX (a broken install), and is skipped
    otherwise, with a reason that the terminal summary counts (tests/conftest.py)."""
    import os

    try:
        import tensorrt_rtx
    except Exception as e:  # noqa: BLE001 - ImportError, or OSError from its libraries: any failure means unavailable
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the TensorRT-RTX cross-check, but `import tensorrt_rtx` failed: {e}")
        installed = rtx_distributions()
        if installed or RTX_INSTALLED:
            pytest.fail(f"TensorRT-RTX is installed ({', '.join(installed) or 'tensorrt_rtx'}) but `import "
                        f"tensorrt_rtx` failed: {e}; the cross-check must not silently stop running")
        pytest.skip(f"{RTX_MISSING} (`import tensorrt_rtx` failed: {e}); `pip install -e .[test]` installs it")
    return tensorrt_rtx


def rtx_missing_summary(skipped_reports) -> str | None:
    """One line counting the tests skipped because TensorRT-RTX is not installed (None if there are none)."""
    count = sum(RTX_MISSING in str(getattr(r, "longrepr", "")) for r in skipped_reports)
    if not count:
        return None
    return (f"{count} test{'s' if count != 1 else ''} skipped: {RTX_MISSING}, so NVIDIA's builder did not judge "
            "the reference; `pip install -e .[test]` installs it")


class RtxNet:
    """A TensorRT-RTX strongly typed network under construction, built ahead of time for sm86 with
    no GPU; the counterpart of RefNet. `build()` returns the serialized engine or None, with
    TensorRT-RTX's error messages in `self.errors`."""

    def __init__(self, rtx_module, targets=("8.6",)):
        from trtbuild.engine.build import new_network
        from trtbuild.engine.rtx import set_targets

        self.trt = rtx_module
        self.builder, self.network, self.logger = new_network(rtx_module)
        self.config = self.builder.create_builder_config()
        set_targets(rtx_module, self.config, targets)

    @property
    def errors(self) -> str:
        return self.logger.error_text()

    def build(self):
        self.logger.clear()
        return self.builder.build_serialized_network(self.network, self.config)


# -- rules found by the TensorRT-RTX sweep (tests/reference/test_rtx_sweep.py) ----------------------------------
def add_profile(refnet, shapes: dict):
    """One optimization profile {input: (min, opt, max)} on the reference network's config and, when
    `refnet` is twinned (tests/helpers/twin.py), on TensorRT-RTX's."""
    for net in [refnet] + ([refnet.rtxnet] if hasattr(refnet, "rtxnet") else []):
        profile = net.builder.create_optimization_profile()
        for name, (mn, opt, mx) in shapes.items():
            profile.set_shape(name, mn, opt, mx)
        net.config.add_optimization_profile(profile)



def concrete(layer):
    """A reference layer from get_layer (an ILayer view, as TensorRT's bindings return) as its own class, the way
    TensorRT users downcast (`layer.__class__ = trt.IConvolutionLayer`, Polygraphy's layer class map); anything
    else (a TensorRT-RTX layer, None) unchanged."""
    from trtbuild.reference.ops import op_for

    if isinstance(layer, trt.ILayer) and type(layer) is trt.ILayer:
        layer.__class__ = op_for(layer.type).cls
    return layer

"""Run a reference network and its ONNX export side by side (used by tests and layerwise)."""

from __future__ import annotations

import numpy as np
import torch

from trtbuild import reference as trt
from trtbuild.reference.enums import DataType
from trtbuild.reference.execute import TORCH_DTYPE

from .export import export_onnx
from .graph import OnnxExportError
from .ort import run_onnxruntime


class _Logger(trt.ILogger):
    def __init__(self):
        trt.ILogger.__init__(self)
        self.messages: list[str] = []

    def log(self, severity, msg):
        self.messages.append(str(msg))


def run_reference(network, feeds: dict) -> dict:
    """Build `network` (reference backend, outputs marked) into a plan and run it once on `feeds`
    ({input name: array/tensor}) through Runtime and an execution context, as with TensorRT.
    Returns {output name: CPU torch tensor}."""
    from trtbuild.reference.runtime import device

    logger = _Logger()
    builder = trt.Builder(logger)
    config = builder.create_builder_config()
    if any(d < 0 for t in network._inputs for d in t.shape):
        profile = builder.create_optimization_profile()
        for t in network._inputs:
            shape = tuple(np.shape(feeds[t.name]))
            profile.set_shape(t.name, shape, shape, shape)
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan) if plan is not None else None
    if engine is None:
        raise RuntimeError("the reference backend could not build the network: " + "; ".join(logger.messages))
    ctx = engine.create_execution_context()
    dev, keep, results = device(), [], {}
    for t in network._inputs:
        value = feeds[t.name]
        buf = (value if torch.is_tensor(value) else torch.as_tensor(np.asarray(value)))
        buf = buf.to(device=dev, dtype=TORCH_DTYPE[t.dtype]).contiguous()
        keep.append(buf)
        ctx.set_input_shape(t.name, tuple(buf.shape))
        ctx.set_tensor_address(t.name, buf.data_ptr())
    later = {}  # outputs of data-dependent shape: their memory is asked for during the run
    for t in network._outputs:
        shape, dtype = tuple(ctx.get_tensor_shape(t.name)), TORCH_DTYPE[engine.get_tensor_dtype(t.name)]
        if any(d < 0 for d in shape):
            later[t.name] = dtype
            continue
        results[t.name] = buf = torch.empty(shape, dtype=dtype, device=dev)
        ctx.set_tensor_address(t.name, buf.data_ptr())
    if later:
        from trtbuild.engine.output_allocator import torch_output_allocator

        allocator = torch_output_allocator(trt, dev, later)
        for name in later:
            ctx.set_output_allocator(name, allocator)
    if not ctx.execute_async_v3(0):
        raise RuntimeError("the reference backend could not run the network: " + "; ".join(logger.messages))
    results.update((name, allocator.tensor(name)) for name in later)
    return {t.name: results[t.name].cpu() for t in network._outputs}


def random_feeds(network, seed: int = 0, low: float = -1.0, high: float = 1.0) -> dict:
    """Seeded random inputs as torch tensors: floats uniform in [low, high), ints in [-3, 3]
    (never 0, so they can divide), bools fair coins. Dynamic inputs raise OnnxExportError."""
    gen = torch.Generator().manual_seed(seed)
    feeds = {}
    for t in network._inputs:
        shape = tuple(t.shape)
        if any(d < 0 for d in shape):
            raise OnnxExportError(f"input '{t.name}' has dynamic shape {shape}: pass the inputs explicitly")
        if t.dtype in (DataType.FLOAT, DataType.HALF, DataType.BF16):
            v = torch.rand(shape, generator=gen) * (high - low) + low
        elif t.dtype == DataType.BOOL:
            v = torch.rand(shape, generator=gen) > 0.5
        else:
            v = torch.randint(1, 4, shape, generator=gen) * (torch.randint(0, 2, shape, generator=gen) * 2 - 1)
        feeds[t.name] = v.to(TORCH_DTYPE[t.dtype])
    return feeds


def as_numpy(x) -> np.ndarray:
    """A torch tensor or array as numpy; fp16/bf16 values widen to float32 exactly."""
    if torch.is_tensor(x):
        x = x.detach().cpu()
        return x.float().numpy() if x.dtype in (torch.float16, torch.bfloat16) else x.numpy()
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.kind == "f" and x.dtype.itemsize < 4 or x.dtype.name == "bfloat16" else x


def export_and_run(network, feeds: dict | None = None, opset: int | None = None, seed: int = 0):
    """Export `network`, run the reference plan and onnxruntime on the same inputs.
    Returns (model, {name: reference numpy}, {name: onnxruntime numpy}); fp16/bf16 as float32."""
    feeds = feeds if feeds is not None else random_feeds(network, seed)
    ref = run_reference(network, feeds)
    model = export_onnx(network, None, opset=opset)
    got = run_onnxruntime(model, feeds)
    return model, {k: as_numpy(v) for k, v in ref.items()}, {k: as_numpy(v) for k, v in got.items()}

"""Tiny harness for layer-builder tests: build a strongly typed network (on the reference backend,
or on real TensorRT where a test asks for it), build/deserialize the engine, run it through
execute_async_v3 with torch buffers, return outputs."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from trtbuild.backend import BackendError, is_reference, load_trt
from trtbuild.reference.runtime import device

_LOGGERS: dict[int, object] = {}  # builder id -> its logger (kept alive for TensorRT, which holds a pointer)


def _torch_dtypes(mod):
    """{torch dtype: DataType} and {DataType: torch dtype} of module `mod` (written out here)."""
    D = mod.DataType
    pairs = [(torch.float32, D.FLOAT), (torch.float16, D.HALF), (torch.bfloat16, D.BF16), (torch.int32, D.INT32),
             (torch.bool, D.BOOL)]
    return dict(pairs), {d: t for t, d in pairs}


def real_trt_or_skip():
    """The real tensorrt module, or skip the test (not installed, or no CUDA GPU)."""
    try:
        return load_trt("tensorrt")
    except BackendError as e:
        pytest.skip(str(e))


def new_network(mod=trt):
    """(builder, network): a fresh strongly typed network of module `mod` (reference by default)."""

    class CaptureLogger(mod.ILogger):
        def __init__(self):
            mod.ILogger.__init__(self)
            self.messages: list[tuple[int, str]] = []

        def log(self, severity, msg):
            self.messages.append((int(severity), str(msg)))

    logger = CaptureLogger()
    builder = mod.Builder(logger)
    _LOGGERS[id(builder)] = logger
    return builder, builder.create_network(1 << int(mod.NetworkDefinitionCreationFlag.STRONGLY_TYPED))


def run_network(builder, network, feeds: dict[str, torch.Tensor], mod=trt) -> dict[str, torch.Tensor]:
    """Build the marked outputs of `network`, run it on `feeds` and return {name: cpu tensor}."""
    config = builder.create_builder_config()
    dynamic = [network.get_input(i) for i in range(network.num_inputs) if -1 in tuple(network.get_input(i).shape)]
    if dynamic:
        profile = builder.create_optimization_profile()
        for t in dynamic:
            shape = tuple(feeds[t.name].shape)
            profile.set_shape(t.name, tuple(1 if d < 0 else s for d, s in zip(t.shape, shape)), shape, shape)
        config.add_optimization_profile(profile)
    logger = _LOGGERS[id(builder)]
    plan = builder.build_serialized_network(network, config)
    assert plan is not None, f"build failed: {logger.messages}"
    engine = mod.Runtime(logger).deserialize_cuda_engine(plan)
    assert engine is not None, f"deserialize failed: {logger.messages}"
    ctx = engine.create_execution_context()
    dev = device() if is_reference(mod) else torch.device("cuda")
    torch_of = _torch_dtypes(mod)[1]
    keep, outputs = [], {}
    for name, value in feeds.items():
        t = value.to(dev).contiguous()
        keep.append(t)
        ctx.set_input_shape(name, tuple(t.shape))
        ctx.set_tensor_address(name, t.data_ptr())
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == mod.TensorIOMode.OUTPUT:
            buf = torch.empty(tuple(ctx.get_tensor_shape(name)), dtype=torch_of[engine.get_tensor_dtype(name)], device=dev)
            outputs[name] = buf
            ctx.set_tensor_address(name, buf.data_ptr())
    stream = torch.cuda.current_stream().cuda_stream if dev.type == "cuda" else 0
    assert ctx.execute_async_v3(stream)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return {k: v.cpu() for k, v in outputs.items()}


def run_builder(fn, x: torch.Tensor, *args, input_shape=None, trt_module=trt, **kwargs):
    """Run `fn(network, input, *args, **kwargs)` on `x`; returns (output tensor, network).

    The input gets x's dtype (float32/float16/bfloat16) and `input_shape` (default x.shape,
    -1 allowed for dynamic dims); `trt_module` is the backend (the reference by default)."""
    builder, network = new_network(trt_module)
    inp = network.add_input("x", _torch_dtypes(trt_module)[0][x.dtype], tuple(input_shape or x.shape))
    y = fn(network, inp, *args, **kwargs)
    network.mark_output(y)
    return run_network(builder, network, {"x": x}, trt_module)[y.name], network


def layer_names(network) -> list[str]:
    return [network.get_layer(i).name for i in range(network.num_layers)]


def assert_close(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, what: str = ""):
    """Elementwise: an element fails only if its error exceeds both atol and rtol * |expected|."""
    a, e = actual.double(), expected.double()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert torch.isfinite(a).all(), f"{what}: {int((~torch.isfinite(a)).sum())} non-finite outputs"
    err = (a - e).abs()
    bad = (err > atol) & (err > rtol * e.abs())
    assert not bad.any(), (f"{what}: {int(bad.sum())}/{bad.numel()} elements off; max abs err {err.max().item():.3g}, "
                           f"max rel err {(err / e.abs().clamp_min(1e-30)).max().item():.3g}")


def rel_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max_i |a_i - r_i| / max(|r_i|, 1e-2 * max|r|, smallest normal of actual's dtype)
    (the robustness metric; see docs/robustness.md). Non-finite outputs give inf.

    Elements of at least 1 % of the largest reference value are judged relatively; smaller ones
    against 1 % of the largest (an fp16 result rounds intermediates of the output's scale to
    2**-12 of it, so near-cancelling elements cannot be judged relative to themselves)."""
    a, r = actual.double(), expected.double()
    if not torch.isfinite(a).all():
        return float("inf")
    floor = max(1e-2 * r.abs().max().item(), torch.finfo(actual.dtype).tiny, 1e-30)
    return ((a - r).abs() / r.abs().clamp_min(floor)).max().item()


def assert_named_under(network, name: str, y) -> None:
    """Every layer (and its outputs) is named `name`/..., and the result tensor is named `name`."""
    assert network.num_layers > 0
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        assert layer.name.startswith(name + "/"), f"layer {i} is named {layer.name!r}, not under {name!r}"
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            assert t.name == layer.name or t is y, f"output of {layer.name!r} is named {t.name!r}"
    assert y.name == name

"""Build and run a zoo model on the reference backend in a few lines (for tests and scripts).

This is a thin, dependency-free path through the TensorRT API (Builder -> plan -> Runtime ->
execution context), so zoo tests do not depend on trtbuild.engine. Real users go through
trtbuild.engine.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import torch

__all__ = ["CapturingLogger", "run_network", "run_spec", "build_spec_network", "PRECISIONS"]

PRECISIONS = ("fp32", "fp16")


def CapturingLogger(trt):  # noqa: N802 - a class factory; TensorRT loggers must subclass trt.ILogger
    """A trt.ILogger that keeps every message (severity, text) in ``.messages``."""

    class _Logger(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.messages: list[tuple[int, str]] = []

        def log(self, severity, msg):
            self.messages.append((int(severity), str(msg)))

    return _Logger()


def _trt_dtype(trt, precision: str):
    if precision == "fp32":
        return trt.DataType.FLOAT
    if precision == "fp16":
        return trt.DataType.HALF
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def build_spec_network(network, spec, wm, precision: str = "fp32", small: bool = False) -> dict:
    """Declare ``spec``'s input (FLOAT or HALF for fp16) and add its layers; returns the outputs dict."""
    trt = _network_trt(network)
    x = network.add_input(spec.input_name, _trt_dtype(trt, precision), trt.Dims(spec.input_shape(small)))
    outs = spec.build_network(network, wm, x)
    missing = [n for n in spec.output_names if n not in outs]
    if missing:
        raise RuntimeError(f"model '{spec.name}': build_network did not return outputs {missing}")
    return outs


def _network_trt(network):
    from trtbuild.backend import trt_of

    return trt_of(network)


def run_network(define: Callable, feeds: dict, trt=None, extra_outputs: Iterable[str] = ()) -> dict:
    """Build a network with ``define(network) -> {name: ITensor}``, mark those outputs (and the
    tensors named in ``extra_outputs``), build, deserialize and execute it once with ``feeds``
    (``{input name: torch tensor}``). Returns ``{name: torch tensor}`` on the CPU.
    Build or deserialization failures raise RuntimeError carrying the logged messages."""
    if trt is None:
        import trtbuild.reference as trt
    from trtbuild.reference.runtime import device

    logger = CapturingLogger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    outs = dict(define(network))
    extra = list(extra_outputs)
    if extra:
        by_name = {}
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            for j in range(layer.num_outputs):
                by_name[layer.get_output(j).name] = layer.get_output(j)
        unknown = [n for n in extra if n not in by_name]
        if unknown:
            raise KeyError(f"run_network: no tensors named {unknown} in the network")
        for n in extra:
            outs.setdefault(n, by_name[n])
    for name, t in outs.items():
        if t.name != name:
            t.name = name
        network.mark_output(t)
    config = builder.create_builder_config()
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise RuntimeError("build_serialized_network failed: " + "; ".join(m for _, m in logger.messages))
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    if engine is None:
        raise RuntimeError("deserialize_cuda_engine failed: " + "; ".join(m for _, m in logger.messages))
    ctx = engine.create_execution_context()
    dev = device()
    from trtbuild.reference.execute import TORCH_DTYPE

    keep = []
    for name, value in feeds.items():
        dtype = TORCH_DTYPE[engine.get_tensor_dtype(name)]
        buf = torch.as_tensor(value).to(device=dev, dtype=dtype).contiguous()
        keep.append(buf)
        ctx.set_input_shape(name, tuple(buf.shape))
        ctx.set_tensor_address(name, buf.data_ptr())
    results = {}
    for name in outs:
        buf = torch.empty(tuple(ctx.get_tensor_shape(name)), dtype=TORCH_DTYPE[engine.get_tensor_dtype(name)],
                          device=dev)
        results[name] = buf
        ctx.set_tensor_address(name, buf.data_ptr())
    if not ctx.execute_async_v3(0):
        raise RuntimeError("execute_async_v3 failed")
    return {k: v.cpu() for k, v in results.items()}


def run_spec(spec, wm, x, precision: str = "fp32", small: bool = False, extra_outputs: Iterable[str] = (),
             info: dict | None = None) -> dict:
    """Build ``spec`` from WeightMap ``wm`` on the reference backend and run it on ``x`` (a float32
    torch tensor or numpy array; cast to the input type). ``info``, if given, receives
    ``num_layers``. Returns ``{output or extra tensor name: torch tensor}``."""

    def define(network):
        outs = build_spec_network(network, spec, wm, precision, small)
        if info is not None:
            info["num_layers"] = network.num_layers
        return outs

    feeds = {spec.input_name: torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)}
    return run_network(define, feeds, extra_outputs=extra_outputs)

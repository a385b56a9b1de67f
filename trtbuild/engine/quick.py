"""Build a network and run it once, in a few lines (tests, scripts, the ONNX exporter).

    out = run_network(lambda net: {"y": relu(net, net.add_input("x", trt.DataType.FLOAT, (1, 4)), "y")},
                      {"x": torch.rand(1, 4)})                           # {"y": cpu tensor}
    out = run_spec(registry.get("alexnet"), wm, x, "fp16", small=True)   # a zoo model, input declared HALF

This is the user-facing path (build_network_plan -> Engine.run) with the conveniences a one-shot run
wants: the reference backend by default, feeds cast to the engine's input types and moved to its
device, outputs returned on the CPU, no progress bars.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Iterable, Mapping

import numpy as np
import torch

from .build import build_network_plan
from .define import check_quant, check_spec_outputs
from .network import tensors_by_name
from .options import PRECISIONS, QUANTIZED, BuildOptions
from .runner import Engine, check_input_names

__all__ = ["SPEC_PRECISIONS", "build_spec_network", "run_builder", "run_network", "run_spec"]

SPEC_PRECISIONS = ("fp32", "fp16")  # the input types build_spec_network can declare


def build_spec_network(network, spec, wm, precision: str = "fp32", small: bool = False, quant=None) -> dict:
    """Declare `spec`'s input (FLOAT, or HALF for fp16, so every layer computes in that type) and
    add the model's layers from WeightMap `wm`; return the {name: ITensor} dict that
    `spec.build_network` returned (outputs are neither renamed nor marked). int8/fp8: a FLOAT input
    and the Q/DQ layers of `quant` (a trtbuild.quant.QuantPlan, see trtbuild.engine.quant_plan;
    with fp16 it keeps modules in fp32). Raises ValueError for another precision or a plan that does
    not fit, and BuildError (a RuntimeError) if an output of `spec.output_names` is missing."""
    if precision not in SPEC_PRECISIONS + QUANTIZED:
        raise ValueError(f"precision must be one of {SPEC_PRECISIONS + QUANTIZED}, got {precision!r}")
    check_quant(precision, quant, spec)
    from trtbuild.backend import trt_of

    trt = trt_of(network)
    dtype = getattr(trt.DataType, PRECISIONS[precision])
    x = network.add_input(spec.input_name, dtype, trt.Dims(spec.input_shape(small)))
    outs = spec.build_network(network, wm, x, **({"quant": quant} if quant is not None else {}))
    check_spec_outputs(spec, outs)
    if quant is not None:
        quant.check_keep_reached(spec.name)
    return outs


def run_network(define: Callable, feeds: Mapping, trt: ModuleType | None = None,
                extra_outputs: Iterable[str] = ()) -> dict[str, torch.Tensor]:
    """Build `define(network) -> {name: ITensor}` (define adds its own inputs), name and mark the
    returned tensors plus the tensors named in `extra_outputs`, and run the engine once on `feeds`
    ({input name: torch tensor or numpy array}, cast to the input's type). `trt` defaults to the
    reference backend. Returns {name: cpu tensor}: the returned outputs in define's order, then the
    extra outputs in the order given. Raises KeyError for an extra output name that no layer
    produces, BuildError (a RuntimeError) quoting TensorRT's log if the build fails, and
    EngineInputError for feeds that name no input or leave one out."""
    if trt is None:
        import trtbuild.reference as trt
    wanted = list(dict.fromkeys(extra_outputs))
    order: list[str] = []

    def define_with_extras(network):
        outs = dict(define(network))
        if wanted:
            found = {n: t for n, (layer, t) in tensors_by_name(network).items() if layer >= 0}  # layer outputs
            unknown = [n for n in wanted if n not in found]
            if unknown:
                raise KeyError(f"run_network: no tensors named {unknown} in the network")
            for n in wanted:
                outs.setdefault(n, found[n])
        order.extend(outs)
        return outs

    engine = Engine(build_network_plan(define_with_extras, trt, BuildOptions(progress=False)), trt, name="run_network")
    check_input_names(feeds, engine.tensors, engine.name)
    outputs = engine.run({name: torch.as_tensor(value).to(device=engine.device, dtype=engine.tensors[name].dtype)
                          for name, value in feeds.items()})
    return {name: outputs[name].cpu() for name in order + [n for n in outputs if n not in order]}


def run_spec(spec, wm, x, precision: str = "fp32", small: bool = False, extra_outputs: Iterable[str] = (),
             info: dict | None = None) -> dict[str, torch.Tensor]:
    """Build `spec` from WeightMap `wm` with build_spec_network (input FLOAT, or HALF for fp16) on
    the reference backend and run it once on `x` (a torch tensor or numpy array, cast to the input
    type). `info`, if given, receives `num_layers` (the model's layers). Returns
    {output or extra tensor name: cpu tensor}."""

    def define(network):
        outs = build_spec_network(network, spec, wm, precision, small)
        if info is not None:
            info["num_layers"] = network.num_layers
        return outs

    feeds = {spec.input_name: torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)}
    return run_network(define, feeds, extra_outputs=extra_outputs)



def run_builder(builder_fn: Callable, x: torch.Tensor, *args, trt: ModuleType | None = None, **kwargs) -> torch.Tensor:
    """Run one builder, ``builder_fn(network, input, *args, **kwargs) -> ITensor``, on the tensor
    ``x`` (its shape, and its dtype: float32, float16 or bfloat16) and return the output."""
    if trt is None:
        import trtbuild.reference as trt
    types = {torch.float32: trt.DataType.FLOAT, torch.float16: trt.DataType.HALF, torch.bfloat16: trt.DataType.BF16}
    if x.dtype not in types:
        raise ValueError(f"run_builder: input dtype {x.dtype} is not float32, float16 or bfloat16")
    names = []

    def define(network):
        y = builder_fn(network, network.add_input("x", types[x.dtype], trt.Dims(tuple(x.shape))), *args, **kwargs)
        names.append(y.name)
        return {y.name: y}

    outs = run_network(define, {"x": x}, trt)
    return outs[names[0]]

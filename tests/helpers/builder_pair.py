"""Build one builder call on the reference and on TensorRT-RTX, compare the two networks layer by layer
(names, types, inputs, output shapes and dtypes), and run the reference's engine.

TensorRT-RTX engines need an RTX GPU, so only the reference runs; TensorRT-RTX's builder must accept every
construction the reference accepts, with the same layers."""

from __future__ import annotations

import numpy as np
import torch

import trtbuild.reference as ref
from trtbuild.layers.common import BuilderError

from helpers.refnet import RefNet, RtxNet, import_rtx, run_plan
from helpers.twin import _NOISE

#: dtype name -> (DataType name, torch dtype)
DTYPES = {"fp32": ("FLOAT", torch.float32), "fp16": ("HALF", torch.float16), "bf16": ("BF16", torch.bfloat16),
          "int32": ("INT32", torch.int32), "int64": ("INT64", torch.int64), "bool": ("BOOL", torch.bool)}


def _kind(layer) -> str:
    return layer.type.name  # the reference's get_layer gives an ILayer view whose .type is the LayerType, as TensorRT


def layer_walk(network) -> list[tuple]:
    """(name, type, input names, outputs (name, shape, dtype)) of every layer, in order."""
    rows = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        inputs = tuple(getattr(layer.get_input(j), "name", None) for j in range(layer.num_inputs))
        outputs = tuple((t.name, tuple(t.shape), t.dtype.name) for t in map(layer.get_output, range(layer.num_outputs)))
        rows.append((layer.name, _kind(layer), inputs, outputs))
    return rows


def _outputs(result) -> list:
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]


class Pair:
    """The reference and TensorRT-RTX networks of one builder call; `outputs` are the reference's tensors."""

    def __init__(self, inputs: dict, build, profile: dict | None = None):
        self.rtx = import_rtx()
        self.refnet, self.rtxnet = RefNet(), RtxNet(self.rtx)
        self.rtxnet.logger.clear()
        self.inputs = inputs
        self.outputs = self._make(ref, self.refnet, build, profile)
        rtx_out = self._make(self.rtx, self.rtxnet, build, profile)
        errors = [m for m in self.rtxnet.logger.error_text().splitlines() if m and not _NOISE.search(m)
                  and "no error message was logged" not in m]
        assert not errors, f"TensorRT-RTX logged errors: {errors}"
        assert self.rtxnet.build() is not None, f"TensorRT-RTX refused to build: {self.rtxnet.errors}"
        ref_rows, rtx_rows = layer_walk(self.refnet.network), layer_walk(self.rtxnet.network)
        for i, (a, b) in enumerate(zip(ref_rows, rtx_rows)):
            assert a == b, f"layer {i} differs:\n  reference {a}\n  RTX       {b}"
        assert len(ref_rows) == len(rtx_rows)
        assert [(t.name, tuple(t.shape)) for t in self.outputs] == [(t.name, tuple(t.shape)) for t in rtx_out]

    def _make(self, trt, net, build, profile):
        tensors = {name: net.network.add_input(name, getattr(trt.DataType, DTYPES[dt][0]), shape)
                   for name, (shape, dt) in self.inputs.items()}
        outputs = _outputs(build(net.network, **tensors))
        for t in outputs:
            net.network.mark_output(t)
        if profile:
            p = net.builder.create_optimization_profile()
            for name, (lo, opt, hi) in profile.items():
                p.set_shape(name, lo, opt, hi)
            net.config.add_optimization_profile(p)
        return outputs

    @property
    def names(self) -> list[str]:
        return [self.refnet.network.get_layer(i).name for i in range(self.refnet.network.num_layers)]

    def run(self, **feeds) -> list[torch.Tensor]:
        """The reference engine's outputs for `feeds` (cast to each input's dtype), in the builder's order."""
        plan = self.refnet.build()
        assert plan is not None, self.refnet.logger.errors
        typed = {k: torch.as_tensor(v).to(DTYPES[self.inputs[k][1]][1]) for k, v in feeds.items()}
        got = run_plan(plan, typed, self.refnet.logger)
        return [got[t.name] for t in self.outputs]


def build_pair(inputs: dict, build, profile: dict | None = None) -> Pair:
    """`build(network, **input tensors) -> tensor or list of tensors` on both backends; `inputs`: name ->
    (shape, dtype name)."""
    return Pair(inputs, build, profile)


def refused(inputs: dict, build) -> str:
    """The BuilderError message `build` raises on a reference network (AssertionError if it builds)."""
    net = RefNet()
    tensors = {name: net.network.add_input(name, getattr(ref.DataType, DTYPES[dt][0]), shape)
               for name, (shape, dt) in inputs.items()}
    try:
        build(net.network, **tensors)
    except BuilderError as e:
        return str(e)
    raise AssertionError("the builder accepted the call")


#: tolerance of each float type against a float64 PyTorch result (rounding of the type, with headroom)
TOL = {"fp32": dict(atol=2e-5, rtol=2e-5), "fp16": dict(atol=1e-2, rtol=1e-2), "bf16": dict(atol=6e-2, rtol=4e-2)}


def assert_close(got: torch.Tensor, want: torch.Tensor, dtype: str, scale: float = 1.0):
    """`got` (the reference, in `dtype`) equals `want` (PyTorch, float64) within `dtype`'s rounding."""
    tol = TOL[dtype]
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    torch.testing.assert_close(got.double(), want.double(), atol=tol["atol"] * scale, rtol=tol["rtol"])


def seeded(*shape, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def rounded(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """`x` rounded to `dtype` and back to float64: the input the network actually sees."""
    return x.to(DTYPES[dtype][1]).double()


def np_weights(*shape, seed: int = 1, scale: float = 1.0) -> np.ndarray:
    return np.random.RandomState(seed).standard_normal(shape) * scale

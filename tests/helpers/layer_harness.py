"""Tiny harness for layer-builder tests: build a strongly typed network (on the reference backend,
or on real TensorRT where a test asks for it) and run it once through trtbuild.engine
(serialize_network + Engine.run, the path users take), returning the outputs on the CPU."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from trtbuild.backend import BackendError, load_trt
from trtbuild.parity.compare import robust_rel_error as rel_error  # noqa: F401 - re-exported for the tests
from trtbuild.engine import Engine, new_network as _engine_network, serialize_network
from helpers.refnet import concrete

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
    builder, network, logger = _engine_network(mod)
    _LOGGERS[id(builder)] = logger
    return builder, network


def _profile_from_feeds(network, feeds) -> dict | None:
    """{input: (min, opt, max)} for the dynamic inputs: 1 for each dynamic dimension at min, the
    fed shape at opt and max; None for a static network."""
    shapes = {}
    for i in range(network.num_inputs):
        t = network.get_input(i)
        if -1 in tuple(t.shape):
            shape = tuple(feeds[t.name].shape)
            shapes[t.name] = (tuple(1 if d < 0 else s for d, s in zip(t.shape, shape)), shape, shape)
    return shapes or None


def run_network(builder, network, feeds: dict[str, torch.Tensor], mod=trt) -> dict[str, torch.Tensor]:
    """Build the marked outputs of `network`, run it on `feeds` and return {name: cpu tensor}."""
    plan = serialize_network(mod, builder, network, _LOGGERS[id(builder)],
                             profile_shapes=_profile_from_feeds(network, feeds), progress=False)
    engine = Engine(plan, mod, name="layer_harness")
    outputs = engine.run({name: value.to(engine.device) for name, value in feeds.items()}, synchronize=True)
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


def run_builder_at(fn, xs: list[torch.Tensor], *args, input_shape, trt_module=trt, **kwargs):
    """Build `fn(network, input, *args, **kwargs)` ONCE on an input of `input_shape` (-1: dynamic) with
    one optimization profile from the elementwise min to the max of the shapes of `xs` (opt = max),
    and run that one engine on each of `xs`; returns ([output per x], network)."""
    builder, network = new_network(trt_module)
    inp = network.add_input("x", _torch_dtypes(trt_module)[0][xs[0].dtype], tuple(input_shape))
    y = fn(network, inp, *args, **kwargs)
    network.mark_output(y)
    lo = tuple(min(x.shape[i] for x in xs) for i in range(len(input_shape)))
    hi = tuple(max(x.shape[i] for x in xs) for i in range(len(input_shape)))
    plan = serialize_network(trt_module, builder, network, _LOGGERS[id(builder)], profile_shapes={"x": (lo, hi, hi)},
                             progress=False)
    engine = Engine(plan, trt_module, name="layer_harness")
    return [engine.run({"x": x.to(engine.device)}, synchronize=True)[y.name].cpu() for x in xs], network


def layer_names(network) -> list[str]:
    return [concrete(network.get_layer(i)).name for i in range(network.num_layers)]


def assert_close(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, what: str = ""):
    """Elementwise: an element fails only if its error exceeds both atol and rtol * |expected|."""
    a, e = actual.double(), expected.double()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert torch.isfinite(a).all(), f"{what}: {int((~torch.isfinite(a)).sum())} non-finite outputs"
    err = (a - e).abs()
    bad = (err > atol) & (err > rtol * e.abs())
    assert not bad.any(), (f"{what}: {int(bad.sum())}/{bad.numel()} elements off; max abs err {err.max().item():.3g}, "
                           f"max rel err {(err / e.abs().clamp_min(1e-30)).max().item():.3g}")


def assert_named_under(network, name: str, y) -> None:
    """Every layer (and its outputs) is named `name`/..., and the result tensor is named `name`."""
    assert network.num_layers > 0
    for i in range(network.num_layers):
        layer = concrete(network.get_layer(i))
        assert layer.name.startswith(name + "/"), f"layer {i} is named {layer.name!r}, not under {name!r}"
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            assert t.name == layer.name or t is y, f"output of {layer.name!r} is named {t.name!r}"
    assert y.name == name


def random_affine(m, seed=1):
    """Fill a norm module's weight and bias with seeded normal values; returns them as numpy."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        m.weight.copy_(torch.randn(m.weight.shape, generator=g, dtype=torch.float64))
        m.bias.copy_(torch.randn(m.bias.shape, generator=g, dtype=torch.float64))
    return m.weight.detach().numpy(), m.bias.detach().numpy()

"""The Involution plugin builder on the reference backend (and, where present, real TensorRT)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.layers import involution as inv_layers
from trtbuild.layers.common import BuilderError
from trtbuild.engine.quick import run_network
from trtbuild.ops.involution import Involution, involution_output_size
from trtbuild.ops.involution_reference_plugin import register_reference_involution
from trtbuild.weights import WeightMap

from helpers.involution_naive import naive_involution
from helpers.refnet import concrete

GEN = torch.Generator().manual_seed(0)


def rand(*shape):
    return torch.randn(*shape, generator=GEN)


def build_and_run(x, w, params, half=False, name="inv"):
    """Network: inputs x, w -> involution_plugin -> output 'y'. Returns (y, network)."""
    dt = trt.DataType.HALF if half else trt.DataType.FLOAT
    holder = {}

    def define(network):
        tx = network.add_input("x", dt, trt.Dims(tuple(x.shape)))
        tw = network.add_input("w", dt, trt.Dims(tuple(w.shape)))
        holder["network"] = network
        y = inv_layers.involution_plugin(network, tx, tw, *params, name)
        holder["output_name"] = y.name
        return {"y": y}

    y = run_network(define, {"x": x, "w": w})["y"]
    assert holder["output_name"] == name
    return y, holder["network"]


# (N, C, H, W, K, stride, padding, dilation, groups)
CASES = [
    (2, 8, 9, 9, 3, 1, 1, 1, 2),
    (1, 16, 14, 12, 7, 2, 3, 1, 1),
    (1, 6, 10, 11, 5, 3, 2, 1, 3),
    (2, 4, 9, 9, 3, 1, 2, 2, 4),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}C{}H{}W{}K{}s{}p{}d{}g{}".format(*c))
def test_plugin_network_matches_reference_fp32(case):
    n, c, h, wd, k, s, p, d, g = case
    x = rand(n, c, h, wd)
    w = rand(n, g, k * k, involution_output_size(h, k, s, p, d), involution_output_size(wd, k, s, p, d))
    y, net = build_and_run(x, w, case[4:])
    expected = naive_involution(x.double(), w.double(), k, s, p, d, g).float()
    assert y.dtype == torch.float32 and y.shape == expected.shape
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    layer = concrete(net.get_layer(0))
    assert net.num_layers == 1 and layer.name == "inv"
    fields = {k_: int(v[0]) for k_, v in layer.plugin._fields.items()}
    assert fields == dict(kernel_size=k, stride=s, padding=p, dilation=d, groups=g)
    assert all(v.dtype == np.int32 for v in layer.plugin._fields.values())


def test_plugin_network_fp16():
    n, c, h, wd, k, s, p, d, g = CASES[1]
    x = rand(n, c, h, wd)
    w = rand(n, g, k * k, involution_output_size(h, k, s, p, d), involution_output_size(wd, k, s, p, d))
    y, _ = build_and_run(x.half(), w.half(), CASES[1][4:], half=True)
    assert y.dtype == torch.float16
    expected = naive_involution(x.half().double(), w.half().double(), k, s, p, d, g)
    err = (y.double() - expected).abs().max().item()
    assert err <= 1e-2 * expected.abs().max().item(), err


def test_plugin_accepts_flat_kernels_of_the_generator():
    n, c, h, wd, k, s, p, d, g = CASES[0]
    x = rand(n, c, h, wd)
    w = rand(n, g * k * k, h, wd)  # (N, G*K*K, Ho, Wo), the span conv's output layout
    y, _ = build_and_run(x, w, CASES[0][4:])
    expected = naive_involution(x.double(), w.view(n, g, k * k, h, wd).double(), k, s, p, d, g).float()
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("w_shape,message", [
    ((2, 3, 9, 9, 9), r"\(N, 2, 9, Ho, Wo\)"),
    ((2, 2, 9, 8, 9), "Ho=9"),
    ((2, 17, 9, 9), r"\(N, 18, Ho, Wo\)"),
])
def test_builder_rejects_inconsistent_kernels(w_shape, message):
    def define(network):
        tx = network.add_input("x", trt.DataType.FLOAT, trt.Dims((2, 8, 9, 9)))
        tw = network.add_input("w", trt.DataType.FLOAT, trt.Dims(w_shape))
        return {"y": inv_layers.involution_plugin(network, tx, tw, 3, 1, 1, 1, 2, "blk/inv")}

    with pytest.raises(BuilderError, match=message) as info:
        run_network(define, {})
    assert "blk/inv" in str(info.value)


def test_builder_rejects_bad_parameters_and_mixed_types():
    def define(network, groups=2, w_type=trt.DataType.FLOAT):
        tx = network.add_input("x", trt.DataType.FLOAT, trt.Dims((1, 8, 5, 5)))
        tw = network.add_input("w", w_type, trt.Dims((1, 2, 9, 5, 5)))
        return {"y": inv_layers.involution_plugin(network, tx, tw, 3, 1, 1, 1, groups, "inv")}

    with pytest.raises(BuilderError, match="divisible by groups"):
        run_network(lambda nw: define(nw, groups=3), {})
    with pytest.raises(BuilderError, match="groups must be an int >= 1"):
        run_network(lambda nw: define(nw, groups=0), {})
    with pytest.raises(BuilderError, match="must have one type"):
        run_network(lambda nw: define(nw, w_type=trt.DataType.HALF), {})


def test_reference_creator_validates_fields_like_the_cpp_creator():
    creator = register_reference_involution(trt)
    assert register_reference_involution(trt) is creator  # idempotent
    assert trt.get_plugin_registry().get_creator("Involution", "1", "trtbuild") is creator
    assert [f.name for f in creator.field_names] == ["kernel_size", "stride", "padding", "dilation", "groups"]

    def fields(**kw):
        return trt.PluginFieldCollection(
            trt.PluginField(k, np.array([v], dtype=np.int32), trt.PluginFieldType.INT32) for k, v in kw.items())

    plugin = creator.create_plugin("p", fields(kernel_size=3, groups=2), trt.TensorRTPhase.BUILD)
    assert {k: int(v[0]) for k, v in plugin._fields.items()} == dict(kernel_size=3, stride=1, padding=0, dilation=1,
                                                                     groups=2)
    with pytest.raises(ValueError, match="field 'groups' is required"):
        creator.create_plugin("p", fields(kernel_size=3), trt.TensorRTPhase.BUILD)
    with pytest.raises(ValueError, match="unknown field"):
        creator.create_plugin("p", fields(kernel_size=3, groups=1, kernel=3), trt.TensorRTPhase.BUILD)
    with pytest.raises(ValueError, match="stride'=0"):
        creator.create_plugin("p", fields(kernel_size=3, groups=1, stride=0), trt.TensorRTPhase.BUILD)
    float_field = trt.PluginFieldCollection([trt.PluginField("kernel_size", np.array([3.0], np.float32),
                                                             trt.PluginFieldType.FLOAT32)])
    with pytest.raises(ValueError, match="one integer"):
        creator.create_plugin("p", float_field, trt.TensorRTPhase.BUILD)


def test_register_and_load_reject_the_wrong_backend():
    class FakeTensorRT:
        __name__ = "tensorrt"

    with pytest.raises(TypeError, match="trtbuild.reference"):
        register_reference_involution(FakeTensorRT())
    assert inv_layers.load_plugin_library(trt) is None  # reference: registers, loads nothing


def test_involution_block_matches_the_torch_module():
    torch.manual_seed(3)
    for stride in (1, 2):
        m = Involution(32, kernel_size=3, stride=stride, group_channels=8).eval()
        with torch.no_grad():
            m.conv1.bn.running_mean.uniform_(-0.5, 0.5)
            m.conv1.bn.running_var.uniform_(0.5, 2.0)
        wm = WeightMap.from_module(m)
        x = rand(2, 32, 8, 8)
        wm_prefixed = WeightMap.from_state_dict({f"inv.{k}": v for k, v in m.state_dict().items()})
        wm_flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in m.state_dict().items()})

        def define(network, x=x, wm=wm, stride=stride):
            tx = network.add_input("x", trt.DataType.FLOAT, trt.Dims(tuple(x.shape)))
            return {"y": inv_layers.involution_block(network, tx, wm, "", "blk", kernel_size=3, stride=stride,
                                                     group_channels=8)}

        def define_flat(network, x=x, wm_flat=wm_flat, stride=stride):  # tensorrtx .wts files store every tensor 1-D
            tx = network.add_input("x", trt.DataType.FLOAT, trt.Dims(tuple(x.shape)))
            return {"y": inv_layers.involution_block(network, tx, wm_flat, "", "blk", kernel_size=3, stride=stride)}

        def define_prefixed(network, x=x, wm_prefixed=wm_prefixed, stride=stride):
            tx = network.add_input("x", trt.DataType.FLOAT, trt.Dims(tuple(x.shape)))
            return {"y": inv_layers.involution_block(network, tx, wm_prefixed, "inv", "blk", kernel_size=3,
                                                     stride=stride, group_channels=8)}

        with torch.no_grad():
            expected = m(x)
        for build in (define, define_prefixed, define_flat):
            y = run_network(build, {"x": x})["y"]
            torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------- real TensorRT

def _real_trt_or_skip():
    if importlib.util.find_spec("tensorrt") is None:
        pytest.skip("the tensorrt module is not installed")
    if not torch.cuda.is_available():
        pytest.skip("real TensorRT needs a CUDA GPU")
    lib = inv_layers.default_plugin_library_path()
    if not lib.is_file():
        pytest.skip(f"plugin library not built at {lib} (scripts/build_plugins.sh --plugin, or set "
                    f"{inv_layers.PLUGIN_LIBRARY_ENV})")
    import tensorrt

    return tensorrt, lib


@pytest.mark.tensorrt
@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
def test_real_tensorrt_plugin_matches_reference(half):
    real, lib = _real_trt_or_skip()
    inv_layers.load_plugin_library(real, lib)
    n, c, h, wd, k, s, p, d, g = CASES[1]
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(wd, k, s, p, d)
    dtype = torch.float16 if half else torch.float32
    x = rand(n, c, h, wd).to("cuda", dtype)
    w = rand(n, g, k * k, ho, wo).to("cuda", dtype)
    logger = real.Logger(real.Logger.WARNING)
    builder = real.Builder(logger)
    network = builder.create_network(1 << int(real.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    dt = real.DataType.HALF if half else real.DataType.FLOAT
    tx = network.add_input("x", dt, tuple(x.shape))
    tw = network.add_input("w", dt, tuple(w.shape))
    y = inv_layers.involution_plugin(network, tx, tw, k, s, p, d, g, "inv")
    network.mark_output(y)
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    assert plan is not None, "TensorRT failed to build the Involution engine"
    engine = real.Runtime(logger).deserialize_cuda_engine(plan)
    ctx = engine.create_execution_context()
    out = torch.empty((n, c, ho, wo), device="cuda", dtype=dtype)
    for name, t in (("x", x), ("w", w), ("inv", out)):
        ctx.set_tensor_address(name, t.data_ptr())
    stream = torch.cuda.current_stream()
    assert ctx.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    expected = naive_involution(x.double().cpu(), w.double().cpu(), k, s, p, d, g)
    tol = 1e-2 * expected.abs().max().item() if half else 1e-4
    assert (out.double().cpu() - expected).abs().max().item() <= tol

"""trtbuild.reference end to end: fp16 emulation, dynamic shapes and optimization profiles, plan
serialization (and what deserialize does with damaged bytes), intermediate outputs, and error
messages that name the layer or tensor."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from helpers.refnet import RefNet, run_plan

gen = torch.Generator().manual_seed(3)
EW = trt.ElementWiseOperation


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


# -- fp16 emulation ----------------------------------------------------------------------------
def test_fp16_network_overflows_to_inf_where_fp32_does_not():
    x = torch.tensor([[300.0, 2.0, -300.0]])
    results = {}
    for dtype, torch_dtype in ((trt.float32, torch.float32), (trt.float16, torch.float16)):
        n = RefNet()
        t = n.input("x", (1, 3), dtype)
        layer = n.network.add_elementwise(t, t, EW.PROD)
        assert layer.get_output(0).dtype == dtype
        results[dtype] = n.run({"x": x.to(torch_dtype)}, y=layer.get_output(0))["y"]
    assert results[trt.float32].tolist() == [[90000.0, 4.0, 90000.0]]
    assert results[trt.float16].dtype == torch.float16
    assert results[trt.float16].float().tolist() == [[math.inf, 4.0, math.inf]]


def test_fp16_scale_layer_overflows_with_fp16_weights(refnet):
    t = refnet.input("x", (1, 2, 1, 1), trt.float16)
    layer = refnet.network.add_scale(t, trt.ScaleMode.UNIFORM, scale=np.array([100.0], np.float16))
    y = refnet.run({"x": torch.tensor([1000.0, -1.0]).reshape(1, 2, 1, 1).half()}, y=layer.get_output(0))["y"]
    assert y.flatten().float().tolist() == [math.inf, -100.0]


def test_fp16_layer_rounds_its_output_once(refnet):
    """A layer computes in fp32 and rounds its output: the mean of 60000 and 60000 is 60000
    even though their fp16 sum (120000) would overflow."""
    t = refnet.input("x", (1, 2), trt.float16)
    layer = refnet.network.add_reduce(t, trt.ReduceOperation.AVG, 1 << 1, False)
    y = refnet.run({"x": torch.tensor([[60000.0, 60000.0]]).half()}, y=layer.get_output(0))["y"]
    assert y.float().tolist() == [60000.0]


def test_fp16_conv_matches_fp32_within_fp16_precision(refnet):
    x, w = randn(1, 3, 8, 8), randn(4, 3, 3, 3)
    layer = refnet.network.add_convolution_nd(refnet.input("x", (1, 3, 8, 8), trt.float16), 4, (3, 3),
                                           w.numpy().astype(np.float16))
    y = refnet.run({"x": x.half()}, y=layer.get_output(0))["y"]
    assert y.dtype == torch.float16
    torch.testing.assert_close(y.float(), F.conv2d(x.half().float(), w.half().float()), atol=1e-2, rtol=1e-2)


# -- dynamic shapes ----------------------------------------------------------------------------
def dynamic_net(min_shape=(1, 3, 4), opt=(2, 3, 4), max_shape=(4, 3, 4), add_profile=True) -> RefNet:
    n = RefNet()
    t = n.input("x", (-1, 3, 4))
    layer = n.network.add_softmax(t)
    layer.axes = 1 << 2
    layer.get_output(0).name = "y"
    n.network.mark_output(layer.get_output(0))
    if add_profile:
        profile = n.builder.create_optimization_profile()
        profile.set_shape("x", min_shape, opt, max_shape)
        n.config.add_optimization_profile(profile)
    return n


def test_dynamic_batch_runs_at_each_size_in_the_profile():
    n = dynamic_net()
    assert tuple(n.network.get_input(0).shape) == (-1, 3, 4)
    assert tuple(n.network.get_output(0).shape) == (-1, 3, 4)
    plan = n.build()
    assert plan is not None, n.logger.errors
    engine = trt.Runtime(n.logger).deserialize_cuda_engine(plan)
    assert tuple(engine.get_tensor_shape("x")) == (-1, 3, 4)
    assert [tuple(s) for s in engine.get_tensor_profile_shape("x", 0)] == [(1, 3, 4), (2, 3, 4), (4, 3, 4)]
    for batch in (1, 3, 4):
        x = randn(batch, 3, 4)
        y = run_plan(plan, {"x": x})["y"]
        torch.testing.assert_close(y, torch.softmax(x, dim=2))


def test_dynamic_batch_flatten_with_zero_and_minus_one():
    """Shuffle reshape (0, -1) on a (-1, 3, 4) input: the batch is copied, the rest inferred (12)."""
    n = RefNet()
    layer = n.network.add_shuffle(n.input("x", (-1, 3, 4)))
    layer.reshape_dims = (0, -1)
    assert tuple(layer.get_output(0).shape) == (-1, 12)
    profile = n.builder.create_optimization_profile()
    profile.set_shape("x", (1, 3, 4), (2, 3, 4), (5, 3, 4))
    n.config.add_optimization_profile(profile)
    x = randn(5, 3, 4)
    y = n.run({"x": x}, y=layer.get_output(0))["y"]
    assert torch.equal(y, x.reshape(5, 12))


def _context_for_dynamic_net():
    n = dynamic_net()
    engine = trt.Runtime(n.logger).deserialize_cuda_engine(n.build())
    return n, engine.create_execution_context()


@pytest.mark.parametrize("shape", [(5, 3, 4), (0, 3, 4), (2, 4, 4), (2, 3)])
def test_set_input_shape_outside_the_profile_is_rejected(shape):
    """Rejected means: TensorRT's False return (with an error logged), or the reference's NetworkError
    naming the input; never silently accepted."""
    n, context = _context_for_dynamic_net()
    try:
        accepted = context.set_input_shape("x", shape)
    except trt.NetworkError as e:
        assert "'x'" in str(e)
        return
    assert accepted is False
    assert n.logger.errors


def test_set_input_shape_outside_the_profile_returns_false():
    n, context = _context_for_dynamic_net()
    assert context.set_input_shape("x", (5, 3, 4)) is False
    assert any("x" in m for m in n.logger.errors)


def test_missing_profile_fails_the_build_naming_the_input():
    n = dynamic_net(add_profile=False)
    assert n.build() is None
    assert any("'x'" in m and "profile" in m for m in n.logger.errors), n.logger.errors


@pytest.mark.parametrize("min_shape,opt,max_shape", [((2, 3, 4), (1, 3, 4), (4, 3, 4)),  # min > opt
                                                     ((1, 3, 4), (2, 3, 4), (4, 3, 5)),  # static dim differs
                                                     ((1, 3), (2, 3), (4, 3))])  # wrong rank
def test_invalid_profiles_fail_the_build(min_shape, opt, max_shape):
    n = dynamic_net(min_shape, opt, max_shape)
    assert n.build() is None
    assert any("'x'" in m for m in n.logger.errors), n.logger.errors


def _two_profile_build(backend, empty: int):
    """(plan, logged errors) of x (-1, 4) -> relu -> y with two optimization profiles, profile `empty` left empty."""
    from trtbuild.engine.logging_bridge import make_logger
    from trtbuild.engine.rtx import set_targets

    logger = make_logger(backend)
    builder = backend.Builder(logger)
    network = builder.create_network(1 << int(backend.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    layer = network.add_activation(network.add_input("x", backend.float32, (-1, 4)), backend.ActivationType.RELU)
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    if hasattr(config, "set_compute_capability"):  # TensorRT-RTX builds ahead of time for a target
        set_targets(backend, config, ("8.6",))
    for k in range(2):
        profile = builder.create_optimization_profile()
        if k != empty:
            profile.set_shape("x", (1, 4), (2, 4), (4, 4))
        assert config.add_optimization_profile(profile) == k
    logger.clear()
    return builder.build_serialized_network(network, config), logger.error_text()


@pytest.mark.parametrize("empty", [0, 1])
@pytest.mark.parametrize("backend", ["reference", "rtx"])
def test_a_profile_without_the_dynamic_input_fails_the_build_as_on_tensorrt_rtx(backend, empty, request):
    """TensorRT-RTX 1.7: "Dynamic input tensor x is missing dimensions in profile 1." (no GPU needed)."""
    trt_module = trt if backend == "reference" else request.getfixturevalue("rtx")
    plan, errors = _two_profile_build(trt_module, empty)
    assert plan is None
    assert f"profile {empty}" in errors and "x" in errors, errors


# -- plan serialization ------------------------------------------------------------------------
def _small_plan() -> tuple[bytes, torch.Tensor, torch.Tensor]:
    n = RefNet()
    x, w, b = randn(1, 2, 5, 5), randn(3, 2, 3, 3), randn(3)
    conv = n.network.add_convolution_nd(n.input("x", (1, 2, 5, 5)), 3, (3, 3), w.numpy(), b.numpy())
    conv.padding_nd = (1, 1)
    relu = n.network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    relu.get_output(0).name = "y"
    n.network.mark_output(relu.get_output(0))
    plan = n.build()
    assert plan is not None, n.logger.errors
    return bytes(plan), x, torch.relu(F.conv2d(x, w, b, padding=1))


def test_plan_round_trips_and_runs():
    plan, x, expected = _small_plan()
    torch.testing.assert_close(run_plan(plan, {"x": x})["y"], expected, atol=1e-5, rtol=1e-5)
    engine = trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan)
    again = bytes(engine.serialize())
    torch.testing.assert_close(run_plan(again, {"x": x})["y"], expected, atol=1e-5, rtol=1e-5)


def _damaged(plan: bytes, how: str) -> bytes:
    if how == "truncated":
        return plan[: len(plan) // 2]
    if how == "random":
        return np.random.default_rng(0).integers(0, 256, size=len(plan), dtype=np.uint8).tobytes()
    if how == "empty":
        return b""
    flipped = bytearray(plan)
    flipped[len(plan) // 2] ^= 0x01
    return bytes(flipped)


@pytest.mark.parametrize("how", ["truncated", "random", "flipped byte", "empty"])
def test_deserialize_damaged_plan_returns_none_and_logs(how):
    plan, _, _ = _small_plan()
    logger = RefNet().logger
    assert trt.Runtime(logger).deserialize_cuda_engine(_damaged(plan, how)) is None
    assert logger.errors, "an ERROR must be logged"


# -- intermediates and outputs -----------------------------------------------------------------
def test_marking_an_intermediate_tensor_returns_it(refnet):
    x, w = randn(1, 2, 6, 6), randn(4, 2, 3, 3)
    conv = refnet.network.add_convolution_nd(refnet.input("x", (1, 2, 6, 6)), 4, (3, 3), w.numpy())
    relu = refnet.network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    pool = refnet.network.add_pooling_nd(relu.get_output(0), trt.PoolingType.MAX, (2, 2))
    pool.stride_nd = (2, 2)
    out = refnet.run({"x": x}, conv_out=conv.get_output(0), relu_out=relu.get_output(0), y=pool.get_output(0))
    c = F.conv2d(x, w)
    torch.testing.assert_close(out["conv_out"], c, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["relu_out"], torch.relu(c), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["y"], F.max_pool2d(torch.relu(c), 2, 2), atol=1e-5, rtol=1e-5)


def test_build_without_outputs_fails(refnet):
    refnet.network.add_identity(refnet.input("x", (2, 2)))
    assert refnet.build() is None
    assert any("output" in m for m in refnet.logger.errors)


def test_only_strongly_typed_networks():
    with pytest.raises(trt.NetworkError, match="STRONGLY_TYPED"):
        trt.Builder(trt.Logger()).create_network(0)


# -- error messages name the layer / tensor ----------------------------------------------------
def test_add_time_error_names_the_input_tensors(refnet):
    a, b = refnet.input("features_a", (1, 3, 4)), refnet.input("features_b", (1, 5, 4))
    with pytest.raises(trt.NetworkError) as err:
        refnet.network.add_elementwise(a, b, EW.SUM)
    assert "features_a" in str(err.value) and "features_b" in str(err.value) and "ElementWise" in str(err.value)


def test_build_error_names_the_layer(refnet):
    conv = refnet.network.add_convolution_nd(refnet.input("x", (1, 3, 8, 8)), 4, (3, 3), np.ones(10, np.float32))
    conv.name = "stage2/conv1"
    refnet.network.mark_output(conv.get_output(0))
    assert refnet.build() is None
    assert any("stage2/conv1" in m for m in refnet.logger.errors), refnet.logger.errors


def test_weights_of_the_wrong_type_name_the_layer_and_types(refnet):
    conv = refnet.network.add_convolution_nd(refnet.input("x", (1, 2, 4, 4), trt.float16), 1, (1, 1),
                                             np.ones(2, np.float32))
    conv.name = "fp16_conv"
    refnet.network.mark_output(conv.get_output(0))
    assert refnet.build() is None
    assert any("fp16_conv" in m and "FLOAT" in m and "HALF" in m for m in refnet.logger.errors), refnet.logger.errors


# -- true fp32 ------------------------------------------------------------------------------------
@pytest.fixture
def tf32_allowed():
    """TF32 allowed for cuDNN and matmuls, as PyTorch allows it for cuDNN by default on CUDA; restored after."""
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    yield
    torch.set_float32_matmul_precision(saved[0])
    torch.backends.cudnn.allow_tf32 = saved[1]


def _flags_seen_by_layers(monkeypatch, fail: bool = False) -> list:
    """Wrap the reference's layer execution so that it records the TF32 settings each layer runs under
    (and raises after recording, with `fail`)."""
    import trtbuild.reference.graph as graph

    seen, real = [], graph.run_layer

    def recording(*args, **kwargs):
        seen.append((torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32,
                     torch.backends.cuda.matmul.allow_tf32))
        if fail:
            raise RuntimeError("layer failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(graph, "run_layer", recording)
    return seen


def _conv_matmul_net():
    n = RefNet()
    x = n.input("x", (1, 2, 4, 4))
    w = np.arange(2 * 2 * 3 * 3, dtype=np.float32).reshape(2, 2, 3, 3) / 10
    conv = n.network.add_convolution_nd(x, 2, (3, 3), w, None)
    m = n.network.add_matrix_multiply(conv.get_output(0), trt.MatrixOperation.NONE, conv.get_output(0),
                                      trt.MatrixOperation.TRANSPOSE)
    return n, conv.get_output(0), m.get_output(0)


def test_layers_execute_without_tf32_and_the_settings_come_back(tf32_allowed, monkeypatch):
    """TensorRT computes float32 layers in true fp32 unless BuilderFlag.TF32 is set; the reference
    turns PyTorch's TF32 (cuDNN's default on CUDA) off while it executes, whatever the caller allowed."""
    seen = _flags_seen_by_layers(monkeypatch)
    n, conv, m = _conv_matmul_net()
    x = torch.linspace(-1, 1, 32).reshape(1, 2, 4, 4)
    got = n.run({"x": x}, c=conv, m=m)
    w = torch.arange(36, dtype=torch.float32).reshape(2, 2, 3, 3) / 10
    want = F.conv2d(x, w)
    torch.testing.assert_close(got["c"], want)
    torch.testing.assert_close(got["m"], want @ want.transpose(-1, -2))
    assert len(seen) >= 2 and set(seen) == {("highest", False, False)}, seen
    assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32


def test_tf32_settings_come_back_when_a_layer_fails(tf32_allowed, monkeypatch):
    seen = _flags_seen_by_layers(monkeypatch, fail=True)
    n, conv, _ = _conv_matmul_net()
    with pytest.raises(RuntimeError, match="layer failed"):
        n.run({"x": torch.zeros(1, 2, 4, 4)}, c=conv)
    assert seen == [("highest", False, False)]
    assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32

"""Refit and weight-stripped engines on the reference backend, with TensorRT's Refitter semantics.

Expected values come from PyTorch (a conv + batch-norm scale + linear of the same weights) and from numpy in
float64; the refused calls' return values are the ones TensorRT's Refitter documentation gives (False, null
weights, count -1), each with one logged sentence. The TensorRT-RTX twin checks what its builder decides without a
GPU: set_weights_name / mark_weights_refittable return values and errors (builds of refittable engines need a GPU
there: without one its builder fails in Myelin's JIT, so nothing about their plans is asserted here).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
C, H, OUT = 4, 6, 5
#: the weights' names in the order of the layers and of their weights (a scale's shift comes before its scale)
ORDER = ["conv.weight", "conv.bias", "bn.shift", "bn.scale", "fc.weight"]


class _Logger(trt.ILogger):
    def __init__(self):
        super().__init__()
        self.errors, self.warnings = [], []

    def log(self, severity, msg):
        if severity == trt.ILogger.ERROR:
            self.errors.append(msg)
        elif severity == trt.ILogger.WARNING:
            self.warnings.append(msg)


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"conv.weight": rng.standard_normal((C, 3, 3, 3)).astype(np.float32),
            "conv.bias": rng.standard_normal(C).astype(np.float32),
            "bn.scale": rng.uniform(0.5, 1.5, C).astype(np.float32),
            "bn.shift": rng.standard_normal(C).astype(np.float32),
            "fc.weight": rng.standard_normal((OUT, C * H * H)).astype(np.float32)}


def _define(mod, builder, weights: dict[str, np.ndarray], name: bool = True):
    """conv (padding 1) -> per-channel scale (folded batch norm) -> flatten -> linear; weights named by key."""
    network = builder.create_network(STRONGLY_TYPED)
    x = network.add_input("x", mod.float32, (1, 3, H, H))
    ws = {k: mod.Weights(v) for k, v in weights.items()}
    conv = network.add_convolution_nd(x, C, (3, 3), ws["conv.weight"], ws["conv.bias"])
    conv.padding_nd, conv.name = (1, 1), "conv"
    bn = network.add_scale(conv.get_output(0), mod.ScaleMode.CHANNEL, ws["bn.shift"], ws["bn.scale"], mod.Weights())
    bn.name = "bn"
    flat = network.add_shuffle(bn.get_output(0))
    flat.reshape_dims, flat.name = (1, C * H * H), "flat"
    fc_w = network.add_constant((OUT, C * H * H), ws["fc.weight"])
    fc_w.name = "fc_w"
    fc = network.add_matrix_multiply(flat.get_output(0), mod.MatrixOperation.NONE, fc_w.get_output(0),
                                     mod.MatrixOperation.TRANSPOSE)
    fc.name = "fc"
    fc.get_output(0).name = "y"
    network.mark_output(fc.get_output(0))
    names = {k: network.set_weights_name(w, k) for k, w in ws.items()} if name else {}
    return network, ws, names


def _build(weights, flags=(), logger=None, name=True, marks=()):
    logger = logger or _Logger()
    builder = trt.Builder(logger)
    network, _, names = _define(trt, builder, weights, name)
    assert all(names.values())
    for m in marks:
        assert network.mark_weights_refittable(m)
    config = builder.create_builder_config()
    for f in flags:
        config.set_flag(f)
    plan = builder.build_serialized_network(network, config)
    assert plan is not None, logger.errors
    return trt.Runtime(logger).deserialize_cuda_engine(plan), bytes(plan), logger


def _run(engine, x: torch.Tensor):
    """(execute_async_v3's result, y)."""
    context = engine.create_execution_context()
    y = torch.full((1, OUT), float("nan"))
    context.set_tensor_address("x", x.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    return context.execute_async_v3(0), y


def _torch(weights, x):
    w = {k: torch.from_numpy(v) for k, v in weights.items()}
    h = torch.nn.functional.conv2d(x, w["conv.weight"], w["conv.bias"], padding=1)
    h = h * w["bn.scale"].view(1, C, 1, 1) + w["bn.shift"].view(1, C, 1, 1)
    return h.reshape(1, -1) @ w["fc.weight"].T


def _float64(weights, x):
    """The same network by hand in float64 numpy (im2col convolution)."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    xp = np.pad(x.numpy().astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h = np.zeros((1, C, H, H))
    for i in range(H):
        for j in range(H):
            patch = xp[0, :, i:i + 3, j:j + 3]
            h[0, :, i, j] = np.tensordot(w["conv.weight"], patch, axes=3) + w["conv.bias"]
    h = h * w["bn.scale"].reshape(1, C, 1, 1) + w["bn.shift"].reshape(1, C, 1, 1)
    return h.reshape(1, -1) @ w["fc.weight"].T


@pytest.fixture(scope="module")
def x():
    return torch.from_numpy(np.random.default_rng(7).standard_normal((1, 3, H, H)).astype(np.float32))


@pytest.mark.parametrize("flag", [trt.BuilderFlag.REFIT_IDENTICAL, trt.BuilderFlag.REFIT])
def test_refit_gives_the_outputs_of_a_network_built_with_the_new_weights(flag, x):
    old, new = _weights(0), _weights(1)
    engine, _, logger = _build(old, [flag])
    assert engine.refittable
    context = engine.create_execution_context()  # made before the refit: stays valid and sees the new weights
    refitter = trt.Refitter(engine, logger)
    assert refitter.get_all_weights() == ORDER
    assert refitter.get_all() == (["conv", "conv", "bn", "bn", "fc_w"],
                                  [trt.WeightsRole.KERNEL, trt.WeightsRole.BIAS, trt.WeightsRole.SHIFT,
                                   trt.WeightsRole.SCALE, trt.WeightsRole.CONSTANT])
    assert refitter.get_missing_weights() == []
    for name, value in new.items():
        assert refitter.set_named_weights(name, trt.Weights(value))
    assert refitter.refit_cuda_engine()
    rebuilt, _, _ = _build(new)
    ok, y = _run(engine, x)
    assert ok
    assert torch.equal(y, _run(rebuilt, x)[1])
    torch.testing.assert_close(y, _torch(new, x), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y.numpy(), _float64(new, x), rtol=1e-4, atol=1e-4)
    assert not np.allclose(y.numpy(), _float64(old, x), atol=1e-2)  # the refit changed something
    y2 = torch.empty(1, OUT)
    context.set_tensor_address("x", x.data_ptr())
    context.set_tensor_address("y", y2.data_ptr())
    assert context.execute_async_v3(0) and torch.equal(y2, y)
    # REFIT_IDENTICAL: TensorRT may assume the build weights; the reference warns that these differ
    assert any("REFIT_IDENTICAL" in w for w in logger.warnings) == (flag == trt.BuilderFlag.REFIT_IDENTICAL)


def test_refitted_engine_serializes_with_its_new_weights_and_names(x):
    engine, _, logger = _build(_weights(0), [trt.BuilderFlag.REFIT])
    refitter = trt.Refitter(engine, logger)
    new = _weights(2)
    assert refitter.set_named_weights("fc.weight", new["fc.weight"])  # a numpy array, as TensorRT's bindings take
    assert refitter.refit_cuda_engine()
    again = trt.Runtime(logger).deserialize_cuda_engine(engine.serialize())
    assert again.refittable
    assert trt.Refitter(again, logger).get_all_weights() == ORDER
    expect = _float64({**_weights(0), "fc.weight": new["fc.weight"]}, x)
    np.testing.assert_allclose(_run(again, x)[1].numpy(), expect, rtol=1e-4, atol=1e-4)


def test_legacy_layer_and_role_calls(x):
    old, new = _weights(0), _weights(3)
    engine, _, logger = _build(old, [trt.BuilderFlag.REFIT], name=False)
    refitter = trt.Refitter(engine, logger)
    assert refitter.get_all_weights() == ["", "", "", "", ""]  # unnamed weights
    assert refitter.set_weights("conv", trt.WeightsRole.KERNEL, trt.Weights(new["conv.weight"]))
    assert not refitter.set_weights("conv", trt.WeightsRole.SHIFT, trt.Weights(new["bn.shift"]))
    assert logger.errors[-1] == ("IRefitter::setWeights: layer 'conv' has no refittable SHIFT weights (it has "
                                 "['KERNEL', 'BIAS'])")
    assert not refitter.set_weights("nope", trt.WeightsRole.KERNEL, trt.Weights(new["conv.weight"]))
    assert "no layer named 'nope'" in logger.errors[-1]
    assert refitter.refit_cuda_engine()
    np.testing.assert_allclose(_run(engine, x)[1].numpy(), _float64({**old, "conv.weight": new["conv.weight"]}, x),
                               rtol=1e-4, atol=1e-4)


def test_refused_weights_return_false_and_log_one_sentence():
    engine, _, logger = _build(_weights(0), [trt.BuilderFlag.REFIT])
    refitter = trt.Refitter(engine, logger)
    good = _weights(1)
    assert not refitter.set_named_weights("conv.weight", trt.Weights(good["conv.weight"][:2]))
    assert logger.errors[-1] == ("IRefitter::setNamedWeights: weights 'conv.weight': the new weights have 54 values "
                                 "but the engine's have 108 (a refit cannot change a weight's count)")
    assert not refitter.set_named_weights("conv.bias", trt.Weights(good["conv.bias"].astype(np.float16)))
    assert logger.errors[-1] == ("IRefitter::setNamedWeights: weights 'conv.bias': the new weights are HALF but the "
                                 "engine's are FLOAT (a refit cannot change a weight's type)")
    assert not refitter.set_named_weights("conv.wieght", trt.Weights(good["conv.weight"]))
    assert logger.errors[-1] == "IRefitter::setNamedWeights: no refittable weights are named 'conv.wieght'"
    assert not refitter.set_named_weights("", trt.Weights(good["conv.weight"]))
    # getters of weights never set: null weights / HOST, each with an error; prototypes of unknown names: count -1
    n = len(logger.errors)
    assert refitter.get_named_weights("conv.weight").size == 0 and len(logger.errors) == n + 1
    assert refitter.get_weights_location("conv.weight") == trt.TensorLocation.HOST and len(logger.errors) == n + 2
    assert not refitter.unset_named_weights("conv.weight")
    proto = refitter.get_weights_prototype("conv.weight")
    assert (proto.size, proto.dtype) == (108, trt.DataType.FLOAT)
    assert refitter.get_weights_prototype("nope").size == -1
    assert refitter.set_named_weights("conv.bias", trt.Weights(good["conv.bias"]), trt.TensorLocation.DEVICE)
    assert refitter.get_weights_location("conv.bias") == trt.TensorLocation.DEVICE
    np.testing.assert_array_equal(refitter.get_named_weights("conv.bias").numpy(), good["conv.bias"])
    assert refitter.unset_named_weights("conv.bias") and not refitter.unset_named_weights("conv.bias")


def test_an_engine_built_without_refit_has_no_refitter():
    engine, _, logger = _build(_weights(0))
    assert not engine.refittable
    with pytest.raises(RuntimeError, match="the engine is not refittable"):
        trt.Refitter(engine, logger)
    assert "not refittable" in logger.errors[-1]


def test_weight_stripped_engine_is_smaller_refuses_to_run_until_refit(x):
    weights = _weights(0)
    _, full, _ = _build(weights, [trt.BuilderFlag.REFIT_IDENTICAL])
    engine, stripped, logger = _build(weights, [trt.BuilderFlag.STRIP_PLAN])
    # the stripped plan lacks exactly the weights' bytes (plus a little header) of every refittable weight
    weight_bytes = sum(v.nbytes for v in weights.values())
    assert len(full) - len(stripped) >= weight_bytes - 64 and len(stripped) < len(full) - weight_bytes + 1024
    assert engine.refittable  # STRIP_PLAN alone means REFIT_IDENTICAL
    ok, y = _run(engine, x)
    assert not ok and torch.isnan(y).all()
    assert logger.errors[-1] == ("IExecutionContext::enqueueV3: the engine is weight-stripped and 5 of its stripped "
                                 "weights have not been refit: fill them with a Refitter (refit_cuda_engine) before "
                                 "running it")
    refitter = trt.Refitter(engine, logger)
    assert refitter.get_missing_weights() == ORDER
    assert refitter.get_missing()[0] == ["conv", "conv", "bn", "bn", "fc_w"]
    for name in ORDER[:-1]:
        assert refitter.set_named_weights(name, trt.Weights(weights[name]))
    assert refitter.get_missing_weights() == ["fc.weight"]
    assert not refitter.refit_cuda_engine()
    assert logger.errors[-1] == ("IRefitter::refitCudaEngine: the engine cannot be refit while weights are missing: "
                                 "'fc.weight'")
    assert not _run(engine, x)[0]
    assert refitter.set_named_weights("fc.weight", trt.Weights(weights["fc.weight"]))
    assert refitter.get_missing_weights() == [] and refitter.refit_cuda_engine()
    ok, y = _run(engine, x)
    assert ok
    np.testing.assert_allclose(y.numpy(), _float64(weights, x), rtol=1e-4, atol=1e-4)
    assert not any("REFIT_IDENTICAL" in w for w in logger.warnings)  # filling stripped weights is no change
    # serialization: stripped again by default; whole once EXCLUDE_WEIGHTS is cleared
    config = engine.create_serialization_config()
    assert config.get_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    assert config.get_flag(trt.SerializationFlag.INCLUDE_REFIT)
    assert len(bytes(engine.serialize())) == len(stripped)
    config.clear_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    whole = trt.Runtime(logger).deserialize_cuda_engine(engine.serialize_with_config(config))
    ok, y2 = _run(whole, x)
    assert ok and torch.equal(y2, y)


def test_serialization_flags_of_a_refittable_engine(x):
    engine, full, logger = _build(_weights(0), [trt.BuilderFlag.REFIT])
    config = engine.create_serialization_config()
    assert not config.get_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    config.set_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    stripped = trt.Runtime(logger).deserialize_cuda_engine(engine.serialize_with_config(config))
    assert not _run(stripped, x)[0]
    config.clear_flag(trt.SerializationFlag.INCLUDE_REFIT)
    assert engine.serialize_with_config(config) is None
    assert logger.errors[-1].startswith("ICudaEngine::serializeWithConfig: SerializationFlag.EXCLUDE_WEIGHTS "
                                        "without INCLUDE_REFIT")
    config.clear_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    fixed = trt.Runtime(logger).deserialize_cuda_engine(engine.serialize_with_config(config))
    assert not fixed.refittable and _run(fixed, x)[0]
    # a stripped engine not yet refit has nothing to write for its weights
    assert stripped.serialize_with_config(config) is None
    assert "never refit" in logger.errors[-1]


def test_refit_individual_strips_and_refits_only_marked_weights(x):
    weights, new = _weights(0), _weights(4)
    engine, _, logger = _build(weights, [trt.BuilderFlag.REFIT_INDIVIDUAL, trt.BuilderFlag.STRIP_PLAN],
                               marks=["fc.weight"])
    refitter = trt.Refitter(engine, logger)
    assert refitter.get_all_weights() == ["fc.weight"] and refitter.get_missing_weights() == ["fc.weight"]
    assert not refitter.set_named_weights("conv.weight", trt.Weights(new["conv.weight"]))
    assert refitter.set_named_weights("fc.weight", trt.Weights(new["fc.weight"])) and refitter.refit_cuda_engine()
    np.testing.assert_allclose(_run(engine, x)[1].numpy(), _float64({**weights, "fc.weight": new["fc.weight"]}, x),
                               rtol=1e-4, atol=1e-4)


def _set_weights_name_calls(mod, logger_errors):
    """The return values of set_weights_name / mark_weights_refittable calls, on either backend."""
    builder = mod.Builder(_LOGGERS[mod])
    network, ws, _ = _define(mod, builder, _weights(0), name=False)
    out = {"first": network.set_weights_name(ws["conv.weight"], "a"),
           "same name, other weights": network.set_weights_name(ws["conv.bias"], "a"),
           "unused weights": network.set_weights_name(mod.Weights(np.ones(3, np.float32)), "zz"),
           "rename": network.set_weights_name(ws["conv.weight"], "b"),
           "old name free again": network.set_weights_name(ws["conv.bias"], "a"),
           "mark": network.mark_weights_refittable("b"),
           "marked": network.are_weights_marked_refittable("b"),
           "mark unknown": network.mark_weights_refittable("nope"),
           "marked unknown": network.are_weights_marked_refittable("nope"),
           "unmark": network.unmark_weights_refittable("b"),
           "marked after unmark": network.are_weights_marked_refittable("b"),
           "clear": network.set_weights_name(ws["conv.weight"], None)}
    return out, network


_LOGGERS: dict = {}


def test_set_weights_name_agrees_with_tensorrt_rtx():
    rtx = pytest.importorskip("tensorrt_rtx")
    from trtbuild.engine.logging_bridge import make_logger

    _LOGGERS[rtx], _LOGGERS[trt] = make_logger(rtx), _Logger()
    theirs, _ = _set_weights_name_calls(rtx, None)
    ours, network = _set_weights_name_calls(trt, None)
    assert ours == theirs
    assert theirs == {"first": True, "same name, other weights": False, "unused weights": False, "rename": True,
                      "old name free again": True, "mark": True, "marked": True, "mark unknown": False,
                      "marked unknown": False, "unmark": True, "marked after unmark": False, "clear": True}
    errors = _LOGGERS[trt].errors
    assert any("the same name a has been used for different sets of weights" in e for e in errors)
    assert any("the given weights is not used in the network" in e for e in errors)
    assert any("there are no weights named nope" in e for e in errors)
    assert not network.are_weights_marked_refittable("b")


@pytest.mark.parametrize("order", [("REFIT", "REFIT_INDIVIDUAL"), ("REFIT_INDIVIDUAL", "REFIT"),
                                   ("REFIT_IDENTICAL", "REFIT"), ("REFIT", "REFIT_IDENTICAL", "REFIT_INDIVIDUAL")])
def test_one_refit_mode_at_a_time_as_tensorrt_rtx(order, rtx):
    """TensorRT-RTX 1.7 (no GPU needed): setting a refit flag clears the other refit modes; the last set wins."""
    from trtbuild.engine.logging_bridge import make_logger

    modes = ("REFIT", "REFIT_IDENTICAL", "REFIT_INDIVIDUAL", "STRIP_PLAN")

    def flags(backend):
        config = backend.Builder(make_logger(backend)).create_builder_config()
        config.set_flag(backend.BuilderFlag.STRIP_PLAN)
        for name in order:
            config.set_flag(getattr(backend.BuilderFlag, name))
        return [name for name in modes if config.get_flag(getattr(backend.BuilderFlag, name))]

    assert flags(trt) == flags(rtx) == [m for m in modes if m in (order[-1], "STRIP_PLAN")]


def test_weights_shared_by_two_layers_have_one_name_and_refit_both():
    """TensorRT names memory, not a layer: both constants holding the same Weights take the name and the refit."""
    logger = _Logger()
    builder = trt.Builder(logger)
    network = builder.create_network(STRONGLY_TYPED)
    x = network.add_input("x", trt.float32, (2,))
    w = trt.Weights(np.array([1.0, 2.0], np.float32))
    a, b = network.add_constant((2,), w), network.add_constant((2,), w)
    a.name, b.name = "a", "b"
    assert network.set_weights_name(w, "shared")
    s = network.add_elementwise(x, a.get_output(0), trt.ElementWiseOperation.SUM)
    p = network.add_elementwise(s.get_output(0), b.get_output(0), trt.ElementWiseOperation.PROD)
    p.get_output(0).name = "y"
    network.mark_output(p.get_output(0))
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.REFIT)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    refitter = trt.Refitter(engine, logger)
    assert refitter.get_all_weights() == ["shared"] and refitter.get_all()[0] == ["a", "b"]
    assert refitter.set_named_weights("shared", np.array([3.0, 4.0], np.float32)) and refitter.refit_cuda_engine()
    context = engine.create_execution_context()
    xs, y = torch.tensor([1.0, 1.0]), torch.empty(2)
    context.set_tensor_address("x", xs.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    assert context.execute_async_v3(0)
    assert y.tolist() == [(1 + 3) * 3, (1 + 4) * 4]


def test_a_plan_whose_refit_fields_name_no_weights_is_refused():
    import struct

    from trtbuild.reference.plan import MAGIC, pack_plan, plan_header
    from trtbuild.reference.safetensors_blob import safetensors_views

    _, plan, logger = _build(_weights(0), [trt.BuilderFlag.REFIT])
    header = plan_header(plan)
    header["layers"][0]["refittable"] = ["kernel", "nope"]
    (hlen,) = struct.unpack_from("<Q", plan, len(MAGIC))
    blob_at = len(MAGIC) + 8 + hlen
    (blen,) = struct.unpack_from("<Q", plan, blob_at)
    arrays = safetensors_views(memoryview(plan)[blob_at + 8:blob_at + 8 + blen])
    assert trt.Runtime(logger).deserialize_cuda_engine(bytes(pack_plan(header, arrays))) is None
    assert logger.errors[-1] == ("deserialize_cuda_engine: reference plan header: layers[0] ('conv') 'refittable' "
                                 "['kernel', 'nope'] does not list refittable weights of the layer")

"""Version and hardware compatibility on the reference backend, and what TensorRT-RTX 1.7's builder does with the
same calls (no GPU needed): BuilderFlag.VERSION_COMPATIBLE / EXCLUDE_LEAN_RUNTIME, hardware_compatibility_level,
Runtime.engine_host_code_allowed.

The reference's load rules are TensorRT's documented ones: a plan of another (older) plan format loads only if
it was built version-compatible, never one of a newer format; a plan that embeds the lean runtime loads only
with engine_host_code_allowed. Older-format plans are made by rewriting a real plan's format number."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as ref
from trtbuild.engine.logging_bridge import make_logger
from trtbuild.engine.rtx import set_targets
from trtbuild.reference.plan import FORMAT_VERSION, deserialize_plan, pack_plan, plan_header

X = np.array([[-2.0, -0.5, 0.0, 1.5]], np.float32)


def _network(trt):
    """(builder, network, config, logger): x -> relu -> y, strongly typed; the config has no flag set yet."""
    logger = make_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", trt.float32, (1, 4))
    layer = network.add_activation(x, trt.ActivationType.RELU)
    layer.name = "relu"
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    if hasattr(config, "set_compute_capability"):  # TensorRT-RTX builds ahead of time for a target
        set_targets(trt, config, ("8.6",))
    return builder, network, config, logger


def _plan(*flags, level=None):
    builder, network, config, logger = _network(ref)
    for flag in flags:
        config.set_flag(flag)
    if level is not None:
        config.hardware_compatibility_level = level
    plan = builder.build_serialized_network(network, config)
    assert plan is not None, logger.error_text()
    return plan


def _with_format(plan, fmt: int) -> bytes:
    """The plan rewritten as if a trtbuild writing plan format `fmt` had made it (checksum made anew)."""
    header, arrays = deserialize_plan(plan)
    return bytes(pack_plan({**header, "format": fmt}, dict(arrays)))


def _load(plan, host_code: bool = False):
    """(engine or None, the error the runtime logged)."""
    logger = make_logger(ref)
    runtime = ref.Runtime(logger)
    runtime.engine_host_code_allowed = host_code
    return runtime.deserialize_cuda_engine(plan), logger.error_text()


def _run(engine) -> np.ndarray:
    context = engine.create_execution_context()
    x, y = torch.from_numpy(X.copy()), torch.empty(1, 4)
    context.set_tensor_address("x", x.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    assert context.execute_async_v3(0)
    return y.numpy()


VC, ELR = ref.BuilderFlag.VERSION_COMPATIBLE, ref.BuilderFlag.EXCLUDE_LEAN_RUNTIME


def test_the_plan_records_the_flags_and_the_level():
    assert {k: v for k, v in plan_header(_plan()).items() if k in ("version_compatible", "lean_runtime",
                                                                   "hardware_compatibility_level")} == {}
    header = plan_header(_plan(VC, ELR, level=ref.HardwareCompatibilityLevel.SAME_COMPUTE_CAPABILITY))
    assert (header["version_compatible"], header["lean_runtime"], header["hardware_compatibility_level"]) == \
        (True, False, 2)
    assert plan_header(_plan(VC))["lean_runtime"] is True


def test_an_older_format_loads_only_if_version_compatible():
    old = _with_format(_plan(), FORMAT_VERSION - 1)
    engine, error = _load(old)
    assert engine is None
    assert (f"reference plan format {FORMAT_VERSION - 1} was written by an older trtbuild and was not built "
            "version-compatible (BuilderFlag.VERSION_COMPATIBLE)") in error
    engine, error = _load(_with_format(_plan(VC, ELR), FORMAT_VERSION - 1))
    assert engine is not None, error
    np.testing.assert_array_equal(_run(engine), np.maximum(X, 0))


def test_a_newer_format_never_loads():
    engine, error = _load(_with_format(_plan(VC, ELR), FORMAT_VERSION + 1), host_code=True)
    assert engine is None and "written by a newer trtbuild" in error and "forward only" in error


def test_an_embedded_lean_runtime_needs_host_code_allowed():
    for plan in (_plan(VC), _with_format(_plan(VC), FORMAT_VERSION - 1)):
        engine, error = _load(plan)
        assert engine is None
        assert "lean runtime embedded, which is host code" in error and "engine_host_code_allowed = True" in error
        engine, error = _load(plan, host_code=True)
        assert engine is not None, error
        np.testing.assert_array_equal(_run(engine), np.maximum(X, 0))
    assert ref.Runtime(make_logger(ref)).engine_host_code_allowed is False  # TensorRT's default


def test_serializing_without_the_lean_runtime_lifts_the_host_code_rule():
    engine, _ = _load(_plan(VC), host_code=True)
    config = engine.create_serialization_config()
    assert not config.get_flag(ref.SerializationFlag.EXCLUDE_LEAN_RUNTIME)
    config.set_flag(ref.SerializationFlag.EXCLUDE_LEAN_RUNTIME)
    lean = engine.serialize_with_config(config)
    assert plan_header(lean)["lean_runtime"] is False
    assert _load(lean)[0] is not None
    assert _load(_plan(VC, ELR))[0].create_serialization_config().get_flag(ref.SerializationFlag.EXCLUDE_LEAN_RUNTIME)


def test_hardware_level_round_trips_and_changes_nothing_else():
    plain, ampere = _plan(), _plan(level=ref.HardwareCompatibilityLevel.AMPERE_PLUS)
    engine, _ = _load(ampere)
    assert engine.hardware_compatibility_level == ref.HardwareCompatibilityLevel.AMPERE_PLUS
    assert _load(plain)[0].hardware_compatibility_level == ref.HardwareCompatibilityLevel.NONE
    np.testing.assert_array_equal(_run(engine), np.maximum(X, 0))
    strip = {"hardware_compatibility_level"}
    assert {k: v for k, v in plan_header(ampere).items() if k not in strip} == plan_header(plain)
    with pytest.raises(ValueError):
        _network(ref)[2].hardware_compatibility_level = 7


@pytest.mark.parametrize("trt_name", ["reference", "rtx"])
def test_exclude_lean_runtime_alone_is_refused_by_both(trt_name, rtx):
    trt = ref if trt_name == "reference" else rtx
    _, _, config, logger = _network(trt)
    logger.clear()
    config.set_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)
    assert not config.get_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)
    assert "kEXCLUDE_LEAN_RUNTIME can only be set if kVERSION_COMPATIBLE is set" in logger.error_text()
    config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
    config.set_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)
    assert config.get_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)


def test_tensorrt_rtx_builder_without_a_gpu(rtx):
    """What TensorRT-RTX 1.7 does with the same calls (docs/rtx_differences.md): VERSION_COMPATIBLE alone fails
    (no lean runtime ships with it); with EXCLUDE_LEAN_RUNTIME it builds a plan of the plain plan's size; the
    hardware compatibility level is ignored (it reads back NONE)."""
    def build(*flags, level=None):
        builder, network, config, logger = _network(rtx)
        for flag in flags:
            config.set_flag(getattr(rtx.BuilderFlag, flag))
        if level is not None:
            config.hardware_compatibility_level = level
        logger.clear()
        plan = builder.build_serialized_network(network, config)
        return plan, logger.error_text(), config

    plain, error, _ = build()
    assert plain is not None, error
    plan, error, _ = build("VERSION_COMPATIBLE")
    assert plan is None and "libnvinfer_lean.so.1" in error
    plan, error, _ = build("VERSION_COMPATIBLE", "EXCLUDE_LEAN_RUNTIME")
    assert plan is not None, error
    assert plan.nbytes == plain.nbytes
    plan, error, config = build(level=rtx.HardwareCompatibilityLevel.AMPERE_PLUS)
    assert plan is not None and config.hardware_compatibility_level == rtx.HardwareCompatibilityLevel.NONE
    assert bytes(plan) == bytes(plain)

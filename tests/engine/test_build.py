"""trtbuild.engine build_plan on the reference backend: precision, fp32 I/O casts, dynamic batch,
workspace, timing cache, progress monitor, logging bridge and build errors."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import BuildError, Engine, TimingCacheError, build_plan, make_logger, make_progress_monitor
from trtbuild.layers.common import BuilderError
from trtbuild.reference.plan import deserialize_plan

from helpers.tiny_net import TINY_SHAPE, TinyNet, tiny_define


@pytest.fixture(scope="module")
def net():
    return TinyNet(seed=1)


def _io(plan):
    return {t["name"]: t["dtype"] for t in plan.info["inputs"] + plan.info["outputs"]}


def test_fp32_plan_runs_and_matches_torch(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False)
    # a buffer of its own, like TensorRT's IHostMemory (not a bytes object), holding a reference plan
    assert isinstance(plan, trt.IHostMemory) and not isinstance(plan, bytes) and plan[:8] == b"TRTBREF\x01"
    assert _io(plan) == {"input": "FLOAT", "y": "FLOAT"}
    x = torch.rand(TINY_SHAPE) * 2 - 1
    out = Engine(plan, trt)(x)["y"]
    torch.testing.assert_close(out, net(x), rtol=1e-5, atol=1e-6)


def test_fp16_keeps_fp32_io_by_default_with_casts(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", progress=False)
    assert _io(plan) == {"input": "FLOAT", "y": "FLOAT"}
    header, _ = deserialize_plan(plan)
    casts = [layer["name"] for layer in header["layers"] if layer["type"] == "CAST"]
    assert casts == ["input/to_fp16", "y/to_fp32"]
    conv = next(layer for layer in header["layers"] if layer["name"] == "conv1")
    assert conv["outputs"][0]["dtype"] == int(trt.DataType.HALF)  # the model really computes in fp16
    x = torch.rand(TINY_SHAPE) * 2 - 1
    out = Engine(plan, trt)(x)["y"]
    assert out.dtype == torch.float32
    expected = net(x)
    err = (out - expected).abs().max().item()
    assert 0 < err < 2e-2 * expected.abs().max().item()  # fp16 rounding is visible but small


def test_native_io_takes_and_returns_half(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", fp32_io=False, progress=False)
    assert _io(plan) == {"input": "HALF", "y": "HALF"}
    engine = Engine(plan, trt)
    out = engine(torch.rand(TINY_SHAPE).half())["y"]
    assert out.dtype == torch.float16


def test_bf16_network_without_weights():
    def define(network, x):
        r = network.add_activation(x, trt.ActivationType.RELU)
        r.name = "relu"
        return {"y": r.get_output(0)}

    plan = build_plan(trt, define, input_shape=(2, 5), precision="bf16", progress=False)
    header, _ = deserialize_plan(plan)
    assert [layer["outputs"][0]["dtype"] for layer in header["layers"]] == [
        int(trt.DataType.BF16), int(trt.DataType.BF16), int(trt.DataType.FLOAT)]
    x = torch.tensor([[1.00390625, -2.0, 3.0, 0.5, -0.1]] * 2)
    out = Engine(plan, trt)(x)["y"]
    torch.testing.assert_close(out, torch.relu(x).bfloat16().float())  # 1.0039 rounds to 1.0 in bf16
    assert out[0, 0].item() == 1.0


def test_dynamic_batch_profile(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, batch=(1, 2, 4), progress=False)
    assert plan.info["inputs"][0]["shape"] == [-1, 3, 8, 8]
    assert plan.info["profile"] == {"input": {"min": [1, 3, 8, 8], "opt": [2, 3, 8, 8], "max": [4, 3, 8, 8]}}
    engine = Engine(plan, trt)
    for n in (1, 3, 4):
        x = torch.rand(n, 3, 8, 8)
        torch.testing.assert_close(engine(x)["y"], net(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch", [(0, 1, 2), (2, 1, 4), (1, 2), "abc"])
def test_bad_batch_profile(net, batch):
    with pytest.raises(ValueError, match="batch"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, batch=batch, progress=False)


def test_bad_precision(net):
    with pytest.raises(ValueError, match="precision 'int4'"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="int4")
    # int8/fp8: a plain definition places its own Q/DQ in a FLOAT network (zoo models need a plan)
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="int8", progress=False)
    assert plan.info["precision"] == "int8" and plan.info["inputs"][0]["dtype"] == "FLOAT"


def test_workspace_limit_reaches_the_builder(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, workspace=64 << 20, progress=False)
    header, _ = deserialize_plan(plan)
    assert header["workspace_limit"] == 64 << 20
    assert plan.info["workspace"] == 64 << 20


def test_timing_cache_written_reused_and_grows(net, tmp_path):
    cache = tmp_path / "timing.cache"
    build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=cache, progress=False)
    first = cache.read_bytes()
    assert first.startswith(b"TRTBREF-TIMING")
    n_first = len(trt.IBuilderConfig().create_timing_cache(first)._entries)
    assert n_first == 3  # one entry per layer: conv1, relu1, conv2

    def other(network, x):  # a different network adds its own entries to the same cache
        r = network.add_activation(x, trt.ActivationType.SIGMOID)
        r.name = "sig"
        return {"z": r.get_output(0)}

    build_plan(trt, other, input_shape=TINY_SHAPE, timing_cache=cache, progress=False)
    entries = trt.IBuilderConfig().create_timing_cache(cache.read_bytes())._entries
    assert len(entries) == n_first + 1
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temp file


@pytest.mark.parametrize("content", [b"garbage", b"1\nconv1.weight 1 3f800000\n", b"TRTBREF-PLAN\x00\x01"])
def test_existing_file_that_is_not_a_timing_cache_is_refused_and_kept(net, tmp_path, content):
    """A mistyped --timing-cache (here a .wts file, an engine...) is never overwritten."""
    cache = tmp_path / "alexnet.wts"
    cache.write_bytes(content)
    with pytest.raises(TimingCacheError, match=f"timing cache {re.escape(str(cache))} exists but is not a timing "
                                               "cache .*refusing to overwrite it"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=cache, progress=False)
    assert cache.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alexnet.wts"]


def test_timing_cache_that_tensorrt_rejects_by_returning_none_is_refused(net, tmp_path, monkeypatch):
    """Real TensorRT may log an error and return None for bytes it cannot read."""
    cache = tmp_path / "t.cache"
    cache.write_bytes(b"TRTBREF-TIMING but from elsewhere")
    monkeypatch.setattr(trt.IBuilderConfig, "create_timing_cache",
                        lambda self, data: None if data else trt.ITimingCache())
    with pytest.raises(TimingCacheError, match="TensorRT returned no cache"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=cache, progress=False)
    assert cache.read_bytes() == b"TRTBREF-TIMING but from elsewhere"


def test_empty_or_missing_timing_cache_file_is_a_new_cache(net, tmp_path):
    empty = tmp_path / "empty.cache"
    empty.write_bytes(b"")
    build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=empty, progress=False)
    assert empty.read_bytes().startswith(b"TRTBREF-TIMING")
    with pytest.raises(TimingCacheError, match="directory .*no_dir does not exist"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=tmp_path / "no_dir" / "t.cache",
                   progress=False)
    with pytest.raises(TimingCacheError, match="is not a file"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=tmp_path, progress=False)


def test_progress_monitor_sees_the_build_phases(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False)
    assert plan.info["build_phases"] == ["Building reference plan"]
    monitor = make_progress_monitor(trt, enabled=False)
    assert isinstance(monitor, trt.IProgressMonitor)
    monitor.phase_start("outer", None, 2)
    monitor.phase_start("inner", "outer", 3)
    assert monitor.step_complete("inner", 0) is True
    monitor.cancel()
    assert monitor.step_complete("inner", 1) is False
    monitor.phase_finish("inner")
    assert monitor.phases == ["outer", "inner"] and monitor.steps == {"outer": 0, "inner": 2}


def test_progress_bars_are_drawn(net, capsys):
    import io

    stream = io.StringIO()
    monitor = make_progress_monitor(trt, enabled=True, stream=stream)
    monitor.phase_start("Building", None, 4)
    for i in range(4):
        monitor.step_complete("Building", i)
    monitor.phase_finish("Building")
    assert "Building" in stream.getvalue() and "4/4" in stream.getvalue()


def test_logger_forwards_to_python_logging_and_captures_errors(caplog):
    logger = make_logger(trt)
    assert isinstance(logger, trt.ILogger)
    with caplog.at_level(logging.INFO, logger="trtbuild.tensorrt"):
        logger.log(trt.ILogger.INFO, "hello info")
        logger.log(trt.ILogger.ERROR, "bad thing")
    assert "hello info" in caplog.text and "bad thing" in caplog.text
    assert logger.errors == ["bad thing"]
    logger.clear()
    assert logger.error_text() == "no error message was logged"


def test_logger_filters_with_its_own_private_min_severity(caplog):
    """trt.ILogger subclasses get every message from TensorRT (min_severity is an attribute of
    trt.Logger only), so the bridge filters itself with a private threshold."""
    default = make_logger(trt)
    assert not hasattr(default, "min_severity") and default._min_severity is None
    quiet = make_logger(trt, min_severity=trt.ILogger.WARNING)
    assert not hasattr(quiet, "min_severity") and quiet._min_severity == int(trt.ILogger.WARNING)
    with caplog.at_level(logging.DEBUG, logger="trtbuild.tensorrt"):
        quiet.log(trt.ILogger.VERBOSE, "verbose detail")
        quiet.log(trt.ILogger.INFO, "chatty info")
        quiet.log(trt.ILogger.WARNING, "careful")
        quiet.log(trt.ILogger.ERROR, "broken")
        default.log(trt.ILogger.INFO, "default passes info")
    assert [r.getMessage() for r in caplog.records] == ["careful", "broken", "default passes info"]
    assert quiet.messages == [(int(trt.ILogger.WARNING), "careful"), (int(trt.ILogger.ERROR), "broken")]


def _cast_rejected_for(monkeypatch, to_type):
    """Make add_cast return None (what real TensorRT does when it rejects a layer) for `to_type`."""
    real = trt.INetworkDefinition.add_cast

    def add_cast(self, tensor, dtype):
        return None if dtype == to_type else real(self, tensor, dtype)

    monkeypatch.setattr(trt.INetworkDefinition, "add_cast", add_cast)


def test_rejected_input_cast_names_the_layer(net, monkeypatch):
    _cast_rejected_for(monkeypatch, trt.DataType.HALF)
    with pytest.raises(BuilderError, match="TensorRT rejected layer 'input/to_fp16'"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", progress=False)


def test_rejected_output_cast_names_the_layer(net, monkeypatch):
    _cast_rejected_for(monkeypatch, trt.DataType.FLOAT)
    with pytest.raises(BuilderError, match="TensorRT rejected layer 'y/to_fp32'"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", progress=False)


def test_failed_build_raises_build_error_quoting_tensorrt(net, tmp_path):
    inner = tiny_define(net)
    cache = tmp_path / "timing.cache"
    build_plan(trt, inner, input_shape=TINY_SHAPE, progress=False, timing_cache=cache)
    cache_before = cache.read_bytes()

    def define(network, x):  # names the model output like an intermediate that is also marked
        return {"conv1": inner(network, x)["y"]}

    with pytest.raises(BuildError) as info:
        build_plan(trt, define, input_shape=TINY_SHAPE, progress=False, extra_outputs=["conv1"], timing_cache=cache)
    assert cache.read_bytes() == cache_before  # a failed build does not rewrite the timing cache
    msg = str(info.value)
    # TensorRT (and TensorRT-RTX, and now the reference) refuse renaming a tensor to a name in use: the error
    # it logs while the network is defined is quoted
    assert msg.startswith("reference reported errors while network 'trtbuild' was defined")
    assert "Failed attempt to rename a tensor from conv2 to conv1 as the new name is already in use" in msg


def test_builder_returning_none_is_reported_with_its_log(net, monkeypatch):
    def fail(self, network, config):  # what real TensorRT does: log errors, return None
        self.logger.log(trt.ILogger.ERROR, "Error Code 4: Internal Error (out of workspace)")
        self.logger.log(trt.ILogger.ERROR, "second message")
        return None

    monkeypatch.setattr(trt.Builder, "build_serialized_network", fail)
    with pytest.raises(BuildError, match=r"out of workspace\); second message"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False)


def test_layer_errors_name_the_layer(net):
    def define(network, x):
        c = network.add_convolution_nd(x, 4, (3, 3), trt.Weights(np.zeros((4, 3, 3, 3), np.float32)))
        c.name = "bad_conv"
        c.num_groups = 2  # 3 input channels are not divisible by 2
        return {"y": c.get_output(0)}

    with pytest.raises(ValueError, match="layer 'bad_conv': num_groups=2 must divide input channels 3"):
        build_plan(trt, define, input_shape=TINY_SHAPE, progress=False)


def test_extra_outputs_in_network_order_and_unknown_names(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False, extra_outputs=["relu1", "conv1"])
    assert list(plan.info["extra_outputs"]) == ["conv1", "relu1"]
    assert [t["name"] for t in plan.info["outputs"]] == ["y", "conv1", "relu1"]
    with pytest.raises(BuildError, match="nope"):
        build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False, extra_outputs=["nope"])


def test_raw_definition_adds_its_own_inputs():
    def define(network):
        x = network.add_input("a", trt.DataType.FLOAT, (2, 3))
        u = network.add_unary(x, trt.UnaryOperation.ABS)
        u.name = "abs"
        return {"abs_out": u.get_output(0)}

    plan = build_plan(trt, define, progress=False)
    out = Engine(plan, trt)(a=torch.tensor([[-1.0, 2.0, -3.0]] * 2))
    assert out["abs_out"].tolist() == [[1.0, 2.0, 3.0]] * 2


def test_raw_definition_with_dynamic_batch():
    def define(network, batch_dim=-1):
        x = network.add_input("a", trt.DataType.FLOAT, (batch_dim, 3))
        u = network.add_unary(x, trt.UnaryOperation.NEG)
        u.name = "neg"
        return {"neg_out": u.get_output(0)}

    plan = build_plan(trt, define, batch=(1, 2, 5), progress=False)
    out = Engine(plan, trt)(a=torch.ones(5, 3))["neg_out"]
    assert out.shape == (5, 3) and out.eq(-1).all()
    with pytest.raises(ValueError, match="input 'a' \\(2, 3\\) has a static batch dimension"):
        build_plan(trt, lambda network: define(network, 2), batch=(1, 2, 5), progress=False)
    with pytest.raises(ValueError, match="pass batch=\\(min, opt, max\\)"):
        build_plan(trt, define, progress=False)
    with pytest.raises(ValueError, match="needs input_shape"):
        build_plan(trt, lambda network, x: {}, progress=False)

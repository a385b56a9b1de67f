"""The tensorrt-rtx backend: NVIDIA's TensorRT-RTX builds real engines here without a GPU.

These run trtbuild's real-TensorRT code paths (build, logger bridge, progress monitor, profiles,
sidecar, atomic save, the compatibility refusal) against a real NVIDIA builder. Nothing here runs
an engine: TensorRT-RTX needs an RTX-class GPU for that.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import trtbuild.reference as reference
from trtbuild.backend import BackendError, backend_kind, backend_name, is_rtx, load_trt, trt_of
from trtbuild.engine import (BuildError, EngineCompatibilityError, check_compatible, load_engine, make_sidecar,
                             read_sidecar, save_engine)
from trtbuild.engine.build import build_plan
from trtbuild.engine.rtx import DEFAULT_TARGETS, TargetError, can_run_here, parse_targets, target_list
from trtbuild.layers.basic import conv, relu
from trtbuild.layers.l2norm import l2norm

RTX_GPU = {"gpu": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"}
H100 = {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
NO_GPU = {"gpu": "cpu", "compute_capability": "cpu"}


@pytest.fixture
def no_gpu(monkeypatch):
    """This machine as one without a GPU, wherever the tests run (a GPU CI runner too)."""
    import trtbuild.engine.device as device
    import trtbuild.engine.model as model
    import trtbuild.engine.serialize as serialize

    for module in (device, model, serialize):
        monkeypatch.setattr(module, "device_info", lambda trt: dict(NO_GPU))


def _tiny(network, x):
    """conv 3->4 (3x3, pad 1) -> relu -> L2Norm over channels: a few named layers."""
    w = np.linspace(-1, 1, 4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3)
    y = conv(network, x, w, np.zeros(4, np.float32), "conv", padding=1)
    y = relu(network, y, "relu")
    return {"y": l2norm(network, y, np.full(4, 20.0, np.float32), "norm")}


def _plan(trt, **kw):
    return build_plan(trt, _tiny, input_shape=(1, 3, 8, 8), progress=False, **kw)


def test_backend_selection_and_module_of_objects(rtx, monkeypatch):
    monkeypatch.delenv("TRTBUILD_BACKEND", raising=False)
    assert load_trt("tensorrt-rtx") is rtx and is_rtx(rtx) and backend_kind(rtx) == "tensorrt-rtx"
    assert backend_name(rtx) == f"tensorrt-rtx {rtx.__version__}" and rtx.__version__.startswith("1.")
    monkeypatch.setenv("TRTBUILD_BACKEND", "tensorrt-rtx")
    assert load_trt() is rtx
    monkeypatch.setenv("TRTBUILD_BACKEND", "auto")
    assert load_trt() is not rtx  # auto never picks TensorRT-RTX
    builder = rtx.Builder(rtx.Logger(rtx.Logger.ERROR))
    network = builder.create_network(1 << int(rtx.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", rtx.float32, (1, 3, 8, 8))
    assert trt_of(network) is rtx and trt_of(x) is rtx
    ref_net = reference.Builder(reference.Logger()).create_network(1)
    assert trt_of(ref_net) is reference


def test_missing_tensorrt_rtx_is_one_sentence(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tensorrt_rtx", None)
    with pytest.raises(BackendError, match=r"`import tensorrt_rtx` failed .*pip install tensorrt-rtx-cu13"):
        load_trt("tensorrt-rtx")


@pytest.mark.parametrize("text, expected", [
    (None, ("8.6", "8.9", "12.0")), ("", ("8.6", "8.9", "12.0")), ("sm86", ("8.6",)),
    ("SM_89, 12.0", ("8.9", "12.0")), ("sm120,sm86,sm120", ("12.0", "8.6")), ("75", ("7.5",)),
    ("current", ("current",)), ("sm121", ("12.1",)),
])
def test_parse_targets(text, expected):
    assert parse_targets(text) == expected


@pytest.mark.parametrize("text, message", [
    ("sm90", r"compute capability 9.0\) is not one TensorRT-RTX builds for.*Hopper"),
    ("sm70", r"compute capability 7.0\) is not one"),
    ("ampere", r"'ampere' is not a compute capability"),
    ("current,sm86", r"'current' .* must be the only target"),
])
def test_bad_targets_are_refused_in_one_sentence(text, message):
    with pytest.raises(TargetError, match=message):
        parse_targets(text)


def test_default_targets_are_nvidias_portable_set():
    # NVIDIA TensorRT-RTX support matrix: "Engines built with TensorRT-RTX are by default portable
    # across devices with compute capabilities 8.6, 8.9, and 12.0".
    assert DEFAULT_TARGETS == ("8.6", "8.9", "12.0") and target_list(DEFAULT_TARGETS) == "sm86,sm89,sm120"


def test_build_writes_a_real_engine_with_progress_and_targets(rtx):
    plan = _plan(rtx, targets="sm86,sm120")
    assert bytes(plan[:4]) == b"vtrt" and len(plan) > 1000
    assert plan.info["targets"] == ["8.6", "12.0"]
    assert plan.info["outputs"] == [{"name": "y", "shape": [1, 4, 8, 8], "dtype": "FLOAT"}]
    assert plan.info["build_phases"], "TensorRT-RTX reported no build phase through IProgressMonitor"


def test_dynamic_batch_profile_and_fp16(rtx):
    plan = _plan(rtx, batch=(1, 2, 8), precision="fp16")
    assert plan.info["profile"]["input"] == {"min": [1, 3, 8, 8], "opt": [2, 3, 8, 8], "max": [8, 3, 8, 8]}
    assert plan.info["outputs"][0]["shape"] == [-1, 4, 8, 8] and plan.info["outputs"][0]["dtype"] == "FLOAT"
    native = _plan(rtx, precision="fp16", fp32_io=False)
    assert native.info["inputs"][0]["dtype"] == "HALF" and native.info["outputs"][0]["dtype"] == "HALF"


def test_targets_refused_on_other_backends():
    with pytest.raises(ValueError, match="apply to TensorRT-RTX only"):
        _plan(reference, targets="sm86")


def test_failed_build_quotes_tensorrt_rtx(rtx, rtxnet, caplog):
    # `rtxnet` keeps another builder alive. TensorRT(-RTX) keeps the first logger of the process and
    # warns that any other is ignored; trtbuild shares one logger per module, so no such warning.
    assert rtxnet.builder is not None

    def broken(network, x):  # a 20x20 max pool on an 8x8 input: negative output size
        layer = network.add_pooling_nd(x, trt_of(network).PoolingType.MAX, (20, 20))
        layer.name = "too_big_pool"
        return {"y": layer.get_output(0)}

    with pytest.raises(BuildError, match=r"tensorrt-rtx 1\.\S+ failed to build network 'trtbuild' for "
                                         r"sm86,sm89,sm120: .*Error Code 4: API Usage Error.*pool"):
        build_plan(rtx, broken, input_shape=(1, 3, 8, 8), progress=False)
    assert "differs from one already registered" not in caplog.text


def test_errors_tensorrt_rtx_logs_while_defining_fail_the_build(rtx):
    def clash(network, x):  # two tensors named "t": TensorRT-RTX logs an error and keeps the old name
        a = network.add_pooling_nd(x, trt_of(network).PoolingType.MAX, (2, 2))
        b = network.add_pooling_nd(a.get_output(0), trt_of(network).PoolingType.MAX, (2, 2))
        a.get_output(0).name = "t"
        b.get_output(0).name = "t"
        return {"y": b.get_output(0)}

    with pytest.raises(BuildError, match=r"reported errors while network 'trtbuild' was defined: .*rename a tensor"):
        build_plan(rtx, clash, input_shape=(1, 3, 8, 8), progress=False)


def test_concurrent_builds_quote_their_own_errors(rtx):
    import threading

    def broken(tag):
        def define(network, x):
            layer = network.add_pooling_nd(x, trt_of(network).PoolingType.MAX, (20, 20))
            layer.name = f"pool_of_{tag}"
            return {"y": layer.get_output(0)}
        return define

    messages = {"a": [], "b": []}

    def worker(tag):
        for _ in range(8):
            try:
                build_plan(rtx, broken(tag), input_shape=(1, 3, 8, 8), progress=False)
            except BuildError as e:
                messages[tag].append(str(e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in messages]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for tag, other in (("a", "b"), ("b", "a")):
        assert len(messages[tag]) == 8
        assert all(f"pool_of_{tag}" in m and f"pool_of_{other}" not in m for m in messages[tag]), messages[tag][:2]


def test_timing_cache_is_left_untouched_and_a_second_build_works(rtx, tmp_path, caplog):
    cache = tmp_path / "t.cache"
    for _ in range(2):  # a second build works too: reading a timing cache back would need CUDA, so none is written
        plan = _plan(rtx, timing_cache=cache)
        assert bytes(plan[:4]) == b"vtrt"
    assert not cache.exists()
    assert "TensorRT-RTX documents its timing cache as deprecated and unused" in caplog.text
    cache.write_bytes(b"user data, not a cache")
    _plan(rtx, timing_cache=cache)
    assert cache.read_bytes() == b"user data, not a cache"


def test_sidecar_records_backend_version_and_targets(rtx, tmp_path):
    plan = _plan(rtx, targets="sm86,sm89")
    path = save_engine(tmp_path / "m.engine", plan, make_sidecar(rtx, plan))
    side = read_sidecar(path)
    assert side["backend"] == "tensorrt-rtx" and side["tensorrt_version"] == rtx.__version__
    assert side["targets"] == ["8.6", "8.9"]
    assert json.loads((tmp_path / "m.engine.json").read_text())["engine_bytes"] == len(plan)


def test_loading_refuses_a_gpu_outside_the_targets_and_another_version(rtx, tmp_path, no_gpu):
    plan = _plan(rtx, targets="sm86,sm89")
    side = make_sidecar(rtx, plan)
    check_compatible(side, rtx, "m.engine", current_device=RTX_GPU)  # 8.9 is a target: accepted
    with pytest.raises(EngineCompatibilityError, match=r"compute capabilities 8.6, 8.9, but this GPU is NVIDIA H100.*"
                                                       r"compute capability 9.0; TensorRT-RTX does not build for "
                                                       r"compute capability 9.0 .* use --backend tensorrt on this GPU"):
        check_compatible(side, rtx, "m.engine", current_device=H100)
    with pytest.raises(EngineCompatibilityError, match=r"this GPU is NVIDIA GeForce RTX 5090 with compute capability "
                                                       r"12.0; rebuild it with --target sm120"):
        check_compatible(side, rtx, "m.engine", current_device={"gpu": "NVIDIA GeForce RTX 5090",
                                                                "compute_capability": "12.0"})
    with pytest.raises(EngineCompatibilityError, match="no CUDA GPU is visible here, so it cannot run"):
        check_compatible(side, rtx, "m.engine", current_device={"gpu": "cpu", "compute_capability": "cpu"})
    with pytest.raises(EngineCompatibilityError, match=r"built with TensorRT-RTX 1.6.0.1 but TensorRT-RTX 1.7"):
        check_compatible(dict(side, tensorrt_version="1.6.0.1"), rtx, "m.engine", current_device=RTX_GPU)
    with pytest.raises(EngineCompatibilityError, match="built by TensorRT-RTX .* loaded with the reference backend"):
        check_compatible(side, reference, "m.engine")
    path = save_engine(tmp_path / "m.engine", plan, side)
    with pytest.raises(EngineCompatibilityError, match="no CUDA GPU is visible"):  # before TensorRT is called
        load_engine(path)


def test_can_run_here(rtx, monkeypatch):
    import trtbuild.engine.device as device

    for here, targets, expected in [(NO_GPU, None, (False, "no CUDA GPU is visible")),
                                    (RTX_GPU, None, (True, "")), (RTX_GPU, "sm86", (False, None)),
                                    (H100, None, (False, None)), (H100, "current", (True, ""))]:
        monkeypatch.setattr(device, "device_info", lambda trt, here=here: dict(here))
        runs, why = can_run_here(rtx, targets)
        assert runs == expected[0]
        if expected[1] is not None:
            assert why == expected[1]
        else:
            assert why.startswith(f"this GPU ({here['gpu']}, compute capability {here['compute_capability']}) is not "
                                  "one of the targets")

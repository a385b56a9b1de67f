"""PycudaEngine picks and switches optimization profiles as Engine does. pycuda and a GPU are not here,
so the engine is a reference plan of two batch profiles (1..4 and 8..16) behind a module that calls
itself TensorRT, with a pycuda stand-in whose "device" memory is host memory the reference reads;
the execution context is wrapped to record the calls TensorRT's rules order: the profile switch on the
run's stream before any set_input_shape, every input's shape set again after a switch. Expected
outputs come from the PyTorch model; expected messages are Engine's own (the same code path)."""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest
import torch

import trtbuild.reference as reference
from trtbuild.engine import BatchProfile, BuildOptions, Engine, EngineInputError
from trtbuild.engine.build import build_spec_plan
from trtbuild.models import registry
from trtbuild.weights import WeightMap

STREAM = 77  # the handle of the stand-in's stream: the switch must be queued on it
RECORDED = ("set_optimization_profile_async", "set_input_shape", "set_tensor_address", "execute_async_v3")


def _as_tensorrt():
    """A module named like real TensorRT that is the reference backend underneath."""
    fake = types.ModuleType("tensorrt")
    fake.__version__ = "10.16.0"
    fake.__getattr__ = lambda attr: getattr(reference, attr)
    return fake


class _Alloc:
    def __init__(self, nbytes):
        self.bytes = np.zeros(nbytes, np.uint8)

    def __int__(self):
        return self.bytes.ctypes.data


def _fake_pycuda():
    driver = types.ModuleType("pycuda.driver")
    primary = types.SimpleNamespace(push=lambda: None, pop=lambda: None)
    driver.init = lambda: None
    driver.Device = lambda index: types.SimpleNamespace(retain_primary_context=lambda: primary)
    driver.Stream = lambda: types.SimpleNamespace(handle=STREAM, synchronize=lambda: None)
    driver.pagelocked_empty = lambda shape, dtype: np.empty(shape, dtype)
    driver.mem_alloc = _Alloc
    driver.memcpy_htod_async = lambda addr, host, stream: ctypes.memmove(int(addr), host.ctypes.data, host.nbytes)
    driver.memcpy_dtoh_async = lambda host, mem, stream: ctypes.memmove(host.ctypes.data, int(mem), host.nbytes)
    package = types.ModuleType("pycuda")
    package.driver = driver
    return package, driver


class _Recorder:
    """The execution context, with the calls of RECORDED appended to `calls` as (method, args)."""

    def __init__(self, context):
        self._context, self.calls = context, []

    def __getattr__(self, attr):
        value = getattr(self._context, attr)
        if attr not in RECORDED:
            return value

        def call(*args):
            self.calls.append((attr, args[:1] if attr == "set_tensor_address" else args))
            return value(*args)
        return call


@pytest.fixture(scope="module")
def two_profiles():
    module = registry.get_torch_model("resnet18", seed=0, small=True).eval()
    plan = build_spec_plan(registry.get("resnet18"), WeightMap.from_module(module), reference,
                           BuildOptions(small=True, progress=False,
                                        profiles=(BatchProfile(1, 2, 4), BatchProfile(8, 8, 16))))
    return module, plan


@pytest.fixture
def pycuda_engine(two_profiles, monkeypatch):
    from trtbuild.engine.pycuda_runner import PycudaEngine

    package, driver = _fake_pycuda()
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    fake_trt = _as_tensorrt()

    def make(**kw):
        engine = PycudaEngine(two_profiles[1], fake_trt, name="two.engine", **kw)
        engine.context = _Recorder(engine.context)
        return engine
    return make


def _expected(module, x):
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def test_each_run_switches_to_the_first_profile_that_takes_the_batch(two_profiles, pycuda_engine):
    module = two_profiles[0]
    engine = pycuda_engine()
    assert engine.profiles == [{"input": ((1, 3, 64, 64), (4, 3, 64, 64))},
                               {"input": ((8, 3, 64, 64), (16, 3, 64, 64))}]
    rng = np.random.default_rng(0)
    for batch, profile in ((2, 0), (8, 1), (9, 1), (3, 0)):
        x = rng.standard_normal((batch, 3, 64, 64)).astype(np.float32)
        engine.context.calls.clear()
        out = engine.run({"input": x})["logits"]
        np.testing.assert_allclose(out, _expected(module, x), rtol=1e-4, atol=1e-4)
        assert engine.context.active_optimization_profile == profile
        switched = {(8, 1): True, (9, 1): False, (3, 0): True, (2, 0): False}[(batch, profile)]
        assert engine.context.calls == (
            [("set_optimization_profile_async", (profile, STREAM))] if switched else []) + [
            ("set_input_shape", ("input", (batch, 3, 64, 64))),
            ("set_tensor_address", ("input",)),
            ("set_tensor_address", ("logits",)),
            ("execute_async_v3", (STREAM,))]


def test_a_batch_no_profile_takes_is_refused_as_engine_refuses_it(two_profiles, pycuda_engine):
    engine = pycuda_engine()
    x = np.zeros((6, 3, 64, 64), np.float32)
    with pytest.raises(EngineInputError) as pycuda_error:
        engine.run({"input": x})
    assert str(pycuda_error.value) == (
        "input 'input' has shape (6, 3, 64, 64), which no optimization profile of two.engine takes: "
        "profile 0 1x3x64x64..4x3x64x64; profile 1 8x3x64x64..16x3x64x64")
    with pytest.raises(EngineInputError) as engine_error:
        Engine(two_profiles[1], reference, name="two.engine").run({"input": torch.from_numpy(x)})
    assert str(engine_error.value) == str(pycuda_error.value)
    assert engine.context.calls == []  # refused before TensorRT is asked anything


def test_a_pinned_profile_never_switches(two_profiles, pycuda_engine):
    engine = pycuda_engine(profile=1)
    x = np.random.default_rng(1).standard_normal((8, 3, 64, 64)).astype(np.float32)
    np.testing.assert_allclose(engine.run({"input": x})["logits"], _expected(two_profiles[0], x),
                               rtol=1e-4, atol=1e-4)
    assert engine.context.calls[0] == ("set_optimization_profile_async", (1, STREAM))
    engine.context.calls.clear()
    with pytest.raises(EngineInputError, match=r"input 'input' has shape \(2, 3, 64, 64\), outside optimization "
                       r"profile 1 8x3x64x64\.\.16x3x64x64 that two.engine is pinned to"):
        engine.run({"input": np.zeros((2, 3, 64, 64), np.float32)})
    assert engine.context.calls == []


@pytest.mark.parametrize("profile", [2, -1, True])
def test_pinning_a_profile_the_engine_has_not_is_refused(pycuda_engine, profile):
    with pytest.raises(EngineInputError, match=rf"two.engine has 2 optimization profile\(s\) \(0 to 1\); "
                       rf"PycudaEngine\(profile={profile!r}\) names none of them"):
        pycuda_engine(profile=profile)

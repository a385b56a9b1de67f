"""Engine.run on the reference backend: results against PyTorch and clear input errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import Engine, EngineInputError, build_plan
from trtbuild.reference.runtime import device

from helpers.tiny_net import TINY_SHAPE, TinyNet, tiny_define


@pytest.fixture(scope="module")
def net():
    return TinyNet(seed=3)


@pytest.fixture(scope="module")
def engine(net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, batch=(1, 2, 4), progress=False,
                      extra_outputs=["relu1"])
    return Engine(plan, trt, name="tiny")


def test_io_description(engine):
    assert engine.input_names == ["input"] and engine.output_names == ["y", "relu1"]
    info = engine.tensors["input"]
    assert info.shape == (-1, 3, 8, 8) and info.min_shape == (1, 3, 8, 8) and info.max_shape == (4, 3, 8, 8)
    assert info.dtype == torch.float32
    assert "profile 1x3x8x8..4x3x8x8" in engine.describe()
    assert engine.device == device()


def test_outputs_match_pytorch_for_each_batch(engine, net):
    for n in (1, 2, 4):
        x = torch.rand(n, 3, 8, 8, device=engine.device) * 4 - 2
        out = engine.run({"input": x})
        torch.testing.assert_close(out["y"], net(x), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out["relu1"], torch.relu(net.conv1(x)), rtol=1e-5, atol=1e-6)
        assert out["y"].shape == (n, 2, 8, 8)


def test_call_styles_and_numpy_inputs(engine, net):
    x = torch.rand(2, 3, 8, 8)
    a = engine(x)["y"]
    b = engine(input=x)["y"]
    c = engine.run({"input": x.numpy()})["y"]
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)


def test_non_contiguous_input_is_handled(engine, net):
    x = torch.rand(2, 8, 8, 3).permute(0, 3, 1, 2)
    assert not x.is_contiguous()
    torch.testing.assert_close(engine(x)["y"], net(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("inputs, message", [
    ({"image": torch.rand(1, 3, 8, 8)}, r"engine tiny has no input named 'image'; its inputs are \['input'\]"),
    ({}, r"input 'input' is missing"),
    ({"input": torch.rand(1, 3, 8, 8, dtype=torch.float64)},
     r"input 'input' has dtype torch.float64 but the engine expects torch.float32"),
    ({"input": torch.rand(1, 3, 8, 8).half()}, r"input 'input' has dtype torch.float16"),
    ({"input": torch.empty(1, 3, 8, 8, device="meta")},
     r"input 'input' is on device meta but this reference engine runs on"),
    ({"input": torch.rand(3, 8, 8)}, r"input 'input' has shape \(3, 8, 8\) \(rank 3\) but the engine expects rank 4"),
    ({"input": torch.rand(1, 3, 8, 9)}, r"input 'input' has shape \(1, 3, 8, 9\) but the engine expects "
                                        r"\(-1, 3, 8, 8\) \(dimension 3 must be 8\)"),
    ({"input": torch.rand(5, 3, 8, 8)}, r"dimension 0 is 5, outside the optimization profile range \[1, 4\]"),
    ({"input": [[1.0]]}, r"input 'input' must be a torch.Tensor"),
])
def test_bad_inputs_name_the_tensor(engine, inputs, message):
    with pytest.raises(EngineInputError, match=message):
        engine.run(inputs)


def test_input_errors_are_value_errors(engine):
    with pytest.raises(ValueError):
        engine.run({"input": torch.rand(9, 3, 8, 8)})


def test_positional_call_needs_single_input(engine):
    with pytest.raises(EngineInputError, match="pass inputs by name"):
        engine(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 8, 8))


def test_static_engine_rejects_other_batch(net):
    plan = build_plan(trt, tiny_define(net), input_shape=(2, 3, 8, 8), progress=False)
    eng = Engine(plan, trt)
    assert eng.tensors["input"].shape == (2, 3, 8, 8)
    with pytest.raises(EngineInputError, match="dimension 0 must be 2"):
        eng(torch.rand(1, 3, 8, 8))
    out = eng(torch.from_numpy(np.ones((2, 3, 8, 8), np.float32)))["y"]
    torch.testing.assert_close(out, net(torch.ones(2, 3, 8, 8)), rtol=1e-5, atol=1e-6)


def test_plan_bytes_that_are_not_an_engine():
    from trtbuild.engine import EngineFileError

    with pytest.raises(EngineFileError, match="junk could not be loaded by reference: deserialize_cuda_engine: "
                                              r"reference plan is truncated \(18 bytes\)"):
        Engine(b"TRTBREF\x01" + b"\x00" * 10, trt, name="junk")
    with pytest.raises(EngineFileError, match="not a trtbuild reference plan"):
        Engine(b"\x7fELF" + b"\x00" * 100, trt, name="elf")


def test_pycuda_runner_refuses_the_reference(net):
    from trtbuild.engine import EngineError
    from trtbuild.engine.pycuda_runner import PycudaEngine

    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False)
    with pytest.raises(EngineError, match="runs real TensorRT engines only"):
        PycudaEngine(plan, trt)


def test_pycuda_runner_without_pycuda_says_so(monkeypatch):
    import sys
    import types

    from trtbuild.engine import EngineError
    from trtbuild.engine.pycuda_runner import PycudaEngine

    monkeypatch.setitem(sys.modules, "pycuda", None)  # import pycuda -> ImportError
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    fake = types.ModuleType("tensorrt")
    fake.__version__ = "10.16.0"
    with pytest.raises(EngineError, match="PycudaEngine needs pycuda"):
        PycudaEngine(b"plan", fake)

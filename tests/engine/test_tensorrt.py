"""The engine code paths on real TensorRT (10.x / 11.x) and a CUDA GPU.

Every test here is marked `tensorrt` and skips (with the reason) where `import tensorrt` fails or
no GPU is visible. They build and run the tiny conv network of tests/helpers/tiny_net.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from trtbuild.backend import BackendError, load_trt
from trtbuild.engine import (BuildError, Engine, EngineInputError, build_plan, load_engine, make_sidecar, save_engine,
                             sidecar_path)

from helpers.tiny_net import TINY_SHAPE, TinyNet, tiny_define

pytestmark = pytest.mark.tensorrt


@pytest.fixture(scope="module")
def trt():
    try:
        real = load_trt("tensorrt")
    except BackendError as e:
        pytest.skip(f"real TensorRT is not usable here: {e}")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA; the torch-buffer Engine needs it")
    return real


@pytest.fixture(scope="module")
def net():
    return TinyNet(seed=5).cuda()


def test_fp32_build_and_run(trt, net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False)
    assert plan.info["inputs"][0]["dtype"] == "FLOAT"
    engine = Engine(plan, trt)
    assert engine.backend == f"tensorrt {trt.__version__}" and engine.device.type == "cuda"
    x = torch.rand(TINY_SHAPE, device="cuda") * 2 - 1
    out = engine.run({"input": x}, synchronize=True)["y"]
    torch.testing.assert_close(out, net(x), rtol=1e-4, atol=1e-5)  # TF32 off in the engine and in net(x)


def test_fp16_strongly_typed_with_fp32_io(trt, net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", progress=False)
    assert [t["dtype"] for t in plan.info["inputs"] + plan.info["outputs"]] == ["FLOAT", "FLOAT"]
    engine = Engine(plan, trt)
    x = torch.rand(TINY_SHAPE, device="cuda") * 2 - 1
    out = engine.run({"input": x}, synchronize=True)["y"]
    expected = net(x)
    err = (out - expected).abs().max().item()
    assert err < 2e-2 * expected.abs().max().item()


def test_fp16_native_io(trt, net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", fp32_io=False,
                      progress=False)
    engine = Engine(plan, trt)
    assert engine.tensors["input"].dtype == torch.float16
    x = (torch.rand(TINY_SHAPE, device="cuda") * 2 - 1).half()
    out = engine.run({"input": x}, synchronize=True)["y"]
    assert out.dtype == torch.float16 and out.shape == (1, 2, 8, 8)
    # The values, not only the dtype: against fp32 PyTorch on the same (fp16) input, with fp16 tolerances
    # (fp16 weights and activations: a few units of 2**-11 per operation, 27 + 4 terms per output).
    expected = net(x.float())
    err = (out.float() - expected).abs().max().item()
    assert torch.isfinite(out).all() and err < 2e-2 * expected.abs().max().item()


def test_dynamic_batch(trt, net):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, batch=(1, 2, 4), progress=False)
    engine = Engine(plan, trt)
    assert engine.tensors["input"].min_shape == (1, 3, 8, 8) and engine.tensors["input"].max_shape == (4, 3, 8, 8)
    for n in (1, 3, 4):
        x = torch.rand(n, 3, 8, 8, device="cuda")
        torch.testing.assert_close(engine.run({"input": x}, synchronize=True)["y"], net(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(EngineInputError, match=r"outside the optimization profile range \[1, 4\]"):
        engine.run({"input": torch.rand(5, 3, 8, 8, device="cuda")})
    with pytest.raises(EngineInputError, match="is on device cpu"):
        engine.run({"input": torch.rand(2, 3, 8, 8)})


def test_timing_cache_and_progress_monitor(trt, net, tmp_path):
    cache = tmp_path / "trt.cache"
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, timing_cache=cache, progress=False)
    assert cache.is_file() and cache.stat().st_size > 0
    assert plan.info["build_phases"], "TensorRT reported no build phase to the progress monitor"
    first = cache.read_bytes()
    build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", timing_cache=cache,
               progress=False)
    assert cache.stat().st_size >= len(first)


def test_failed_build_quotes_tensorrt_errors(trt, net):
    inner = tiny_define(net)
    with pytest.raises(BuildError, match="failed to build network 'trtbuild': ") as info:
        build_plan(trt, lambda network, x: {"conv1": inner(network, x)["y"]}, input_shape=TINY_SHAPE,
                   extra_outputs=["conv1"], progress=False)
    # TensorRT's own logged error follows trtbuild's prefix, e.g. "[network.cpp::validate::...] Error Code 4:
    # Internal Error (Repeated tensor name: conv1 (tensors must have distinct names))".
    quoted = str(info.value).split("failed to build network 'trtbuild': ", 1)[1]
    assert re.search(r"Error Code \d+", quoted), f"TensorRT's error is not quoted: {info.value}"
    assert "conv1" in quoted, f"TensorRT's error does not name the repeated tensor: {info.value}"


def test_save_load_sidecar(trt, net, tmp_path):
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False)
    path = tmp_path / "tiny.engine"
    save_engine(path, plan, make_sidecar(trt, plan))
    side = json.loads(sidecar_path(path).read_text())
    major, minor = torch.cuda.get_device_capability()
    assert side["tensorrt_version"] == trt.__version__ and side["compute_capability"] == f"{major}.{minor}"
    engine = load_engine(path)
    x = torch.rand(TINY_SHAPE, device="cuda")
    torch.testing.assert_close(engine.run({"input": x}, synchronize=True)["y"], net(x), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_pycuda_runner(trt, net, tmp_path):
    pytest.importorskip("pycuda.driver", reason="pycuda is not installed")
    from trtbuild.engine.pycuda_runner import PycudaEngine

    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, batch=(1, 2, 2), progress=False)
    path = tmp_path / "tiny.engine"
    save_engine(path, plan, make_sidecar(trt, plan))
    engine = PycudaEngine.load(path, trt)
    x = np.random.default_rng(0).random((2, 3, 8, 8), dtype=np.float32)
    out = engine.run({"input": x})["y"]
    expected = net(torch.from_numpy(x).cuda()).detach().cpu().numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(EngineInputError, match="has dtype float64"):
        engine.run({"input": x.astype(np.float64)})

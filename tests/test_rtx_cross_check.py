"""The cross-check: every zoo model, built by the reference and by TensorRT-RTX, must agree.

build_plan(..., cross_check=True) defines the same network on both backends, builds both (the
TensorRT-RTX build is real: NVIDIA's builder, no GPU needed) and compares acceptance, the marked
outputs and the shape and dtype of every tensor both name alike. The expected shapes and dtypes
are NVIDIA's, never the reference's own. The comparator itself is shown to catch planted
differences (a definition that behaves differently on TensorRT-RTX).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import trtbuild.reference as reference
from trtbuild.backend import is_rtx, trt_of
from trtbuild.cli import main
from trtbuild.engine import BuildError, CrossCheckError
from trtbuild.engine.build import build_plan
from trtbuild.models import registry
from trtbuild.weights import WeightMap

#: every zoo model: rednet's involution is the plugin (twin) on the reference and, on TensorRT-RTX,
#: which has no plugins, composed of native layers; its outputs and every tensor both name alike agree.
ZOO = ("alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0", "rednet")


@functools.lru_cache(maxsize=None)
def _weights(name: str, small: bool) -> WeightMap:
    return WeightMap.from_module(registry.get_torch_model(name, seed=0, small=small))


def _cross(trt, name, small, **kw):
    spec = registry.get(name)
    return build_plan(trt, spec, weights=_weights(name, small), small=small, progress=False, cross_check=True, **kw)


def _check_result(plan, rtx, expected_outputs):
    check = plan.info["cross_check"]
    assert check["rtx_version"] == rtx.__version__ and check["targets"] == ["8.6", "8.9", "12.0"]
    assert [o["name"] for o in check["outputs"]] == expected_outputs
    assert check["outputs"] == plan.info["outputs"]  # TensorRT-RTX's own shapes and dtypes equal the reference's
    assert check["tensors_compared"] >= len(expected_outputs)
    assert bytes(plan.rtx_plan[:4]) == b"vtrt"


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("name", ZOO)
def test_small_zoo_static_and_dynamic_batch(rtx, name, precision):
    spec = registry.get(name)
    plan = _cross(reference, name, True, precision=precision)
    _check_result(plan, rtx, list(spec.output_names))
    dynamic = _cross(reference, name, True, precision=precision, batch=(1, 2, 4))
    _check_result(dynamic, rtx, list(spec.output_names))
    assert all(o["shape"][0] == -1 for o in dynamic.info["cross_check"]["outputs"])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", ZOO)
def test_small_zoo_with_every_layerwise_output(rtx, name, precision):
    spec = registry.get(name)
    layers = list(spec.layer_map)
    plan = _cross(reference, name, True, precision=precision, extra_outputs=layers)
    marked = [o["name"] for o in plan.info["cross_check"]["outputs"]]
    assert set(plan.info["extra_outputs"]) == set(layers)
    assert marked[:len(spec.output_names)] == list(spec.output_names)
    assert sorted(marked) == sorted(set(spec.output_names) | set(plan.info["extra_outputs"].values()))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", ZOO)
def test_full_size_zoo(rtx, name, precision):
    spec = registry.get(name)
    plan = _cross(reference, name, False, precision=precision)
    _check_result(plan, rtx, list(spec.output_names))
    assert plan.info["inputs"][0]["shape"] == list(spec.input_shape(False))


def test_cross_check_from_the_rtx_side_returns_the_rtx_engine(rtx):
    plan = _cross(rtx, "resnet18", True, precision="fp16", targets="sm89")
    assert bytes(plan[:4]) == b"vtrt" and plan.info["targets"] == ["8.9"]
    assert plan.info["cross_check"]["targets"] == ["8.9"] and not hasattr(plan, "rtx_plan")


# --- the comparator catches what it should -----------------------------------------------------------------


def _pool(network, x, window, name):
    layer = network.add_pooling_nd(x, trt_of(network).PoolingType.MAX, window)
    layer.name = name
    layer.get_output(0).name = name
    return layer.get_output(0)


def test_a_shape_difference_names_the_tensor_and_its_layer(rtx):
    def define(network, x):  # a planted backend difference: TensorRT-RTX's network pools with a 3x3 window
        y = _pool(network, x, (3, 3) if is_rtx(trt_of(network)) else (2, 2), "pool1")
        return {"y": _pool(network, y, (1, 1), "pool2")}

    with pytest.raises(CrossCheckError) as err:
        build_plan(reference, define, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)
    message = str(err.value)
    assert "tensor 'pool1' of layer 'pool1' (POOLING) is (1, 2, 7, 7) FLOAT on the reference but (1, 2, 6, 6) FLOAT" \
        in message and "TensorRT-RTX 1." in message and "(and 1 more difference(s))" in message


def test_a_dtype_difference_is_caught(rtx):
    def define(network):
        trt = trt_of(network)
        x = network.add_input("x", trt.float32, (1, 4))
        cast = network.add_cast(x, trt.float16 if is_rtx(trt) else trt.float32)
        cast.name = "cast"
        cast.get_output(0).name = "y"
        network.mark_output(cast.get_output(0))

    with pytest.raises(CrossCheckError, match=r"tensor 'y' of layer 'cast' \(CAST\) is \(1, 4\) FLOAT on the "
                                              r"reference but \(1, 4\) HALF"):
        build_plan(reference, define, progress=False, cross_check=True)


def test_acceptance_differences_are_caught_both_ways(rtx):
    def rejected_by_rtx(network, x):  # a 20x20 window on 8x8: negative output size, only on the RTX side
        return {"y": _pool(network, x, (20, 20) if is_rtx(trt_of(network)) else (2, 2), "pool")}

    with pytest.raises(CrossCheckError, match="the reference builds the network but TensorRT-RTX .* rejects it"):
        build_plan(reference, rejected_by_rtx, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)

    def rejected_by_reference(network, x):
        return {"y": _pool(network, x, (2, 2) if is_rtx(trt_of(network)) else (20, 20), "pool")}

    with pytest.raises(CrossCheckError, match="TensorRT-RTX .* builds the network but the reference rejects it"):
        build_plan(rtx, rejected_by_reference, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)


def test_output_name_differences_are_caught(rtx):
    def define(network, x):
        y = _pool(network, x, (2, 2), "pool")
        return {"y": y, "z": _pool(network, y, (1, 1), "z")} if is_rtx(trt_of(network)) else {"y": y}

    with pytest.raises(CrossCheckError, match=r"the marked outputs differ: reference \['y'\], TensorRT-RTX"):
        build_plan(reference, define, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)


def test_a_network_both_reject_raises_the_usual_error(rtx):
    with pytest.raises(BuildError, match=r"extra outputs \['nope'\] are not tensors"):
        build_plan(reference, lambda n, x: {"y": _pool(n, x, (2, 2), "p")}, input_shape=(1, 1, 4, 4),
                   extra_outputs=["nope"], progress=False, cross_check=True)


# --- the CLI --------------------------------------------------------------------------------------------


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_build_with_rtx_targets_and_cross_check(rtx, cwd, capsys):
    code = main(["build", "resnet18", "--small", "--backend", "tensorrt-rtx", "--target", "sm86,sm120",
                 "--cross-check", "--no-progress", "--timing-cache", "t.cache"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].startswith(f"backend: tensorrt-rtx {rtx.__version__} (NVIDIA TensorRT for RTX, not "
                                          "TensorRT 10/11)")
    assert "targets: sm86,sm120" in out and "timing cache: not used: TensorRT-RTX has no timing cache" in out
    assert f"built and cross-checked by TensorRT-RTX {rtx.__version__} for sm86,sm120" in out
    engine = cwd / "engines" / "resnet18-small-fp32.engine"
    assert engine.read_bytes()[:4] == b"vtrt" and not (cwd / "t.cache").exists()


def test_cli_parity_on_rtx_without_a_gpu_labels_the_numbers(rtx, cwd, capsys):
    code = main(["parity", "resnet18", "--small", "--backend", "tensorrt-rtx"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert "no CUDA GPU is visible, so its engines are built here ahead of time but cannot run" in lines[0]
    assert "NUMBERS BELOW COME FROM THE REFERENCE BACKEND" in lines[1]
    assert lines[2].startswith(f"built and cross-checked by TensorRT-RTX {rtx.__version__} for sm86,sm89,sm120")
    assert "backend=reference (standing in: the TensorRT-RTX" in "\n".join(lines)


def test_cli_demo_cross_checks_and_keeps_the_rtx_engine(rtx, cwd, capsys):
    code = main(["demo", "--small", "--backend", "reference"])
    out = capsys.readouterr().out
    assert code == 0 and f"built and cross-checked by TensorRT-RTX {rtx.__version__} for sm86,sm89,sm120" in out
    rtx_engine = cwd / "engines" / "alexnet-small-fp32-rtx.engine"
    assert rtx_engine.read_bytes()[:4] == b"vtrt"
    assert '"backend": "tensorrt-rtx"' in (cwd / "engines" / "alexnet-small-fp32-rtx.engine.json").read_text()

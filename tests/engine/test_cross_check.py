"""The cross-check: every zoo model, built by the reference and by TensorRT-RTX, must agree.

build_plan(..., cross_check=True) defines the same network on both backends, builds both (the
TensorRT-RTX build is real: NVIDIA's builder, no GPU needed) and compares acceptance, the marked
outputs and the shape and dtype of every tensor both name alike. The expected shapes and dtypes
are NVIDIA's, never the reference's own. The comparator itself is shown to catch planted
differences (a definition that behaves differently on TensorRT-RTX). TensorRT-RTX's engines cannot
run here, so the values are judged on the reference engine of the same build: its outputs against
the PyTorch model's (a reference that got every shape right but computed something else fails).
"""

from __future__ import annotations

import functools
import re

import pytest
import torch

import trtbuild.reference as reference
from trtbuild.backend import is_rtx, trt_of
from trtbuild.cli import main
from trtbuild.engine import BuildError, CrossCheckError, Engine
from trtbuild.engine.build import build_plan
from trtbuild.models import registry
from trtbuild.weights import WeightMap

#: every zoo model: rednet's involution is the plugin (twin) on the reference and, on TensorRT-RTX,
#: which has no plugins, composed of native layers; its outputs and every tensor both name alike agree.
ZOO = ("alexnet", "vgg16_ssd", "vgg16_refinedet", "resnet18", "resnet50", "repvgg_a0", "rednet")


@functools.lru_cache(maxsize=None)
def _model(name: str, small: bool) -> torch.nn.Module:
    return registry.get_torch_model(name, seed=0, small=small)


@functools.lru_cache(maxsize=None)
def _weights(name: str, small: bool) -> WeightMap:
    return WeightMap.from_module(_model(name, small))


def _check_values(plan, name: str, small: bool, batch: int = 1):
    """The reference engine of the cross-checked build computes what the PyTorch model computes, on a seeded
    input in the spec's value range: fp32 within 1e-5 + 1e-4 * max|ref|; fp16/bf16 within 3e-2 * max|ref|,
    cosine > 0.999."""
    spec = registry.get(name)
    lo, hi = spec.value_range
    shape = (batch, *spec.input_shape(small)[1:])
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0)) * (hi - lo) + lo
    out = Engine(plan, reference).run({spec.input_name: x})
    with torch.no_grad():
        want = _model(name, small)(x)
    for key, ref in zip(spec.output_names, want if isinstance(want, (tuple, list)) else (want,)):
        got = out[key].float().cpu()
        assert got.shape == ref.shape, (key, got.shape, ref.shape)
        err, scale = float((got - ref).abs().max()), float(ref.abs().max())
        if plan.info["precision"] == "fp32":
            assert err <= 1e-5 + 1e-4 * scale, f"{name}/{key}: max abs err {err:.3g}, max|ref| {scale:.3g}"
        else:
            cos = float(torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0))
            assert err <= 3e-2 * scale and cos > 0.999, f"{name}/{key}: max rel err {err / scale:.3g}, cosine {cos:.6f}"


def _cross(trt, name, small, **kw):
    spec = registry.get(name)
    return build_plan(trt, spec, weights=_weights(name, small), small=small, progress=False, cross_check=True, **kw)


def _check_result(plan, rtx, expected_outputs, name=None):
    check = plan.info["cross_check"]
    if name == "rednet" and plan.info["precision"] != "bf16":  # plugin twin vs composed (bf16: composed on both)
        assert len(check["notes"]) == 1 and "differ in structure" in check["notes"][0]
    else:  # same layers: every tensor of each network was paired with the other's and compared
        assert check["notes"] == []
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
    _check_result(plan, rtx, list(spec.output_names), name)
    _check_values(plan, name, True)
    dynamic = _cross(reference, name, True, precision=precision, batch=(1, 2, 4))
    _check_result(dynamic, rtx, list(spec.output_names), name)
    assert all(o["shape"][0] == -1 for o in dynamic.info["cross_check"]["outputs"])
    _check_values(dynamic, name, True, batch=2)


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
    _check_values(plan, name, True)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", ZOO)
def test_full_size_zoo(rtx, name, precision):
    spec = registry.get(name)
    plan = _cross(reference, name, False, precision=precision)
    _check_result(plan, rtx, list(spec.output_names), name)
    assert plan.info["inputs"][0]["shape"] == list(spec.input_shape(False))
    if precision == "fp32":  # the fp16 values of the full-size models: tests/models/test_zoo_parity.py (-m slow)
        _check_values(plan, name, False)


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


def test_rednet_composed_on_both_sides_compares_every_tensor(rtx):
    spec = registry.get("rednet").with_options(involution_impl="composed")
    plan = build_plan(reference, spec, weights=_weights("rednet", True), small=True, progress=False, cross_check=True)
    assert plan.info["cross_check"]["notes"] == [] and plan.info["options"] == {"involution_impl": "composed"}


def test_a_definition_error_on_one_side_is_a_cross_check_error(rtx):
    def define(network, x):  # ITensor.location exists on the reference only (TensorRT-RTX has no such attribute)
        assert x.location is not None
        return {"y": _pool(network, x, (2, 2), "pool")}

    with pytest.raises(CrossCheckError, match="the reference builds the network but TensorRT-RTX .* rejects it "
                                              r"\(.*location"):
        build_plan(reference, define, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)


def test_duplicate_names_are_not_compared_by_name(rtx):
    """TensorRT's API keeps tensor names unique: an automatic name already taken gets a suffix, and a
    rename to a layer output's automatic name takes it from its holder, which is renamed (on both sides:
    tests/reference/test_names.py). A duplicate can still sit in the reference's bookkeeping (planted here), and
    the cross-check reports it rather than pairing tensors by an ambiguous name."""
    automatic = "(Unnamed Layer* 1) [Pooling]_output"  # the output name the second pooling layer gets

    def define(network, x):
        trt = trt_of(network)
        a = network.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2)).get_output(0)
        a.name = automatic
        b = network.add_pooling_nd(a, trt.PoolingType.MAX, (2, 2)).get_output(0)
        assert b.name == f"{automatic}_1"  # both backends suffix the taken automatic name
        if not is_rtx(trt):
            b._name = automatic
        return {"y": _pool(network, b, (1, 1), "y")}

    with pytest.raises(CrossCheckError, match=re.escape(
            f"tensor name '{automatic}' is used by more than one tensor on the reference, so the networks cannot "
            "be compared by name")):
        build_plan(reference, define, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)
    # renaming to a name in use: both refuse it (the asked backend's error, quoting TensorRT's message)

    def renamed(network, x):
        a, b = _pool(network, x, (2, 2), "p1"), None
        b = _pool(network, a, (2, 2), "p2")
        a.name = "t"
        b.name = "t"
        return {"y": _pool(network, b, (1, 1), "y")}

    with pytest.raises(BuildError, match="rename a tensor from p2 to t as the new name is already in use"):
        build_plan(reference, renamed, input_shape=(1, 2, 8, 8), progress=False, cross_check=True)


def test_a_failed_cross_check_writes_no_timing_cache(rtx, tmp_path):
    cache = tmp_path / "t.cache"

    def define(network, x):
        return {"y": _pool(network, x, (3, 3) if is_rtx(trt_of(network)) else (2, 2), "pool")}

    with pytest.raises(CrossCheckError):
        build_plan(reference, define, input_shape=(1, 2, 8, 8), progress=False, cross_check=True, timing_cache=cache)
    assert not cache.exists()
    build_plan(reference, lambda n, x: {"y": _pool(n, x, (2, 2), "pool")}, input_shape=(1, 2, 8, 8),
               progress=False, cross_check=True, timing_cache=cache)
    assert cache.is_file()  # written once the comparison passed


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
    engine = cwd / "engines" / "resnet18-small-fp32-rtx.engine"
    assert not (cwd / "engines" / "resnet18-small-fp32.engine").exists()  # the reference engine's default path
    assert engine.read_bytes()[:4] == b"vtrt" and not (cwd / "t.cache").exists()


@pytest.fixture
def no_gpu(monkeypatch):
    import trtbuild.engine.device as device
    import trtbuild.engine.model as model

    for module in (device, model):
        monkeypatch.setattr(module, "device_info", lambda trt: {"gpu": "cpu", "compute_capability": "cpu"})


def test_cli_parity_on_rtx_without_a_gpu_labels_the_numbers(rtx, cwd, capsys, no_gpu):
    code = main(["parity", "resnet18", "--small", "--backend", "tensorrt-rtx", "--batch", "2", "--target", "sm89"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert "no CUDA GPU is visible, so its engines are built here ahead of time but cannot run" in lines[0]
    assert "NUMBERS BELOW COME FROM THE REFERENCE BACKEND" in lines[1]
    assert lines[2].startswith(f"built and cross-checked by TensorRT-RTX {rtx.__version__} for sm89")
    table = "\n".join(lines)
    assert "backend=reference (standing in: the TensorRT-RTX" in table and "batch=2" in table
    assert not (cwd / "weights").exists()  # the same seeded weights as the numbers, nothing exported


def test_cli_parity_refuses_cross_check_options_with_a_saved_engine(rtx, cwd, capsys):
    assert main(["build", "resnet18", "--small", "--backend", "reference", "--no-progress"]) == 0
    code = main(["parity", "resnet18", "--small", "--backend", "reference", "--engine",
                 "engines/resnet18-small-fp32.engine", "--cross-check"])
    assert code != 0 and "--cross-check and --target apply to an engine built in memory" in capsys.readouterr().err


def test_cli_demo_refuses_to_overwrite_a_user_file(rtx, cwd, capsys):
    (cwd / "engines").mkdir()
    mine = cwd / "engines" / "alexnet-small-fp32-rtx.engine"
    mine.write_bytes(b"my own file")
    code = main(["demo", "--small", "--backend", "reference"])
    assert code != 0 and "is not a TensorRT-RTX engine written by trtbuild, so the demo will not overwrite it" in \
        capsys.readouterr().err
    assert mine.read_bytes() == b"my own file" and not (cwd / "engines" / "alexnet-small-fp32.engine").exists()


def test_cli_demo_cross_checks_and_keeps_the_rtx_engine(rtx, cwd, capsys):
    code = main(["demo", "--small", "--backend", "reference"])
    out = capsys.readouterr().out
    assert code == 0 and f"built and cross-checked by TensorRT-RTX {rtx.__version__} for sm86,sm89,sm120" in out
    rtx_engine = cwd / "engines" / "alexnet-small-fp32-rtx.engine"
    assert rtx_engine.read_bytes()[:4] == b"vtrt"
    assert '"backend": "tensorrt-rtx"' in (cwd / "engines" / "alexnet-small-fp32-rtx.engine.json").read_text()

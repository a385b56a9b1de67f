"""Layerwise parity through debug tensors on the reference backend: mark_debug, IDebugListener,
debug states; the engine checked has only the model's outputs (the deployable one)."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import Engine, build_model, build_plan
from trtbuild.models import registry
from trtbuild.parity import check_model_parity, check_parity, make_inputs
from trtbuild.parity import debug_tensors as dt
from trtbuild.reference.debug import capsule_address
from trtbuild.reference.plan import PlanError, deserialize_plan
from trtbuild.reference.runtime import device
from trtbuild.weights import WeightMap

from helpers.tiny_net import TINY_LAYER_MAP, TINY_SHAPE, TinyNet, tiny_define


@pytest.fixture(scope="module")
def resnet_reports():
    kw = dict(small=True, layerwise=True)
    return {via: check_model_parity("resnet18", trt, layerwise_via=via, **kw)
            for via in ("debug tensors", "unfused debug tensors", "outputs")}


@pytest.mark.parametrize("via", ["debug tensors", "unfused debug tensors"])
def test_debug_tensor_path_equals_extra_output_path(resnet_reports, via):
    debug, outputs = resnet_reports[via], resnet_reports["outputs"]
    assert debug.meta["layerwise_via"] == via and outputs.meta["layerwise_via"] == "outputs"
    assert debug.passed and outputs.passed and debug.meta["fused_away"] == []  # the reference fuses nothing
    assert len(debug.layers) == len(outputs.layers) > 20
    for a, b in zip(debug.layers, outputs.layers):  # the same tensors, the same numbers
        assert (a.name, a.module, a.shape, a.count) == (b.name, b.module, b.shape, b.count)
        assert (a.max_abs, a.rel_l2, a.cosine, a.failed) == (b.max_abs, b.rel_l2, b.cosine, b.failed)
    assert [(s.name, s.max_abs) for s in debug.outputs] == [(s.name, s.max_abs) for s in outputs.outputs]
    assert f"layer tensors read through: {via}" in debug.to_table()


@pytest.mark.parametrize("via", ["debug tensors", "unfused debug tensors"])
def test_check_model_parity_checks_an_engine_with_only_the_models_outputs(monkeypatch, via):
    """The engine a layerwise check_model_parity runs has the model's outputs only: the layer
    tensors reach the report through the debug listener, not as extra engine outputs."""
    import trtbuild.parity.check as check

    engines = []
    real = check.check_parity
    monkeypatch.setattr(check, "check_parity", lambda engine, *a, **k: engines.append(engine) or real(engine, *a, **k))
    report = check_model_parity("resnet18", trt, small=True, layerwise=True, layerwise_via=via)
    assert report.passed and report.meta["layerwise_via"] == via and len(report.layers) > 20
    (engine,) = engines
    assert engine.output_names == list(registry.get("resnet18").output_names)
    assert engine.sidecar["extra_outputs"] == {} and engine._engine.num_io_tensors == 2  # input, logits


def test_layerwise_engine_is_the_deployable_one_plus_debug_marks():
    spec = registry.get("resnet18")
    wm = WeightMap.from_module(registry.get_torch_model("resnet18", seed=0, small=True))
    names = list(spec.layer_map)
    deployable = build_model(spec, wm, trt, small=True, progress=False)
    layerwise = build_model(spec, wm, trt, small=True, progress=False, debug_tensors=names)
    engine = Engine(layerwise, trt)
    assert engine.output_names == list(spec.output_names)  # no extra outputs
    assert all(engine._engine.is_debug_tensor(n) for n in names)
    assert not engine._engine.is_debug_tensor("input")
    header, arrays = deserialize_plan(bytes(layerwise))
    header0, arrays0 = deserialize_plan(bytes(deployable))
    marks = header.pop("debug")
    assert header == header0 and arrays.keys() == arrays0.keys()
    assert all((arrays[k] == arrays0[k]).all() for k in arrays)
    assert sorted(t["name"] for t in marks["tensors"]) == sorted(names) and marks["unfused"] is False
    assert layerwise.info["debug_tensors"] == {n: n for n in names}
    unfused = build_model(spec, wm, trt, small=True, progress=False, debug_tensors=names, debug_unfused=True)
    header, _ = deserialize_plan(bytes(unfused))
    assert header.pop("debug") == {"tensors": [], "unfused": True} and header == header0


def test_planted_bug_is_found_through_debug_tensors():
    net = TinyNet(seed=4)
    plan = build_plan(trt, tiny_define(net, corrupt_conv2=True), input_shape=TINY_SHAPE, progress=False,
                      debug_tensors=list(TINY_LAYER_MAP))
    engine = Engine(plan, trt)
    assert engine.output_names == ["y"]
    report = check_parity(engine, net, make_inputs({"input": TINY_SHAPE}, seed=1), output_names=["y"],
                          layer_map=TINY_LAYER_MAP, meta={"precision": "fp32"})
    assert report.meta["layerwise_via"] == "debug tensors"
    assert [r.passed for r in report.layers] == [True, True, False]
    assert report.first_failure == "conv2" and report.suspect_layer == "conv2"


def _network(builder):
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", trt.float32, (2, 3))
    relu = network.add_activation(x, trt.ActivationType.RELU).get_output(0)
    relu.name = "relu"
    neg = network.add_unary(relu, trt.UnaryOperation.NEG).get_output(0)
    neg.name = "neg"
    out = network.add_unary(neg, trt.UnaryOperation.EXP).get_output(0)
    out.name = "y"
    network.mark_output(out)
    return network, x, relu, neg, out


class Recorder(trt.IDebugListener):
    def __init__(self):
        trt.IDebugListener.__init__(self)
        self.calls = []

    def process_debug_tensor(self, addr, location, type, shape, name, stream):  # noqa: A002
        view = dt.tensor_at(addr, location, type, shape)
        self.calls.append((type_of(addr), capsule_address(addr), location, type, tuple(shape), name, stream,
                           view.clone()))


def type_of(x) -> str:
    return type(x).__name__


def _engine(mark=("relu", "neg"), unfused=False):
    logger = trt.Logger()
    builder = trt.Builder(logger)
    network, x, relu, neg, out = _network(builder)
    tensors = {"relu": relu, "neg": neg, "y": out}
    for name in mark:
        assert network.mark_debug(tensors[name]) is True
    if unfused:
        assert network.mark_unfused_tensors_as_debug_tensors() is True
    assert [network.is_debug_tensor(t) for t in (x, relu, neg, out)] == [False, "relu" in mark, "neg" in mark,
                                                                        "y" in mark]
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    return trt.Runtime(logger).deserialize_cuda_engine(plan)


def _execute(context, x):
    y = torch.empty_like(x)
    context.set_tensor_address("x", x.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    assert context.execute_async_v3(0)
    return y


def test_listener_gets_each_debug_tensor_once_per_execution_in_tensorrt_order():
    engine = _engine()
    assert engine.is_debug_tensor("relu") and engine.is_debug_tensor("neg") and not engine.is_debug_tensor("y")
    context = engine.create_execution_context()
    rec = Recorder()
    assert context.set_debug_listener(rec) and context.get_debug_listener() is rec
    assert not context.get_debug_state("relu")  # off until turned on, as on TensorRT
    assert context.set_all_tensors_debug_state(True)
    x = torch.tensor([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], device=device())
    for _ in range(2):
        _execute(context, x)
    assert [c[5] for c in rec.calls] == ["relu", "neg", "relu", "neg"]  # once per tensor per execution
    loc = trt.TensorLocation.DEVICE if device().type == "cuda" else trt.TensorLocation.HOST
    relu = torch.tensor([[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]])
    for kind, address, location, dtype, shape, name, stream, value in rec.calls:
        assert kind == "PyCapsule" and address != 0  # TensorRT's bindings pass the address in a capsule
        assert (location, dtype, shape, stream) == (loc, trt.DataType.FLOAT, (2, 3), 0)
        torch.testing.assert_close(value.cpu(), relu if name == "relu" else -relu, rtol=0, atol=0)


def test_a_debug_tensor_no_output_needs_is_kept_and_reported():
    """x -> relu -> y, and a side branch x -> neg marked as a debug tensor: the build keeps the
    branch (as TensorRT-RTX does, whose engine grows by it) and the listener gets -x."""
    logger = trt.Logger()
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", trt.float32, (2, 3))
    y = network.add_activation(x, trt.ActivationType.RELU).get_output(0)
    y.name = "y"
    network.mark_output(y)
    side = network.add_unary(x, trt.UnaryOperation.NEG).get_output(0)
    side.name = "side"
    network.mark_debug(side)
    engine = trt.Runtime(logger).deserialize_cuda_engine(
        builder.build_serialized_network(network, builder.create_builder_config()))
    assert engine.is_debug_tensor("side")
    context = engine.create_execution_context()
    rec = Recorder()
    context.set_debug_listener(rec)
    context.set_tensor_debug_state("side", True)
    xv = torch.tensor([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], device=device())
    y_out = _execute(context, xv)
    assert [c[5] for c in rec.calls] == ["side"]
    torch.testing.assert_close(rec.calls[0][-1].cpu(), -xv.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(y_out.cpu(), xv.relu().cpu(), rtol=0, atol=0)


def test_debug_state_off_stops_the_calls():
    context = _engine().create_execution_context()
    rec = Recorder()
    context.set_debug_listener(rec)
    x = torch.ones(2, 3, device=device())
    _execute(context, x)
    assert rec.calls == []  # no state on
    assert context.set_tensor_debug_state("relu", True) and context.set_tensor_debug_state("neg", True)
    _execute(context, x)
    assert context.set_tensor_debug_state("relu", False) and not context.get_debug_state("relu")
    _execute(context, x)
    assert [c[5] for c in rec.calls] == ["relu", "neg", "neg"]
    assert context.set_tensor_debug_state("y", True) is False  # not marked at build time


def test_unfused_marks_report_every_layer_output_but_not_is_debug_tensor():
    engine = _engine(mark=(), unfused=True)
    assert not any(engine.is_debug_tensor(n) for n in ("relu", "neg", "y"))
    context = engine.create_execution_context()
    rec = Recorder()
    context.set_debug_listener(rec)
    _execute(context, torch.ones(2, 3, device=device()))
    assert rec.calls == [] and context.unfused_tensors_debug_state is False
    context.unfused_tensors_debug_state = True
    y = _execute(context, torch.ones(2, 3, device=device()))
    assert [c[5] for c in rec.calls] == ["relu", "neg", "y"]
    torch.testing.assert_close(rec.calls[-1][-1], y)


def test_marked_network_input_is_refused_by_the_build():
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    builder = trt.Builder(logger)
    network, x, *_ = _network(builder)
    network.mark_debug(x)
    assert builder.build_serialized_network(network, builder.create_builder_config()) is None


def test_plan_debug_entry_is_checked():
    plan = bytes(build_plan(trt, tiny_define(TinyNet()), input_shape=TINY_SHAPE, progress=False,
                            debug_tensors=["conv1"]))
    header, _ = deserialize_plan(plan)
    assert header["debug"]["tensors"][0]["name"] == "conv1"
    from trtbuild.reference import plan as plan_module

    header["debug"]["tensors"][0]["id"] = 10_000
    with pytest.raises(PlanError, match=r"debug tensors\[0\] .* not an object naming a tensor id the plan defines"):
        plan_module.check_header(header)


def test_tensor_never_reported_is_listed_as_fused_away(monkeypatch):
    net = TinyNet(seed=4)
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False,
                      debug_tensors=list(TINY_LAYER_MAP))
    make = dt.debug_listener

    def dropping_relu1(backend):  # as real TensorRT does for a tensor it fused away
        listener = make(backend)
        keep = listener.process_debug_tensor
        listener.process_debug_tensor = lambda *a: True if a[4] == "relu1" else keep(*a)
        return listener

    monkeypatch.setattr(dt, "debug_listener", dropping_relu1)
    report = check_parity(Engine(plan, trt), net, make_inputs({"input": TINY_SHAPE}, seed=1), output_names=["y"],
                          layer_map=TINY_LAYER_MAP, meta={"precision": "fp32"})
    assert report.passed and report.meta["fused_away"] == ["relu1"]
    assert [r.note for r in report.layers] == ["", "fused away (not compared)", ""]
    assert report.first_jump is None and report.first_failure is None
    assert "fused away (1, marked as debug tensors but never reported by the engine; not compared): relu1" \
        in report.to_table()


def test_a_debug_tensor_that_cannot_be_copied_fails_the_check_naming_it(monkeypatch):
    """An exception in the listener (which TensorRT would swallow) is raised after the run, naming
    the tensor, rather than leaving the tensor uncompared like one fused away."""
    net = TinyNet(seed=4)
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False,
                      debug_tensors=list(TINY_LAYER_MAP))
    engine = Engine(plan, trt)

    def failing(addr, location, type, shape):  # noqa: A002
        raise RuntimeError("no such memory")

    monkeypatch.setattr(dt, "tensor_at", failing)
    with pytest.raises(ValueError, match=r"debug tensor 'conv1' \(FLOAT \(1, 4, 8, 8\)\): RuntimeError: no such "
                                         r"memory; debug tensor 'relu1' "):
        check_parity(engine, net, make_inputs({"input": TINY_SHAPE}, seed=1), output_names=["y"],
                     layer_map=TINY_LAYER_MAP, meta={"precision": "fp32"})
    assert not any(engine.context.get_debug_state(n) for n in TINY_LAYER_MAP)  # the states are off again
    with pytest.raises(ValueError, match=r"has no debug tensors named \['input'\]"):
        dt.run_with_debug_tensors(engine, make_inputs({"input": TINY_SHAPE}, seed=1), ["conv1", "input"])


def test_bad_layerwise_via_and_unmarked_layer_tensors_are_refused():
    with pytest.raises(ValueError, match="layerwise_via 'debug' is not one of 'debug tensors', 'unfused debug "
                                         "tensors', 'outputs'"):
        check_model_parity("resnet18", trt, small=True, layerwise=True, layerwise_via="debug")
    net = TinyNet()
    plan = build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, progress=False, debug_tensors=["conv1"])
    with pytest.raises(ValueError, match=r"layer tensors \['relu1', 'conv2'\] are not debug tensors"):
        check_parity(Engine(plan, trt), net, make_inputs({"input": TINY_SHAPE}), output_names=["y"],
                     layer_map=TINY_LAYER_MAP, meta={"precision": "fp32"})


def test_cli_parity_layerwise_reads_debug_tensors_unless_told_otherwise(tmp_path, monkeypatch, capsys):
    from trtbuild.cli import main

    monkeypatch.chdir(tmp_path)
    cwd = tmp_path

    assert main(["parity", "resnet18", "--small", "--layerwise", "--backend", "reference", "--json", "r.json"]) == 0
    out = capsys.readouterr().out
    assert "layer tensors read through: debug tensors" in out
    import json

    meta = json.loads((cwd / "r.json").read_text())["meta"]
    assert meta["layerwise_via"] == "debug tensors" and meta["fused_away"] == []
    assert main(["parity", "resnet18", "--small", "--layerwise", "--layerwise-via", "outputs",
                 "--backend", "reference"]) == 0
    assert "layer tensors read through: outputs" in capsys.readouterr().out
    assert main(["parity", "resnet18", "--small", "--layerwise", "--layerwise-via", "unfused",
                 "--backend", "reference"]) == 0
    assert "layer tensors read through: unfused debug tensors" in capsys.readouterr().out

"""Debug tensors on TensorRT-RTX's real builder (no GPU needed to build): networks with
mark_debug'd tensors build, the marks reach the engine, and the cross-check requires both
backends to accept the same marks. Deserializing a TensorRT-RTX engine needs a GPU, so the engine's
is_debug_tensor is asserted only where one can load it."""

from __future__ import annotations

import pytest

import trtbuild.reference as reference
from trtbuild.backend import is_rtx, trt_of
from trtbuild.engine import BuildError, CrossCheckError, build_model, build_plan
from trtbuild.engine.build import definition_step
from trtbuild.models import registry
from trtbuild.weights import WeightMap

from helpers.tiny_net import TINY_LAYER_MAP, TINY_SHAPE, TinyNet, tiny_define


@pytest.fixture(scope="module")
def resnet18_small():
    spec = registry.get("resnet18")
    return spec, WeightMap.from_module(registry.get_torch_model("resnet18", seed=0, small=True))


def test_builder_network_with_debug_marks_builds_on_tensorrt_rtx(rtx):
    define = tiny_define(TinyNet())
    defined = definition_step(define, input_shape=TINY_SHAPE, debug_tensors=["relu1", "conv2"])(rtx)
    network = defined.network
    marked = {network.get_layer(i).get_output(0).name: network.is_debug_tensor(network.get_layer(i).get_output(0))
              for i in range(network.num_layers)}
    assert {n for n, m in marked.items() if m} == {"relu1", "y"}  # NVIDIA's network holds the marks (conv2 is output y)
    plain = build_plan(rtx, define, input_shape=TINY_SHAPE, progress=False)
    plan = build_plan(rtx, define, input_shape=TINY_SHAPE, progress=False, debug_tensors=["relu1", "conv2"])
    assert plan.info["debug_tensors"] == {"relu1": "relu1", "conv2": "y"}
    assert len(plan) > len(plain)  # the engine carries the debug outputs
    assert [o["name"] for o in plan.info["outputs"]] == ["y"]  # and no extra engine outputs
    engine = rtx.Runtime(rtx.Logger(rtx.Logger.INTERNAL_ERROR)).deserialize_cuda_engine(bytes(plan))
    if engine is not None:  # a GPU that runs TensorRT-RTX engines
        assert engine.is_debug_tensor("relu1") and engine.is_debug_tensor("y") and not engine.is_debug_tensor("conv1")


def test_unfused_marks_leave_the_tensorrt_rtx_engine_its_size(rtx):
    define = tiny_define(TinyNet())
    plain = build_plan(rtx, define, input_shape=TINY_SHAPE, progress=False)
    unfused = build_plan(rtx, define, input_shape=TINY_SHAPE, progress=False, debug_tensors=list(TINY_LAYER_MAP),
                         debug_unfused=True)
    marked = build_plan(rtx, define, input_shape=TINY_SHAPE, progress=False, debug_tensors=list(TINY_LAYER_MAP))
    assert unfused.info["debug_unfused"] is True and len(unfused) == len(plain) < len(marked)
    defined = definition_step(define, input_shape=TINY_SHAPE, debug_tensors=["conv1"], debug_unfused=True)(rtx)
    network = defined.network  # as documented: tensors marked this way are not seen by is_debug_tensor
    assert not any(network.is_debug_tensor(network.get_layer(i).get_output(0)) for i in range(network.num_layers))


def test_resnet18_small_with_debug_marks_is_cross_checked(rtx, resnet18_small):
    spec, wm = resnet18_small
    names = list(spec.layer_map)
    plan = build_model(spec, wm, reference, small=True, progress=False, debug_tensors=names, cross_check=True)
    cross = plan.info["cross_check"]
    assert sorted(cross["debug_tensors"]) == sorted(names)  # both networks mark exactly these
    from trtbuild.engine.cross_check import CrossCheckResult

    assert f"1 output(s), {len(names)} debug tensor mark(s) and " in CrossCheckResult(**cross).summary()
    assert [o["name"] for o in cross["outputs"]] == list(spec.output_names)  # no extra outputs on either side
    deployable = build_model(spec, wm, rtx, small=True, progress=False)
    assert len(plan.rtx_plan) > len(deployable)  # NVIDIA's engine carries the marks


def test_cross_check_catches_differing_debug_marks(rtx):
    define = tiny_define(TinyNet())

    def marks_more_on_rtx(network, x):
        outputs = define(network, x)
        if is_rtx(trt_of(network)):
            layer = next(network.get_layer(i) for i in range(network.num_layers)
                         if network.get_layer(i).get_output(0).name == "conv1")
            network.mark_debug(layer.get_output(0))
        return outputs

    with pytest.raises(CrossCheckError, match=r"the debug tensors \(mark_debug\) differ: reference \['relu1'\], "
                                              r"TensorRT-RTX 1\.\S+ \['conv1', 'relu1'\]"):
        build_plan(reference, marks_more_on_rtx, input_shape=TINY_SHAPE, progress=False, cross_check=True,
                   debug_tensors=["relu1"])


def test_a_marked_network_input_is_refused_by_both_builders(rtx):
    def define(network, x):
        trt = trt_of(network)
        network.mark_debug(network.get_input(0))
        return {"y": network.add_activation(x, trt.ActivationType.RELU).get_output(0)}

    with pytest.raises(BuildError, match="debug output for input has no runners"):
        build_plan(rtx, define, input_shape=TINY_SHAPE, progress=False)
    # both reject it, so the cross-check raises the reference's own error, not a disagreement
    with pytest.raises(BuildError, match=r"network input\(s\) \['input'\] are marked as debug tensors"):
        build_plan(reference, define, input_shape=TINY_SHAPE, progress=False, cross_check=True)


def test_layer_map_of_the_tiny_net_marks_layer_tensors_only():
    plan = build_plan(reference, tiny_define(TinyNet()), input_shape=TINY_SHAPE, progress=False,
                      debug_tensors=list(TINY_LAYER_MAP))
    assert [o["name"] for o in plan.info["outputs"]] == ["y"]
    assert list(plan.info["debug_tensors"]) == ["conv1", "relu1", "conv2"]  # network order


def test_unmark_undoes_mark_as_on_tensorrt_rtx(rtx):
    """unmark_debug / unmark_unfused_tensors_as_debug_tensors on both backends: the mark is gone from
    is_debug_tensor, and the reference's plan is byte for byte the plan of the unmarked network."""
    from trtbuild.engine.build import new_network

    seen = {}
    for trt in (reference, rtx):
        builder, network, _ = new_network(trt)
        x = network.add_input("x", trt.float32, (1, 3))
        relu = network.add_activation(x, trt.ActivationType.RELU).get_output(0)
        y = network.add_unary(relu, trt.UnaryOperation.NEG).get_output(0)
        network.mark_output(y)
        steps = [network.is_debug_tensor(relu)]
        steps += [network.mark_debug(relu), network.is_debug_tensor(relu)]
        steps += [network.unmark_debug(relu), network.is_debug_tensor(relu)]
        steps += [network.mark_unfused_tensors_as_debug_tensors(), network.unmark_unfused_tensors_as_debug_tensors()]
        seen[trt.__name__] = steps
        if trt is reference:
            plan = bytes(builder.build_serialized_network(network, builder.create_builder_config()))
            _, plain, _ = new_network(trt)
            px = plain.add_input("x", trt.float32, (1, 3))
            plain.mark_output(plain.add_unary(plain.add_activation(px, trt.ActivationType.RELU).get_output(0),
                                              trt.UnaryOperation.NEG).get_output(0))
            assert plan == bytes(builder.build_serialized_network(plain, builder.create_builder_config()))
    assert seen["trtbuild.reference"] == seen[rtx.__name__] == [False, True, True, True, False, True, True], seen

"""EngineInspector of the reference: each format and profiling verbosity, field by field.

The expected fields are the network's own (names, shapes, types written out by hand here) in the keys TensorRT's
documentation shows; the verbosity rules are TensorRT's (NONE: nothing, LAYER_NAMES_ONLY: names, DETAILED: all).
"""

from __future__ import annotations

import json

import numpy as np
import torch

import trtbuild.reference as trt

from helpers.inspect_engines import conv_relu_plan
from helpers.refnet import CapturingLogger

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)


def _engine(verbosity, dynamic=False):
    logger = CapturingLogger()
    plan = conv_relu_plan(logger, verbosity, stride=(2, 2), dynamic=dynamic)
    return trt.Runtime(logger).deserialize_cuda_engine(plan), logger


def test_detailed_json_layer_fields():
    engine, _ = _engine(trt.ProfilingVerbosity.DETAILED)
    assert engine.profiling_verbosity == trt.ProfilingVerbosity.DETAILED
    info = json.loads(engine.create_engine_inspector().get_layer_information(0, trt.LayerInformationFormat.JSON))
    assert info["Name"] == "stem" and info["LayerType"] == "CONVOLUTION" and info["ParameterType"] == "Convolution"
    assert info["Inputs"] == [{"Name": "x", "Location": "Device", "Dimensions": [2, 3, 5, 5],
                               "Format/Datatype": "Float"}]
    assert info["Outputs"] == [{"Name": "stem_output", "Location": "Device", "Dimensions": [2, 8, 2, 2],
                                "Format/Datatype": "Float"}]
    assert (info["Kernel"], info["Stride"], info["OutMaps"], info["Groups"]) == ([3, 3], [2, 2], 8, 1)
    assert info["PaddingMode"] == "kEXPLICIT_ROUND_DOWN"
    assert info["Weights"] == {"Type": "Float", "Count": 216, "Name": "stem.weight"}
    assert info["Bias"] == {"Type": "Float", "Count": 8}  # unnamed


def test_detailed_oneline_layer():
    engine, _ = _engine(trt.ProfilingVerbosity.DETAILED)
    line = engine.create_engine_inspector().get_layer_information(1, trt.LayerInformationFormat.ONELINE)
    assert "\n" not in line
    assert line.startswith("Name: act, LayerType: ACTIVATION, Inputs: [ { Name: stem_output, Location: Device, "
                           "Dimensions: [2,8,2,2], Format/Datatype: Float } ], Outputs: [ { Name: y, Location: Device, "
                           "Dimensions: [2,8,2,2], Format/Datatype: Float } ], ParameterType: Activation")


def test_engine_information_json_and_oneline():
    engine, _ = _engine(trt.ProfilingVerbosity.DETAILED, dynamic=True)
    inspector = engine.create_engine_inspector()
    info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    assert [layer["Name"] for layer in info["Layers"]] == ["stem", "act"]
    assert info["Layers"][0]["Inputs"][0]["Dimensions"] == [-1, 3, 5, 5]
    assert info["I/O Tensors"] == [
        {"Name": "x", "IOMode": "Input", "DataType": "Float", "Dimensions": [-1, 3, 5, 5], "Location": "Device",
         "IsShapeInferenceIO": False,
         "ProfileInfo": [{"MinShape": [1, 3, 5, 5], "OptShape": [2, 3, 5, 5], "MaxShape": [4, 3, 5, 5]}]},
        {"Name": "y", "IOMode": "Output", "DataType": "Float", "Dimensions": [-1, 8, 2, 2], "Location": "Device",
         "IsShapeInferenceIO": False}]
    lines = inspector.get_engine_information(trt.LayerInformationFormat.ONELINE).splitlines()
    assert [line.split(",")[0] for line in lines] == ["Name: stem", "Name: act"]
    # with an execution context, the dimensions are the context's
    context = engine.create_execution_context()
    assert context.set_input_shape("x", (3, 3, 5, 5))
    inspector.execution_context = context
    info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    assert info["Layers"][1]["Outputs"][0]["Dimensions"] == [3, 8, 2, 2]
    assert info["I/O Tensors"][1]["Dimensions"] == [3, 8, 2, 2]


def test_layer_names_only_and_none():
    engine, _ = _engine(trt.ProfilingVerbosity.LAYER_NAMES_ONLY)
    inspector = engine.create_engine_inspector()
    assert inspector.get_layer_information(0, trt.LayerInformationFormat.ONELINE) == "stem"
    assert json.loads(inspector.get_layer_information(0, trt.LayerInformationFormat.JSON)) == "stem"
    assert json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))["Layers"] == ["stem", "act"]
    assert inspector.get_engine_information(trt.LayerInformationFormat.ONELINE) == "stem\nact\n"
    engine, _ = _engine(trt.ProfilingVerbosity.NONE)
    inspector = engine.create_engine_inspector()
    assert inspector.get_layer_information(0, trt.LayerInformationFormat.JSON) == ""
    assert json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))["Layers"] == []


def test_layer_index_out_of_range_logs_and_returns_empty():
    engine, logger = _engine(trt.ProfilingVerbosity.DETAILED)
    assert engine.create_engine_inspector().get_layer_information(2, trt.LayerInformationFormat.JSON) == ""
    assert logger.errors[-1] == ("IEngineInspector::getLayerInformation: layer index 2 is outside [0, 2) (the engine "
                                 "has 2 layers)")


def test_weight_names_survive_serialization_and_a_stripped_plan():
    """A stripped plan has no weight arrays, but the inspector still reports each weight's type, count and name."""
    logger = CapturingLogger()
    builder = trt.Builder(logger)
    network = builder.create_network(STRONGLY_TYPED)
    x = network.add_input("x", trt.float32, (1, 4))
    w = trt.Weights(np.arange(4, dtype=np.float32).reshape(1, 4))
    const = network.add_constant((1, 4), w)
    const.name = "c"
    assert network.set_weights_name(w, "bias")
    add = network.add_elementwise(x, const.get_output(0), trt.ElementWiseOperation.SUM)
    add.get_output(0).name = "y"
    network.mark_output(add.get_output(0))
    config = builder.create_builder_config()
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.set_flag(trt.BuilderFlag.STRIP_PLAN)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    engine = trt.Runtime(logger).deserialize_cuda_engine(engine.serialize())
    info = json.loads(engine.create_engine_inspector().get_layer_information(0, trt.LayerInformationFormat.JSON))
    assert info["Weights"] == {"Type": "Float", "Count": 4, "Name": "bias"}
    refitter = trt.Refitter(engine, logger)
    assert refitter.get_missing_weights() == ["bias"]
    assert refitter.set_named_weights("bias", np.full((1, 4), 10, np.float32)) and refitter.refit_cuda_engine()
    context = engine.create_execution_context()
    xs, y = torch.arange(4, dtype=torch.float32).reshape(1, 4), torch.empty(1, 4)
    context.set_tensor_address("x", xs.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    assert context.execute_async_v3(0)
    assert y.tolist() == [[10.0, 11.0, 12.0, 13.0]]



def test_a_plan_with_an_unknown_profiling_verbosity_is_refused():
    from trtbuild.reference.plan import pack_plan, plan_header

    engine, logger = _engine(trt.ProfilingVerbosity.DETAILED)
    header = plan_header(bytes(engine.serialize()))
    header["profiling_verbosity"] = 7
    assert trt.Runtime(logger).deserialize_cuda_engine(bytes(pack_plan(header, engine._arrays))) is None
    assert logger.errors[-1] == ("deserialize_cuda_engine: reference plan header: 'profiling_verbosity' is 7, not a "
                                 "ProfilingVerbosity value")

"""trtbuild.engine.quick (one-shot build and run) and the lower-level pieces it shares with build_plan:
new_network, serialize_network (with explicit profile shapes) and the logger's captured messages."""

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import BuildError, Engine, EngineInputError, make_logger, new_network, serialize_network
from trtbuild.engine.quick import build_spec_network, run_network, run_spec
from trtbuild.layers.basic import relu


def _two_relus(network):
    x = network.add_input("x", trt.DataType.FLOAT, (2, 3))
    neg = network.add_unary(x, trt.UnaryOperation.NEG)
    neg.name = "neg"
    neg.get_output(0).name = "neg"
    return {"y": relu(network, neg.get_output(0), "r"), "x_relu": relu(network, x, "xr")}


def test_run_network_casts_feeds_and_orders_outputs_then_extras():
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -4.0, 0.25]])  # float64 numpy: cast to the FLOAT input
    out = run_network(_two_relus, {"x": x}, extra_outputs=["neg"])
    assert list(out) == ["y", "x_relu", "neg"]
    t = torch.from_numpy(x).float()
    torch.testing.assert_close(out["y"], torch.relu(-t), rtol=0, atol=0)
    torch.testing.assert_close(out["x_relu"], torch.relu(t), rtol=0, atol=0)
    torch.testing.assert_close(out["neg"], -t, rtol=0, atol=0)
    assert all(v.device.type == "cpu" and v.dtype == torch.float32 for v in out.values())


def test_run_network_errors_name_the_problem():
    with pytest.raises(KeyError, match=r"no tensors named \['nope'\]"):
        run_network(_two_relus, {"x": torch.zeros(2, 3)}, extra_outputs=["nope"])
    with pytest.raises(KeyError, match=r"no tensors named \['x'\]"):  # an input is not a layer output
        run_network(_two_relus, {"x": torch.zeros(2, 3)}, extra_outputs=["x"])
    with pytest.raises(EngineInputError, match="no input named 'z'"):
        run_network(_two_relus, {"x": torch.zeros(2, 3), "z": torch.zeros(1)})
    with pytest.raises(EngineInputError, match="input 'x' is missing"):
        run_network(_two_relus, {})


def test_build_spec_network_refuses_other_precisions():
    from trtbuild.models import registry

    network = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    with pytest.raises(ValueError, match=r"precision must be one of \('fp32', 'fp16', 'int8', 'fp8'\), got 'bf16'"):
        build_spec_network(network, registry.get("alexnet"), None, "bf16", small=True)
    with pytest.raises(ValueError, match="--precision int8 needs a calibration"):  # int8/fp8: a quantization plan
        build_spec_network(network, registry.get("alexnet"), None, "int8", small=True)
    assert network.num_inputs == 0


def test_run_spec_reports_missing_outputs_by_name():
    class Spec:
        name, input_name, output_names = "fake", "input", ["logits", "boxes"]

        @staticmethod
        def input_shape(small):
            return (1, 4)

        @staticmethod
        def build_network(network, wm, x):
            return {"logits": relu(network, x, "logits")}

    with pytest.raises(BuildError, match=r"model 'fake': build_network returned no tensor for outputs \['boxes'\]"):
        run_spec(Spec, None, torch.zeros(1, 4))
    Spec.output_names = ["logits"]
    info = {}
    out = run_spec(Spec, None, torch.tensor([[-1.0, 2.0, -3.0, 4.0]]), "fp16", info=info)
    assert out["logits"].dtype == torch.float16 and out["logits"].tolist() == [[0.0, 2.0, 0.0, 4.0]]
    assert info == {"num_layers": 1}


def test_serialize_network_with_explicit_profile_for_a_non_batch_dimension():
    builder, network, logger = new_network(trt)
    x = network.add_input("x", trt.DataType.FLOAT, (2, -1))
    y = relu(network, x, "y")
    network.mark_output(y)
    with pytest.raises(ValueError, match=r"input .x. \(2, -1\) has a static batch dimension"):
        serialize_network(trt, builder, network, logger, batch=(1, 2, 2), progress=False)
    plan = serialize_network(trt, builder, network, logger, profile_shapes={"x": ((2, 1), (2, 5), (2, 8))},
                             progress=False)
    assert plan.info["profile"] == {"x": {"min": [2, 1], "opt": [2, 5], "max": [2, 8]}}
    engine = Engine(plan, trt)
    v = torch.linspace(-3, 3, 14).reshape(2, 7)
    torch.testing.assert_close(engine.run({"x": v})["y"], torch.relu(v), rtol=0, atol=0)
    with pytest.raises(EngineInputError, match=r"outside the optimization profile range \[1, 8\]"):
        engine.run({"x": torch.zeros(2, 9)})


def test_capturing_logger_keeps_warnings_and_errors():
    logger = make_logger(trt)
    assert isinstance(logger, trt.ILogger) and logger.messages == []
    assert trt.Runtime(logger).deserialize_cuda_engine(b"junk") is None
    assert [sev for sev, _ in logger.messages] == [int(trt.ILogger.ERROR)]
    assert "not a trtbuild reference plan" in logger.messages[0][1] and logger.errors == [logger.messages[0][1]]
    logger.log(trt.ILogger.WARNING, "careful")
    logger.log(trt.ILogger.INFO, "chatty")
    assert logger.messages[-1] == (int(trt.ILogger.WARNING), "careful") and len(logger.errors) == 1
    logger.clear()
    assert logger.messages == [] and logger.errors == []


def test_run_builder_runs_one_builder_in_the_input_type():
    from trtbuild.engine.quick import run_builder
    from trtbuild.layers.l2norm import l2norm

    x = torch.tensor([[[[3.0]], [[4.0]]]]).half()  # |x| over channels = 5
    y = run_builder(l2norm, x, np.array([10.0, 20.0]), "norm")
    assert y.dtype == torch.float16
    torch.testing.assert_close(y.float().reshape(-1), torch.tensor([6.0, 16.0]), rtol=1e-3, atol=0)
    with pytest.raises(ValueError, match="not float32, float16 or bfloat16"):
        run_builder(l2norm, x.double(), np.ones(2), "norm")


def test_robust_rel_error_by_hand():
    from trtbuild.parity.compare import robust_rel_error

    ref = torch.tensor([100.0, 0.5, -2.0])
    # floor = 1 % of 100 = 1: element 0 judged by itself (1/100), element 1 against 1 (0.25),
    # element 2 by itself (0.5/2)
    assert robust_rel_error(torch.tensor([101.0, 0.75, -2.5]), ref) == pytest.approx(0.25)
    assert robust_rel_error(torch.tensor([float("nan"), 0.5, -2.0]), ref) == float("inf")

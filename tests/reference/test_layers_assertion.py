"""trtbuild.reference: Assertion. A condition of constants is checked when the network is built (as
TensorRT-RTX does: a false one fails its build too), one left to run time makes execute_async_v3 log the message
and return False; refusals (type, rank, a condition that reads a network input's values) agree with TensorRT-RTX
(the `refnet` twin)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import CapturingLogger, run_plan

EQUAL = trt.ElementWiseOperation.EQUAL


def condition(refnet, a, b, op=EQUAL, dtype=np.int32):
    """A BOOL condition a == b (elementwise) of two constants."""
    x, y = (np.array(v, dtype) for v in (a, b))
    ca = refnet.network.add_constant(x.shape, trt.Weights(x)).get_output(0)
    cb = refnet.network.add_constant(y.shape, trt.Weights(y)).get_output(0)
    return refnet.network.add_elementwise(ca, cb, op).get_output(0)


def passthrough(refnet):
    x = refnet.input("x", (2, 3))
    return refnet.network.add_identity(x).get_output(0)


def with_output(refnet):
    """An identity output, so that TensorRT-RTX's build of a refused construction fails for the assertion's
    reason, not for want of an output."""
    y = passthrough(refnet)
    y.name = "y"
    refnet.network.mark_output(y)


@pytest.mark.parametrize("a, b", [([2, 3], [2, 3]), (4, 4)], ids=["1-D", "0-D"])
def test_a_true_condition_builds_and_runs(refnet, a, b):
    layer = refnet.network.add_assertion(condition(refnet, a, b), "shapes agree")
    assert layer.message == "shapes agree" and layer.num_outputs == 0 and layer.num_inputs == 1
    assert layer.type == trt.LayerType.ASSERTION
    x = torch.rand(2, 3)
    y = refnet.run({"x": x}, y=passthrough(refnet))["y"]
    torch.testing.assert_close(y, x)


@pytest.mark.parametrize("a, b, where", [([2, 3], [2, 4], r"condition\[1\] is false"),
                                         (4, 5, "the condition is false")])
def test_a_false_constant_condition_fails_the_build(refnet, a, b, where):
    layer = refnet.network.add_assertion(condition(refnet, a, b), "the second dim must be 4")
    y = passthrough(refnet)
    y.name = "y"
    refnet.network.mark_output(y)
    assert refnet.build() is None
    assert refnet.logger.errors[-1] == (f"layer '{layer.name}': the assertion failed when the network is built "
                                        f"({where.replace(chr(92), '')}): the second dim must be 4")


def test_message_can_change(refnet):
    layer = refnet.network.add_assertion(condition(refnet, [1], [2]), "first")
    layer.message = "second"
    assert layer.message == "second"
    y = passthrough(refnet)
    y.name = "y"
    refnet.network.mark_output(y)
    assert refnet.build() is None and refnet.logger.errors[-1].endswith("(condition[0] is false): second")
    with pytest.raises(TypeError, match="a str is needed, got int"):
        layer.message = 3


def test_the_assertion_is_kept_in_the_plan_although_nothing_consumes_it(refnet):
    layer = refnet.network.add_assertion(condition(refnet, [1, 1], [1, 1]), "kept")
    y = passthrough(refnet)
    y.name = "y"
    refnet.network.mark_output(y)
    plan = refnet.build()
    engine = trt.Runtime(CapturingLogger()).deserialize_cuda_engine(plan)
    assert engine.num_layers == 5  # two constants, the comparison, the assertion, the identity
    assert layer.name in bytes(plan).decode("latin-1")


def test_a_condition_left_to_run_time_fails_the_run(refnet, monkeypatch):
    """Where the condition is not known at build time (the shape of a dynamic input, once shape layers exist),
    execute_async_v3 evaluates it: false, it logs one sentence and returns False."""
    import trtbuild.reference.ops.assertion as assertion

    monkeypatch.setattr(assertion, "constant_value", lambda t: None)  # as if it depended on a run-time shape
    layer = refnet.network.add_assertion(condition(refnet, [2, 3, 4], [2, 9, 4]), "batch mismatch")
    y = passthrough(refnet)
    y.name = "y"
    refnet.network.mark_output(y)
    plan = trt.Builder(CapturingLogger()).build_serialized_network(refnet.network.ref, refnet.config)
    assert plan is not None
    logger = CapturingLogger()
    with pytest.raises(AssertionError):
        run_plan(plan, {"x": torch.rand(2, 3)}, logger)
    assert logger.errors[-1] == (f"IExecutionContext::enqueueV3: layer '{layer.name}': the assertion failed when "
                                 "the engine runs (condition[1] is false): batch mismatch")
    refnet.twin.built = True  # judged by the builds above; RTX fails this construction at build time


@pytest.mark.parametrize("dt", [trt.int32, trt.float32])
def test_refuses_a_condition_not_bool(refnet, dt):
    with_output(refnet)
    a = np.array([1, 2], np.int32 if dt == trt.int32 else np.float32)
    c = refnet.network.add_constant(a.shape, trt.Weights(a)).get_output(0)
    with pytest.raises(trt.NetworkError, match=f"Assertion\\]': the condition has type {dt.name}; an assertion "
                                               "needs a BOOL condition"):
        refnet.network.add_assertion(c, "m")


def test_refuses_a_condition_of_rank_two(refnet):
    with_output(refnet)
    with pytest.raises(trt.NetworkError, match=r"the condition has shape \(2, 2\); an assertion needs a 0-D or 1-D"):
        refnet.network.add_assertion(condition(refnet, [[1, 2], [3, 4]], [[1, 2], [3, 4]]), "m")


@pytest.mark.parametrize("dt", [trt.bool, trt.int32, trt.float32])
def test_refuses_a_condition_of_network_input_values(refnet, dt):
    """TensorRT-RTX makes such an input a shape input: a BOOL or FLOAT one is refused ("input shape tensors must
    have type INT32 or INT64"), an INT32 one needs profile values; the reference has no shape inputs."""
    with_output(refnet)
    x = refnet.input("c", (2,), dt)
    cond = x
    if dt != trt.bool:
        k = np.array([1, 1], np.int32 if dt == trt.int32 else np.float32)
        cond = refnet.network.add_elementwise(x, refnet.network.add_constant((2,), trt.Weights(k)).get_output(0),
                                              EQUAL).get_output(0)
    with pytest.raises(trt.NetworkError, match="the condition depends on the values of network input 'c'; an "
                                               "assertion needs a shape tensor"):
        refnet.network.add_assertion(cond, "m")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_a_false_comparison_of_constants_of_each_type_fails_the_build(refnet, dtype):
    layer = refnet.network.add_assertion(
        condition(refnet, [3, 2], [1, 5], op=trt.ElementWiseOperation.GREATER, dtype=dtype), "first must exceed")
    y = passthrough(refnet)
    y.name = "y"
    refnet.network.mark_output(y)
    assert refnet.build() is None
    assert refnet.logger.errors[-1] == (f"layer '{layer.name}': the assertion failed when the network is built "
                                        "(condition[1] is false): first must exceed")

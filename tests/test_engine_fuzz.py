"""Fuzzing the two engine-side parsers: the reference plan (deserialize_cuda_engine must log and
return None, never raise) and an engine file with its JSON sidecar (only trtbuild's engine
errors, each with a message)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trtbuild.reference as trt
from trtbuild.engine import Engine, build_plan, load_engine, make_sidecar, save_engine
from trtbuild.engine.errors import EngineError


class _Quiet(trt.ILogger):
    def __init__(self):
        trt.ILogger.__init__(self)
        self.errors = []

    def log(self, severity, msg):
        if severity <= trt.ILogger.ERROR:
            self.errors.append(msg)


def _define(network):
    x = network.add_input("x", trt.float32, (1, 2, 3, 3))
    w = np.arange(2 * 2 * 3 * 3, dtype=np.float32).reshape(2, 2, 3, 3) / 10
    conv = network.add_convolution_nd(x, 2, (3, 3), trt.Weights(w), trt.Weights(np.ones(2, np.float32)))
    conv.padding_nd = (1, 1)
    conv.name = conv.get_output(0).name = "y"
    return {"y": conv.get_output(0)}


PLAN = bytes(build_plan(trt, _define, progress=False))
FEED = {"x": torch.linspace(-1, 1, 18).reshape(1, 2, 3, 3)}
EXPECTED = Engine(PLAN, trt).run(FEED)["y"]


def _mutate(data: bytes, flips, cut, insert) -> bytes:
    buf = bytearray(data)
    for pos, value in flips:
        buf[pos % len(buf)] = value
    if cut is not None:
        buf = buf[:cut % (len(buf) + 1)]
    if insert is not None:
        pos, blob = insert
        buf[pos % (len(buf) + 1):pos % (len(buf) + 1)] = blob
    return bytes(buf)


mutations = dict(
    flips=st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 255)), max_size=4),
    cut=st.none() | st.integers(0, 1 << 30),
    insert=st.none() | st.tuples(st.integers(0, 1 << 30), st.binary(min_size=1, max_size=16)),
)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=512))
def test_arbitrary_bytes_are_not_a_plan(data):
    logger = _Quiet()
    assert trt.Runtime(logger).deserialize_cuda_engine(data) is None
    assert logger.errors and "deserialize_cuda_engine" in logger.errors[0]


@settings(max_examples=300, deadline=None)
@given(**mutations)
def test_mutated_plans_load_and_run_unchanged_or_are_refused(flips, cut, insert):
    data = _mutate(PLAN, flips, cut, insert)
    logger = _Quiet()
    engine = trt.Runtime(logger).deserialize_cuda_engine(data)
    if data == PLAN:
        assert engine is not None
    elif engine is None:  # the checksum or the structure caught it
        assert logger.errors
    else:  # a mutation the checksum cannot see does not exist: the bytes equal the plan
        pytest.fail("a changed plan was accepted")
    if engine is not None:
        torch.testing.assert_close(Engine(data, trt).run(FEED)["y"], EXPECTED)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "tiny.engine"
    save_engine(path, PLAN, make_sidecar(trt, PLAN))
    return path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(["engine", "sidecar"]), **mutations)
def test_mutated_engine_files_raise_engine_errors_only(saved, tmp_path, target, flips, cut, insert):
    engine_bytes = saved.read_bytes()
    sidecar_bytes = saved.with_name(saved.name + ".json").read_bytes()
    if target == "engine":
        engine_bytes = _mutate(engine_bytes, flips, cut, insert)
    else:
        sidecar_bytes = _mutate(sidecar_bytes, flips, cut, insert)
    path = tmp_path / "m.engine"
    path.write_bytes(engine_bytes)
    path.with_name("m.engine.json").write_bytes(sidecar_bytes)
    try:
        engine = load_engine(path, trt)
    except EngineError as e:
        assert str(e)
        return
    # accepted: the engine bytes are intact (sha256) and the sidecar still parses to the same facts
    assert engine_bytes == saved.read_bytes()
    side = json.loads(sidecar_bytes)  # an unreadable sidecar is never accepted silently
    assert side.get("engine_sha256") in (None, hashlib.sha256(engine_bytes).hexdigest())
    torch.testing.assert_close(engine.run(FEED)["y"], EXPECTED)

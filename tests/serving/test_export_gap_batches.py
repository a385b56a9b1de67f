"""The model that `trtbuild export-triton --kind python` writes runs a batch that no optimization profile
takes as `trtbuild serve` does: zero-padded to the next profile's min, the padding cut from the answers
(trtbuild.serving.padding); a batch that no profile takes even padded gets Engine.run's one sentence.
The exported model.py itself runs here, without Triton: its `triton_python_backend_utils` is a stand-in
holding requests and responses, and initialize() gets the config.pbtxt export-triton wrote, as Triton's
JSON. The engine (reference): the sums of exp(-|x|) over H and W, with profiles 0: batch 1..4 at
8x8, 1: batch 8..16 at 8x8, 2: batch 1..2 at 16x16. Expected outputs come from numpy (float64) and from
direct Engine runs of each request."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.engine import ShapeProfile, build_plan, load_engine
from trtbuild.engine.serialize import make_sidecar, save_engine
from trtbuild.serving.repository import export_model

text_format = pytest.importorskip("google.protobuf.text_format")
json_format = pytest.importorskip("google.protobuf.json_format")
mc = pytest.importorskip("tritonclient.grpc.model_config_pb2")

PROFILES = (ShapeProfile((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8)),
            ShapeProfile((8, 3, 8, 8), (8, 3, 8, 8), (16, 3, 8, 8)),
            ShapeProfile((1, 3, 16, 16), (1, 3, 16, 16), (2, 3, 16, 16)))


def _define(network, x):
    y = network.add_unary(x, trt.UnaryOperation.ABS).get_output(0)
    y = network.add_unary(y, trt.UnaryOperation.NEG).get_output(0)
    y = network.add_unary(y, trt.UnaryOperation.EXP).get_output(0)
    return {"sums": network.add_reduce(y, trt.ReduceOperation.SUM, 0b1100, True).get_output(0)}


def _expected(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.abs(x.astype(np.float64))).sum(axis=(2, 3), keepdims=True)


class _Tensor:
    """pb_utils.Tensor: an input read through DLPack, an output kept as the model handed it over."""

    def __init__(self, name, value):
        self.name, self.value = name, np.asarray(value)

    @classmethod
    def from_dlpack(cls, name, capsule):
        return cls(name, torch.utils.dlpack.from_dlpack(capsule).cpu().numpy())

    def to_dlpack(self):
        return torch.utils.dlpack.to_dlpack(torch.from_numpy(self.value))


class _Response:
    def __init__(self, output_tensors=(), error=None):
        self.outputs = {t.name: t.value for t in output_tensors}
        self.error = error


def _utils() -> types.ModuleType:
    utils = types.ModuleType("triton_python_backend_utils")
    utils.Tensor, utils.InferenceResponse, utils.TritonError = _Tensor, _Response, str
    utils.get_input_tensor_by_name = lambda request, name: _Tensor(name, request[name]) if name in request else None
    return utils


@pytest.fixture(scope="module")
def engine_path(tmp_path_factory):
    plan = build_plan(trt, _define, input_shape=(1, 3, 8, 8), profiles=PROFILES, progress=False)
    path = tmp_path_factory.mktemp("gaps") / "gaps.engine"
    return save_engine(path, plan, make_sidecar(trt, plan, plan.info))


def _exported(engine_path, tmp_path, monkeypatch, batching):
    """TritonPythonModel of the model.py export-triton wrote, initialized as Triton's Python backend does,
    with the batches its engine ran recorded."""
    repo = tmp_path / "repo"
    export_model(engine_path, repo, "gaps", kind="python", batching=batching)
    model_dir = repo / "gaps"
    config = text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _utils())
    spec = importlib.util.spec_from_file_location("exported_gaps_model", model_dir / "1" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel()
    model.initialize({"model_config": json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True)),
                      "model_repository": str(model_dir), "model_version": "1", "model_name": "gaps",
                      "model_instance_name": "gaps_0_0"})
    ran, run = [], model.engine.run

    def recording(feeds, **kw):
        ran.append({k: tuple(v.shape) for k, v in feeds.items()})
        return run(feeds, **kw)
    monkeypatch.setattr(model.engine, "run", recording)
    return model, ran, config


def test_the_config_says_the_model_pads_the_gap(engine_path, tmp_path, monkeypatch):
    _, _, config = _exported(engine_path, tmp_path, monkeypatch, "concatenate")
    text = (tmp_path / "repo" / "gaps" / "config.pbtxt").read_text()
    assert config.max_batch_size == 16
    assert text.startswith("# batches 5 to 7: in no optimization profile of the engine; Triton may still form them "
                           "(the model zero-pads them to the next profile's min and cuts the padding from the "
                           "answers)\n")


def test_requests_concatenated_into_a_gap_batch_are_padded(engine_path, tmp_path, monkeypatch):
    model, ran, _ = _exported(engine_path, tmp_path, monkeypatch, "concatenate")
    rng = np.random.default_rng(0)
    requests = [{"input": rng.standard_normal((b, 3, 8, 8)).astype(np.float32)} for b in (3, 3)]
    responses = model.execute(requests)  # 6 rows: between profile 0 (1..4) and profile 1 (8..16)
    assert ran == [{"input": (8, 3, 8, 8)}]
    direct = load_engine(engine_path, trt)
    for request, response in zip(requests, responses):
        assert response.error is None
        assert response.outputs["sums"].shape == (3, 3, 1, 1)
        want = direct.run({"input": torch.from_numpy(request["input"])})["sums"].numpy()  # profile 0 takes 3
        np.testing.assert_allclose(response.outputs["sums"], want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(response.outputs["sums"], _expected(request["input"]), rtol=1e-5)


def test_one_request_of_a_gap_batch_is_padded(engine_path, tmp_path, monkeypatch):
    model, ran, _ = _exported(engine_path, tmp_path, monkeypatch, "per-request")
    x = np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)
    (response,) = model.execute([{"input": x}])
    assert ran == [{"input": (8, 3, 8, 8)}] and response.error is None
    direct = load_engine(engine_path, trt)
    halves = [direct.run({"input": torch.from_numpy(h)})["sums"].numpy() for h in (x[:3], x[3:])]
    np.testing.assert_allclose(response.outputs["sums"], np.concatenate(halves), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(response.outputs["sums"], _expected(x), rtol=1e-5)


@pytest.mark.parametrize("batching", ["concatenate", "per-request"])
def test_a_batch_no_profile_takes_is_refused_in_one_sentence(engine_path, tmp_path, monkeypatch, batching):
    model, ran, _ = _exported(engine_path, tmp_path, monkeypatch, batching)
    big, ok = np.ones((4, 3, 16, 16), np.float32), np.ones((1, 3, 16, 16), np.float32)
    refused, answered = model.execute([{"input": big}, {"input": ok}])
    path = tmp_path / "repo" / "gaps" / "1" / "model.engine"
    assert refused.error == (f"EngineInputError: input 'input' has shape (4, 3, 16, 16), which no optimization "
                             f"profile of {path} takes: profile 0 1x3x8x8..4x3x8x8; profile 1 "
                             "8x3x8x8..16x3x8x8; profile 2 1x3x16x16..2x3x16x16")
    assert answered.error is None  # the other request is answered on its own
    np.testing.assert_allclose(answered.outputs["sums"], _expected(ok), rtol=1e-5)
    assert (4, 3, 16, 16) in [r["input"] for r in ran]  # run as it is: padding it would not help

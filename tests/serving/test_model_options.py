"""What the model code does around each engine run (trtbuild.serving.model_options): PyTorch threads
per model instance and the refusal of NaN/Inf inputs, written by export-triton into config.pbtxt and
applied by model.py's EngineModel when Triton loads it. With a real Triton: test_python_backend_server.py
and test_serve.py."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.triton_models import build_zoo

from trtbuild.cli import main
from trtbuild.serving.config import ConfigError, config_text
from trtbuild.serving.model_options import ModelOptions, ModelOptionsError
from trtbuild.serving.python_model import EngineModel

text_format = pytest.importorskip("google.protobuf.text_format")
json_format = pytest.importorskip("google.protobuf.json_format")
mc = pytest.importorskip("tritonclient.grpc.model_config_pb2")


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return build_zoo(tmp_path_factory.mktemp("options"), "resnet18", batch=(1, 2, 4))


def _config(model_dir):
    return text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())


class _Logger:
    lines: list[str] = []

    @classmethod
    def log_info(cls, message: str) -> None:
        cls.lines.append(message)


class _Utils:
    Logger = _Logger


class _Model(EngineModel):
    utils = _Utils


def _initialize(model_dir) -> _Model:
    """EngineModel.initialize as Triton's Python backend calls it (model_config as Triton's JSON)."""
    config = json_format.MessageToDict(_config(model_dir), preserving_proto_field_name=True)
    model = _Model()
    model.initialize({"model_config": json.dumps(config), "model_repository": str(model_dir), "model_version": "1",
                      "model_name": model_dir.name, "model_instance_name": f"{model_dir.name}_0_0"})
    return model


def test_export_writes_threads_and_the_model_applies_them(engine, tmp_path, capsys):
    repo = tmp_path / "repo"
    before = torch.get_num_threads()
    try:
        assert main(["export-triton", "resnet18", "--small", "--engine", str(engine), "--repo", str(repo), "--kind",
                     "python"]) == 0
        assert _config(repo / "resnet18").parameters["trtbuild_threads"].string_value == "1"  # the default
        torch.set_num_threads(2)
        _initialize(repo / "resnet18")
        assert torch.get_num_threads() == 1
        assert main(["export-triton", "resnet18", "--small", "--engine", str(engine), "--repo", str(repo), "--kind",
                     "python", "--name", "r3", "--threads", "3"]) == 0
        assert _config(repo / "r3").parameters["trtbuild_threads"].string_value == "3"
        _Logger.lines.clear()
        model = _initialize(repo / "r3")
        assert torch.get_num_threads() == 3
        assert _Logger.lines == ["trtbuild: model 'r3' instance 'r3_0_0' runs 3 PyTorch thread(s) (config.pbtxt "
                                 "parameter trtbuild_threads)"]
        x = torch.rand(2, 3, 64, 64)
        assert model.engine.run({"input": x})["logits"].shape == (2, 10)
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["export-triton", "resnet18", "--small", "--engine", str(engine), "--repo", str(repo), "--kind", "python",
              "--threads", "-1"])
    assert "--threads: must be >= 0, got -1" in capsys.readouterr().err


def test_threads_zero_keeps_pytorchs_default_and_bad_values_are_refused(engine):
    sidecar = json.loads(engine.with_name(engine.name + ".json").read_text())
    before = torch.get_num_threads()
    assert ModelOptions(threads=0).apply_threads() == before
    assert ModelOptions.from_config({}) == ModelOptions(threads=1)  # a repository written before: the default
    assert ModelOptions.from_config({"parameters": {"trtbuild_threads": {"string_value": "4"}}}).threads == 4
    with pytest.raises(ModelOptionsError, match=r"^config.pbtxt parameter trtbuild_threads 'many': expected an "
                                                r"integer >= 1, or 0 for PyTorch's default$"):
        ModelOptions.from_config({"parameters": {"trtbuild_threads": {"string_value": "many"}}})
    with pytest.raises(ModelOptionsError, match=r"^threads -2: PyTorch threads per model instance"):
        ModelOptions(threads=-2)
    with pytest.raises(ConfigError, match=r"^--threads and --reject-nonfinite apply to --kind python only"):
        config_text(sidecar, "m", "tensorrt", options=ModelOptions(threads=2))


def test_reject_nonfinite_is_off_by_default_and_written_when_asked(engine, tmp_path):
    repo = tmp_path / "repo"
    assert main(["export-triton", "resnet18", "--small", "--engine", str(engine), "--repo", str(repo), "--kind",
                 "python"]) == 0
    assert _config(repo / "resnet18").parameters["trtbuild_reject_nonfinite"].string_value == "false"
    assert main(["export-triton", "resnet18", "--small", "--engine", str(engine), "--repo", str(repo), "--kind",
                 "python", "--name", "strict", "--reject-nonfinite"]) == 0
    params = _config(repo / "strict").parameters
    assert params["trtbuild_reject_nonfinite"].string_value == "true" and params["trtbuild_threads"].string_value == "1"
    assert ModelOptions.from_config({}).reject_nonfinite is False  # a repository written before: not checked
    strict = ModelOptions.from_config({"parameters": {"trtbuild_reject_nonfinite": {"string_value": "True"}}})
    assert strict == ModelOptions(reject_nonfinite=True)
    with pytest.raises(ModelOptionsError, match=r"^config.pbtxt parameter trtbuild_reject_nonfinite 'maybe': "
                                                r"expected true or false$"):
        ModelOptions.from_config({"parameters": {"trtbuild_reject_nonfinite": {"string_value": "maybe"}}})


def test_check_finite_names_the_input_and_the_counts():
    x = torch.zeros(2, 3)
    ModelOptions().check_finite("input", x.fill_(float("nan")))  # off: not looked at
    strict = ModelOptions(reject_nonfinite=True)
    strict.check_finite("input", torch.zeros(2, 3, dtype=torch.float16))
    strict.check_finite("ids", torch.tensor([1, 2], dtype=torch.int32))  # integers cannot be NaN
    y = torch.zeros(2, 3, dtype=torch.float16)
    y[0, 0], y[1, 2] = float("-inf"), float("nan")
    with pytest.raises(ValueError, match=r"^input 'input' holds 1 NaN and 1 infinite value\(s\) of 6, and this model "
                                         r"rejects non-finite inputs \(trtbuild_reject_nonfinite: true\)$"):
        strict.check_finite("input", y)

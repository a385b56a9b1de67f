"""`trtbuild export-onnx`: backend line, checked file, --weights, --precision, errors."""

from __future__ import annotations

import numpy as np
import onnx
import torch

from trtbuild.cli import main
from trtbuild.models import registry
from trtbuild.onnx_export import run_onnxruntime


def _input(spec):
    return torch.rand(spec.input_shape(True), generator=torch.Generator().manual_seed(1)) * 2 - 1


def test_export_onnx_writes_a_checked_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no weights/resnet18-small.wts here: the seeded model's weights
    path = tmp_path / "r18.onnx"
    assert main(["export-onnx", "resnet18", "--small", "--out", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("backend: reference")
    assert any(line.startswith("wrote ") and "opset 17" in line for line in lines)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    spec = registry.get("resnet18")
    x = _input(spec)
    with torch.no_grad():
        ref = registry.get_torch_model("resnet18", seed=0, small=True)(x)
    y = run_onnxruntime(model, {spec.input_name: x})["logits"]
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-4, atol=1e-5)


def test_export_onnx_reads_weights_and_precision(tmp_path, capsys):
    from trtbuild.weights import export_weights

    model3 = registry.get_torch_model("resnet18", seed=3, small=True)
    wpath = tmp_path / "r18.safetensors"
    export_weights(model3, wpath)
    path = tmp_path / "r18_fp16.onnx"
    assert main(["export-onnx", "resnet18", "--small", "--weights", str(wpath), "--precision", "fp16",
                 "--opset", "18", "--out", str(path)]) == 0
    model = onnx.load(path)
    assert model.opset_import[0].version == 18
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    spec = registry.get("resnet18")
    x = _input(spec)
    with torch.no_grad():
        ref = model3(x)
    y = torch.from_numpy(run_onnxruntime(model, {spec.input_name: x.half()})["logits"]).float()
    assert (y - ref).abs().max().item() <= 1e-2 * ref.abs().max().item()


def test_export_onnx_reads_the_default_weight_file_as_build_does(cwd, capsys):
    from trtbuild.weights import export_weights

    model3 = registry.get_torch_model("resnet18", seed=3, small=True)
    (cwd / "weights").mkdir()
    export_weights(model3, cwd / "weights" / "resnet18-small.wts")
    before = sorted(p.name for p in (cwd / "weights").iterdir())
    assert main(["export-onnx", "resnet18", "--small", "--out", "r18.onnx"]) == 0
    spec = registry.get("resnet18")
    x = _input(spec)
    with torch.no_grad():
        ref = model3(x)
    y = run_onnxruntime(onnx.load(cwd / "r18.onnx"), {spec.input_name: x})["logits"]
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-4, atol=1e-5)
    assert "weights: weights/resnet18-small.wts" in capsys.readouterr().out.splitlines()
    assert sorted(p.name for p in (cwd / "weights").iterdir()) == before


def test_export_onnx_errors(tmp_path, capsys):
    assert main(["export-onnx", "no_such_model", "--out", str(tmp_path / "x.onnx")]) == 1
    assert "no_such_model" in capsys.readouterr().err
    assert main(["export-onnx", "resnet18", "--small", "--out", str(tmp_path / "missing" / "x.onnx")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["export-onnx", "resnet18", "--small", "--opset", "9", "--out", str(tmp_path / "x.onnx")]) == 1
    assert "opset 9" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []

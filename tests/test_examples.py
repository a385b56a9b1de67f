"""Every example under examples/ runs as a user would run it (its one script, in a subprocess, from an
empty working directory, writing under --out), and what it wrote is checked here, where possible
without trusting the example's own verdict: engines are run against the PyTorch model, the ONNX file
in onnxruntime directly, the sidecars and the Triton config are read and parsed here."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from trtbuild.engine import load_engine
from trtbuild.models import registry

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
EXAMPLES = ROOT / "examples"
FOLDER = re.compile(r"^(\d\d)_[a-z0-9_]+$")
TESTED: set[str] = set()


def example(folder: str):
    """Mark a test as the one that runs examples/<folder> (test_every_example_is_tested checks the set)."""
    TESTED.add(folder)
    return lambda test: test


def example_folders() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and FOLDER.match(p.name))


def script_of(folder: str) -> Path:
    (script,) = (EXAMPLES / folder).glob("*.py")
    return script


def run_example(folder: str, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the example's script with --out tmp_path/out from an empty working directory on the
    reference backend; require that it wrote nothing outside --out. Returns (process, out dir)."""
    out, cwd = tmp_path / "out", tmp_path / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TRTBUILD_BACKEND="reference",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(script_of(folder)), "--out", str(out), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert list(cwd.iterdir()) == [], f"{folder} wrote outside --out: {list(cwd.iterdir())}"
    assert "DeprecationWarning" not in proc.stderr, f"{folder} uses a deprecated API:\n{proc.stderr}"
    return proc, out


def passed(proc: subprocess.CompletedProcess) -> bool:
    """Exit code 0 and a last line ending in PASS."""
    lines = proc.stdout.strip().splitlines()
    return proc.returncode == 0 and bool(lines) and lines[-1].endswith(": PASS")


def load_script(folder: str):
    """The example's script as a module (its PyTorch model is the user's code, independent of trtbuild)."""
    spec = importlib.util.spec_from_file_location(f"example_{folder}", script_of(folder))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seeded_input(shape, seed: int = 1) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def max_error(engine_path: Path, module: torch.nn.Module, shape, output: str) -> tuple[float, float]:
    """(max |engine - PyTorch|, max |PyTorch|) of `output` on a seeded input the examples never used."""
    x = seeded_input(shape)
    got = load_engine(engine_path)(input=x)[output].float()
    with torch.no_grad():
        want = module(x)
    return float((got - want).abs().max()), float(want.abs().max())


def test_every_example_is_a_folder_with_a_readme_one_script_and_a_test():
    folders = example_folders()
    assert [int(FOLDER.match(p.name).group(1)) for p in folders] == list(range(1, len(folders) + 1))
    for folder in folders:
        scripts = sorted(p.name for p in folder.iterdir() if p.suffix == ".py")
        assert len(scripts) == 1, f"{folder.name} must hold exactly one script, not {scripts}"
        readme = folder / "README.md"
        assert readme.is_file(), f"{folder.name} has no README.md"
        assert f"python examples/{folder.name}/{scripts[0]}" in readme.read_text(), \
            f"{folder.name}/README.md does not show how to run {scripts[0]}"
    assert {p.name for p in folders} == TESTED, "every example needs a test here, and every test its example"


@example("01_zoo_parity")
def test_zoo_parity(tmp_path):
    proc, out = run_example("01_zoo_parity", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    assert proc.stdout.count("result: PASS") == 2
    module = registry.get_torch_model("resnet18", seed=0, small=True)
    for precision, rel in (("fp32", 1e-4), ("fp16", 1e-2)):
        engine = out / f"resnet18-small-{precision}.engine"
        sidecar = json.loads(Path(f"{engine}.json").read_text())
        assert sidecar["precision"] == precision and sidecar["backend"] == "reference"
        assert sidecar["engine_sha256"] == hashlib.sha256(engine.read_bytes()).hexdigest()
        err, scale = max_error(engine, module, (1, 3, 64, 64), "logits")
        assert err <= 1e-5 + rel * scale, (precision, err, scale)


def test_zoo_parity_leaves_a_file_of_another_kind_alone(tmp_path):
    notes = tmp_path / "out" / "resnet18-small-fp32.engine"
    notes.parent.mkdir()
    notes.write_text("my notes\n")
    proc, _ = run_example("01_zoo_parity", tmp_path)
    assert proc.returncode != 0 and "is not overwritten" in proc.stderr
    assert notes.read_text() == "my notes\n"


@example("02_own_network")
def test_own_network(tmp_path):
    proc, out = run_example("02_own_network", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    rows = re.findall(r"^\d+\s+(\S+)\s+(\S+)\s+1x", proc.stdout, re.MULTILINE)  # layerwise rows: tensor, torch module
    assert rows == [("conv1", "bn1"), ("relu1", "relu1"), ("pool", "pool"), ("conv2", "conv2"), ("gn", "gn"),
                    ("relu2", "relu2"), ("avgpool", "avgpool"), ("fc", "fc")]
    engine = out / "small_net-fp32.engine"
    assert (out / "small_net.wts").is_file() and Path(f"{engine}.json").is_file()
    err, scale = max_error(engine, load_script("02_own_network").make_model(seed=0), (1, 3, 32, 32), "logits")
    assert err <= 1e-5 + 1e-4 * scale


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m trtbuild ARGS` in `cwd` on the reference backend."""
    env = dict(os.environ, TRTBUILD_BACKEND="reference", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "trtbuild", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_own_network_file_is_a_model_for_the_cli(tmp_path):
    """What the example's README says: the script is also a MODEL for `trtbuild parity`."""
    proc = run_cli(tmp_path, "parity", f"{script_of('02_own_network')}:SPEC", "--layerwise")
    assert proc.returncode == 0 and "result: PASS" in proc.stdout, proc.stdout + proc.stderr
    assert "unmapped layers (0" in proc.stdout


@example("03_int8_calibration")
def test_int8_calibration_and_debug_precision(tmp_path):
    proc, out = run_example("03_int8_calibration", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["format"] == "trtbuild-calibration" and calibration["model"] == "outlier_net"
    amax = calibration["activations"]
    assert 0.9 < amax["conv1.input"] <= 1.0  # the inputs are uniform in [-1, 1]
    assert amax["conv2.input"] > 100 * amax["conv1.input"]  # the outlier channel sets conv2's input range
    assert "result: keep 1 of 3 candidate modules in fp32: conv2" in proc.stdout
    assert "for trtbuild build: --keep fp32:conv2" in proc.stdout
    engine = out / "outlier_net-int8.engine"
    quantization = json.loads(Path(f"{engine}.json").read_text())["quantization"]
    assert quantization["precision"] == "int8" and quantization["keep"] == ["fp32:conv2"]
    assert quantization["quantized_layers"] == ["conv1", "fc"]
    err, scale = max_error(engine, load_script("03_int8_calibration").make_model(seed=0), (1, 3, 16, 16), "logits")
    assert err <= 0.1 * scale  # int8 tolerance, with the outlier's convolution kept in fp32

    # the README's command line finds the same module from the file the example wrote
    cli = run_cli(tmp_path, "debug", "precision", f"{script_of('03_int8_calibration')}:SPEC", "--precision", "int8",
                  "--calibration", str(out / "calibration.json"))
    assert cli.returncode == 0 and "for trtbuild build: --keep fp32:conv2" in cli.stdout, cli.stdout + cli.stderr


@example("04_layerwise_bug")
def test_layerwise_points_at_the_planted_bug(tmp_path):
    proc, out = run_example("04_layerwise_bug", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    report = json.loads((out / "layerwise.json").read_text())
    assert report["passed"] is False and report["first_failure"] == "gn" and report["suspect_layer"] == "gn"
    layers = {row["name"]: row for row in report["layers"]}
    assert [name for name in layers][:4] == ["conv1", "relu1", "conv2", "gn"]
    assert all(layers[name]["passed"] for name in ("conv1", "relu1", "conv2")) and not layers["gn"]["passed"]
    assert (out / "layerwise.html").read_text().lstrip().lower().startswith("<!doctype html")

    fixed, out = run_example("04_layerwise_bug", tmp_path / "fixed", "--fixed")
    assert passed(fixed), fixed.stdout + fixed.stderr
    report = json.loads((out / "layerwise.json").read_text())
    assert report["passed"] is True and report["first_failure"] is None
    assert all(row["passed"] for row in report["layers"])


@example("05_onnx_export")
def test_onnx_export_in_onnxruntime(tmp_path):
    import onnx
    import onnxruntime

    proc, out = run_example("05_onnx_export", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    path = out / "resnet18-small.onnx"
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = seeded_input((1, 3, 64, 64))
    (got,) = session.run(["logits"], {"input": x.numpy()})
    with torch.no_grad():
        want = registry.get_torch_model("resnet18", seed=0, small=True)(x).numpy()
    assert np.abs(got - want).max() <= 1e-5 + 1e-4 * np.abs(want).max()


@pytest.mark.rtx
@example("06_tensorrt_rtx")
def test_tensorrt_rtx_engine(tmp_path):
    import tensorrt_rtx

    proc, out = run_example("06_tensorrt_rtx", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    engine = out / "resnet18-small-fp16-rtx.engine"
    data = engine.read_bytes()
    assert len(data) > 100_000
    sidecar = json.loads(Path(f"{engine}.json").read_text())
    assert sidecar["backend"] == "tensorrt-rtx" and sidecar["tensorrt_version"] == tensorrt_rtx.__version__
    assert sidecar["targets"] == ["8.6", "8.9", "12.0"] and sidecar["precision"] == "fp16"
    assert sidecar["engine_sha256"] == hashlib.sha256(data).hexdigest()
    assert sidecar["cross_check"]["tensors_compared"] > 0
    assert "built by TensorRT-RTX, not run" in proc.stdout or "loaded on this machine's GPU" in proc.stdout


@example("07_triton_repository")
def test_triton_repository(tmp_path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    proc, out = run_example("07_triton_repository", tmp_path)
    assert passed(proc), proc.stdout + proc.stderr
    model = out / "models" / "resnet18"
    files = sorted(str(p.relative_to(model)) for p in model.rglob("*") if p.is_file())
    assert files == ["1/model.engine", "1/model.engine.json", "1/model.py", "config.pbtxt", "trtbuild.json"]
    assert (model / "1" / "model.engine").read_bytes() == (out / "resnet18-small-fp32.engine").read_bytes()
    config = text_format.Parse((model / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert config.name == "resnet18" and config.backend == "python" and config.max_batch_size == 8
    assert [(t.name, list(t.dims), model_config_pb2.DataType.Name(t.data_type)) for t in config.input] == \
        [("input", [3, 64, 64], "TYPE_FP32")]
    assert [(t.name, list(t.dims), model_config_pb2.DataType.Name(t.data_type)) for t in config.output] == \
        [("logits", [10], "TYPE_FP32")]
    assert config.HasField("dynamic_batching")

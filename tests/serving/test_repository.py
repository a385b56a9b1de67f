"""`trtbuild export-triton`: the model repository it writes, checked against Triton's own schema
(tritonclient's model_config_pb2, parsed with protobuf's text_format), its refusals and its
atomic writes. Serving the repository with a real tritonserver: tests/serving/test_python_backend_server.py."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers.triton_models import build_user, build_zoo, skip_or_fail

from trtbuild.cli import main

try:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc
except ImportError as e:  # the test and serve extras install tritonclient
    mc = None
    _MISSING = f"tritonclient is not installed ({e}); `pip install -e .[test]` installs it"


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    if mc is None:
        skip_or_fail(_MISSING)
    work = tmp_path_factory.mktemp("triton-engines")
    user_ref, user_engine = build_user(work)
    return {"resnet18": build_zoo(work, "resnet18", batch=(1, 4, 8)), "rednet": build_zoo(work, "rednet"),
            "user": user_engine, "user_ref": user_ref, "work": work}


def parse(model_dir: Path):
    return text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())


def export(*args) -> int:
    return main(["export-triton", *map(str, args)])


def tensors(entries):
    return [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in entries]


def test_python_kind_of_a_dynamic_batch_engine(engines, tmp_path, capsys):
    repo = tmp_path / "repo"
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    cfg = parse(repo / "resnet18")
    assert cfg.name == "resnet18" and cfg.backend == "python" and cfg.platform == ""
    assert cfg.max_batch_size == 8  # the profile's max (built with --batch 1,4,8)
    assert tensors(cfg.input) == [("input", "TYPE_FP32", [3, 64, 64])]  # without the batch dimension
    assert tensors(cfg.output) == [("logits", "TYPE_FP32", [10])]
    assert list(cfg.dynamic_batching.preferred_batch_size) == [4, 8]
    assert [(mc.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in cfg.instance_group] == [("KIND_CPU", 1)]
    assert cfg.parameters["trtbuild_batching"].string_value == "per-request"  # reference plans: bit-exact responses
    assert not cfg.HasField("version_policy") and len(cfg.model_warmup) == 0
    version = repo / "resnet18" / "1"
    assert sorted(p.name for p in version.iterdir()) == ["model.engine", "model.engine.json", "model.py"]
    assert (version / "model.engine").read_bytes() == engines["resnet18"].read_bytes()
    assert json.loads((version / "model.engine.json").read_text()) == json.loads(
        Path(f"{engines['resnet18']}.json").read_text())
    tree = ast.parse((version / "model.py").read_text())
    assert "TritonPythonModel" in [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert json.loads((repo / "resnet18" / "trtbuild.json").read_text())["kind"] == "python"
    assert "wrote Triton model" in capsys.readouterr().out


def test_static_engine_has_max_batch_size_0_and_no_dynamic_batching(engines, tmp_path):
    repo = tmp_path / "repo"
    assert export("rednet", "--small", "--engine", engines["rednet"], "--repo", repo, "--kind", "python",
                  "--name", "red", "--warmup", "--version-policy", "all") == 0
    cfg = parse(repo / "red")
    assert cfg.name == "red" and cfg.max_batch_size == 0
    assert tensors(cfg.input) == [("input", "TYPE_FP32", [1, 3, 64, 64])]  # with the batch dimension
    assert tensors(cfg.output) == [("logits", "TYPE_FP32", [1, 10])]
    assert not cfg.HasField("dynamic_batching")
    assert cfg.version_policy.HasField("all")
    (warm,) = cfg.model_warmup
    assert (warm.batch_size == 0 and list(warm.inputs["input"].dims) == [1, 3, 64, 64]
            and warm.inputs["input"].random_data)


def test_user_network(engines, tmp_path, capsys):
    """MODEL as net.py:FUNCTION; its input is taken from the engine's sidecar (no --input needed)."""
    repo = tmp_path / "repo"
    assert export(engines["user_ref"], "--engine", engines["user"], "--repo", repo, "--kind", "python",
                  "--max-batch", "4", "--batching", "concatenate", "--instances", "2") == 0
    cfg = parse(repo / "smallnet")
    assert [(mc.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in cfg.instance_group] == [("KIND_CPU", 2)]
    assert cfg.max_batch_size == 4 and list(cfg.dynamic_batching.preferred_batch_size) == [4]
    assert tensors(cfg.input) == [("input", "TYPE_FP32", [3, 16, 16])]
    assert tensors(cfg.output) == [("scores", "TYPE_FP32", [5])]
    assert cfg.parameters["trtbuild_batching"].string_value == "concatenate"
    source = Path(engines["user_ref"].rpartition(":")[0])
    net = repo / "smallnet" / "net.py"  # the model's own file in the model directory: kept
    shutil.copy(source, net)
    assert export(f"{net}:smallnet", "--engine", engines["user"], "--repo", repo, "--kind", "python") == 0
    assert f"kept in {repo / 'smallnet'}: net.py\n" in capsys.readouterr().out  # only the user's file
    assert net.read_bytes() == source.read_bytes()
    net = repo / "smallnet" / "1" / "net.py"  # in the version directory export-triton replaces: refused
    shutil.copy(source, net)
    assert export(f"{net}:smallnet", "--engine", engines["user"], "--repo", repo, "--kind", "python") == 1
    assert "1/net.py, which trtbuild did not write" in capsys.readouterr().err and net.is_file()


def _fake_tensorrt_engine(engines, tmp_path, plugin_library=None) -> Path:
    """A TensorRT 10 engine as the sidecar describes it (export-triton never deserializes it): fp16 I/O,
    batch profile 1,2,16, and optionally the plugin library the build loaded."""
    sidecar = json.loads(Path(f"{engines['resnet18']}.json").read_text())
    data = b"ftrt" + bytes(range(256)) * 8
    sidecar.update(backend="tensorrt", tensorrt_version="10.13.0", gpu="NVIDIA H100", compute_capability="9.0",
                   fp32_io=False, precision="fp16", engine_sha256=hashlib.sha256(data).hexdigest(),
                   engine_bytes=len(data))
    for t in sidecar["inputs"] + sidecar["outputs"]:
        t["dtype"] = "HALF"
    sidecar["profile"]["input"].update(min=[1, 3, 64, 64], opt=[2, 3, 64, 64], max=[16, 3, 64, 64])
    if plugin_library is not None:
        sidecar["plugins"] = [{"plugin": "trtbuild::Involution", "version": "1", "layers": 2,
                               "library": str(plugin_library)}]
    engine = tmp_path / "trt.engine"
    engine.write_bytes(data)
    Path(f"{engine}.json").write_text(json.dumps(sidecar))
    return engine


def test_tensorrt_kind_of_a_tensorrt_engine_with_a_plugin(engines, tmp_path, capsys):
    library = tmp_path / "build" / "libtrtbuild_involution_plugin.so"
    library.parent.mkdir()
    library.write_bytes(b"\x7fELF plugin")
    engine = _fake_tensorrt_engine(engines, tmp_path, library)
    repo = tmp_path / "repo"
    assert export("resnet18", "--small", "--engine", engine, "--repo", repo, "--version-policy", "latest:2",
                  "--warmup") == 0
    cfg = parse(repo / "resnet18")
    assert cfg.platform == "tensorrt_plan" and cfg.backend == ""
    assert cfg.max_batch_size == 16
    assert tensors(cfg.input) == [("input", "TYPE_FP16", [3, 64, 64])]
    assert tensors(cfg.output) == [("logits", "TYPE_FP16", [10])]
    assert list(cfg.dynamic_batching.preferred_batch_size) == [2, 16]
    assert [(mc.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in cfg.instance_group] == [("KIND_GPU", 1)]
    assert cfg.version_policy.latest.num_versions == 2
    (warm,) = cfg.model_warmup
    assert warm.batch_size == 1 and mc.DataType.Name(warm.inputs["input"].data_type) == "TYPE_FP16"
    model = repo / "resnet18"
    assert (model / "1" / "model.plan").read_bytes() == engine.read_bytes()
    assert (model / "libtrtbuild_involution_plugin.so").read_bytes() == library.read_bytes()
    out = capsys.readouterr().out
    assert f"--backend-config=tensorrt,plugins={model / 'libtrtbuild_involution_plugin.so'}" in out


def test_tensorrt_plugin_without_a_library_is_refused(engines, tmp_path, capsys):
    engine = _fake_tensorrt_engine(engines, tmp_path, plugin_library=tmp_path / "missing.so")
    assert export("resnet18", "--small", "--engine", engine, "--repo", tmp_path / "repo") == 1
    err = capsys.readouterr().err
    assert f"plugin library {tmp_path / 'missing.so'} (needed by {engine}) does not exist" in err
    assert not (tmp_path / "repo").exists()


def test_sidecar_records_plugins(engines):
    from trtbuild.models.registry import get_torch_model
    from trtbuild.ops.involution import Involution

    rednet = json.loads(Path(f"{engines['rednet']}.json").read_text())
    involutions = sum(isinstance(m, Involution) for m in get_torch_model("rednet", small=True).modules())
    assert involutions > 0
    assert rednet["plugins"] == [{"plugin": "trtbuild::Involution", "version": "1", "layers": involutions,
                                  "library": None}]  # the reference's plugin is a PyTorch twin: no library
    assert json.loads(Path(f"{engines['resnet18']}.json").read_text())["plugins"] == []


@pytest.mark.parametrize("case, message", [
    ("reference", ("Triton's TensorRT backend cannot load a trtbuild reference plan; use --kind python or build "
                   "with --backend tensorrt")),
    ("tampered", "does not match the sha256 in its sidecar"),
    ("other model", "was built for model 'resnet18' (its sidecar says so), not 'alexnet'"),
    ("max batch", "--max-batch 9: must be between 1 and the engine profile's maximum batch 8"),
    ("policy", "--version-policy 'newest': expected latest:N, all or specific:V1,V2"),
    ("name", "--name '../up': a Triton model name here is letters, digits, '_', '-' and '.', not starting with "
             "'.' or '-'"),
    ("version", "--version 0: a Triton model version is a positive integer"),
])
def test_refusals(engines, tmp_path, capsys, case, message):
    engine = tmp_path / "r.engine"
    shutil.copy(engines["resnet18"], engine)
    shutil.copy(f"{engines['resnet18']}.json", f"{engine}.json")
    args = {"reference": ["resnet18", "--kind", "tensorrt"], "tampered": ["resnet18", "--kind", "python"],
            "other model": ["alexnet", "--kind", "python"], "max batch": ["resnet18", "--kind", "python",
                                                                          "--max-batch", "9"],
            "policy": ["resnet18", "--kind", "python", "--version-policy", "newest"],
            "name": ["resnet18", "--kind", "python", "--name", "../up"],
            "version": ["resnet18", "--kind", "python", "--version", "0"]}[case]
    if case == "tampered":
        data = bytearray(engine.read_bytes())
        data[-1] ^= 1
        engine.write_bytes(bytes(data))
    assert export(*args, "--small", "--engine", engine, "--repo", tmp_path / "repo") == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1  # one line
    assert not (tmp_path / "repo").exists() or not any((tmp_path / "repo").iterdir())


def test_tensorrt_rtx_engine_is_refused_for_kind_tensorrt(engines, tmp_path, capsys, rtx):
    engine = build_zoo(engines["work"], "resnet18", batch=(1, 2, 4), backend="tensorrt-rtx")
    assert export("resnet18", "--small", "--engine", engine, "--repo", tmp_path / "repo") == 1
    assert "TensorRT-RTX engine, and Triton has no TensorRT-RTX backend" in capsys.readouterr().err
    assert export("resnet18", "--small", "--engine", engine, "--repo", tmp_path / "repo", "--kind", "python") == 0
    cfg = parse(tmp_path / "repo" / "resnet18")  # runs on a GPU: TensorRT-RTX engines never run on the CPU
    assert [mc.ModelInstanceGroup.Kind.Name(g.kind) for g in cfg.instance_group] == ["KIND_GPU"]
    assert cfg.parameters["trtbuild_batching"].string_value == "concatenate" and cfg.max_batch_size == 4


def test_replaces_only_a_model_directory_trtbuild_wrote(engines, tmp_path, capsys):
    repo = tmp_path / "repo"
    mine = repo / "resnet18"
    mine.mkdir(parents=True)
    (mine / "config.pbtxt").write_text('name: "resnet18"\nplatform: "onnxruntime_onnx"\n')
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 1
    assert "was not written by trtbuild export-triton" in capsys.readouterr().err
    assert (mine / "config.pbtxt").read_text().endswith('"onnxruntime_onnx"\n') and len(list(mine.iterdir())) == 1
    shutil.rmtree(mine)
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python",
                  "--batching", "concatenate") == 0
    assert "replaced Triton model" in capsys.readouterr().out
    assert parse(mine).parameters["trtbuild_batching"].string_value == "concatenate"
    assert [p.name for p in repo.iterdir()] == ["resnet18"]  # no staging or old directories left


def test_a_failed_export_leaves_the_old_model(engines, tmp_path, monkeypatch, capsys):
    from trtbuild.serving import repository

    repo = tmp_path / "repo"
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}

    def fail(version, *args):
        version.mkdir()
        (version / "model.engine").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(repository, "_write_version", fail)
    capsys.readouterr()
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python",
                  "--warmup") == 1
    assert "error: [Errno 28] No space left on device" in capsys.readouterr().err  # one line, no traceback
    assert {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


def test_engine_inside_the_model_directory_is_not_replaced(engines, tmp_path, capsys):
    repo = tmp_path / "repo"
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    inside = repo / "resnet18" / "1" / "model.engine"
    assert export("resnet18", "--small", "--engine", inside, "--repo", repo, "--kind", "python") == 1
    assert "lies inside" in capsys.readouterr().err and inside.is_file()


def test_server_entry_point_refuses_a_missing_repository(tmp_path, capsys):
    from trtbuild.serving.tritonserver import main as serve

    assert serve([str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert err == f"trtbuild: error: model repository {tmp_path / 'nowhere'} is not a directory\n"


def _snapshot(repo: Path) -> dict:
    return {str(p.relative_to(repo)): p.read_bytes() if p.is_file() else None for p in sorted(repo.rglob("*"))}


def test_rerun_keeps_the_users_files_and_other_versions(engines, tmp_path, capsys):
    repo = tmp_path / "repo"
    model = repo / "resnet18"
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    (model / "2").mkdir()
    (model / "2" / "model.onnx").write_bytes(b"the user's version 2")
    (model / "README.txt").write_text("notes\n")
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python",
                  "--batching", "concatenate") == 0
    assert "replaced Triton model" in capsys.readouterr().out
    assert (model / "2" / "model.onnx").read_bytes() == b"the user's version 2"
    assert (model / "README.txt").read_text() == "notes\n"
    assert parse(model).parameters["trtbuild_batching"].string_value == "concatenate"
    # --version 2 would replace the user's 2/: refused, nothing touched
    before = _snapshot(repo)
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python",
                  "--version", "2") == 1
    err = capsys.readouterr().err
    assert "2/model.onnx, which trtbuild did not write" in err and err.count("\n") == 1
    assert _snapshot(repo) == before
    shutil.rmtree(model / "2")
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python",
                  "--version", "2") == 0
    assert "wrote Triton model" in capsys.readouterr().out
    for version in ("1", "2"):
        assert (model / version / "model.engine").read_bytes() == engines["resnet18"].read_bytes()
    assert json.loads((model / "trtbuild.json").read_text())["files"] == [
        "1/model.engine", "1/model.engine.json", "1/model.py",
        "config.pbtxt", "2/model.engine", "2/model.engine.json", "2/model.py"]
    assert (model / "README.txt").read_text() == "notes\n"
    assert sorted(p.name for p in repo.iterdir()) == ["resnet18"]  # no staging or old directories left
    # one config.pbtxt serves both versions: another --kind for version 2 is refused while 1 is python
    engine = _fake_tensorrt_engine(engines, tmp_path)
    before = _snapshot(repo)
    assert export("resnet18", "--small", "--engine", engine, "--repo", repo, "--version", "2") == 1
    assert "holds version 1 written with --kind python" in capsys.readouterr().err and _snapshot(repo) == before


def test_a_failed_rerun_restores_the_old_model(engines, tmp_path, monkeypatch, capsys):
    from trtbuild.serving.repository import MARKER

    repo = tmp_path / "repo"
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    (repo / "resnet18" / "README.txt").write_text("notes\n")
    before = _snapshot(repo)
    rename = Path.rename

    def failing_rename(self, target):  # the last step: trtbuild.json from the staging directory into place
        if Path(target).name == MARKER and self.parent.name.startswith(".resnet18.tmp-"):
            raise OSError(28, "No space left on device")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", failing_rename)
    capsys.readouterr()
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python",
                  "--warmup") == 1
    assert "error: [Errno 28] No space left on device" in capsys.readouterr().err  # one line, no traceback
    assert _snapshot(repo) == before  # old config, version 1 and the user's file; no staging or backup left


def test_input_must_fit_the_engine(engines, tmp_path, capsys):
    """The user network's engine takes 1x3x16x16: a --input of another size is refused, as serve does."""
    assert export(engines["user_ref"], "--input", "input:1x3x32x32", "--engine", engines["user"], "--repo",
                  tmp_path / "repo", "--kind", "python") == 1
    err = capsys.readouterr().err
    assert "takes input 'input' of shape (-1, 3, 16, 16) but model 'smallnet' expects ('N', 3, 32, 32)" in err
    assert not (tmp_path / "repo").exists()


def test_small_must_match_the_sidecar(engines, tmp_path, capsys):
    assert export("resnet18", "--engine", engines["resnet18"], "--repo", tmp_path / "repo", "--kind", "python") == 1
    err = capsys.readouterr().err
    assert "was built with small True but --small asks for False; add --small" in err and err.count("\n") == 1
    assert not (tmp_path / "repo").exists()


def test_last_line_says_how_to_serve(engines, tmp_path, capsys):
    repo = tmp_path / "repo"
    assert export("resnet18", "--small", "--engine", engines["resnet18"], "--repo", repo, "--kind", "python") == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"serve it: python -m trtbuild.serving.tritonserver {repo}"
    engine = _fake_tensorrt_engine(engines, tmp_path)
    assert export("resnet18", "--small", "--engine", engine, "--repo", tmp_path / "trt") == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "Triton's TensorRT backend needs a GPU" in last and "nvcr.io/nvidia/tritonserver" in last

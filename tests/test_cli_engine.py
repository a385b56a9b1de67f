"""`trtbuild models | build | parity | demo` end to end on the reference backend (small models)."""

from __future__ import annotations

import json

import pytest

from trtbuild.cli import main

pytest.importorskip("trtbuild.models.registry", reason="the model registry is not available")

REF = ["--backend", "reference"]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_first_line_names_the_backend(cwd, capsys):
    code, out, _ = _run(capsys, ["models"])
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("backend: ")
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        assert first.startswith("backend: reference (PyTorch) — TensorRT is not available (")
        assert "No module named 'tensorrt'" in first


def test_models_table(cwd, capsys):
    code, out, _ = _run(capsys, ["models", *REF])
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("backend: reference")
    row = next(line for line in lines if line.startswith("alexnet "))
    assert "1x3x224x224" in row and "logits" in row


def test_build_exports_weights_and_writes_engine(cwd, capsys):
    code, out, err = _run(capsys, ["build", "alexnet", "--small", "--batch", "1,2,4", "--workspace", "16",
                                   "--timing-cache", "t.cache", "--no-progress", *REF])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("backend: reference")
    assert lines[1] == "weights: weights/alexnet-small.wts (exported from the seeded PyTorch model, seed 0)"
    engine = cwd / "engines" / "alexnet-small-fp32.engine"
    assert engine.is_file() and (cwd / "weights" / "alexnet-small.wts").is_file() and (cwd / "t.cache").is_file()
    side = json.loads((cwd / "engines" / "alexnet-small-fp32.engine.json").read_text())
    assert side["profile"]["input"]["max"] == [4, 3, 96, 96] and side["workspace"] == 16 << 20
    assert "profile input: min [1, 3, 96, 96] opt [2, 3, 96, 96] max [4, 3, 96, 96]" in out
    # a second build reuses the weight file
    code, out, _ = _run(capsys, ["build", "alexnet", "--small", "--precision", "fp16", "--no-progress", *REF])
    assert code == 0 and out.splitlines()[1] == "weights: weights/alexnet-small.wts"
    assert (cwd / "engines" / "alexnet-small-fp16.engine").is_file()


def test_build_missing_weights_names_the_path(cwd, capsys):
    code, out, err = _run(capsys, ["build", "alexnet", "--small", "--weights", "no/such.wts", *REF])
    assert code == 1 and out.startswith("backend: reference")
    assert "no/such.wts" in err and "does not exist" in err


def test_build_failure_keeps_existing_engine(cwd, capsys):
    assert _run(capsys, ["build", "alexnet", "--small", "--out", "a.engine", "--no-progress", *REF])[0] == 0
    before = (cwd / "a.engine").read_bytes(), (cwd / "a.engine.json").read_bytes()
    # weights of another model: the network definition fails half-way through the build
    assert _run(capsys, ["export-weights", "--model", "resnet18", "--out", "r.wts"])[0] == 0
    code, _, err = _run(capsys, ["build", "alexnet", "--small", "--out", "a.engine", "--weights", "r.wts",
                                 "--no-progress", *REF])
    assert code == 1 and "trtbuild: error:" in err and "r.wts" in err
    assert ((cwd / "a.engine").read_bytes(), (cwd / "a.engine.json").read_bytes()) == before


@pytest.mark.parametrize("batch, message", [("1,2", "expected 1 or 3"), ("a,b,c", "MIN,OPT,MAX integers"),
                                            ("4,2,8", "min <= opt <= max")])
def test_build_bad_batch(cwd, capsys, batch, message):
    code, _, err = _run(capsys, ["build", "alexnet", "--small", "--batch", batch, *REF])
    assert code == 1 and message in err


def test_unknown_model(cwd, capsys):
    code, _, err = _run(capsys, ["build", "alexnot", *REF])
    assert code == 1 and "unknown model 'alexnot'" in err


def test_parity_engine_file_json_html(cwd, capsys):
    assert _run(capsys, ["build", "alexnet", "--small", "--precision", "fp16", "--no-progress", *REF])[0] == 0
    code, out, err = _run(capsys, ["parity", "alexnet", "--small", "--engine", "engines/alexnet-small-fp16.engine",
                                   "--range", "-2,2", "--seed", "3", "--json", "r/p.json", "--html", "r/p.html", *REF])
    assert code == 0, out + err
    assert out.splitlines()[0].startswith("backend: reference")
    assert "inputs=uniform[-2, 2]" in out and "precision=fp16" in out and "result: PASS" in out
    data = json.loads((cwd / "r" / "p.json").read_text())
    assert data["passed"] and data["meta"]["engine"] == "engines/alexnet-small-fp16.engine"
    assert (cwd / "r" / "p.html").read_text().count("<svg") == 1


def test_parity_layerwise_and_failure_exit_code(cwd, capsys):
    code, out, _ = _run(capsys, ["parity", "alexnet", "--small", "--layerwise", "--distribution", "normal", *REF])
    assert code == 0 and "layerwise (22 layers" in out and "features.0" in out
    code, out, _ = _run(capsys, ["parity", "alexnet", "--small", "--precision", "fp16", "--atol", "0", "--rtol", "0",
                                 *REF])
    assert code == 1 and "result: FAIL (failing outputs: logits)" in out


def test_parity_against_onnxruntime(cwd, capsys):
    pytest.importorskip("onnxruntime")
    code, out, err = _run(capsys, ["parity", "alexnet", "--small", "--against", "onnxruntime"])
    assert code == 0, err
    assert out.splitlines()[0].startswith("backend: reference") and "result: PASS" in out


def test_demo_small(cwd, capsys):
    code, out, err = _run(capsys, ["demo", "--small", *REF])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("backend: reference")
    assert lines[1].startswith("[1/4] weights: weights/alexnet-small.wts (exported")
    assert "[3/4] loaded engines/alexnet-small-fp32.engine on reference" in out
    assert "result: PASS" in out and lines[-1].startswith("demo finished in") and lines[-1].endswith("parity PASS")
    code, out, _ = _run(capsys, ["demo", "--small", "--precision", "fp16", "--layerwise", *REF])
    assert code == 0 and "(existing file" in out and "layerwise (22 layers" in out


def test_demo_fails_on_bad_weights(cwd, capsys):
    (cwd / "bad.wts").write_text("2\nfeatures.0.weight 1 3f800000\n")
    code, _, err = _run(capsys, ["demo", "--small", "--weights", "bad.wts", *REF])
    assert code == 1 and "bad.wts" in err

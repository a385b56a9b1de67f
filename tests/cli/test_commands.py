"""`trtbuild models | build | parity | demo` end to end on the reference backend (small models)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import pytest

from trtbuild.cli import main, make_parser

from helpers.cli_run import REF, run_cli


def test_first_line_names_the_backend(cwd, capsys):
    code, out, _ = run_cli(capsys, ["models"])
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("backend: ")
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        assert first.startswith("backend: reference (PyTorch) — TensorRT is not available (")
        assert "No module named 'tensorrt'" in first


def test_models_table(cwd, capsys):
    code, out, _ = run_cli(capsys, ["models", *REF])
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("backend: reference")
    row = next(line for line in lines if line.startswith("alexnet "))
    assert "1x3x224x224" in row and "logits" in row


def test_build_exports_weights_and_writes_engine(cwd, capsys):
    code, out, err = run_cli(capsys, ["build", "alexnet", "--small", "--batch", "1,2,4", "--workspace", "16",
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
    code, out, _ = run_cli(capsys, ["build", "alexnet", "--small", "--precision", "fp16", "--no-progress", *REF])
    assert code == 0 and out.splitlines()[1] == "weights: weights/alexnet-small.wts"
    assert (cwd / "engines" / "alexnet-small-fp16.engine").is_file()


def test_tensorrt_rtx_build_has_its_own_default_engine_name(cwd, capsys, rtx):
    code, _, err = run_cli(capsys, ["build", "alexnet", "--small", "--no-progress", *REF])
    assert code == 0, err
    reference = cwd / "engines" / "alexnet-small-fp32.engine"
    before = reference.read_bytes(), (cwd / "engines" / "alexnet-small-fp32.engine.json").read_text()
    code, out, err = run_cli(capsys, ["build", "alexnet", "--small", "--no-progress", "--backend", "tensorrt-rtx"])
    assert code == 0, err
    assert "engines/alexnet-small-fp32-rtx.engine" in out
    side = json.loads((cwd / "engines" / "alexnet-small-fp32-rtx.engine.json").read_text())
    assert side["backend"] == "tensorrt-rtx"
    assert (reference.read_bytes(), (cwd / "engines" / "alexnet-small-fp32.engine.json").read_text()) == before
    code, _, err = run_cli(capsys, ["parity", "alexnet", "--small", "--engine", str(reference), *REF])
    assert code == 0, err


def test_build_missing_weights_names_the_path(cwd, capsys):
    code, out, err = run_cli(capsys, ["build", "alexnet", "--small", "--weights", "no/such.wts", *REF])
    assert code == 1 and out.startswith("backend: reference")
    assert "no/such.wts" in err and "does not exist" in err


def test_build_failure_keeps_existing_engine(cwd, capsys):
    assert run_cli(capsys, ["build", "alexnet", "--small", "--out", "a.engine", "--no-progress", *REF])[0] == 0
    before = (cwd / "a.engine").read_bytes(), (cwd / "a.engine.json").read_bytes()
    # weights of another model: the network definition fails half-way through the build
    assert run_cli(capsys, ["export-weights", "--model", "resnet18", "--out", "r.wts"])[0] == 0
    code, _, err = run_cli(capsys, ["build", "alexnet", "--small", "--out", "a.engine", "--weights", "r.wts",
                                    "--no-progress", *REF])
    assert code == 1 and "trtbuild: error:" in err and "r.wts" in err
    assert ((cwd / "a.engine").read_bytes(), (cwd / "a.engine.json").read_bytes()) == before


@pytest.mark.parametrize("batch, message", [("1,2", "expected 1 or 3"), ("a,b,c", "MIN,OPT,MAX integers"),
                                            ("4,2,8", "min <= opt <= max")])
def test_build_bad_batch(cwd, capsys, batch, message):
    code, _, err = run_cli(capsys, ["build", "alexnet", "--small", "--batch", batch, *REF])
    assert code == 1 and message in err


def test_unknown_model(cwd, capsys):
    code, _, err = run_cli(capsys, ["build", "alexnot", *REF])
    assert code == 1 and "unknown model 'alexnot'" in err


def test_parity_engine_file_json_html(cwd, capsys):
    assert run_cli(capsys, ["build", "alexnet", "--small", "--precision", "fp16", "--no-progress", *REF])[0] == 0
    code, out, err = run_cli(capsys, ["parity", "alexnet", "--small", "--engine", "engines/alexnet-small-fp16.engine",
                                      "--range=-2,2", "--seed", "3", "--json", "r/p.json", "--html", "r/p.html", *REF])
    assert code == 0, out + err
    assert out.splitlines()[0].startswith("backend: reference")
    assert "inputs=uniform[-2, 2]" in out and "precision=fp16" in out and "result: PASS" in out
    data = json.loads((cwd / "r" / "p.json").read_text())
    assert data["passed"] and data["meta"]["engine"] == "engines/alexnet-small-fp16.engine"
    assert (cwd / "r" / "p.html").read_text().count("<svg") == 1


def test_parity_layerwise_and_failure_exit_code(cwd, capsys):
    code, out, _ = run_cli(capsys, ["parity", "alexnet", "--small", "--layerwise", "--distribution", "normal", *REF])
    assert code == 0 and "layerwise (22 layers" in out and "features.0" in out
    code, out, _ = run_cli(capsys, ["parity", "alexnet", "--small", "--precision", "fp16", "--atol", "0", "--rtol", "0",
                                    *REF])
    assert code == 1 and "result: FAIL (failing outputs: logits)" in out


def test_parity_against_onnxruntime(cwd, capsys):
    code, out, err = run_cli(capsys, ["parity", "alexnet", "--small", "--against", "onnxruntime"])
    assert code == 0, err
    assert out.splitlines()[0].startswith("backend: reference") and "result: PASS" in out


def test_demo_small(cwd, capsys):
    code, out, err = run_cli(capsys, ["demo", "--small", *REF])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("backend: reference")
    assert lines[1].startswith("[1/4] weights: weights/alexnet-small.wts (exported")
    assert "[3/4] loaded engines/alexnet-small-fp32.engine on reference" in out
    assert "result: PASS" in out and lines[-1].startswith("demo finished in") and ": parity PASS" in lines[-1]
    code, out, _ = run_cli(capsys, ["demo", "--small", "--precision", "fp16", "--layerwise", *REF])
    assert code == 0 and "(existing file" in out and "layerwise (22 layers" in out


def test_demo_fails_on_bad_weights(cwd, capsys):
    (cwd / "bad.wts").write_text("2\nfeatures.0.weight 1 3f800000\n")
    code, _, err = run_cli(capsys, ["demo", "--small", "--weights", "bad.wts", *REF])
    assert code == 1 and "bad.wts" in err


# ------------------------------------------------ parity --engine must match the request


@pytest.fixture
def fp32_engine(cwd, capsys):
    assert run_cli(capsys, ["build", "alexnet", "--small", "--no-progress", *REF])[0] == 0
    return "engines/alexnet-small-fp32.engine"


def test_parity_engine_of_another_model_or_size_is_an_error(fp32_engine, capsys):
    code, out, err = run_cli(capsys, ["parity", "resnet18", "--small", "--engine", fp32_engine, *REF])
    assert code == 1 and "result:" not in out
    assert "built for model 'alexnet' but parity was requested for 'resnet18'" in err
    code, out, err = run_cli(capsys, ["parity", "alexnet", "--engine", fp32_engine, *REF])
    assert code == 1 and "built for the small variant of 'alexnet'" in err and "add --small" in err


def test_parity_explicit_precision_or_batch_contradicting_the_engine(fp32_engine, capsys):
    code, _, err = run_cli(capsys, ["parity", "alexnet", "--small", "--engine", fp32_engine, "--precision", "fp16",
                                    *REF])
    assert code == 1 and "computes in fp32 but --precision fp16 was requested" in err
    code, _, err = run_cli(capsys, ["parity", "alexnet", "--small", "--engine", fp32_engine, "--batch", "2", *REF])
    assert code == 1 and "static batch of 1" in err and "batch 2 was requested" in err
    code, out, _ = run_cli(capsys, ["parity", "alexnet", "--small", "--engine", fp32_engine, "--precision", "fp32",
                                    "--batch", "1", *REF])
    assert code == 0 and "precision=fp32 batch=1" in out and "result: PASS" in out


# ------------------------------------------------ --against onnxruntime takes only what it honours


@pytest.mark.parametrize("extra, flag", [
    (["--engine", "x.engine"], "--engine"), (["--backend", "tensorrt"], "--backend tensorrt"),
    (["--json", "r.json"], "--json"), (["--html", "r.html"], "--html"), (["--png", "r.png"], "--png"),
    (["--range=-2,2"], "--range"), (["--distribution", "normal"], "--distribution"),
    (["--distribution", "large", "--scale", "10"], "--distribution, --scale"), (["--batch", "2"], "--batch")])
def test_against_onnxruntime_rejects_options_it_cannot_honour(cwd, capsys, extra, flag):
    code, out, err = run_cli(capsys, ["parity", "alexnet", "--small", "--against", "onnxruntime", *extra])
    assert code == 1 and out == ""
    assert "--against onnxruntime runs the reference backend and onnxruntime" in err
    assert f"it cannot honour {flag} (drop them" in err
    assert not any(cwd.iterdir())  # nothing was written


def test_against_onnxruntime_is_always_layerwise(cwd, capsys):
    code, out, err = run_cli(capsys, ["parity", "alexnet", "--small", "--against", "onnxruntime", "--layerwise",
                                      "--backend", "reference"])
    assert code == 0, err
    assert "features.0" in out and "result: PASS" in out


# ------------------------------------------------ files: timing cache, unwritable targets, --png


def test_build_refuses_a_timing_cache_path_that_is_a_weight_file(cwd, capsys):
    assert run_cli(capsys, ["export-weights", "--model", "alexnet", "--small", "--out",
                            "weights/alexnet-small.wts"])[0] == 0
    wts = cwd / "weights" / "alexnet-small.wts"
    before = wts.read_bytes()
    code, _, err = run_cli(capsys, ["build", "alexnet", "--small", "--timing-cache", str(wts), "--no-progress", *REF])
    assert code == 1
    assert f"--timing-cache {wts} is the same file as the input --weights weights/alexnet-small.wts" in err
    assert wts.read_bytes() == before and not (cwd / "engines").exists()
    other = cwd / "other.wts"  # a weight file that is not this build's input: refused by its content
    other.write_bytes(before)
    code, _, err = run_cli(capsys, ["build", "alexnet", "--small", "--timing-cache", str(other), "--no-progress", *REF])
    assert code == 1 and f"--timing-cache {other} exists and is a .wts weight file, not a timing cache" in err
    assert other.read_bytes() == before and not (cwd / "engines").exists()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_build_error_names_the_target_not_its_temp_file(cwd, capsys):
    code, _, err = run_cli(capsys, ["build", "alexnet", "--small", "--out", "/proc/x.engine", "--no-progress", *REF])
    assert code == 1
    assert err.strip() == "trtbuild: error: cannot write /proc/x.engine: No such file or directory"


def test_parity_png_without_matplotlib_fails_before_comparing(cwd, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    code, out, err = run_cli(capsys, ["parity", "alexnet", "--small", "--png", "p.png", *REF])
    assert code == 1 and "result:" not in out and not (cwd / "p.png").exists()
    assert "cannot write p.png: --png needs matplotlib, which is not installed" in err


@pytest.mark.parametrize("scale", ["0", "-5", "inf", "abc"])
def test_parity_scale_must_be_positive(cwd, capsys, scale):
    with pytest.raises(SystemExit) as info:
        main(["parity", "alexnet", "--small", "--distribution", "large", f"--scale={scale}", *REF])
    assert info.value.code == 2 and "argument --scale:" in capsys.readouterr().err


def test_parity_scale_needs_distribution_large(cwd, capsys):
    code, _, err = run_cli(capsys, ["parity", "alexnet", "--small", "--scale", "10", *REF])
    assert code == 1 and "--scale only applies with --distribution large" in err


# ------------------------------------------------ --range without private argparse attributes


def _parity_parser() -> argparse.ArgumentParser:
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["parity"]


def test_range_parses_with_equals_and_argparse_is_left_alone(capsys):
    args = make_parser().parse_args(["parity", "alexnet", "--range=-1,1"])
    assert args.range == (-1.0, 1.0)
    assert make_parser().parse_args(["parity", "alexnet", "--range", "0.5,2e1"]).range == (0.5, 20.0)
    fresh = argparse.ArgumentParser()
    assert _parity_parser()._negative_number_matcher.pattern == fresh._negative_number_matcher.pattern
    with pytest.raises(SystemExit):
        make_parser().parse_args(["parity", "alexnet", "--range=2,1"])
    assert "argument --range: --range '2,1': LO must be smaller than HI" in capsys.readouterr().err


def test_build_option_reaches_the_model_and_the_sidecar(cwd, capsys):
    code, _, err = run_cli(capsys, ["build", "rednet", "--small", "--option", "involution_impl=composed",
                                    "--no-progress", *REF])
    assert code == 0, err
    side = json.loads((cwd / "engines" / "rednet-small-fp32.engine.json").read_text())
    assert side["options"] == {"involution_impl": "composed"}
    from trtbuild.reference.plan import deserialize_plan

    header, _ = deserialize_plan((cwd / "engines" / "rednet-small-fp32.engine").read_bytes())
    kinds = {layer["type"] for layer in header["layers"]}
    assert "SLICE" in kinds and not any("PLUGIN" in k for k in kinds), kinds


@pytest.mark.parametrize("option, message", [
    ("involution_impl=fast", "involution_impl='fast' is not one of 'auto', 'plugin', 'composed'"),
    ("colour=red", "model 'rednet' has no build option 'colour' (its options: involution_impl)"),
    ("nothing", "--option 'nothing': expected KEY=VALUE"),
])
def test_bad_build_options_are_one_sentence(cwd, capsys, option, message):
    code, _, err = run_cli(capsys, ["build", "rednet", "--small", "--option", option, *REF])
    assert code != 0 and message in err and not (cwd / "engines").exists()

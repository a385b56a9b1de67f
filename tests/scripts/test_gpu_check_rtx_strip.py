"""gpu_check.sh's rtx_strip step on a machine without a GPU: its table and JSON with the builds stubbed, the real
TensorRT-RTX builder's refusal here quoted whole, and a clean skip without TensorRT-RTX."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
STEPS = ROOT / "scripts" / "gpu_check_steps.py"
#: what TensorRT-RTX 1.7's builder says when a refittable build needs the CUDA driver that is not there
MYELIN_NO_DRIVER = "MyelinCheckException: graph_jit.cpp:278: CHECK(status == CUDA_SUCCESS)"


def load_steps():
    spec = importlib.util.spec_from_file_location("gpu_check_steps", STEPS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def steps():
    module = load_steps()
    return module, sys.modules["gpucheck.rtx_strip"]


def fake_build(timeouts=(), no_record=()):
    """A stand-in for `trtbuild build` in a child process: writes a plan of 1000 + 10 * (its position) bytes and a
    sidecar whose refit record names three weights for --refit, prints the CLI's "built ... in 2.5 s" line; a build
    of a variant in `timeouts` times out, one in `no_record` writes no refit record."""
    calls = []

    def run(cmd, cwd, env, capture_output, text, timeout):
        calls.append(cmd)
        out = Path(cmd[cmd.index("-o") + 1])
        variant = out.name.split("-", 1)[1].removesuffix(".engine")
        if variant in timeouts:
            raise subprocess.TimeoutExpired(cmd, timeout)
        if variant == "refit-strip":
            return subprocess.CompletedProcess(cmd, 1, "weights: w\n", "ERROR x\ntrtbuild: error: no stripping\n")
        out.write_bytes(bytes(1000 + 10 * len(calls)))
        refit = None
        if "--refit" in cmd and variant not in no_record:
            refit = {"mode": "any" if "any" in cmd else "identical", "stripped": False,
                     "weights": [{"name": n} for n in ("a.weight", "a.bias", "fc.weight")]}
        Path(f"{out}.json").write_text(json.dumps({"refit": refit}))
        return subprocess.CompletedProcess(cmd, 0, f"built m [fp32] in 2.5 s: {out} (1 KiB)\n", "")

    return run, calls


def run_step(steps, monkeypatch, tmp_path, capsys, argv, refitter=("refused: sm90", None), **fake):
    module, strip = steps
    run, calls = fake_build(**fake)
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", types.SimpleNamespace(__version__="1.7-test"))
    monkeypatch.setattr(strip.subprocess, "run", run)
    monkeypatch.setattr(strip, "check_refitter", lambda engine, timeout: refitter)
    code = module.main(["rtx-strip", "--work", str(tmp_path / "w"), "--json", str(tmp_path / "t.json"), *argv])
    return code, capsys.readouterr().out, calls


def test_table_and_json_of_stubbed_builds(steps, monkeypatch, tmp_path, capsys):
    code, out, calls = run_step(steps, monkeypatch, tmp_path, capsys, ["--models", "m"])
    assert code == 0, out
    assert [c[c.index("build") + 1:c.index("--no-progress")] for c in calls] == [
        ["m", "--backend", "tensorrt-rtx", "--target", "sm86"],
        ["m", "--backend", "tensorrt-rtx", "--target", "sm86", "--refit"],
        ["m", "--backend", "tensorrt-rtx", "--target", "sm86", "--refit", "any"],
        ["m", "--backend", "tensorrt-rtx", "--target", "sm86", "--refit", "--strip-weights"]]
    assert all(c[:3] == [sys.executable, "-m", "trtbuild"] for c in calls)
    table = out[out.index("model "):].splitlines()
    assert table == [
        "model  variant      flags                    result      plan bytes  build s  refit names  Refitter",
        "-----  -----------  -----------------------  ----------  ----------  -------  -----------  -------------",
        "m      plain        (none)                   built       1,010       2.5      0            -",
        "m      refit        --refit                  built       1,020       2.5      3            refused: sm90",
        "m      refit-any    --refit any              built       1,030       2.5      3            refused: sm90",
        "m      refit-strip  --refit --strip-weights  failed [1]  -           -        -            -",
        "[1] trtbuild: error: no stripping"]
    assert "key: m refit-strip: trtbuild: error: no stripping" in out.splitlines()
    assert ("key: m refit-any: built; 1,030 B in 2.5 s; refit record 3 names; Refitter: refused: sm90"
            in out.splitlines())
    data = json.loads((tmp_path / "t.json").read_text())
    assert (data["target"], data["small"]) == ("sm86", False)
    assert data["rows"][2] == {"model": "m", "variant": "refit-any", "flags": "--refit any", "result": "built",
                               "plan_bytes": 1030, "build_s": 2.5, "refit_names": 3, "refitter": "refused: sm90",
                               "refitter_names": None}
    assert data["rows"][3]["result"] == "trtbuild: error: no stripping" and data["rows"][3]["plan_bytes"] is None


def test_a_timeout_or_a_missing_refit_record_fails_the_step(steps, monkeypatch, tmp_path, capsys):
    code, out, _ = run_step(steps, monkeypatch, tmp_path, capsys,
                            ["--models", "m", "--variants", "plain,refit", "--timeout", "7"], timeouts=("plain",))
    assert code == 1 and "key: m plain: timed out after 7 s" in out.splitlines()
    code, out, _ = run_step(steps, monkeypatch, tmp_path, capsys, ["--models", "m", "--variants", "refit-any"],
                            refitter=("created", 3), no_record=("refit-any",))
    assert code == 1
    assert "m      refit-any  --refit any  built   1,010       2.5      0            created (3 weights)" in out


def test_without_tensorrt_rtx_it_skips_and_writes_nothing(steps, monkeypatch, tmp_path, capsys):
    module, _ = steps
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", None)  # `import tensorrt_rtx` raises ModuleNotFoundError
    code = module.main(["rtx-strip", "--work", str(tmp_path / "w"), "--json", str(tmp_path / "t.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("key: skipped: `import tensorrt_rtx` failed (ModuleNotFoundError: ")
    assert out.rstrip().endswith("; nothing was built")
    assert list(tmp_path.iterdir()) == []


def test_unknown_variant_is_one_sentence(steps, capsys):
    module, _ = steps
    with pytest.raises(SystemExit) as exit_:
        module.main(["rtx-strip", "--work", "w", "--variants", "plain,stripped"])
    assert exit_.value.code == 2
    assert "--variants: stripped is not among plain,refit,refit-any,refit-strip" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without a CUDA driver")
def test_real_builder_here_builds_plain_and_quotes_the_refit_failure(tmp_path):
    """TensorRT-RTX's own builder through `trtbuild build`: without a driver the plain plan builds and the
    refittable one fails in Myelin; the row quotes the CLI's error line whole."""
    pytest.importorskip("tensorrt_rtx")
    work = tmp_path / "w"
    done = subprocess.run([sys.executable, str(STEPS), "rtx-strip", "--models", "resnet18", "--small",
                           "--variants", "plain,refit-any", "--work", str(work), "--json", str(tmp_path / "t.json")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    plain, refit_any = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert plain["result"] == "built" and plain["refit_names"] == 0
    assert plain["plan_bytes"] == (work / "resnet18-plain.engine").stat().st_size
    assert f"built resnet18 (small) [fp32] in {plain['build_s']} s: " in done.stdout
    assert refit_any["result"].startswith("trtbuild: error: tensorrt-rtx ") and MYELIN_NO_DRIVER in refit_any["result"]
    assert refit_any["result"] in done.stderr.splitlines() or refit_any["result"] in done.stdout
    assert f"[1] {refit_any['result']}" in done.stdout.splitlines()
    assert not (work / "resnet18-refit-any.engine").exists()


def test_refitter_is_not_tried_without_a_gpu(steps, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    _, strip = steps
    assert strip.check_refitter(tmp_path / "x.engine", 10) == ("not tried: no CUDA GPU is visible", None)

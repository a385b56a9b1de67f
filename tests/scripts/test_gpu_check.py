"""scripts/gpu_check.sh on a machine without a GPU: the dry run's report, the refusals, and its Python steps."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
STEPS = ROOT / "scripts" / "gpu_check_steps.py"
#: caches that Python and pytest may write into the repository while the tests run, not the script
CACHES = {"__pycache__", ".pytest_cache", ".hypothesis", ".git", ".mypy_cache", ".ruff_cache"}
#: every step and a piece of the command it must show
STEP_COMMANDS = {
    "env": "gpu_check_steps.py env",
    "kernels": "build_plugins.sh --out",
    "kernels_selftest": "involution_selftest",
    "trt_plugin": "build_plugins.sh --out",
    "torch_extension": "gpu_check_steps.py extension",
    "pytest_gpu": "-m pytest -m gpu -p gpu_check_steps",
    "bench_fp32": "bench_involution.py --dtype fp32",
    "bench_fp16": "bench_involution.py --dtype fp16",
    "rtx_install": "gpu_check_steps.py rtx-install --wheels",
    "rtx_current": "gpu_check_steps.py rtx-current",
    "rtx_parity": "-m trtbuild parity resnet18 --small --backend tensorrt-rtx --target current",
    "rtx_strip": "gpu_check_steps.py rtx-strip --target sm86",
}
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils' timeout")


def zoo_models() -> list[str]:
    """The zoo as a fresh process sees it: a model another test registered in this process (a user's network
    named like a zoo model replaces it here) is not the script's."""
    code = ("from trtbuild.models import registry; "
            "print(' '.join(n for n in registry.names() if registry.origin(n) == registry.BUILT_IN))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.split()


def repo_files() -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in CACHES]
        found.update(os.path.relpath(os.path.join(folder, f), ROOT) for f in files)
    return found


def run_script(*args, tmp_path: Path, env_extra=None, timeout=300):
    tmpdir = tmp_path / "tmpdir"
    cwd = tmp_path / "cwd"
    tmpdir.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "TRTBUILD_WHEELS", "TORCH_CUDA_ARCH_LIST")}
    env.update(TMPDIR=str(tmpdir), **(env_extra or {}))
    return subprocess.run(["bash", str(SCRIPT), "--python", sys.executable, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def sections(report: str) -> dict[str, str]:
    """{heading: body} of the report's "## " sections."""
    parts = re.split(r"^## (\S+)\n", report, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("gpu_check_dry")
    before = repo_files()
    report = tmp_path / "out" / "report.md"
    result = run_script("--dry-run", "--report", report, tmp_path=tmp_path)
    return result, report, tmp_path, before, repo_files()


def test_dry_run_exits_0_and_writes_only_the_report(dry_run):
    result, report, tmp_path, before, after = dry_run
    assert result.returncode == 0, result.stdout + result.stderr
    assert report.is_file()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.md"]
    assert list((tmp_path / "tmpdir").iterdir()) == [] and list((tmp_path / "cwd").iterdir()) == []
    # Other tests running beside this one (pytest-xdist) may add files to the checkout; none of them writes
    # where the script would (its builds, logs or reports) or into the code.
    new = {path for path in after - before
           if "gpu_check" in path or path.startswith(("scripts", "plugins", "trtbuild"))}
    assert not new and before <= after, sorted(new | (before - after))


def test_dry_run_report_names_every_step_with_its_command_and_why_it_did_not_run(dry_run):
    result, report, *_ = dry_run
    text = report.read_text()
    parts = sections(text)
    expected = dict(STEP_COMMANDS)
    models = zoo_models()
    assert models
    for model in models:
        for precision in ("fp32", "fp16"):
            expected[f"zoo_{model}_{precision}"] = (f"-m trtbuild parity {model} --small --backend reference "
                                                    f"--precision {precision}")
    reason = "not run: dry run" if torch.cuda.is_available() else "not run: no GPU"
    for name, command in expected.items():
        assert name in parts, f"no section for step {name}"
        body = parts[name]
        status = re.search(r"^- status: (.*)$", body, re.M).group(1)
        assert status.startswith(reason), (name, status)
        shown = re.search(r"^- command: `(.*)`$", body, re.M).group(1)
        assert command in shown, (name, shown)
        assert shown in result.stdout, f"the command of {name} was not printed"
        assert f"| {name} | {status} |" in parts["Summary"]
    assert set(parts) - set(expected) == {"Prerequisites", "Versions", "nvidia-smi", "Summary"}
    assert "dry run (--dry-run)" in text and "NVIDIA_TF32_OVERRIDE=0" in text
    # the TensorRT plugin step says why it would be skipped
    assert "TensorRT >= 10 headers" in parts["trt_plugin"] or "TensorRT headers" in parts["Prerequisites"]
    for check in ("Python with PyTorch", "a CUDA GPU", "nvcc", "trtbuild imports", "pytest", "tests using the gpu mark",
                  "TensorRT-RTX files"):
        assert re.search(rf"^- \[[ x]\] {re.escape(check)}", parts["Prerequisites"], re.M), check


def test_pytest_step_runs_the_files_with_the_gpu_mark(dry_run):
    _, report, *_ = dry_run
    shown = re.search(r"^- command: `(.*)`$", sections(report.read_text())["pytest_gpu"], re.M).group(1)
    assert "tests/test_involution_cuda.py" in shown.replace(os.sep, "/") or "test_involution_cuda.py" in shown
    assert "--continue-on-collection-errors" in shown and "no:cacheprovider" in shown


@pytest.mark.parametrize("where", ["under_a_file", "a_directory"])
def test_unwritable_report_is_one_sentence_and_exit_2(tmp_path, where):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    target = tmp_path / "file.txt" / "report.md" if where == "under_a_file" else tmp_path / "folder"
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_script("--dry-run", "--report", target, tmp_path=tmp_path, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpu_check.sh: cannot write the report to '{target}': "), lines
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["cwd", "tmpdir"])
    assert (tmp_path / "file.txt").read_text() == "x" and list((tmp_path / "folder").iterdir()) == []


def test_bad_arguments_exit_2_and_help_exits_0(tmp_path):
    result = run_script("--bogus", tmp_path=tmp_path, timeout=60)
    assert result.returncode == 2 and "unknown argument '--bogus'" in result.stderr
    result = run_script("--budget", "soon", tmp_path=tmp_path, timeout=60)
    assert result.returncode == 2 and "--budget" in result.stderr
    result = run_script("--help", tmp_path=tmp_path, timeout=60)
    assert result.returncode == 0
    for word in ("--dry-run", "--report", "--wheels", "pack-rtx", "ComputeCapability.CURRENT", "TF32"):
        assert word in result.stdout, word
    assert not list((tmp_path / "cwd").iterdir())


def test_run_without_gpu_records_each_step_and_removes_its_work_folder(tmp_path):
    """Not a dry run, with no time budget: nothing is started, every step says why, the work folder goes."""
    out = tmp_path / "out"
    selection = "env|kernels|trt_plugin|torch_extension|pytest_gpu|bench_fp32|rtx|zoo"  # all but bench_fp16
    result = run_script("--budget", "0", "--steps", selection, tmp_path=tmp_path, env_extra={"OUT": str(out)})
    assert result.returncode == 0, result.stdout + result.stderr
    text = (out / "gpu_check_report.md").read_text()
    statuses = {name: re.search(r"^- status: (.*)$", body, re.M).group(1) for name, body in sections(text).items()
                if name in STEP_COMMANDS or name.startswith("zoo_")}
    assert set(STEP_COMMANDS) <= set(statuses)
    assert statuses.pop("bench_fp16") == f"not run: not selected (--steps '{selection}')"
    assert f"| bench_fp16 | not run: not selected (--steps '{selection.replace('|', chr(92) + '|')}') |" in text
    gpu_steps = ["env", "kernels_selftest", "torch_extension", "pytest_gpu", "bench_fp32", "rtx_current", "rtx_parity",
                 "rtx_strip"]
    gpu_steps += [f"zoo_{m}_fp32" for m in zoo_models()]
    for name in gpu_steps:
        expected = "not run: time budget spent" if torch.cuda.is_available() else "not run: no GPU visible to PyTorch"
        assert statuses[name].startswith(expected) or statuses[name].startswith("skipped: "), (name, statuses[name])
    no_files = (f"skipped: no TensorRT-RTX files (tensorrt_rtx*.whl, tensorrt_rtx*.tar.xz[.partN]) in {ROOT / '.whl'}; "
                "see --help for how to bring them")
    assert statuses["rtx_install"] in ("not run: time budget spent (--budget 0 s)", no_files)
    assert list((tmp_path / "tmpdir").iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check_report.md"]  # nothing ran: no logs archive


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck_clean():
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout


# ---------------------------------------------------------------- the Python steps


def load_steps():
    spec = importlib.util.spec_from_file_location("gpu_check_steps", STEPS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pytest_plugin_turns_tf32_off():
    steps = load_steps()
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        steps.pytest_runtest_setup(None)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert torch.get_float32_matmul_precision() == "highest"
        assert "allow_tf32=False" in steps.pytest_report_header(None)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def fake_wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


@pytest.mark.parametrize("split", [False, True], ids=["one_archive", "two_parts"])
def test_pack_rtx_then_rtx_install_gives_an_importable_tensorrt_rtx(tmp_path, split):
    """A stand-in for the two TensorRT-RTX wheels: pack-rtx keeps every file (in one archive or in parts),
    rtx-install joins and unpacks it and writes the tensorrt_rtx re-export that the sdist would have installed."""
    bindings = fake_wheel(tmp_path / "tensorrt_rtx_cu13_bindings-1.7-cp312-none-manylinux_2_28_x86_64.whl", {
        "tensorrt_rtx_bindings/__init__.py": b"__version__ = '1.7-test'\nBuilder = 'builder'\n",
        "tensorrt_rtx_cu13_bindings-1.7.dist-info/METADATA": b"Name: tensorrt_rtx_cu13_bindings\n"})
    library = os.urandom(3 << 19)  # incompressible: 1.5 MiB of archive, cut into two parts of at most 1 MiB
    libs = fake_wheel(tmp_path / "tensorrt_rtx_cu13_libs-1.7-py3-none-manylinux_2_28_x86_64.whl", {
        "tensorrt_rtx_libs/__init__.py": b"", "tensorrt_rtx_libs/libtensorrt_rtx.so.1": library,
        "tensorrt_rtx_libs/libtensorrt_onnxparser_rtx.so.1": b"\x7fELF" + bytes(64)})
    wheels = tmp_path / "wheels"
    pack = wheels / "tensorrt_rtx_site.tar.xz"
    result = subprocess.run([sys.executable, str(STEPS), "pack-rtx", str(bindings), str(libs), "--out", str(pack),
                             *(["--split-mib", "1"] if split else [])], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"a call would carry [0-9.]+ MiB: fits the 64 MiB limit", result.stdout), result.stdout
    if split:
        assert not pack.exists()
        assert sorted(p.name for p in wheels.iterdir()) == [f"{pack.name}.part0", f"{pack.name}.part1"]
    else:
        with tarfile.open(pack) as tar:
            assert sorted(tar.getnames()) == sorted([
                "tensorrt_rtx_bindings/__init__.py", "tensorrt_rtx_cu13_bindings-1.7.dist-info/METADATA",
                "tensorrt_rtx_libs/__init__.py", "tensorrt_rtx_libs/libtensorrt_rtx.so.1",
                "tensorrt_rtx_libs/libtensorrt_onnxparser_rtx.so.1"])
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, str(STEPS), "rtx-install", "--wheels", str(wheels), "--target", str(site)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "key: import tensorrt_rtx: version 1.7-test" in result.stdout
    assert ("key: joined 2 parts into tensorrt_rtx_site.tar.xz" in result.stdout) == split
    assert (site / "tensorrt_rtx_libs" / "libtensorrt_rtx.so.1").read_bytes() == library
    assert (site / "tensorrt_rtx_libs" / "libtensorrt_onnxparser_rtx.so.1").is_file()
    assert "from tensorrt_rtx_bindings import *" in (site / "tensorrt_rtx" / "__init__.py").read_text()
    assert not (site / "tensorrt_rtx_site.tar.xz").exists()


def test_rtx_install_without_files_says_so(tmp_path):
    result = subprocess.run([sys.executable, str(STEPS), "rtx-install", "--wheels", str(tmp_path),
                             "--target", str(tmp_path / "site")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert ("key: no TensorRT-RTX wheels (tensorrt_rtx*.whl) or pack-rtx archive (tensorrt_rtx*.tar.xz[.partN]) "
            f"in {tmp_path}") in result.stdout
    assert not (tmp_path / "site").exists()


def test_rtx_current_gives_one_answer():
    """The tiny network is built with TensorRT-RTX's real API; without a GPU the answer is its refusal."""
    pytest.importorskip("tensorrt_rtx")
    result = subprocess.run([sys.executable, str(STEPS), "rtx-current"], capture_output=True, text=True, timeout=300)
    answers = [line for line in result.stdout.splitlines() if line.startswith("key: ANSWER: ")]
    assert len(answers) == 1, result.stdout + result.stderr
    assert "key: config.set_compute_capability(ComputeCapability.CURRENT, 0) returned True" in result.stdout
    ran = "the CURRENT engine ran on this GPU" in answers[0]
    refused_as_documented = "refuses to run engines on this GPU's compute capability" in answers[0]  # Hopper
    assert (result.returncode == 0) == (ran or refused_as_documented), answers[0]
    if not torch.cuda.is_available():
        assert result.returncode == 1 and "build_serialized_network returned None" in answers[0], answers[0]


def test_probe_reports_torch_and_the_zoo():
    result = subprocess.run([sys.executable, str(STEPS), "probe"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stderr
    fields = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert fields["torch"] == torch.__version__ and fields["gpu"] == str(torch.cuda.is_available())
    assert fields["models"].split() == zoo_models()
    assert ("sm" in fields) == torch.cuda.is_available()

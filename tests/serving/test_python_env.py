"""trtbuild.serving.python_env: Triton's Python-backend stub runs *this* interpreter (its shared
libpython first on LD_LIBRARY_PATH), and where it cannot, one sentence says why."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers.triton_models import skip_or_fail

from trtbuild.serving import python_env


def _stub_can_run() -> None:
    """Skip (fail under CI=true) where the stub cannot run here, judged without python_env (whose own
    judgement is under test), then require python_env to agree that it can."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None:
        skip_or_fail("nvidia-pytriton (the serve extra) is not installed")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stub = (Path(spec.origin).parent / "tritonserver" / "python_backend_stubs" / version /
            "triton_python_backend_stub")
    if not stub.is_file():
        skip_or_fail(f"nvidia-pytriton has no Python-backend stub for Python {version}")
    libdir = Path(sysconfig.get_config_var("LIBDIR") or "/nonexistent")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not list(libdir.glob(f"libpython{version}*.so*")):
        skip_or_fail(f"{sys.executable} has no shared libpython{version} in {libdir}")
    assert python_env.stub_problem() is None, python_env.stub_problem()


def test_environment_puts_this_pythons_libdir_first_and_keeps_the_rest():
    _stub_can_run()
    libdir = sysconfig.get_config_var("LIBDIR")
    env = python_env.server_environment({"LD_LIBRARY_PATH": f"/opt/x:{libdir}:/opt/y", "HOME": "/h"})
    assert env["LD_LIBRARY_PATH"].split(os.pathsep) == [libdir, "/opt/x", "/opt/y"]
    assert env["HOME"] == "/h"


def test_stub_linked_through_the_backend_dir_embeds_this_interpreter(tmp_path):
    """The stub's libpython, as the dynamic loader resolves it with the environment: this
    interpreter's (without it, the system's libpython3.X that started the issue)."""
    _stub_can_run()
    backends = python_env.python_backend_dir(tmp_path)
    stub = backends / "python" / "triton_python_backend_stub"
    assert stub.is_symlink() and stub.resolve() == python_env.stub_path().resolve()
    out = subprocess.run(["ldd", str(stub)], env=python_env.server_environment(), capture_output=True, text=True).stdout
    line = next(line for line in out.splitlines() if "libpython" in line)
    assert str(python_env.shared_libpython().parent) in line, line


def test_a_static_python_is_refused_in_one_sentence(monkeypatch):
    real = sysconfig.get_config_var
    monkeypatch.setattr(python_env.sysconfig, "get_config_var",
                        lambda name: 0 if name == "Py_ENABLE_SHARED" else real(name))
    problem = python_env.stub_problem()
    assert problem and "has no shared libpython" in problem and sys.executable in problem and "\n" not in problem
    with pytest.raises(python_env.StubError, match="has no shared libpython"):
        python_env.server_environment()


def test_a_python_without_a_stub_is_refused(monkeypatch):
    monkeypatch.setattr(python_env, "python_version", lambda: "3.99")
    problem = python_env.stub_problem()
    assert problem.startswith("nvidia-pytriton has no Python-backend stub for Python 3.99")

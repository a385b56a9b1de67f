"""Run Triton's Python backend in this interpreter, whatever libpython the system carries.

Triton's Python backend starts a *stub* process (``triton_python_backend_stub``) that embeds a
Python interpreter. nvidia-pytriton bundles one stub per Python minor version, linked against
``libpython3.X.so.1.0`` and found by the dynamic loader. On a machine where the interpreter running
trtbuild is not the system one (pyenv 3.11.7 next to Debian's 3.11.2), the loader picks the system
library, which then reads *this* interpreter's standard library and fails while models initialise
(``'_thread.RLock' object has no attribute '_recursion_count'``), or does not see this
interpreter's packages at all (``No module named 'numpy'``).

The fix: put this interpreter's own ``LIBDIR`` first on ``LD_LIBRARY_PATH`` for the server, so the
stub embeds the very interpreter that runs trtbuild, with its packages. That needs a shared
libpython (``Py_ENABLE_SHARED``); where there is none, :func:`stub_problem` says so in one
sentence and nothing is started.

    env = server_environment()               # os.environ + LD_LIBRARY_PATH, or StubError
    backends = python_backend_dir(tmpdir)      # a backend directory with this Python's stub
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path


class StubError(RuntimeError):
    """Triton's Python backend cannot run in this interpreter (the message says why, in one sentence)."""


def python_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def pytriton_root() -> Path:
    """The directory of the tritonserver distribution nvidia-pytriton bundles; StubError if absent."""
    try:
        import pytriton
    except ImportError:
        raise StubError("Triton Inference Server is not installed: trtbuild uses the tritonserver binary that "
                        "nvidia-pytriton bundles (pip install \"trtbuild[serve]\")") from None
    root = Path(pytriton.__file__).resolve().parent / "tritonserver"
    if not (root / "bin" / "tritonserver").is_file():
        raise StubError(f"nvidia-pytriton at {root.parent} has no tritonserver binary (bin/tritonserver)")
    return root


def tritonserver_binary() -> Path:
    return pytriton_root() / "bin" / "tritonserver"


def shared_libpython() -> Path | None:
    """This interpreter's shared libpython (libpython3.X.so.1.0), or None if it was built static."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    libdir = sysconfig.get_config_var("LIBDIR")
    name = f"libpython{python_version()}.so.1.0"
    path = Path(libdir or "") / name
    return path if path.is_file() else None


def stub_path() -> Path:
    """nvidia-pytriton's Python-backend stub for this interpreter's minor version; StubError if none."""
    stub = pytriton_root() / "python_backend_stubs" / python_version() / "triton_python_backend_stub"
    if not stub.is_file():
        raise StubError(f"nvidia-pytriton has no Python-backend stub for Python {python_version()} "
                        f"(looked for {stub})")
    return stub


def stub_problem() -> str | None:
    """None if Triton's Python backend can run in this interpreter, else one sentence saying why not."""
    try:
        stub_path()
    except StubError as e:
        return str(e)
    if shared_libpython() is None:
        return (f"this Python ({sys.executable}, {sys.version.split()[0]}) has no shared libpython{python_version()}"
                ".so, so Triton's Python-backend stub would embed the system's Python instead, whose standard "
                "library and packages do not match; use a Python built with --enable-shared (pyenv: "
                "PYTHON_CONFIGURE_OPTS=--enable-shared) or a venv of the system Python")
    return None


def server_environment(base: dict | None = None) -> dict:
    """The environment to start tritonserver with: `base` (default os.environ) with this
    interpreter's LIBDIR first on LD_LIBRARY_PATH. StubError (one sentence) when that cannot work."""
    problem = stub_problem()
    if problem:
        raise StubError(problem)
    env = dict(os.environ if base is None else base)
    libdir = str(shared_libpython().parent)
    rest = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and p != libdir]
    env["LD_LIBRARY_PATH"] = os.pathsep.join([libdir, *rest])
    return env


def python_backend_dir(workdir: str | os.PathLike) -> Path:
    """A Triton backend directory under `workdir` whose ``python/`` backend runs this interpreter's
    stub: links to nvidia-pytriton's backend library and utilities, and to the stub for this Python
    (linked, not copied: the stub finds its bundled libraries relative to its real location).
    Returns the directory to pass as ``--backend-directory``."""
    source = pytriton_root() / "backends" / "python"
    backends = Path(workdir) / "backends"
    target = backends / "python"
    target.mkdir(parents=True, exist_ok=True)
    links = {entry.name: entry for entry in source.iterdir() if entry.name != "__pycache__"}
    links["triton_python_backend_stub"] = stub_path()
    for name, real in links.items():
        link = target / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(real)
    return backends

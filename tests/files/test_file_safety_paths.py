"""trtbuild.files holds the file-safety helpers; their old paths under trtbuild.weights still work,
warn, and are the same code (patching the old module reaches the new writers)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import trtbuild.weights
from trtbuild.files import atomic, outputs
from trtbuild.weights.errors import WeightsError, WeightsWriteError

ROOT = Path(__file__).resolve().parents[2]


def _fresh_import(name: str, monkeypatch):
    """Import `name` as if for the first time; returns (module, the warnings it raised)."""
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delattr(trtbuild.weights, name.rpartition(".")[2], raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(f"import {name}", "user_code.py", "exec"), {})
    return sys.modules[name], [w for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("old, new", [("trtbuild.weights.atomic", "trtbuild.files.atomic"),
                                      ("trtbuild.weights.outputs", "trtbuild.files.outputs")])
def test_old_path_warns_once_naming_the_new_one_and_points_at_the_importer(old, new, monkeypatch):
    _, caught = _fresh_import(old, monkeypatch)
    assert [str(w.message) for w in caught] == [f"{old} has moved to {new}; import it from there"]
    assert (caught[0].filename, caught[0].lineno) == ("user_code.py", 1)


def test_old_outputs_path_is_the_same_code(monkeypatch):
    old, _ = _fresh_import("trtbuild.weights.outputs", monkeypatch)
    for name in outputs.__all__:
        assert getattr(old, name) is getattr(outputs, name), name
    assert set(outputs.__all__) <= set(dir(old))


def test_old_atomic_path_keeps_its_names_and_its_default_error(tmp_path, monkeypatch):
    old, _ = _fresh_import("trtbuild.weights.atomic", monkeypatch)
    assert old.AtomicWriteError is atomic.AtomicWriteError and old.WeightsWriteError is WeightsWriteError
    assert set(old.__all__) == set(atomic.__all__) | {"WeightsWriteError"}
    assert issubclass(WeightsWriteError, WeightsError) and issubclass(WeightsWriteError, atomic.AtomicWriteError)
    assert old.atomic_write_bytes(tmp_path / "a.bin", b"xy") == tmp_path / "a.bin"
    assert (tmp_path / "a.bin").read_bytes() == b"xy"
    missing = tmp_path / "no" / "dir" / "b.bin"
    for write in (lambda: old.atomic_write_bytes(missing, b""), lambda: old.atomic_write(missing, Path.touch),
                  lambda: old.atomic_write_files([(missing, Path.touch)])):
        with pytest.raises(WeightsWriteError, match=f"^cannot write {missing}: directory {missing.parent} does not"):
            write()
    # the new path's default is the generic error: no weights concept below the weights package
    with pytest.raises(atomic.AtomicWriteError) as info:
        atomic.atomic_write_bytes(missing, b"")
    assert type(info.value) is atomic.AtomicWriteError
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(WeightsWriteError, match="cannot create directory"):
        old.ensure_parent_dir(blocker / "sub" / "c.bin")


def test_patching_the_old_module_reaches_the_new_writers(tmp_path, monkeypatch):
    old, _ = _fresh_import("trtbuild.weights.atomic", monkeypatch)

    def broken_fsync(path):
        raise OSError(5, "Input/output error", str(path))

    monkeypatch.setattr(old, "_fsync", broken_fsync)
    assert atomic._fsync is broken_fsync
    with pytest.raises(atomic.AtomicWriteError, match="Input/output error"):
        atomic.atomic_write_bytes(tmp_path / "x.bin", b"data")
    monkeypatch.undo()
    assert atomic._fsync is not broken_fsync and "_fsync" not in vars(old)


def test_trtbuild_and_scripts_import_only_the_new_paths():
    """No module of trtbuild imports the deprecated paths (importing everything raises no warning)."""
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "import trtbuild.cli, trtbuild.engine, trtbuild.parity, trtbuild.quant, trtbuild.onnx_export, "
            "trtbuild.debug.precision, trtbuild.serving, trtbuild.weights\n"
            "from trtbuild.cli import make_parser; make_parser()\n"
            "import sys; print(sorted(m for m in sys.modules if m in ('trtbuild.weights.atomic', "
            "'trtbuild.weights.outputs')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    old_paths = ("trtbuild.weights.atomic", "trtbuild.weights.outputs", "weights import atomic",
                 "weights import outputs")
    sources = [p for d in ("trtbuild", "scripts") for p in (ROOT / d).rglob("*.py")]
    shims = {ROOT / "trtbuild/weights/atomic.py", ROOT / "trtbuild/weights/outputs.py"}
    offenders = [str(p.relative_to(ROOT)) for p in sources if p not in shims
                 and any(s in p.read_text() for s in old_paths)]
    assert offenders == []

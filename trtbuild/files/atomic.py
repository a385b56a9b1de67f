"""Atomic file replacement: write a temp file next to the target, then ``os.replace``.

    atomic_write("w.wts", lambda tmp: tmp.write_text("..."))        # one file, written by a callback
    atomic_write_bytes("trt.cache", data)                             # one file from bytes
    atomic_write_files([("a.engine", w1), ("a.engine.json", w2)])     # both temps written, then renamed

This is the one atomic writer of trtbuild (weight files, engines, timing caches, parity reports,
calibration files and ONNX files). Every OSError while writing (missing directory, permission, disk
full, ...) is re-raised as ``error`` (default :class:`AtomicWriteError`; each caller passes its
own subclass, e.g. ``trtbuild.weights.errors.WeightsWriteError``) with a message naming the target
path, never the temporary file. Stdlib only: it sits below every other package.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Callable, Iterable

__all__ = ["AtomicWriteError", "atomic_write", "atomic_write_bytes", "atomic_write_files",
           "ensure_parent_dir"]

Writer = Callable[[Path], object]


class AtomicWriteError(ValueError, OSError):
    """A file could not be written; the message names the target path (not the temp file).

    Both a ValueError (the CLI prints it as one line) and an OSError (for callers catching OSError)."""


def _reason(exc: OSError) -> str:
    """The OS's reason without the file name it carries (that may be the temp file)."""
    return exc.strerror or str(exc) or type(exc).__name__


def ensure_parent_dir(path: str | os.PathLike, error: type[Exception] = AtomicWriteError) -> Path:
    """Create the missing parent directories of `path`; return `path` as a Path. An OSError
    becomes `error` naming the directory and the file meant to go there."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise error(f"cannot write {target}: cannot create directory {target.parent} ({_reason(e)})") from e
    return target


def _check_target(target: Path, error: type[Exception]) -> None:
    if not target.parent.is_dir():
        raise error(f"cannot write {target}: directory {target.parent} does not exist")
    if target.is_dir():
        raise error(f"cannot write {target}: it is a directory")


def _new_temp(target: Path) -> Path:
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # mode follows the umask
    os.close(fd)
    return tmp


def _fsync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def _finish_renames(pairs: list[tuple[Path, Path]]) -> None:
    """After a Ctrl-C between two renames: move the remaining temp files too, so that the set is
    complete (a new engine next to its old sidecar would be worse than either set)."""
    for target, tmp in pairs:
        if os.path.lexists(tmp):  # already moved if the interrupt came right after its os.replace
            os.replace(tmp, target)


def atomic_write_files(items: Iterable[tuple[str | os.PathLike, Writer]],
                       error: type[Exception] = AtomicWriteError) -> list[Path]:
    """Replace several files together: call ``write(tmp_path)`` for each (path, write) pair on a
    fresh temp file next to its path, fsync it, and only when every temp file is complete rename
    them all into place (in the given order).

    If a write fails, every temp file is removed and the existing files are left untouched; the
    exception of `write` propagates, except an OSError, which becomes `error` (default
    AtomicWriteError) naming the target. Returns the target paths.
    """
    items = [(Path(path), write) for path, write in items]
    temps: list[Path] = []
    current = items[0][0] if items else None
    try:
        for target, write in items:
            current = target
            _check_target(target, error)
            temps.append(_new_temp(target))
            write(temps[-1])
            _fsync(temps[-1])
        renames, done = [(target, tmp) for (target, _), tmp in zip(items, temps)], 0
        try:
            for done, (target, tmp) in enumerate(renames):  # noqa: B007 - `done` is read by the handler below
                current = target
                os.replace(tmp, target)
        except KeyboardInterrupt:
            _finish_renames(renames[done:])
            raise
    except BaseException as e:
        for tmp in temps:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(e, OSError) and not isinstance(e, (AtomicWriteError, error)):
            raise error(f"cannot write {current}: {_reason(e)}") from e
        raise
    return [target for target, _ in items]


def atomic_write(path: str | os.PathLike, write: Writer, error: type[Exception] = AtomicWriteError) -> Path:
    """Call ``write(tmp_path)`` on a fresh temp file in ``path``'s directory, then move it to ``path``.

    The temp file is flushed to disk before the rename.  If ``write`` (or the
    rename) fails, the temp file is removed and an existing ``path`` is left
    untouched; the exception propagates (an OSError as `error`, naming ``path``).
    Returns ``path`` as a Path.
    """
    return atomic_write_files([(path, write)], error)[0]


def atomic_write_bytes(path: str | os.PathLike, data, error: type[Exception] = AtomicWriteError) -> Path:
    """Replace ``path`` with the bytes-like ``data`` atomically (see atomic_write)."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(memoryview(data)), error)

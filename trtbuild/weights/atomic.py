"""Atomic file replacement: write a temp file next to the target, then ``os.replace``."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Callable

from .errors import WeightsError


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)`` on a fresh temp file in ``path``'s directory, then move it to ``path``.

    The temp file is flushed to disk before the rename.  If ``write`` (or the
    rename) fails, the temp file is removed and an existing ``path`` is left
    untouched; the exception propagates.  Returns ``path`` as a Path.
    """
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        raise WeightsError(f"cannot write {target}: directory {directory} does not exist")
    if target.is_dir():
        raise WeightsError(f"cannot write {target}: it is a directory")
    tmp = directory / f".{target.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # mode follows the umask
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target

"""Deprecated path of :mod:`trtbuild.files.atomic`, which every writer of trtbuild uses.

Its writers raise WeightsWriteError by default here, as they did when they lived in this package.
"""

from __future__ import annotations

from trtbuild._moved import forward_module

from .errors import WeightsWriteError

_atomic = forward_module(__name__, "trtbuild.files.atomic")

__all__ = [*_atomic.__all__, "WeightsWriteError"]


def ensure_parent_dir(path, error: type[Exception] = WeightsWriteError):
    """trtbuild.files.atomic.ensure_parent_dir, raising WeightsWriteError by default."""
    return _atomic.ensure_parent_dir(path, error)


def atomic_write_files(items, error: type[Exception] = WeightsWriteError):
    """trtbuild.files.atomic.atomic_write_files, raising WeightsWriteError by default."""
    return _atomic.atomic_write_files(items, error)


def atomic_write(path, write, error: type[Exception] = WeightsWriteError):
    """trtbuild.files.atomic.atomic_write, raising WeightsWriteError by default."""
    return _atomic.atomic_write(path, write, error)


def atomic_write_bytes(path, data, error: type[Exception] = WeightsWriteError):
    """trtbuild.files.atomic.atomic_write_bytes, raising WeightsWriteError by default."""
    return _atomic.atomic_write_bytes(path, data, error)

"""Lazy build of the involution CUDA kernels as a PyTorch C++/CUDA extension.

The extension is compiled by ``torch.utils.cpp_extension.load`` from the same sources the
TensorRT plugin uses (``plugins/involution/involution_kernels.cu`` plus the binding
``plugins/involution/torch/involution_torch.cpp``) the first time it is needed, and only when
``torch.cuda.is_available()``. The build is cached by torch (``TORCH_EXTENSIONS_DIR``).

Set ``TRTBUILD_PLUGINS_DIR`` to the ``plugins`` folder when trtbuild is installed away from its
source tree.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import ModuleType

import torch

EXTENSION_NAME = "trtbuild_involution_ext"

_lock = threading.Lock()
_module: ModuleType | None = None
_failure: str | None = None


def involution_source_dir() -> Path:
    """Folder holding involution_kernels.cu/.h and torch/involution_torch.cpp."""
    override = os.environ.get("TRTBUILD_PLUGINS_DIR")
    plugins = Path(override) if override else Path(__file__).resolve().parents[2] / "plugins"
    return plugins / "involution"


def source_files() -> list[Path]:
    """The two translation units compiled into the extension."""
    root = involution_source_dir()
    return [root / "torch" / "involution_torch.cpp", root / "involution_kernels.cu"]


def _build() -> ModuleType:
    from torch.utils.cpp_extension import load

    sources = source_files()
    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"involution extension sources not found: {missing}; set TRTBUILD_PLUGINS_DIR to the "
            "trtbuild 'plugins' folder"
        )
    return load(
        name=EXTENSION_NAME,
        sources=[str(p) for p in sources],
        extra_include_paths=[str(involution_source_dir())],
        extra_cflags=["-O3"],  # torch adds its own -std (C++17 or C++20 by version)
        extra_cuda_cflags=["-O3"],
        verbose=bool(os.environ.get("TRTBUILD_VERBOSE_BUILD")),
    )


def load_extension() -> ModuleType:
    """Return the compiled extension, building it on first use.

    Raises RuntimeError (with the reason) when CUDA is unavailable or the build failed; a failed
    build is not retried in the same process.
    """
    global _module, _failure
    with _lock:
        if _module is not None:
            return _module
        if _failure is not None:
            raise RuntimeError(f"involution CUDA extension unavailable: {_failure}")
        if not torch.cuda.is_available():
            raise RuntimeError("involution CUDA extension unavailable: torch.cuda.is_available() is False")
        try:
            _module = _build()
        except Exception as exc:  # remember why, then re-raise with context
            _failure = f"{type(exc).__name__}: {exc}"
            raise RuntimeError(f"involution CUDA extension failed to build: {_failure}") from exc
        return _module


def extension_available() -> bool:
    """True when the extension is (or can be) loaded; builds it on the first call with CUDA."""
    if not torch.cuda.is_available():
        return False
    try:
        load_extension()
    except RuntimeError:
        return False
    return True


def unavailable_reason() -> str | None:
    """Why the extension cannot be used, or None when it is loaded (does not trigger a build)."""
    if _module is not None:
        return None
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return _failure

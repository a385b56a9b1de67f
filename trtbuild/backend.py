"""Backend selection: the real `tensorrt` module where it can run, else trtbuild's reference.

Order of precedence: an explicit choice (argument / CLI --backend), then the TRTBUILD_BACKEND
environment variable, then "auto" (tensorrt when it imports and a CUDA GPU is visible).
"""

from __future__ import annotations

import ctypes
import importlib
import os
from types import ModuleType

ENV_VAR = "TRTBUILD_BACKEND"
CHOICES = ("auto", "reference", "tensorrt")
SUPPORTED_TRT_MAJORS = (10, 11)


class BackendError(RuntimeError):
    """The requested backend cannot be used; the message says why in one sentence."""


CUDA_DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")


def load_cuda_driver():
    """The CUDA driver library (ctypes.CDLL) after a successful cuInit(0), or None where there is
    no driver or it fails to initialise (no GPU). Shared by the GPU count here and
    trtbuild.engine.device (GPU name and compute capability) for machines without torch CUDA."""
    for lib in CUDA_DRIVER_LIBRARIES:
        try:
            cuda = ctypes.CDLL(lib)
        except OSError:
            continue
        return cuda if cuda.cuInit(0) == 0 else None
    return None


def _cuda_gpu_count() -> int:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.device_count()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    cuda = load_cuda_driver()
    count = ctypes.c_int(0)
    if cuda is not None and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0:
        return count.value
    return 0


def _import_tensorrt() -> ModuleType:
    try:
        trt = importlib.import_module("tensorrt")
    except Exception as e:  # ImportError, or OSError from missing libnvinfer
        raise BackendError(f"the tensorrt backend needs the TensorRT Python package, but `import tensorrt` failed ({e}); "
                           "install TensorRT 10.x or 11.x, or use --backend reference") from None
    version = getattr(trt, "__version__", "")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise BackendError(f"`import tensorrt` gave a module without a usable version ({version!r}); "
                           "is it a stub package whose download failed?") from None
    if major not in SUPPORTED_TRT_MAJORS:
        raise BackendError(f"trtbuild supports TensorRT 10.x and 11.x, but TensorRT {version} is installed")
    if _cuda_gpu_count() == 0:
        raise BackendError(f"TensorRT {version} is installed but no CUDA GPU is visible, so it cannot build or run engines; "
                           "use --backend reference")
    return trt


def requested_backend(choice: str | None = None) -> str:
    source = "--backend" if choice else ENV_VAR if os.environ.get(ENV_VAR) else "default"
    choice = (choice or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if choice not in CHOICES:
        raise BackendError(f"unknown backend {choice!r} (from {source}); choose one of {', '.join(CHOICES)}")
    return choice


def load_trt(choice: str | None = None) -> ModuleType:
    """Return the module to use as `trt`: the real tensorrt or trtbuild.reference."""
    choice = requested_backend(choice)
    if choice == "tensorrt":
        return _import_tensorrt()
    if choice == "auto":
        try:
            return _import_tensorrt()
        except BackendError:
            pass
    from trtbuild import reference

    return reference


def is_reference(trt: ModuleType) -> bool:
    return getattr(trt, "__name__", "") == "trtbuild.reference"


def backend_name(trt: ModuleType) -> str:
    return "reference" if is_reference(trt) else f"tensorrt {trt.__version__}"


def trt_of(network) -> ModuleType:
    """The module (reference or tensorrt) that a network object belongs to."""
    from trtbuild import reference

    if isinstance(network, reference.INetworkDefinition):
        return reference
    return importlib.import_module("tensorrt")

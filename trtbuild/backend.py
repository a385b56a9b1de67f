"""Backend selection: the real `tensorrt` module where it can run, else trtbuild's reference;
NVIDIA's TensorRT-RTX (`tensorrt_rtx`) when asked for.

Order of precedence: an explicit choice (argument / CLI --backend), then the TRTBUILD_BACKEND
environment variable, then "auto" (tensorrt when it imports and a CUDA GPU is visible, else the
reference). "tensorrt-rtx" is never picked by auto: it is NVIDIA's RTX-GPU edition of TensorRT
(strongly typed only, no plugins, no Hopper target). Its builder runs without a GPU once target
compute capabilities are set, so it loads on any machine; running its engines needs an RTX-class GPU.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from dataclasses import dataclass
from types import ModuleType

ENV_VAR = "TRTBUILD_BACKEND"
CHOICES = ("auto", "reference", "tensorrt", "tensorrt-rtx")
RTX_MODULE = "tensorrt_rtx"
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
    except Exception as e:  # noqa: BLE001 - ImportError, or OSError from missing libnvinfer
        raise BackendError("the tensorrt backend needs the TensorRT Python package, but `import tensorrt` failed "
                           f"({e}); install TensorRT 10.x or 11.x, or use --backend reference") from None
    version = getattr(trt, "__version__", "")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise BackendError(f"`import tensorrt` gave a module without a usable version ({version!r}); "
                           "is it a stub package whose download failed?") from None
    if major not in SUPPORTED_TRT_MAJORS:
        raise BackendError(f"trtbuild supports TensorRT 10.x and 11.x, but TensorRT {version} is installed")
    if _cuda_gpu_count() == 0:
        raise BackendError(f"TensorRT {version} is installed but no CUDA GPU is visible, so it cannot build "
                           "or run engines; use --backend reference")
    return trt


def _import_tensorrt_rtx() -> ModuleType:
    try:
        trt = importlib.import_module(RTX_MODULE)
    except Exception as e:  # noqa: BLE001 - ImportError, or OSError from a missing libtensorrt_rtx
        raise BackendError(f"the tensorrt-rtx backend needs NVIDIA's TensorRT-RTX Python package, but "
                           f"`import tensorrt_rtx` failed ({e}); install it with "
                           "`pip install tensorrt-rtx-cu13`, or use --backend reference") from None
    if not hasattr(trt, "ComputeCapability"):
        raise BackendError(f"`import tensorrt_rtx` gave a module without ComputeCapability (version "
                           f"{getattr(trt, '__version__', '?')}); trtbuild needs TensorRT-RTX >= 1.0")
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
    if choice == "tensorrt-rtx":
        return _import_tensorrt_rtx()
    if choice == "auto":
        try:
            return _import_tensorrt()
        except BackendError:
            pass
    from trtbuild import reference

    return reference


def is_reference(trt: ModuleType) -> bool:
    return getattr(trt, "__name__", "") == "trtbuild.reference"


def is_rtx(trt: ModuleType) -> bool:
    """True for NVIDIA's TensorRT-RTX module (`tensorrt_rtx`)."""
    return getattr(trt, "__name__", "") == RTX_MODULE


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers, so that callers ask for a feature rather than for a product name.

    has_plugins: it builds plugin layers (TensorRT-RTX has no plugins).
    has_timing_cache: a timing cache file is read and written (TensorRT-RTX documents its own as
        deprecated and unused: engines are tuned just in time on the GPU that runs them).
    needs_targets: it builds for target compute capabilities given at build time, and needs them to
        build without a GPU (TensorRT-RTX); the others build for the GPU they run on.
    """

    has_plugins: bool
    has_timing_cache: bool
    needs_targets: bool


_RTX_CAPABILITIES = Capabilities(has_plugins=False, has_timing_cache=False, needs_targets=True)
_CAPABILITIES = Capabilities(has_plugins=True, has_timing_cache=True, needs_targets=False)


def capabilities(trt: ModuleType) -> Capabilities:
    """The Capabilities of a trt module (trtbuild.reference, tensorrt or tensorrt_rtx)."""
    return _RTX_CAPABILITIES if is_rtx(trt) else _CAPABILITIES


def backend_kind(trt: ModuleType) -> str:
    """"reference", "tensorrt" or "tensorrt-rtx": the --backend name of a trt module."""
    return "reference" if is_reference(trt) else "tensorrt-rtx" if is_rtx(trt) else "tensorrt"


def backend_name(trt: ModuleType) -> str:
    """"reference", "tensorrt 10.16.1.11" or "tensorrt-rtx 1.7.1.116"."""
    kind = backend_kind(trt)
    return kind if kind == "reference" else f"{kind} {trt.__version__}"


def product_name(trt: ModuleType) -> str:
    """How messages name the backend: "the reference backend", "TensorRT 10.16.1.11", "TensorRT-RTX 1.7.1.116"."""
    kind = backend_kind(trt)
    return "the reference backend" if kind == "reference" else \
        f"{'TensorRT-RTX' if kind == 'tensorrt-rtx' else 'TensorRT'} {trt.__version__}"


def trt_of(network) -> ModuleType:
    """The module (trtbuild.reference, tensorrt or tensorrt_rtx) that a network object (or any
    object of the API: builder, layer, tensor) belongs to."""
    from trtbuild import reference

    if isinstance(network, (reference.INetworkDefinition, reference.ITensor)):
        return reference
    origin = type(network).__module__ or ""
    if origin.startswith("trtbuild.reference"):
        return reference
    if origin.split(".")[0].startswith(RTX_MODULE):  # tensorrt_rtx_bindings.tensorrt_rtx
        return importlib.import_module(RTX_MODULE)
    return importlib.import_module("tensorrt")

"""Which device engines are built for and run on: GPU name and compute capability, or "cpu"."""

from __future__ import annotations

import ctypes
from types import ModuleType

from trtbuild import backend
from trtbuild.backend import is_reference

CPU = "cpu"


def _cuda_driver_info(index: int = 0) -> dict | None:
    """GPU name and compute capability from the CUDA driver (for machines without torch CUDA)."""
    cuda = backend.load_cuda_driver()
    if cuda is None:
        return None
    dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    if cuda.cuDeviceGet(ctypes.byref(dev), index) != 0:
        return None
    cuda.cuDeviceGetName(name, 256, dev)
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
    return {"gpu": name.value.decode(errors="replace"), "compute_capability": f"{major.value}.{minor.value}"}


def gpu_info(index: int | None = None) -> dict | None:
    """{"gpu": name, "compute_capability": "8.6"} of the current CUDA device, or None without a GPU."""
    try:
        import torch

        if torch.cuda.is_available():
            idx = torch.cuda.current_device() if index is None else index
            major, minor = torch.cuda.get_device_capability(idx)
            return {"gpu": torch.cuda.get_device_name(idx), "compute_capability": f"{major}.{minor}"}
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return _cuda_driver_info(index or 0)


def device_info(trt: ModuleType) -> dict:
    """Where engines of this backend run: the GPU, or {"gpu": "cpu", ...} for the reference on CPU."""
    if is_reference(trt):
        from trtbuild.reference.runtime import device

        if device().type == "cpu":
            return {"gpu": CPU, "compute_capability": CPU}
    info = gpu_info()
    return info if info is not None else {"gpu": CPU, "compute_capability": CPU}

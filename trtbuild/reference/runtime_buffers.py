"""Where the reference runtime executes, and the raw addresses its execution context reads and writes.

Like TensorRT, the execution context reads inputs from and writes outputs to raw addresses given with
set_tensor_address (torch tensors' data_ptr()); these helpers view the memory at an address as a tensor,
without a copy, on the CPU (ctypes) or on CUDA (__cuda_array_interface__). The reference executes on CUDA
when torch sees a GPU, else on the CPU, and expects buffers on that device (`device()`).
"""

from __future__ import annotations

import ctypes
import math

import torch

from . import lowbit
from .enums import DataType
from .execute import TORCH_DTYPE


def device() -> torch.device:
    """Where the reference runtime executes and expects tensor buffers."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _wrap(address: int, shape, dtype: DataType, dev: torch.device) -> torch.Tensor:
    """The buffer at `address` as a tensor of `shape`; an INT4/FP4 buffer (two values a byte, as TensorRT packs
    them) as its flat bytes, which lowbit.pack fills."""
    if dtype in lowbit.HOLDER:
        nbytes = math.ceil(math.prod(shape) / 2)
        if nbytes == 0:
            return torch.empty((0,), dtype=torch.uint8, device=dev)
        return _bytes_at(address, nbytes, dev)
    nbytes = math.prod(shape) * TORCH_DTYPE[dtype].itemsize
    if nbytes == 0:
        return torch.empty(tuple(shape), dtype=TORCH_DTYPE[dtype], device=dev)
    return _bytes_at(address, nbytes, dev).view(TORCH_DTYPE[dtype]).reshape(tuple(shape))


def _bytes_at(address: int, nbytes: int, dev: torch.device) -> torch.Tensor:
    if dev.type == "cpu":
        raw = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=torch.uint8)
    else:
        class _Buffer:
            __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False), "version": 3}
        raw = torch.as_tensor(_Buffer(), device=dev)
    return raw

"""Turning torch tensors / numpy arrays into plain numpy arrays, and value checks."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .errors import WeightsError


def contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` in C order, copied only if needed; unlike np.ascontiguousarray, 0-d stays 0-d."""
    array = np.asarray(array)
    return array if array.flags.c_contiguous else array.copy(order="C")


def is_torch_tensor(value: Any) -> bool:
    """True if ``value`` is a torch.Tensor (without importing torch when it is not loaded)."""
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def torch_to_numpy(tensor: Any, name: str, notes: list[str], copy: bool = True) -> np.ndarray:
    """Convert a dense CPU-able torch tensor to a contiguous numpy array.

    bfloat16 and other floating types numpy lacks are widened to float32 (with a
    note).  ``copy=True`` detaches the result from the tensor's memory.  Sparse,
    quantized and other non-dense tensors are rejected with WeightsError.
    """
    import torch

    tensor = tensor.detach()
    if tensor.layout != torch.strided or tensor.is_quantized:
        raise WeightsError(
            f"tensor {name!r}: layout {tensor.layout}{' (quantized)' if tensor.is_quantized else ''} "
            f"is not supported; only dense tensors can be exported"
        )
    tensor = tensor.cpu().contiguous()
    try:
        array = tensor.numpy()
    except TypeError:
        if not tensor.is_floating_point():
            raise WeightsError(
                f"tensor {name!r}: dtype {tensor.dtype} has no numpy equivalent"
            ) from None
        notes.append(f"tensor {name!r}: {tensor.dtype} widened to float32")
        return tensor.float().numpy()
    return array.copy() if copy else contiguous(array)


def to_numpy(value: Any, name: str, notes: list[str], copy: bool = True) -> np.ndarray:
    """Convert a torch tensor or numpy array (anything else is an error) to a contiguous array."""
    if is_torch_tensor(value):
        return torch_to_numpy(value, name, notes, copy=copy)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise WeightsError(f"tensor {name!r}: numpy dtype {value.dtype} is not numeric")
        return value.copy(order="C") if copy else contiguous(value)
    raise WeightsError(
        f"entry {name!r} is a {type(value).__name__}, not a tensor or numpy array"
    )


def check_names(tensors: Mapping[Any, Any], source: str) -> None:
    """Every key must be a non-empty str."""
    for name in tensors:
        if not isinstance(name, str) or not name:
            raise WeightsError(f"{source}: tensor name {name!r} must be a non-empty string")


def check_finite(tensors: Mapping[str, np.ndarray], source: str) -> None:
    """Raise WeightsError naming the first floating-point tensor holding NaN or Inf."""
    for name, array in tensors.items():
        if array.dtype.kind not in "fc" or np.isfinite(array).all():
            continue
        nan = int(np.isnan(array).sum())
        inf = int(np.isinf(array).sum())
        first = int(np.flatnonzero(~np.isfinite(array.reshape(-1)))[0])
        raise WeightsError(
            f"{source}: tensor {name!r} has {nan + inf} non-finite values of {array.size} "
            f"({nan} NaN, {inf} Inf; first at flat index {first}); "
            f"pass allow_nonfinite=True to accept them"
        )

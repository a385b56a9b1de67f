"""IOutputAllocator, and how the execution context hands an output to it.

An output whose shape depends on the data (the count of a non-zero or NMS layer: -1 in the engine's and
the context's shape until the layer has run) cannot be given memory before the run. TensorRT's answer is
an IOutputAllocator the application subclasses and sets with IExecutionContext.set_output_allocator:
during execute_async_v3 TensorRT calls its reallocate_output_async (when the subclass defines it, else
reallocate_output) with the byte size the output needs and the address set before (0 if none), writes the
output to the address returned, then calls notify_shape with the output's real shape. The reference does
the same, once the output's value is known. An allocator set for an output of static shape is used too,
as in TensorRT.

As in TensorRT's bindings the base class has no public methods (the conformance dumps list none):
the callbacks are the subclass's, looked up by name when they are called.
"""

from __future__ import annotations

import math

from .core import Dims


class IOutputAllocator:
    """Application-implemented class for controlling output tensor allocation: subclass it, call
    IOutputAllocator.__init__(self), define reallocate_output(tensor_name, memory, size, alignment) (or
    reallocate_output_async(..., stream)) returning the address to write to (None or 0 if it cannot), and
    notify_shape(tensor_name, shape)."""

    def __init__(self):
        pass


#: the alignment asked of an output's memory (TensorRT asks for at least 256 bytes on the GPU)
ALIGNMENT = 256


class AllocationFailed(RuntimeError):
    """An IOutputAllocator gave no memory (or no usable address) for an output."""


def allocate(allocator: IOutputAllocator, name: str, shape: tuple, itemsize: int, current: int, stream: int) -> int:
    """The address `allocator` returns for output `name` of `shape` (TensorRT's sizes are in bytes and never 0,
    even for an empty tensor). Raises AllocationFailed naming the output where it returns nothing."""
    size = max(1, math.prod(shape) * itemsize)
    asynchronous = getattr(allocator, "reallocate_output_async", None)
    if asynchronous is not None:
        address = asynchronous(name, current, size, ALIGNMENT, stream)
    else:
        sync = getattr(allocator, "reallocate_output", None)
        if sync is None:
            raise AllocationFailed(f"the IOutputAllocator of output '{name}' defines neither reallocate_output nor "
                                   "reallocate_output_async")
        address = sync(name, current, size, ALIGNMENT)
    if not address:
        raise AllocationFailed(f"the IOutputAllocator of output '{name}' returned no memory for {size} bytes")
    return int(address)


def notify(allocator: IOutputAllocator, name: str, shape: tuple) -> None:
    callback = getattr(allocator, "notify_shape", None)
    if callback is not None:
        callback(name, Dims(shape))

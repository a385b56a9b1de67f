"""Torch memory for engine outputs whose shape is known only after the run (data-dependent shapes).

A non-zero or NMS layer's count is -1 in the engine's output shape until the engine has run, so the Engine
cannot allocate such an output beforehand. TensorRT (and the reference) ask an IOutputAllocator set on the
execution context instead: reallocate_output(_async) with the byte size during execute_async_v3, then
notify_shape with the real shape. TorchOutputs is that allocator, backed by torch tensors on the engine's
device; after the run `tensor(name)` is the output, with its real shape.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

from .errors import EngineError


def torch_output_allocator(trt: ModuleType, device: torch.device, dtypes: dict[str, torch.dtype]):
    """An IOutputAllocator of backend `trt` (its own base class, as TensorRT requires) giving torch memory on
    `device` to the outputs named in `dtypes` ({name: torch dtype})."""

    class TorchOutputs(trt.IOutputAllocator):
        def __init__(self):
            trt.IOutputAllocator.__init__(self)
            self.buffers: dict[str, torch.Tensor] = {}
            self.shapes: dict[str, tuple] = {}

        def reallocate_output(self, tensor_name, memory, size, alignment):
            buf = self.buffers.get(tensor_name)
            if buf is None or buf.numel() < size:
                # torch's allocators align far more than TensorRT asks (256 bytes); round up so the view fits
                self.buffers[tensor_name] = buf = torch.empty(int(size), dtype=torch.uint8, device=device)
            return buf.data_ptr()

        def reallocate_output_async(self, tensor_name, memory, size, alignment, stream):
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name, shape):
            self.shapes[tensor_name] = tuple(int(d) for d in shape)

        def tensor(self, name: str) -> torch.Tensor:
            """Output `name` as the run left it: the allocated bytes viewed with the notified shape."""
            if name not in self.shapes:
                raise EngineError(f"output '{name}' has a data-dependent shape but the engine never reported it "
                                  "(notify_shape was not called)")
            shape, dtype = self.shapes[name], dtypes[name]
            count = math.prod(shape)
            raw = self.buffers.get(name)
            if raw is None or not count:
                return torch.empty(shape, dtype=dtype, device=device)
            return raw[:count * dtype.itemsize].view(dtype).reshape(shape)

    return TorchOutputs()

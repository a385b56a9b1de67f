"""IExecutionContext of the reference backend: input shapes and the optimization profile they are checked
against, shape inference, tensor addresses and output allocators, and the run (execute_async_v3), which reads
its inputs from and writes its outputs to the raw addresses it was given (runtime_buffers)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from . import lowbit
from .core import Dims, ILogger, NetworkError, RunFailure
from .debug import ContextDebugState
from .enums import DataType, TensorIOMode
from .execute import TORCH_DTYPE
from .output_allocator import AllocationFailed, IOutputAllocator, allocate, notify
from .profile_check import check_profile
from .runtime_buffers import _wrap, device

if TYPE_CHECKING:  # runtime imports this module
    from .runtime import ICudaEngine


class IExecutionContext(ContextDebugState):
    def __init__(self, engine: ICudaEngine):
        self.engine = engine
        self.name = ""
        self.debug_sync = False
        self._shapes = {t["name"]: tuple(t["shape"]) for t in engine._header["inputs"]}
        self._addresses: dict[str, int] = {}
        self._out_shapes: dict[str, tuple] | None = None
        self._allocators: dict[str, IOutputAllocator] = {}
        self._ran_shapes: dict[str, tuple] = {}  # data-dependent output shapes, as the last run found them
        self._profile = 0  # the optimization profile whose ranges set_input_shape checks

    @property
    def active_optimization_profile(self) -> int:
        return self._profile

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        """Switch to optimization profile `profile_index`. As in TensorRT, tensor names are the same in every
        profile, and the input shapes set before are dropped: each input's shape is set again for the new
        profile's ranges. An index the engine has not is logged as an error and returns False."""
        count = self.engine.num_optimization_profiles
        if not 0 <= int(profile_index) < count:
            self.engine._logger.log(ILogger.ERROR, f"IExecutionContext::setOptimizationProfileAsync: profile index "
                                    f"{profile_index} is out of range: the engine has {count} profile(s)")
            return False
        if int(profile_index) != self._profile:
            self._profile = int(profile_index)
            self._shapes = {t["name"]: tuple(t["shape"]) for t in self.engine._header["inputs"]}
            self._out_shapes = None
            self._ran_shapes = {}
        return True

    def set_input_shape(self, name: str, shape) -> bool:
        t, mode = self.engine._tensor(name)
        if mode != TensorIOMode.INPUT:
            raise NetworkError(f"set_input_shape: '{name}' is not an input")
        shape = tuple(Dims(shape))
        reason = check_profile(name, shape, self.engine.get_tensor_profile_shape(name, self._profile))
        if reason:  # TensorRT logs the error and returns False
            self.engine._logger.log(ILogger.ERROR, f"IExecutionContext::setInputShape: {reason}")
            return False
        self._shapes[name] = shape
        self._out_shapes = None
        self._ran_shapes = {}
        return True

    @property
    def all_binding_shapes_specified(self) -> bool:
        return all(d >= 0 for s in self._shapes.values() for d in s)

    def infer_shapes(self) -> list[str]:
        missing = [n for n, s in self._shapes.items() if any(d < 0 for d in s)]
        missing += [n for n in self._shape_inputs() if n not in self._addresses]
        if not missing:
            computed: dict = {}
            ids = self.engine._graph.infer_shapes(self._shapes, {n: self._host_values(n) for n in
                                                                 self._shape_inputs()}, computed)
            self._out_shapes = {t["name"]: ids[t["id"]] for t in self.engine._header["outputs"]}
            for t in self.engine._header["outputs"]:  # shape outputs: written to host memory, where bound
                if t.get("shape_tensor") and t["name"] in self._addresses:
                    out = _wrap(self._addresses[t["name"]], self._out_shapes[t["name"]], DataType(t["dtype"]),
                                torch.device("cpu"))
                    out.copy_(torch.tensor(computed[t["id"]], dtype=out.dtype).reshape(out.shape))
        return missing

    def _shape_inputs(self) -> list[str]:
        return [t["name"] for t in self.engine._header["inputs"] if t.get("shape_tensor")]

    def _host_values(self, name: str) -> tuple:
        """The values of a shape tensor input, read from the host memory its address points to; TensorRT refuses
        values outside the optimization profile's [min, max]."""
        t, _ = self.engine._tensor(name)
        count = math.prod(self._shapes[name])
        cpu = _wrap(self._addresses[name], (count,), DataType(t["dtype"]), torch.device("cpu"))
        values = tuple(int(v) for v in cpu.tolist())
        profiles = self.engine._header.get("shape_values", [])
        if len(profiles) > self._profile and name in profiles[self._profile]:
            mn, _, mx = profiles[self._profile][name]
            for i, (v, lo, hi) in enumerate(zip(values, mn, mx)):
                if not lo <= v <= hi:
                    raise NetworkError(f"infer_shapes: shape input '{name}' value {i} is {v}, outside the "
                                       f"optimization profile range [{lo}, {hi}]")
        return values

    def get_tensor_shape(self, name: str) -> Dims:
        t, mode = self.engine._tensor(name)
        if mode == TensorIOMode.INPUT:
            return Dims(self._shapes[name])
        if self._out_shapes is None and self.infer_shapes():
            return Dims(t["shape"])
        return Dims(self._ran_shapes.get(name, self._out_shapes[name]))

    def set_output_allocator(self, name: str, output_allocator: IOutputAllocator | None) -> bool:
        """The allocator execute_async_v3 asks for output `name`'s memory (output_allocator.py); None unsets it.
        False, with an error logged, where `name` is no output of the engine."""
        if self.engine.get_tensor_mode(name) != TensorIOMode.OUTPUT:
            self.engine._logger.log(ILogger.ERROR, f"IExecutionContext::setOutputAllocator: '{name}' is not an "
                                                   "output tensor of the engine")
            return False
        if output_allocator is None:
            self._allocators.pop(name, None)
        elif not isinstance(output_allocator, IOutputAllocator):
            raise TypeError(f"set_output_allocator('{name}', ...): incompatible function arguments: an "
                            f"IOutputAllocator is needed, got {type(output_allocator).__name__}")
        else:
            self._allocators[name] = output_allocator
        return True

    def get_output_allocator(self, name: str) -> IOutputAllocator | None:
        return self._allocators.get(name)

    def set_tensor_address(self, name: str, memory: int) -> bool:
        self.engine._tensor(name)
        self._addresses[name] = int(memory)
        return True

    def get_tensor_address(self, name: str) -> int:
        return self._addresses.get(name, 0)

    def execute_async_v3(self, stream_handle: int) -> bool:
        if self.engine._unfilled:  # a weight-stripped engine holds zeros where its stripped weights go
            self.engine._logger.log(ILogger.ERROR, "IExecutionContext::enqueueV3: the engine is weight-stripped and "
                                    f"{len(self.engine._unfilled)} of its stripped weights have not been refit: "
                                    "fill them with a Refitter (refit_cuda_engine) before running it")
            return False
        missing = self.infer_shapes()
        if missing:
            raise NetworkError(f"execute_async_v3: input shapes not set for {missing} (call set_input_shape)")
        unbound = [t["name"] for t, _ in self.engine._io if t["name"] not in self._addresses
                   and t["name"] not in self._allocators]
        if unbound:
            raise NetworkError(f"execute_async_v3: no address set for tensors {unbound} (call set_tensor_address)")
        unallocated = [n for n, s in self._out_shapes.items() if any(d < 0 for d in s) and n not in self._allocators]
        if unallocated:
            raise NetworkError(f"execute_async_v3: outputs {unallocated} have data-dependent shapes "
                               f"{[tuple(self._out_shapes[n]) for n in unallocated]}, known only after the run: set "
                               "an IOutputAllocator for each with set_output_allocator")
        dev = device()
        stream = torch.cuda.ExternalStream(stream_handle) if dev.type == "cuda" and stream_handle else None
        with torch.cuda.stream(stream) if stream is not None else _Null():
            feeds = {t["name"]: _wrap(self._addresses[t["name"]], self._shapes[t["name"]], DataType(t["dtype"]),
                                      torch.device("cpu") if t.get("shape_tensor") else dev)
                     for t in self.engine._header["inputs"]}
            try:
                results = self.engine._graph.run(feeds, dev, self._debug_callback(dev, stream_handle))
                for t in self.engine._header["outputs"]:
                    self._write_output(t, results[t["name"]], dev, stream_handle)
            except (AllocationFailed, RunFailure) as e:  # TensorRT logs a failed run and returns False
                self.engine._logger.log(ILogger.ERROR, f"IExecutionContext::enqueueV3: {e}")
                return False
        return True

    def _write_output(self, t: dict, value: torch.Tensor, dev, stream_handle: int) -> None:
        """Write an output's value to its address, or to the memory its IOutputAllocator gives (then tell
        the allocator the shape)."""
        name, dtype, shape = t["name"], DataType(t["dtype"]), tuple(value.shape)
        allocator = self._allocators.get(name)
        if allocator is not None:
            self._addresses[name] = allocate(allocator, name, shape, TORCH_DTYPE[dtype].itemsize,
                                             self._addresses.get(name, 0), stream_handle)
        if dtype in lowbit.HOLDER:  # INT4/FP4 outputs are written packed, two values a byte
            value = lowbit.pack(dtype, value)
        _wrap(self._addresses[name], shape, dtype, torch.device("cpu") if t.get("shape_tensor") else dev).copy_(value)
        if any(d < 0 for d in self._out_shapes[name]):
            self._ran_shapes[name] = shape
        if allocator is not None:
            notify(allocator, name, shape)

    def execute_v2(self, bindings) -> bool:
        for (t, _), address in zip(self.engine._io, bindings):
            self._addresses[t["name"]] = int(address)
        return self.execute_async_v3(0)


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False

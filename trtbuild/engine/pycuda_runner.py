"""Run a TensorRT engine with numpy in/out and pycuda buffers (for machines without torch CUDA).

    from trtbuild.engine.pycuda_runner import PycudaEngine
    engine = PycudaEngine.load("engines/alexnet-fp16.engine")
    out = engine.run({"input": np.random.rand(1, 3, 224, 224).astype(np.float32)})   # {"logits": ndarray}

pycuda is imported lazily (only when a PycudaEngine is made). This runner needs real TensorRT
and a CUDA GPU; the reference backend reads host memory and has no use for it (use Engine).
Optimization profiles are picked and switched as Engine does (profile_select.ProfileSwitch): the
first profile that takes the input shapes, or the one pinned with PycudaEngine(profile=k).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Mapping

import numpy as np

from trtbuild.backend import backend_name, is_reference, load_trt

from .compat import lean_runtime_embedded
from .errors import EngineError, EngineInputError
from .profile_select import ProfileSwitch, check_pinned, profile_ranges
from .runner import EngineIO, check_input_names, check_input_shape, io_tensors, open_engine
from .serialize import read_engine_file

NUMPY_DTYPES = {"FLOAT": np.float32, "HALF": np.float16, "INT32": np.int32, "INT64": np.int64, "INT8": np.int8,
                "UINT8": np.uint8, "BOOL": np.bool_}


def _import_pycuda():
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise EngineError(f"PycudaEngine needs pycuda (pip install pycuda), but importing it failed: {e}") from None
    return cuda


class PycudaEngine(ProfileSwitch, EngineIO):
    """An engine and execution context whose buffers are pycuda allocations; numpy in, numpy out.
    `profile`: as Engine's (pin one optimization profile; None picks, per run, the first that fits)."""

    def __init__(self, plan, trt: ModuleType | None = None, *, sidecar: dict | None = None, name: str = "engine",
                 device_index: int = 0, profile: int | None = None):
        trt = trt if trt is not None else load_trt("tensorrt")
        if is_reference(trt):
            raise EngineError("PycudaEngine runs real TensorRT engines only; use trtbuild.engine.Engine for the "
                              "reference backend")
        cuda = _import_pycuda()
        cuda.init()
        self._cuda = cuda
        self._cuda_ctx = cuda.Device(device_index).retain_primary_context()  # the context TensorRT uses
        self._cuda_ctx.push()
        try:
            self.trt, self.name, self.sidecar = trt, name, sidecar
            self.backend = backend_name(trt)
            self.logger, self.runtime, self._engine, self.context = open_engine(
                trt, plan, name, host_code_allowed=lean_runtime_embedded(sidecar))
            self.tensors = io_tensors(self._engine, trt)
            #: [{dynamic input: (min, max)}] of every optimization profile, in index order
            self.profiles = profile_ranges(self._engine, self.tensors)
            self.profile = check_pinned(profile, self.profiles, name, type(self).__name__)
            self.stream = cuda.Stream()
            self._device_buffers: dict[str, tuple[int, object]] = {}
        finally:
            self._cuda_ctx.pop()

    @classmethod
    def load(cls, path: str | os.PathLike, trt: ModuleType | None = None, device_index: int = 0,
             profile: int | None = None) -> "PycudaEngine":
        """Load an engine file, checking its sidecar (version, GPU, sha256) before TensorRT sees it."""
        trt = trt if trt is not None else load_trt("tensorrt")
        plan, sidecar = read_engine_file(path, trt)
        return cls(plan, trt, sidecar=sidecar, name=str(path), device_index=device_index, profile=profile)

    def _np_dtype(self, name: str):
        info = self.tensors[name]
        if info.trt_dtype not in NUMPY_DTYPES:
            raise EngineError(f"tensor '{name}' has type {info.trt_dtype}, which numpy cannot hold; use Engine (torch)")
        return np.dtype(NUMPY_DTYPES[info.trt_dtype])

    def _buffer(self, name: str, nbytes: int) -> int:
        """A device allocation for `name` of at least nbytes (reused across runs)."""
        held = self._device_buffers.get(name)
        if held is None or held[0] < nbytes:
            mem = self._cuda.mem_alloc(max(nbytes, 1))
            self._device_buffers[name] = (max(nbytes, 1), mem)
        return int(self._device_buffers[name][1])

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Copy inputs to the GPU, execute_async_v3 on this engine's stream, copy outputs back. With several
        optimization profiles, the first that takes the input shapes is switched to before the shapes are set."""
        check_input_names(inputs, self.tensors, self.name)
        for n in self.input_names:
            value = inputs[n]
            if not isinstance(value, np.ndarray):
                raise EngineInputError(f"input '{n}' must be a numpy array, got {type(value).__name__}")
            want = self._np_dtype(n)
            if value.dtype != want:
                raise EngineInputError(f"input '{n}' has dtype {value.dtype} but the engine expects {want}; "
                                       f"convert it with .astype(np.{want.name})")
            check_input_shape(self.tensors[n], tuple(value.shape), ranges=self._single_profile)
        cuda, ctx = self._cuda, self.context
        self._cuda_ctx.push()
        try:
            self.logger.clear()
            self._select_profile({n: tuple(inputs[n].shape) for n in self.input_names}, self.stream.handle)
            hosts = {}
            for n in self.input_names:
                value = inputs[n]
                host = cuda.pagelocked_empty(value.shape, value.dtype)
                host[...] = value
                hosts[n] = host
                if ctx.set_input_shape(n, tuple(value.shape)) is False:
                    raise EngineInputError(f"TensorRT rejected shape {tuple(value.shape)} for input '{n}': "
                                           f"{self.logger.error_text()}")
                addr = self._buffer(n, host.nbytes)
                ctx.set_tensor_address(n, addr)
                cuda.memcpy_htod_async(addr, host, self.stream)
            outputs = {}
            for n in self.output_names:
                shape = tuple(int(d) for d in ctx.get_tensor_shape(n))
                if any(d < 0 for d in shape):
                    raise EngineError(f"output '{n}' has a data-dependent shape {shape}, which is not supported")
                outputs[n] = cuda.pagelocked_empty(shape, self._np_dtype(n))
                ctx.set_tensor_address(n, self._buffer(n, outputs[n].nbytes))
            if not ctx.execute_async_v3(self.stream.handle):
                raise EngineError(f"TensorRT failed to execute {self.name}: {self.logger.error_text()}")
            for n, host in outputs.items():
                cuda.memcpy_dtoh_async(host, self._device_buffers[n][1], self.stream)
            self.stream.synchronize()
            return {n: np.array(h) for n, h in outputs.items()}
        finally:
            self._cuda_ctx.pop()

    __call__ = run

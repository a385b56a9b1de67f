"""Runtime, ICudaEngine and IExecutionContext of the reference backend.

Like TensorRT, the execution context reads inputs from and writes outputs to raw addresses
given with set_tensor_address (torch tensors' data_ptr()). The reference executes on CUDA when
torch sees a GPU, else on the CPU, and expects buffers on that device (see `device()`).
"""

from __future__ import annotations

import ctypes
import math
import mmap

import torch

from . import lowbit
from .core import Dims, ILogger, NetworkError, RunFailure
from .debug import ContextDebugState, EngineDebugTensors
from .enums import (DataType, HardwareCompatibilityLevel, ProfilingVerbosity, SerializationFlag, TensorIOMode,
                    TensorLocation)
from .execute import TORCH_DTYPE
from .graph import PlanGraph
from .output_allocator import AllocationFailed, IOutputAllocator, allocate, notify
from .plan import PlanError, check_profile, deserialize_plan
from .refit import ISerializationConfig, serialized_header, stripped_slots, with_placeholders


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


class ICudaEngine(EngineDebugTensors):
    def __init__(self, header: dict, graph: PlanGraph, logger: ILogger, plan: bytes, arrays: dict | None = None):
        self._logger = logger
        self._plan = plan  # None once a Refitter has changed weights: serialize() then packs the header and arrays
        self._header = header
        self._graph = graph
        self._arrays = arrays if arrays is not None else {}
        self._unfilled = stripped_slots(header)  # stripped weights no Refitter has filled yet
        self._io = ([(t, TensorIOMode.INPUT) for t in header["inputs"]]
                    + [(t, TensorIOMode.OUTPUT) for t in header["outputs"]])
        self._by_name = {t["name"]: (t, mode) for t, mode in self._io}

    def _tensor(self, name: str):
        if name not in self._by_name:
            raise NetworkError(f"engine has no I/O tensor named '{name}' (it has {list(self._by_name)})")
        return self._by_name[name]

    @property
    def name(self) -> str:
        return self._header["name"]

    @property
    def num_io_tensors(self) -> int:
        return len(self._io)

    @property
    def num_layers(self) -> int:
        return len(self._header["layers"])

    @property
    def num_optimization_profiles(self) -> int:
        return max(1, len(self._header["profiles"]))

    @property
    def device_memory_size_v2(self) -> int:
        return 0

    @property
    def refittable(self) -> bool:
        return "refit" in self._header

    @property
    def profiling_verbosity(self) -> ProfilingVerbosity:
        return ProfilingVerbosity(self._header.get("profiling_verbosity", ProfilingVerbosity.LAYER_NAMES_ONLY))

    @property
    def hardware_compatibility_level(self) -> HardwareCompatibilityLevel:
        """The level the engine was built with (recorded only: see builder.py)."""
        return HardwareCompatibilityLevel(self._header.get("hardware_compatibility_level", 0))

    def create_engine_inspector(self):
        from .inspector import EngineInspector

        return EngineInspector(self)

    def create_serialization_config(self) -> ISerializationConfig:
        """Starts with the flags the engine was built with (refit.ISerializationConfig)."""
        config = ISerializationConfig()
        if self.refittable:
            config.set_flag(SerializationFlag.INCLUDE_REFIT)
        if self._header.get("version_compatible") and not self._header.get("lean_runtime"):
            config.set_flag(SerializationFlag.EXCLUDE_LEAN_RUNTIME)
        if any("stripped" in entry for entry in self._header["layers"]):
            config.set_flag(SerializationFlag.EXCLUDE_WEIGHTS)
        return config

    def serialize_with_config(self, arg0: ISerializationConfig):
        """The plan the config asks for; None, with an error logged, where the engine cannot give it."""
        from .plan import pack_plan

        try:
            header, left_out = serialized_header(self._header, self._arrays, arg0, self._unfilled)
        except ValueError as e:
            self._logger.log(ILogger.ERROR, f"ICudaEngine::serializeWithConfig: {e}")
            return None
        return pack_plan(header, {ref: a for ref, a in self._arrays.items() if ref not in left_out})

    def get_tensor_name(self, index: int) -> str:
        return self._io[index][0]["name"]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return self._by_name[name][1] if name in self._by_name else TensorIOMode.NONE

    def get_tensor_shape(self, name: str) -> Dims:
        return Dims(self._tensor(name)[0]["shape"])

    def get_tensor_dtype(self, name: str) -> DataType:
        return DataType(self._tensor(name)[0]["dtype"])

    def get_tensor_location(self, name: str) -> TensorLocation:
        """A shape tensor input lives in host memory (its values are read by infer_shapes)."""
        return TensorLocation.HOST if self.is_shape_inference_io(name) else TensorLocation.DEVICE

    def is_shape_inference_io(self, name: str) -> bool:
        """Whether infer_shapes reads or writes this tensor (in host memory): an input that layers read as a shape,
        or an output marked with mark_output_for_shapes."""
        t, _ = self._tensor(name)
        return bool(t.get("shape_tensor"))

    def get_tensor_profile_values(self, name: int, profile_index: str) -> list:
        """The min/opt/max values of a shape tensor input in a profile. As in TensorRT's bindings, the first
        argument (named `name`) is the profile index and the second (`profile_index`) the tensor name."""
        index, tensor = name, profile_index
        t, mode = self._tensor(tensor)
        if mode != TensorIOMode.INPUT or not t.get("shape_tensor"):
            raise NetworkError(f"get_tensor_profile_values: '{tensor}' is not a shape tensor input")
        profiles = self._header.get("shape_values", [])
        if not 0 <= index < len(profiles):
            raise NetworkError(f"get_tensor_profile_values: profile {index} does not exist (the engine has "
                               f"{len(profiles)})")
        return [list(v) for v in profiles[index].get(tensor, [])]

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list:
        profiles = self._header["profiles"]
        if not 0 <= profile_index < self.num_optimization_profiles:
            raise NetworkError(f"get_tensor_profile_shape: profile {profile_index} does not exist (the engine has "
                               f"{self.num_optimization_profiles})")
        if not profiles or name not in profiles[profile_index]:
            shape = self.get_tensor_shape(name)
            return [shape, shape, shape]
        return [Dims(s) for s in profiles[profile_index][name]]

    def create_execution_context(self, strategy=None) -> "IExecutionContext":
        return IExecutionContext(self)

    def serialize(self):
        from .host_memory import host_memory_of

        if self._plan is None:
            return self.serialize_with_config(self.create_serialization_config())
        return host_memory_of(self._plan)


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


class Runtime:
    def __init__(self, logger: ILogger):
        if not isinstance(logger, ILogger):
            raise TypeError("Runtime(logger): logger must be a trt.ILogger")
        self.logger = logger
        self.max_threads = 1
        #: whether a plan carrying host code (a version-compatible plan with the lean runtime embedded) may load;
        #: False by default, as in TensorRT: loading it runs code from the plan, so only trusted plans should
        self.engine_host_code_allowed = False

    def deserialize_cuda_engine(self, serialized_engine) -> ICudaEngine | None:
        """Load a reference plan; on failure log an ERROR and return None, as TensorRT does.

        The plan is checked in stages (container, header, blob, graph rebuild), each refusing with
        a PlanError that names what is wrong. Any other exception is a gap in those checks: it is
        still logged as one sentence naming the stage that failed, never raised. A version-compatible
        plan with the lean runtime embedded loads only with engine_host_code_allowed (builder.py)."""
        stage = "reading the plan bytes"
        try:
            plan = serialized_engine if isinstance(serialized_engine, (bytes, mmap.mmap)) else bytes(serialized_engine)
            stage = "parsing the plan header and weights blob"
            header, arrays = deserialize_plan(plan)
            if header.get("lean_runtime") and not self.engine_host_code_allowed:
                raise PlanError("the plan is version-compatible with the lean runtime embedded, which is host code "
                                "that would run in this process: set runtime.engine_host_code_allowed = True to load "
                                "a plan you trust (or build it with BuilderFlag.EXCLUDE_LEAN_RUNTIME)")
            stage = "rebuilding the graph"
            arrays = with_placeholders(header, arrays)
            return ICudaEngine(header, PlanGraph(header, arrays), self.logger, plan, arrays)
        except (PlanError, NetworkError) as e:
            self.logger.log(ILogger.ERROR, f"deserialize_cuda_engine: {e}")
        except Exception as e:  # noqa: BLE001 - TensorRT's contract: log and return None, never raise
            self.logger.log(ILogger.ERROR, f"deserialize_cuda_engine: malformed reference plan (unexpected "
                                           f"{type(e).__name__} while {stage}: {e})")
        return None

    def get_plugin_registry(self):
        from .plugins import get_plugin_registry

        return get_plugin_registry()

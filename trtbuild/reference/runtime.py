"""Runtime and ICudaEngine of the reference backend; the execution context is in runtime_context and the
address-to-tensor helpers in runtime_buffers (both importable from here, as before).

Like TensorRT, the execution context reads inputs from and writes outputs to raw addresses
given with set_tensor_address (torch tensors' data_ptr()). The reference executes on CUDA when
torch sees a GPU, else on the CPU, and expects buffers on that device (see `device()`).
"""

from __future__ import annotations

import mmap

from .core import Dims, ILogger, NetworkError
from .debug import EngineDebugTensors
from .enums import (DataType, HardwareCompatibilityLevel, ProfilingVerbosity, SerializationFlag, TensorIOMode,
                    TensorLocation)
from .graph import PlanGraph
from .plan import PlanError, deserialize_plan
from .refit import ISerializationConfig, serialized_header, stripped_slots, with_placeholders
from .runtime_buffers import device  # noqa: F401 - trtbuild.reference.runtime.device is its documented path
from .runtime_context import IExecutionContext


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

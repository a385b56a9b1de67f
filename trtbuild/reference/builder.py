"""Builder, IBuilderConfig, IOptimizationProfile, ITimingCache and IHostMemory of the reference backend.

Version and hardware compatibility, as the reference keeps them:
- BuilderFlag.VERSION_COMPATIBLE is recorded in the plan, and with it whether the lean runtime is
  embedded (not when EXCLUDE_LEAN_RUNTIME is set too, which, as in TensorRT, only VERSION_COMPATIBLE
  allows). The runtime then applies TensorRT's documented rules (plan.py, runtime.py): a plan written
  in another (older) plan format loads only if it was built version-compatible, and a plan that
  carries the lean runtime loads only with Runtime.engine_host_code_allowed = True, because on
  TensorRT that runtime is host code from the plan run in the loading process. The reference plan
  holds no code (it is JSON and safetensors): it keeps the flag so that code written against the
  reference makes the same trust decision it must make on TensorRT.
- IBuilderConfig.hardware_compatibility_level is recorded in the plan and read back from
  ICudaEngine.hardware_compatibility_level, and changes nothing else: a reference plan holds no
  GPU-architecture-specific kernels (PyTorch executes it on whatever device it has), so every level is
  already met and there is no architecture for the reference to check. It does not pretend to check one.
"""

from __future__ import annotations

import hashlib
import json

from . import arithmetic as _arith
from .argtypes import api_types
from typing import TYPE_CHECKING

from .core import Dims, ILogger, Logger, NetworkError
from .enums import BuilderFlag, HardwareCompatibilityLevel, MemoryPoolType, ProfilingVerbosity
from .host_memory import IHostMemory, host_memory_of
from .network import INetworkDefinition
from .plan import serialize_network
from .plugins import get_plugin_registry
from .profile_check import validate_profiles
from .refit import RefitSpec

if TYPE_CHECKING:  # the annotations' names; argtypes.api_types resolves them itself
    from collections.abc import Sequence

REFERENCE_VERSION = "reference"


class IProgressMonitor:
    """Subclass and override to follow a build, as with TensorRT."""

    def __init__(self):
        pass

    def phase_start(self, phase_name: str, parent_phase, num_steps: int) -> None:
        pass

    def step_complete(self, phase_name: str, step: int) -> bool:
        return True

    def phase_finish(self, phase_name: str) -> None:
        pass


@api_types
class IOptimizationProfile:
    def __init__(self):
        self._shapes: dict[str, list[tuple]] = {}
        self._values: dict[str, list[list[int]]] = {}  # set_shape_input
        self.extra_memory_target = 1.0

    def set_shape(self, input: str, min: Dims, opt: Dims, max: Dims) -> None:
        self._shapes[str(input)] = [tuple(Dims(min)), tuple(Dims(opt)), tuple(Dims(max))]

    def get_shape(self, input: str) -> list:
        return [Dims(s) for s in self._shapes.get(str(input), [])]

    def set_shape_input(self, input: str, min: Sequence[int], opt: Sequence[int], max: Sequence[int]) -> None:
        """The min/opt/max values of a shape tensor input; TensorRT refuses (ValueError) values that are not
        min <= opt <= max element by element or whose counts differ."""
        vals = [tuple(int(v) for v in s) for s in (min, opt, max)]
        if len({len(v) for v in vals}) != 1:
            raise ValueError(f"set_shape_input '{input}': min, opt and max have {[len(v) for v in vals]} values; "
                             "they must have as many")
        if any(not a <= b <= c for a, b, c in zip(*vals)):
            raise ValueError(f"set_shape_input '{input}': need min <= opt <= max for every value, got {list(vals)}")
        self._values[str(input)] = [list(v) for v in vals]

    def get_shape_input(self, input: str) -> list:
        return [list(v) for v in self._values.get(str(input), [])]

    def __bool__(self) -> bool:
        return bool(self._shapes) or bool(self._values)


_CACHE_MAGIC = b"TRTBREF-TIMING\x01"
#: the refit modes, of which a config holds at most one (IBuilderConfig.set_flag)
_REFIT_MODES = (BuilderFlag.REFIT, BuilderFlag.REFIT_IDENTICAL, BuilderFlag.REFIT_INDIVIDUAL)


@api_types
class ITimingCache:
    """A timing cache. The reference backend times nothing, but it records one entry per layer
    signature so that a cache file round-trips and grows across builds as TensorRT's does."""

    def __init__(self, entries: dict | None = None):
        self._entries = dict(entries or {})

    def serialize(self) -> IHostMemory:
        return host_memory_of(_CACHE_MAGIC + json.dumps(self._entries, sort_keys=True).encode())

    def combine(self, input_cache: "ITimingCache", ignore_mismatch: bool) -> bool:
        self._entries.update(input_cache._entries)
        return True

    def reset(self) -> bool:
        self._entries.clear()
        return True


@api_types
class IBuilderConfig:
    def __init__(self):
        self.flags = 0
        self._pools = {MemoryPoolType.WORKSPACE: 1 << 62}
        self._profiles: list[IOptimizationProfile] = []
        self._timing_cache: ITimingCache | None = None
        self.progress_monitor: IProgressMonitor | None = None
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self.builder_optimization_level = 3
        self.avg_timing_iterations = 1
        self.max_aux_streams = -1
        self._hardware_compatibility_level = HardwareCompatibilityLevel.NONE
        self._logger: ILogger | None = None  # the builder's: set_flag logs API usage errors to it, as TensorRT
        # not TensorRT API (the conformance test forbids extra public members): read and set it with
        # arithmetic.set_model(config, ...) / arithmetic.model_of(config or engine)
        self._arithmetic = _arith.default_model()

    def set_flag(self, flag: BuilderFlag) -> None:
        """Set a flag; EXCLUDE_LEAN_RUNTIME without VERSION_COMPATIBLE is refused as TensorRT refuses it
        (an API usage error logged, the flag left clear); REFIT, REFIT_IDENTICAL and REFIT_INDIVIDUAL clear
        each other, as in TensorRT-RTX 1.7."""
        flag = BuilderFlag(flag)
        if flag == BuilderFlag.EXCLUDE_LEAN_RUNTIME and not self.get_flag(BuilderFlag.VERSION_COMPATIBLE):
            if self._logger is not None:
                self._logger.log(Logger.ERROR, "IBuilderConfig::setFlag: Error Code 3: API Usage Error (Parameter "
                                 "check failed, condition: builderFlag != BuilderFlag::kEXCLUDE_LEAN_RUNTIME || "
                                 "flags[BuilderFlag::kVERSION_COMPATIBLE]. kEXCLUDE_LEAN_RUNTIME can only be set if "
                                 "kVERSION_COMPATIBLE is set.)")
            return
        if flag in _REFIT_MODES:  # one refit mode at a time: TensorRT-RTX clears the others (the last set wins)
            for other in _REFIT_MODES:
                self.clear_flag(other)
        self.flags |= 1 << int(flag)

    def clear_flag(self, flag: BuilderFlag) -> None:
        self.flags &= ~(1 << int(BuilderFlag(flag)))

    def get_flag(self, flag: BuilderFlag) -> bool:
        return bool(self.flags >> int(BuilderFlag(flag)) & 1)

    @property
    def hardware_compatibility_level(self) -> HardwareCompatibilityLevel:
        return self._hardware_compatibility_level

    @hardware_compatibility_level.setter
    def hardware_compatibility_level(self, value: HardwareCompatibilityLevel) -> None:
        self._hardware_compatibility_level = HardwareCompatibilityLevel(value)

    def _compatibility_header(self) -> dict:
        """What the plan records of version and hardware compatibility (nothing for the defaults)."""
        out = {}
        if self.get_flag(BuilderFlag.VERSION_COMPATIBLE):
            out.update(version_compatible=True, lean_runtime=not self.get_flag(BuilderFlag.EXCLUDE_LEAN_RUNTIME))
        if self._hardware_compatibility_level != HardwareCompatibilityLevel.NONE:
            out["hardware_compatibility_level"] = int(self._hardware_compatibility_level)
        return out

    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        if int(pool_size) < 0:
            raise NetworkError(f"set_memory_pool_limit: {MemoryPoolType(pool).name} size must be >= 0, got {pool_size}")
        self._pools[MemoryPoolType(pool)] = int(pool_size)

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        return self._pools.get(MemoryPoolType(pool), 0)

    def add_optimization_profile(self, profile: IOptimizationProfile | None) -> int:
        if profile is None:  # TensorRT's null pointer: TensorRT-RTX logs an API usage error and returns -1
            raise NetworkError("IBuilderConfig::addOptimizationProfile: Error Code 3: API Usage Error (Parameter check "
                               "failed, condition: profile != nullptr.)")
        self._profiles.append(profile)
        return len(self._profiles) - 1

    @property
    def num_optimization_profiles(self) -> int:
        return len(self._profiles)

    # `Buffer` (the buffer protocol) is no class: argtypes.api_types reads the annotation's text
    def create_timing_cache(self, serialized_timing_cache: Buffer) -> ITimingCache:  # noqa: F821
        data = bytes(serialized_timing_cache)
        if not data:
            return ITimingCache()
        if not data.startswith(_CACHE_MAGIC):
            raise NetworkError("create_timing_cache: the bytes are not a reference timing cache")
        return ITimingCache(json.loads(data[len(_CACHE_MAGIC):]))

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        self._timing_cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._timing_cache


@api_types
class Builder:
    def __init__(self, logger: ILogger):
        if not isinstance(logger, ILogger):
            raise TypeError("Builder(logger): logger must be a trt.ILogger")
        self.logger = logger
        self.max_threads = 1

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        return INetworkDefinition(flags, builder=self)

    def create_builder_config(self) -> IBuilderConfig:
        config = IBuilderConfig()
        config._logger = self.logger
        return config

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    def get_plugin_registry(self):
        return get_plugin_registry()

    @property
    def num_DLA_cores(self) -> int:
        return 0

    def is_network_supported(self, network: INetworkDefinition, config: IBuilderConfig) -> bool:
        try:
            network._validate()
            return True
        except NetworkError:
            return False

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory | None:
        """Validate and serialize; on failure log an ERROR and return None, as TensorRT does."""
        monitor = config.progress_monitor
        phase = "Building reference plan"
        try:
            network._validate()
            # An empty profile beside others is checked at its own index (a dynamic input missing from it is
            # refused, as TensorRT-RTX refuses it); only empty profiles are left out of the plan.
            checked = config._profiles if any(config._profiles) else []
            validate_profiles(network, [p._shapes for p in checked], [p._values for p in checked])
            used = [p for p in config._profiles if p]
            profiles, shape_values = [p._shapes for p in used], [p._values for p in used]
            if monitor is not None:
                monitor.phase_start(phase, None, len(network._layers))
            for i in range(len(network._layers)):
                if monitor is not None and not monitor.step_complete(phase, i):
                    self.logger.log(Logger.ERROR, "build cancelled by the progress monitor")
                    return None
            if config._timing_cache is not None:
                for layer in network._layers:
                    key = hashlib.sha1(f"{layer._TYPE.name}:{json.dumps(layer._params, sort_keys=True, default=str)}"
                                       f":{[tuple(t.shape) for t in layer._inputs]}".encode()).hexdigest()
                    config._timing_cache._entries.setdefault(key, layer._TYPE.name)
            plan = serialize_network(network, profiles, {
                "backend": REFERENCE_VERSION, **({"shape_values": shape_values} if any(shape_values) else {}),
                "workspace_limit": config.get_memory_pool_limit(MemoryPoolType.WORKSPACE),
                "profiling_verbosity": int(config.profiling_verbosity),
                **({"arithmetic": config._arithmetic} if config._arithmetic != _arith.DEFAULT else {}),
                **config._compatibility_header()},
                refit=RefitSpec.of(config))
            if monitor is not None:
                monitor.phase_finish(phase)
            return plan
        except NetworkError as e:
            self.logger.log(Logger.ERROR, str(e))
            return None

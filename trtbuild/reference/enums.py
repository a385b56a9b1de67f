"""Enums of TensorRT's Python API, with the same member names and integer values.

This module holds the enums of the builder, the engine and the runtime (creation flags, memory
pools, builder and serialization flags, hardware compatibility, refit roles, I/O modes, profiling);
those a network definition is written with (DataType, the layers' operations, LayerType) live in
layer_enums and are re-exported here, so ``from trtbuild.reference.enums import DataType`` works.

Values were read from NVIDIA's tensorrt_cu13_bindings 10.16 and 11.4 wheels; the conformance
test (tests/reference/test_api_conformance.py) checks them against both.
"""

from __future__ import annotations

from .layer_enums import (  # noqa: F401 - re-exported: every enum has been importable from here
    TrtEnum, DataType, ScaleMode, ReduceOperation, ElementWiseOperation, UnaryOperation, ActivationType,
    PoolingType, PaddingMode, MatrixOperation, SampleMode, CumulativeOperation, GatherMode, InterpolationMode,
    ResizeCoordinateTransformation, ResizeSelector, ResizeRoundMode, LayerType, AttentionNormalizationOp,
    BoundingBoxFormat, FillOperation, KVCacheMode, LoopOutput, MoEActType, ScatterMode, TopKOperation,
    TripLimit, AttentionIOForm, CausalMaskKind)


class NetworkDefinitionCreationFlag(TrtEnum):
    """Values follow TensorRT 11. TensorRT 10 numbers them one higher (its EXPLICIT_BATCH was 0):
    use the names, never the numbers; the conformance test checks both tables."""

    STRONGLY_TYPED = 0
    PREFER_JIT_PYTHON_PLUGINS = 1
    PREFER_AOT_PYTHON_PLUGINS = 2


class MemoryPoolType(TrtEnum):
    WORKSPACE = 0
    DLA_MANAGED_SRAM = 1
    DLA_LOCAL_DRAM = 2
    DLA_GLOBAL_DRAM = 3
    TACTIC_DRAM = 4
    TACTIC_SHARED_MEMORY = 5


class BuilderFlag(TrtEnum):
    """The flags whose name and value are the same in TensorRT 10 and 11, and the compatibility and refit
    flags with 11's values.

    11 removed FP16, BF16, INT8, OBEY_PRECISION_CONSTRAINTS, ... and renumbered the flags after
    DIRECT_IO (VERSION_COMPATIBLE is 13 in 10 and 12 in 11, STRIP_PLAN 19 and 18), so always refer to
    flags by name, never by number.
    """

    DEBUG = 2
    GPU_FALLBACK = 3
    REFIT = 4
    DISABLE_TIMING_CACHE = 5
    TF32 = 6
    SPARSE_WEIGHTS = 7
    SAFETY_SCOPE = 8
    DIRECT_IO = 11
    VERSION_COMPATIBLE = 12
    EXCLUDE_LEAN_RUNTIME = 13
    STRIP_PLAN = 18
    REFIT_IDENTICAL = 19
    REFIT_INDIVIDUAL = 22


class HardwareCompatibilityLevel(TrtEnum):
    """IBuilderConfig.hardware_compatibility_level: which GPUs besides the building one an engine must run on
    (the reference records it; see builder.py for what it means there)."""

    NONE = 0
    AMPERE_PLUS = 1
    SAME_COMPUTE_CAPABILITY = 2


class SerializationFlag(TrtEnum):
    """ICudaEngine.serialize_with_config's flags: EXCLUDE_WEIGHTS leaves the refittable weights out of the plan,
    INCLUDE_REFIT keeps a refittable engine refittable."""

    EXCLUDE_WEIGHTS = 0
    EXCLUDE_LEAN_RUNTIME = 1
    INCLUDE_REFIT = 2


class WeightsRole(TrtEnum):
    """How a layer uses its weights, for the Refitter's (layer name, role) calls (a scale's power is not
    refittable: TensorRT has no role for it)."""

    KERNEL = 0
    BIAS = 1
    SHIFT = 2
    SCALE = 3
    CONSTANT = 4
    ANY = 5


class LayerInformationFormat(TrtEnum):
    ONELINE = 0
    JSON = 1


class TensorIOMode(TrtEnum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class TensorLocation(TrtEnum):
    DEVICE = 0
    HOST = 1


class PluginFieldType(TrtEnum):
    FLOAT16 = 0
    FLOAT32 = 1
    FLOAT64 = 2
    INT8 = 3
    INT16 = 4
    INT32 = 5
    CHAR = 6
    DIMS = 7
    UNKNOWN = 8
    BF16 = 9
    INT64 = 10


class TensorRTPhase(TrtEnum):
    BUILD = 0
    RUNTIME = 1


class ProfilingVerbosity(TrtEnum):
    LAYER_NAMES_ONLY = 0
    NONE = 1
    DETAILED = 2

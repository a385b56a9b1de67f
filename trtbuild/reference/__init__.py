"""trtbuild's reference backend: TensorRT's Python network-definition API, executed with PyTorch.

`import trtbuild.reference as trt` and write the same code as for `import tensorrt as trt`.
Everything in __all__ has TensorRT's name, parameters and enum values; the conformance test
(tests/reference/test_api_conformance.py) checks that against NVIDIA's real bindings for 10.16 and 11.4.

Differences a user may notice (all on the side of being stricter or clearer):
- a construction TensorRT rejects raises NetworkError at add time (TensorRT logs and returns
  None); build_serialized_network and deserialize_cuda_engine log and return None, as TensorRT;
- only strongly typed networks; weights must have their input's type;
- Weights copies its array (TensorRT keeps a reference until the build).
"""

from .builder import (REFERENCE_VERSION, Builder, IBuilderConfig, IHostMemory, IOptimizationProfile, IProgressMonitor,
                      ITimingCache)
from .core import (Dims, ILogger, ITensor, Logger, NetworkError as NetworkError, Permutation, Weights, bfloat16,
                   bool,  # noqa: A004 - TensorRT's module exposes `tensorrt.bool`
                   float16, float32, int8, int32, int64, nptype, uint8)
from .enums import (ActivationType, BuilderFlag, DataType, ElementWiseOperation, LayerType, MatrixOperation,
                    MemoryPoolType, NetworkDefinitionCreationFlag, PaddingMode, PluginFieldType, PoolingType,
                    ProfilingVerbosity, ReduceOperation, SampleMode, ScaleMode, TensorIOMode, TensorLocation,
                    TensorRTPhase, UnaryOperation)
from .enums import InterpolationMode, ResizeCoordinateTransformation, ResizeRoundMode, ResizeSelector
from .enums import (AttentionNormalizationOp, BoundingBoxFormat, CumulativeOperation, FillOperation, GatherMode,
                    KVCacheMode, LoopOutput, MoEActType, ScatterMode, TopKOperation, TripLimit)
from .enums import AttentionIOForm, CausalMaskKind  # TensorRT 11 only (IAttention's layouts and causal kinds)
from .layers import PUBLIC as _LAYER_API
from .layers import ILayer
from .debug import IDebugListener
from .network import INetworkDefinition
from .plugins import (IPluginCreatorV3One, IPluginRegistry, IPluginV3, PluginField, PluginFieldCollection,
                      get_plugin_registry)
from .output_allocator import IOutputAllocator
from .runtime import ICudaEngine, IExecutionContext, Runtime
from .enums import HardwareCompatibilityLevel, LayerInformationFormat, SerializationFlag, WeightsRole
from .inspector import EngineInspector
from .refit import ISerializationConfig
from .refitter import Refitter

__version__ = REFERENCE_VERSION

# every layer class (one module per layer type under ops/, found there) and the op modules' other API
globals().update(_LAYER_API)

#: The TensorRT API this module mirrors (checked by the conformance test). NetworkError is ours.
__all__ = [
    "ActivationType", "BuilderFlag", "DataType", "ElementWiseOperation", "LayerType", "MatrixOperation",
    "MemoryPoolType", "NetworkDefinitionCreationFlag", "PaddingMode", "PluginFieldType", "PoolingType",
    "ProfilingVerbosity", "ReduceOperation", "SampleMode", "ScaleMode", "TensorIOMode", "TensorLocation",
    "TensorRTPhase", "UnaryOperation",
    "InterpolationMode", "ResizeCoordinateTransformation", "ResizeRoundMode", "ResizeSelector",
    "Builder", "IBuilderConfig", "IHostMemory", "IOptimizationProfile", "IProgressMonitor", "ITimingCache",
    "Dims", "ILogger", "ITensor", "Logger", "Permutation", "Weights", "nptype",
    "float32", "float16", "bfloat16", "int8", "int32", "int64", "bool", "uint8",
    "AttentionNormalizationOp", "BoundingBoxFormat", "CumulativeOperation", "FillOperation", "GatherMode",
    "KVCacheMode", "LoopOutput", "MoEActType", "ScatterMode", "TopKOperation", "TripLimit",
    "AttentionIOForm", "CausalMaskKind",
    "ILayer", *_LAYER_API,
    "INetworkDefinition",
    "IPluginCreatorV3One", "IPluginRegistry", "IPluginV3", "PluginField", "PluginFieldCollection",
    "get_plugin_registry", "ICudaEngine", "IExecutionContext", "Runtime", "IDebugListener",
    "IOutputAllocator",
    "Refitter", "EngineInspector", "ISerializationConfig", "SerializationFlag", "WeightsRole", "LayerInformationFormat",
    "HardwareCompatibilityLevel",
]

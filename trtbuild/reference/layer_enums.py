"""The enums a network definition is written with: DataType, the layers' operations and modes, and
LayerType (with TrtEnum, the base that makes them print as TensorRT's do).

Values were read from NVIDIA's tensorrt_cu13_bindings 10.16 and 11.4 wheels; the conformance
test (tests/reference/test_api_conformance.py) checks them against both. trtbuild.reference.enums
re-exports every one of them, next to the builder, engine and runtime enums it defines.
"""

from __future__ import annotations

from enum import IntEnum


class TrtEnum(IntEnum):
    """An enum that prints as TensorRT's do: str, format and %s give 'DataType.HALF' (IntEnum gives '1')."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        if spec:  # TensorRT's enums take no format spec ("unsupported format string")
            raise TypeError(f"unsupported format string passed to {type(self).__name__}.__format__")
        return str(self)


class DataType(TrtEnum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9
    FP4 = 10
    E8M0 = 11

    @property
    def itemsize(self) -> float:
        return _ITEMSIZE[self]


_ITEMSIZE = {
    DataType.FLOAT: 4, DataType.HALF: 2, DataType.INT8: 1, DataType.INT32: 4, DataType.BOOL: 1,
    DataType.UINT8: 1, DataType.FP8: 1, DataType.BF16: 2, DataType.INT64: 8, DataType.INT4: 0.5,
    DataType.FP4: 0.5, DataType.E8M0: 1,
}


class ScaleMode(TrtEnum):
    UNIFORM = 0
    CHANNEL = 1
    ELEMENTWISE = 2


class ReduceOperation(TrtEnum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class ElementWiseOperation(TrtEnum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    SUB = 4
    DIV = 5
    POW = 6
    FLOOR_DIV = 7
    AND = 8
    OR = 9
    XOR = 10
    EQUAL = 11
    GREATER = 12
    LESS = 13


class UnaryOperation(TrtEnum):
    EXP = 0
    LOG = 1
    SQRT = 2
    RECIP = 3
    ABS = 4
    NEG = 5
    SIN = 6
    COS = 7
    TAN = 8
    SINH = 9
    COSH = 10
    ASIN = 11
    ACOS = 12
    ATAN = 13
    ASINH = 14
    ACOSH = 15
    ATANH = 16
    CEIL = 17
    FLOOR = 18
    ERF = 19
    NOT = 20
    SIGN = 21
    ROUND = 22
    ISINF = 23
    ISNAN = 24


class ActivationType(TrtEnum):
    RELU = 0
    SIGMOID = 1
    TANH = 2
    LEAKY_RELU = 3
    ELU = 4
    SELU = 5
    SOFTSIGN = 6
    SOFTPLUS = 7
    CLIP = 8
    HARD_SIGMOID = 9
    SCALED_TANH = 10
    THRESHOLDED_RELU = 11
    GELU_ERF = 12
    GELU_TANH = 13


class PoolingType(TrtEnum):
    MAX = 0
    AVERAGE = 1
    MAX_AVERAGE_BLEND = 2


class PaddingMode(TrtEnum):
    EXPLICIT_ROUND_DOWN = 0
    EXPLICIT_ROUND_UP = 1
    SAME_UPPER = 2
    SAME_LOWER = 3


class MatrixOperation(TrtEnum):
    NONE = 0
    TRANSPOSE = 1
    VECTOR = 2


class SampleMode(TrtEnum):
    STRICT_BOUNDS = 0
    WRAP = 1
    CLAMP = 2
    FILL = 3
    REFLECT = 4


class CumulativeOperation(TrtEnum):
    SUM = 0


class GatherMode(TrtEnum):
    DEFAULT = 0
    ELEMENT = 1
    ND = 2


class InterpolationMode(TrtEnum):
    NEAREST = 0
    LINEAR = 1
    CUBIC = 2


class ResizeCoordinateTransformation(TrtEnum):
    ALIGN_CORNERS = 0
    ASYMMETRIC = 1
    HALF_PIXEL = 2


class ResizeSelector(TrtEnum):
    FORMULA = 0
    UPPER = 1


class ResizeRoundMode(TrtEnum):
    HALF_UP = 0
    HALF_DOWN = 1
    FLOOR = 2
    CEIL = 3


class LayerType(TrtEnum):
    CONVOLUTION = 0
    CAST = 1
    ACTIVATION = 2
    POOLING = 3
    LRN = 4
    SCALE = 5
    SOFTMAX = 6
    DECONVOLUTION = 7
    CONCATENATION = 8
    ELEMENTWISE = 9
    PLUGIN = 10
    UNARY = 11
    PADDING = 12
    SHUFFLE = 13
    REDUCE = 14
    TOPK = 15
    GATHER = 16
    MATRIX_MULTIPLY = 17
    RAGGED_SOFTMAX = 18
    CONSTANT = 19
    IDENTITY = 20
    PLUGIN_V2 = 21
    SLICE = 22
    SHAPE = 23
    PARAMETRIC_RELU = 24
    RESIZE = 25
    TRIP_LIMIT = 26
    RECURRENCE = 27
    ITERATOR = 28
    LOOP_OUTPUT = 29
    SELECT = 30
    FILL = 31
    QUANTIZE = 32
    DEQUANTIZE = 33
    CONDITION = 34
    CONDITIONAL_INPUT = 35
    CONDITIONAL_OUTPUT = 36
    SCATTER = 37
    EINSUM = 38
    ASSERTION = 39
    ONE_HOT = 40
    NON_ZERO = 41
    GRID_SAMPLE = 42
    NMS = 43
    REVERSE_SEQUENCE = 44
    NORMALIZATION = 45
    PLUGIN_V3 = 46
    SQUEEZE = 47
    UNSQUEEZE = 48
    CUMULATIVE = 49
    DYNAMIC_QUANTIZE = 50
    ATTENTION_INPUT = 51
    ATTENTION_OUTPUT = 52
    ROTARY_EMBEDDING = 53
    KV_CACHE_UPDATE = 54
    MOE = 55
    DIST_COLLECTIVE = 56


class AttentionNormalizationOp(TrtEnum):
    NONE = 0
    SOFTMAX = 1


class BoundingBoxFormat(TrtEnum):
    CORNER_PAIRS = 0
    CENTER_SIZES = 1


class FillOperation(TrtEnum):
    LINSPACE = 0
    RANDOM_UNIFORM = 1
    RANDOM_NORMAL = 2


class KVCacheMode(TrtEnum):
    LINEAR = 0


class LoopOutput(TrtEnum):
    LAST_VALUE = 0
    CONCATENATE = 1
    REVERSE = 2


class MoEActType(TrtEnum):
    NONE = 0
    SILU = 1


class ScatterMode(TrtEnum):
    ELEMENT = 0
    ND = 1


class TopKOperation(TrtEnum):
    MAX = 0
    MIN = 1


class TripLimit(TrtEnum):
    COUNT = 0
    WHILE = 1


# TensorRT 11 only (IAttention's query/key-value layouts and causal mask kinds); TensorRT 10.16 lacks them


class AttentionIOForm(TrtEnum):
    PADDED_BHND = 0
    PACKED_NHD = 1


class CausalMaskKind(TrtEnum):
    NONE = 0
    UPPER_LEFT = 1
    LOWER_RIGHT = 2

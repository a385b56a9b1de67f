"""Foundational types of the reference backend: Dims, Permutation, Weights, ITensor, loggers."""

from __future__ import annotations

import ctypes
import logging
import math
from enum import IntEnum
from typing import TYPE_CHECKING, Iterable

import numpy as np

from . import lowbit as _lowbit
from .argtypes import BAD, CONVERTERS, api_types
from .enums import DataType, TensorLocation, TrtEnum

if TYPE_CHECKING:  # pragma: no cover
    from .layers import ILayer

__all__ = ["Dims", "Permutation", "Weights", "ITensor", "ILogger", "Logger", "nptype",
           "NetworkError", "float32", "float16", "bfloat16", "int8", "int32", "int64", "bool", "uint8"]

float32 = DataType.FLOAT
float16 = DataType.HALF
bfloat16 = DataType.BF16
int8 = DataType.INT8
int32 = DataType.INT32
int64 = DataType.INT64
bool = DataType.BOOL  # noqa: A001 - TensorRT's module exposes `tensorrt.bool`
uint8 = DataType.UINT8


class NetworkError(ValueError):
    """A construction that TensorRT rejects; the message names the layer and the problem."""


class RunFailure(RuntimeError):
    """A layer stopped a run (a failed IAssertionLayer); execute_async_v3 logs the message and returns False."""


def binding_int(value, where: str) -> int:
    """An integer as pybind11's int caster takes it (argtypes' "int" rule: no Python float, np.float64, str,
    bytes or None; np.float32 truncates, as the bindings do); otherwise TensorRT's TypeError."""
    got = CONVERTERS["int"](value)
    if got is BAD:
        raise TypeError(f"{where}: incompatible function arguments: an integer is needed, got {value!r}")
    return got


class Dims(tuple):
    """A shape. -1 marks a dimension known only at run time (dynamic)."""

    MAX_DIMS = 8

    def __new__(cls, shape: Iterable[int] = ()):
        if isinstance(shape, (int, np.integer, str, bytes, dict)) or not isinstance(shape, Iterable):
            raise TypeError(f"Dims({shape!r}): incompatible constructor arguments: a sequence of integers is needed")
        dims = tuple(binding_int(d, "Dims") for d in shape)  # once: shape may be a generator
        if len(dims) > cls.MAX_DIMS:
            raise NetworkError(f"Dims {dims} has rank {len(dims)}; TensorRT allows at most {cls.MAX_DIMS}")
        return super().__new__(cls, dims)

    @staticmethod
    def _is_dynamic(dims) -> "bool":
        return any(d < 0 for d in dims)


class Permutation(tuple):
    """A permutation of dimensions, as IShuffleLayer.first_transpose takes it."""

    def __new__(cls, order: Iterable[int] = ()):
        return super().__new__(cls, tuple(binding_int(i, "Permutation") for i in order))


_NP_TO_DT = {
    np.dtype(np.float32): DataType.FLOAT, np.dtype(np.float16): DataType.HALF,
    np.dtype(np.int8): DataType.INT8, np.dtype(np.int32): DataType.INT32,
    np.dtype(np.int64): DataType.INT64, np.dtype(np.bool_): DataType.BOOL,
    np.dtype(np.uint8): DataType.UINT8,
}
_DT_TO_NP = {v: k.type for k, v in _NP_TO_DT.items()}
#: how Weights stores each type; numpy has no bfloat16, so BF16 keeps its raw 16-bit patterns
_STORAGE = {**_DT_TO_NP, DataType.BF16: np.uint16, **_lowbit.STORAGE}


def nptype(trt_type: DataType):
    """The numpy type of a DataType, as tensorrt.nptype does."""
    try:
        return _DT_TO_NP[DataType(trt_type)]
    except KeyError:
        raise TypeError(f"Could not resolve TensorRT datatype {DataType(trt_type).name} to an "
                        "equivalent numpy datatype.") from None


class Weights:
    """An array of weights. Unlike TensorRT (which holds a reference until the build), the
    reference keeps its own contiguous copy of a writable array, so the caller may free or change
    it at once; a read-only array is held as is (it is kept alive, never copied)."""

    def __init__(self, *args, **kwargs):
        """Weights(type=DataType.FLOAT) -> empty; Weights(type, ptr, count) -> copy of host memory;
        Weights(a) -> numpy array `a` (a copy unless it is read-only; TensorRT's three overloads)."""
        if "a" in kwargs:
            args = (kwargs.pop("a"),) + args
        if "type" in kwargs:
            args = (kwargs.pop("type"),) + args
        for k in ("ptr", "count"):
            if k in kwargs:
                args = args + (kwargs.pop(k),)
        if kwargs:
            raise TypeError(f"Weights(): unexpected arguments {sorted(kwargs)}")
        if not args or isinstance(args[0], (DataType, IntEnum)):
            self._dtype = DataType(args[0]) if args else DataType.FLOAT
            self._null = len(args) < 3 or not int(args[1])  # TensorRT's `values` pointer is null
            if len(args) == 3:
                count = int(args[2])
                n = int(count * self._dtype.itemsize)
                if self._dtype not in _STORAGE:
                    raise NetworkError(f"Weights: type {self._dtype.name} is not supported by the reference backend")
                if self._dtype in _lowbit.STORAGE:  # packed INT4/FP4 (ceil(count / 2) bytes) or FP8 bytes
                    n = math.ceil(count * self._dtype.itemsize)
                raw = (ctypes.c_uint8 * n).from_address(int(args[1])) if n else b""
                if self._dtype in _lowbit.STORAGE:
                    self._array = _lowbit.from_bytes(self._dtype, bytes(raw), count)
                else:
                    self._array = np.frombuffer(bytes(raw), dtype=_STORAGE[self._dtype]).copy()
            elif len(args) <= 1:
                self._array = np.zeros((0,), dtype=_STORAGE.get(self._dtype, np.float32))
            else:
                raise TypeError("Weights(type, ptr, count) takes exactly three arguments")
            return
        arr = np.asarray(args[0])
        if arr.dtype == np.float64:
            raise NetworkError("Weights: float64 arrays are not a TensorRT weight type; convert to float32 "
                               "(or float16) first")
        if arr.dtype not in _NP_TO_DT:
            raise NetworkError(f"Weights: numpy dtype {arr.dtype} has no TensorRT DataType")
        # A read-only contiguous array is held, not copied (TensorRT holds the caller's memory too):
        # builders hand over read-only views of weights they keep unchanged, so a model's weights
        # are not duplicated. Writable arrays are copied, so the caller may reuse them at once.
        held = not arr.flags.writeable and arr.flags.c_contiguous
        self._array = arr if held else np.ascontiguousarray(arr).copy()
        self._dtype = _NP_TO_DT[arr.dtype]
        self._null = False  # an array's pointer, even an empty one's

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def size(self) -> int:
        return int(self._array.size)

    @property
    def nbytes(self) -> int:
        return int(self._array.nbytes)

    def numpy(self) -> np.ndarray:
        """The values; BF16, FP8 and FP4 weights (no numpy type) come back as the exact float32 values, INT4 as int8."""
        if self._dtype == DataType.BF16:
            return (self._array.astype(np.uint32) << 16).view(np.float32)
        if self._dtype in _lowbit.STORAGE:
            return _lowbit.values(self._dtype, self._array)
        return self._array

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Weights(dtype={self._dtype.name}, size={self.size})"


def as_weights(w, what: str) -> Weights:
    """Accept Weights, a numpy array or None (empty weights), as TensorRT's bindings do."""
    if w is None:
        return Weights()
    if isinstance(w, Weights):
        return w
    if isinstance(w, np.ndarray):
        return Weights(w)
    raise NetworkError(f"{what}: expected Weights or a numpy array, got {type(w).__name__}")


@api_types
class ITensor:
    """A tensor of a network. Its shape is inferred from the producing layer when read, so
    attributes changed after the layer was added (stride_nd, reshape_dims, ...) are honoured."""

    def __init__(self, network, name: str, dtype: DataType, shape=None, producer: "ILayer | None" = None,
                 index: int = 0):
        self._network = network
        self._name = name
        self._explicit = False  # named by add_input or a rename (not automatically): see network._set_tensor_name
        self._dtype = DataType(dtype)
        self._shape = Dims(shape) if shape is not None else None
        self._producer = producer
        self._index = index
        self.location = TensorLocation.DEVICE
        self.allowed_formats = 1
        self._dimension_names: dict[int, str] = {}

    # -- identity -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._network._rename_tensor(self, value)

    @property
    def dtype(self) -> DataType:
        if self._producer is not None:
            return self._producer._infer()[1][self._index]
        return self._dtype

    @dtype.setter
    def dtype(self, value: DataType) -> None:
        if self._producer is not None:
            raise NetworkError(f"tensor '{self._name}': the data type of a layer output is inferred in a strongly "
                               "typed network; use add_cast")
        if not isinstance(value, DataType):
            raise TypeError(f"tensor '{self._name}': dtype = {value!r}: incompatible function arguments: a DataType is "
                            f"needed, got {type(value).__name__}")
        self._dtype = value
        self._network._touch()

    @property
    def shape(self) -> Dims:
        if self._producer is not None:
            return self._producer._infer()[0][self._index]
        return self._shape

    @shape.setter
    def shape(self, value) -> None:
        if self._producer is not None:
            raise NetworkError(f"tensor '{self._name}': only the shape of a network input can be set")
        shape = CONVERTERS["dims"](value)
        if shape is BAD:
            raise TypeError(f"tensor '{self._name}': shape = {value!r}: incompatible function arguments: a Dims is "
                            f"needed, got {type(value).__name__}")
        self._shape = shape
        self._network._touch()

    def _value(self):
        """The flat value known at build time (trtbuild.reference.shape_values), or None."""
        if self._producer is not None:
            return self._producer._values()[self._index]
        return None

    @property
    def is_network_input(self) -> "bool":
        return self._producer is None and self in self._network._inputs

    @property
    def is_network_output(self) -> "bool":
        return self in self._network._outputs

    @property
    def is_shape_tensor(self) -> "bool":
        """Whether a layer leading to an output reads this tensor as a shape (trtbuild.reference.shape_values)."""
        from .shape_values import roles

        return id(self) in roles(self._network)[0]

    @property
    def is_execution_tensor(self) -> "bool":
        """Whether this tensor is a network output or read as data on the way to one."""
        from .shape_values import roles

        return id(self) in roles(self._network)[1]

    def get_dimension_name(self, index: int) -> str | None:
        return self._dimension_names.get(int(index))

    def set_dimension_name(self, index: int, name: str | None) -> None:
        if name is not None:  # TensorRT's null name (TensorRT-RTX takes it and returns)
            self._dimension_names[int(index)] = name

    def __repr__(self) -> str:
        return f"ITensor(name={self._name!r}, shape={tuple(self.shape)}, dtype={self.dtype.name})"


class ILogger:
    """Abstract logger; subclass and implement log(severity, msg), as with TensorRT."""

    class Severity(TrtEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def __init__(self):
        pass

    def log(self, severity, msg: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


_PY_LEVEL = {0: logging.CRITICAL, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}


@api_types(constructor=True)
class Logger(ILogger):
    """The default logger: messages at or above min_severity go to Python logging
    (logger 'trtbuild.reference')."""

    def __init__(self, min_severity: ILogger.Severity = ILogger.Severity.WARNING):
        super().__init__()
        self.min_severity = min_severity

    def log(self, severity: ILogger.Severity, msg: str | None) -> None:
        if int(severity) <= int(self.min_severity):
            logging.getLogger("trtbuild.reference").log(_PY_LEVEL[int(severity)], msg)

"""IDynamicQuantizeLayer: block quantization computed at run time (NVFP4: FP4 data with FP8 block scales and a
double-quantization scale input; MXFP8: FP8 data with E8M0 block scales).

The reference defines the layer, its attributes and TensorRT's shape and type rules (TensorRT-RTX 1.7 judges
them): a 2-D or 3-D FLOAT/HALF/BF16 input, FP4 or FP8 data, blocks along the last or second-to-last axis
(add_dynamic_quantize: `axis` and a `block_size` of 16 or 32, which must divide that extent) or of a whole
`block_shape` (add_dynamic_quantize_v2); output 0 has the input's shape and the data type, output 1 (the block
scales) the input's shape divided by the block, with the scale type. An FP8 scale type needs the double
quantization scale as input 1, an E8M0 one no input 1.

It does not build: TensorRT documents no exact formula for the block scale (how the block's maximum becomes an
FP8 or E8M0 value, and its rounding), and the reference has no storage for E8M0 tensors (FP4 and FP8 it holds:
lowbit.py). TensorRT-RTX 1.7 builds the layer only for Blackwell targets (sm120), never for sm86.
"""

from __future__ import annotations

from ..core import Dims, ITensor
from ..enums import DataType, LayerType
from .base import ILayer, param
from .common import FLOATS, fail
from .registry import register

DATA_TYPES = (DataType.FP4, DataType.FP8)
#: why the reference refuses to build the layer (checked at build: quantize.validate)
NOT_BUILT = ("a dynamic quantize layer is not built by the reference: TensorRT documents no exact formula for its "
             "block scales (the rounding of a block's maximum to FP8 or E8M0), and the reference has no storage for "
             "E8M0 tensors; build it with TensorRT-RTX for an sm120 target")


class IDynamicQuantizeLayer(ILayer):
    """Input 0: the tensor; input 1: the double quantization scale (set with set_input)."""

    _TYPE = LayerType.DYNAMIC_QUANTIZE
    _MAX_INPUTS = 2
    _OPTIONAL_INPUTS = True
    axis = param("axis", "int")
    block_size = param("block_size", "int", lambda v: None if v in (16, 32) else "blocks of 16 (NVFP4) or 32 (MXFP8)")
    to_type = param("to_type", DataType, lambda v: None if v in DATA_TYPES else "the data is FP4 or FP8")
    scale_type = param("scale_type", DataType)

    @property
    def block_shape(self) -> Dims:
        return Dims(self._params["block_shape"] or ())

    @block_shape.setter
    def block_shape(self, value) -> None:
        self._params["block_shape"] = tuple(Dims(value))
        self._network._touch()

    @classmethod
    def _type_label(cls) -> str:
        return "DynamicQuantize"


def _blocks(p, x, name) -> list[int]:
    """The block extent of each dimension of the input `x`."""
    if p["block_shape"]:
        shape = list(p["block_shape"])
        if len(shape) != len(x):
            fail(name, f"block_shape {tuple(shape)} has rank {len(shape)}; the input {x} has rank {len(x)}")
        return [x[i] if b == -1 else b for i, b in enumerate(shape)]
    axis = p["axis"]
    if not -len(x) <= axis < len(x) or axis % len(x) < len(x) - 2:
        fail(name, f"axis {axis} is refused: the blocked axis must be the last or second-to-last dimension of the "
                   f"rank-{len(x)} input")
    axis %= len(x)
    blocks = [1] * len(x)
    blocks[axis] = p["block_size"]
    return blocks


def infer(p, w, shapes, dtypes, name, plugin):
    x, dt = tuple(shapes[0]), dtypes[0]
    to, scale = DataType(p["to_type"]), DataType(p["scale_type"])
    if len(x) not in (2, 3):
        fail(name, f"the input has shape {x}; a dynamic quantize takes 2-D or 3-D inputs")
    if dt not in FLOATS:
        fail(name, f"the input has type {dt.name}; a dynamic quantize takes FLOAT, HALF or BF16")
    if to not in DATA_TYPES:
        fail(name, f"to_type {to.name} is refused: the quantized data is FP4 (NVFP4) or FP8 (MXFP8)")
    has_scale = len(shapes) > 1 and shapes[1] is not None
    if scale == DataType.FP8 and not has_scale:
        fail(name, "an FP8 scale type needs the double quantization scale as input 1 (set_input(1, scale))")
    if scale == DataType.E8M0 and has_scale:
        fail(name, "an E8M0 scale type takes no double quantization scale; leave input 1 unset")
    blocks = _blocks(p, x, name)
    out = []
    for i, (d, b) in enumerate(zip(x, blocks)):
        if b <= 0 or (d >= 0 and d % b):
            fail(name, f"the block extent {b} does not divide the input's dimension {i} ({d})")
        out.append(d // b if d >= 0 else -1)
    return [x, tuple(out)], [to, scale]


def run(p, w, inputs, plugin):  # pragma: no cover - quantize.validate refuses the layer at build
    raise NotImplementedError(NOT_BUILT)


def add_dynamic_quantize(self, input: ITensor, axis: int, block_size: int, output_type: DataType,
                         scale_type: DataType) -> IDynamicQuantizeLayer:
    """TensorRT refuses a block size other than 16 or 32 here (the add returns None)."""
    from ..core import NetworkError

    if int(block_size) not in (16, 32):
        raise NetworkError(f"add_dynamic_quantize: block_size {block_size} is refused: blocks of 16 (NVFP4) or 32 "
                           "(MXFP8) elements")
    return self._add(IDynamicQuantizeLayer, [input], _params(int(axis), int(block_size), None, output_type,
                                                             scale_type), eager=False, num_outputs=2)


def add_dynamic_quantize_v2(self, input: ITensor, block_shape: Dims, output_type: DataType,
                            scale_type: DataType) -> IDynamicQuantizeLayer:
    return self._add(IDynamicQuantizeLayer, [input], _params(-1, -1, tuple(Dims(block_shape)), output_type,
                                                             scale_type), eager=False, num_outputs=2)


def _params(axis, block_size, block_shape, output_type, scale_type) -> dict:
    return {"axis": axis, "block_size": block_size, "block_shape": block_shape,
            "to_type": int(DataType(output_type)), "scale_type": int(DataType(scale_type))}


register(IDynamicQuantizeLayer, infer, run, adds=(add_dynamic_quantize, add_dynamic_quantize_v2))

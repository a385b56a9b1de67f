"""IDynamicQuantizeLayer: block quantization computed at run time. NVFP4: FP4 data with FP8 (E4M3) block scales and
a double-quantization scale input; MXFP8 (and MXFP4): FP8 (or FP4) data with E8M0 block scales.

Shape and type rules (TensorRT's, judged by TensorRT-RTX 1.7 for sm120, the only target it builds the layer for):
a 2-D or 3-D FLOAT/HALF/BF16 input (4-D with a 2-D block_shape: the operator page, "For 2D block quantization,
4D I/O tensors are also supported"), FP4 or FP8 data, blocks along the last or second-to-last axis
(add_dynamic_quantize: `axis` and a `block_size` of 16 or 32, which must divide that extent, a static one: "the
extent of the blocked axis must be a compile-time constant") or of a whole `block_shape`
(add_dynamic_quantize_v2); output 0 has the input's shape and the data type, output 1 (the block
scales) the input's shape divided by the block, with the scale type. An FP8 scale type needs the double
quantization scale as input 1, an E8M0 one no input 1.

What TensorRT-RTX 1.7 builds (the reference refuses the rest at build, check_build): FP8 data only with E8M0
scales ("Dynamic Quantize Op has wrong output types"); FP8 scales (NVFP4) only with axis/block_size blocks of 16
("block_size 32 is not supported"; a block_shape: "DynamicQuantize operation with double_quant_scale must have
scalar block_size") and a build-time constant double-quantization scale (TensorRT's operator page: "The
double_quant_scale tensor must be a build-time constant"); an E8M0 block_shape has one value other than 1 (-1
counts), a 1-D block of 16 or 32 smaller than its dimension ("No blocked dimension found"), or, for FP8 data, two
on the last two dimensions ("2D block quantization requires the non-one block sizes to be the last two
dimensions"), a 2-D block of any extents, which may cover a dynamic dimension (a 1-D block's may not).
Stricter than TensorRT-RTX, documented: a block_shape must divide the input (TensorRT-RTX 1.7 builds a 2-D
block that does not, with ceil-divided scales, a partial-block rule TensorRT does not document).

The rule executed. TensorRT documents no formula for the block scale (its "Quantization Schemes" page,
docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/quantized-types-schemes.html, says of MXFP8 only
that "the quantization and dequantization formulas are identical to the FP8 quantization scheme", and its
DynamicQuantize operator page, docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/DynamicQuantize.html,
that input 1 "is a scalar scale factor used to quantize the computed block scales-factors"), so the reference
takes it from NVIDIA's neighbouring libraries, per block of the input:

    amax  = max |x| over the block                                     (all: the block's largest magnitude)
    vmax  = 6 (FP4 data, E2M1's largest value) or 448 (FP8 data, E4M3's)
    E8M0:  scale = 2^ceil(log2(amax / vmax)), saturated to [2^-127, 2^127]     s_eff = scale
    FP8:   scale = castToFp8(clip((amax / vmax) * (1 / s2), -448, 448))        s_eff = scale * s2   (s2: input 1)
    data  = castTo<data type>(clip(x * (1 / s_eff), -vmax, vmax)), 0 where s_eff is 0

- scale = amax / vmax, and the E8M0 scale rounded UP to a power of two (no element of the block then saturates):
  cuDNN's "Block Scaling" page (docs.nvidia.com/deeplearning/cudnn/frontend/latest/operations/BlockScaling.html),
  "scale = quantize_round_up(amax(vals) / vmax_otype), output = quantize_round_to_even(vals / scale)", for MXFP8
  (E8M0 scales) and NVFP4; TensorRT-LLM's quantize kernels (cvt_warp_fp16_to_fp4) convert the UE8M0 scale with
  __nv_cvt_float_to_e8m0(v, __NV_SATFINITE, cudaRoundPosInf) too. (The OCP Microscaling Formats spec v1.0's
  sample conversion instead takes floor(log2(amax)) - emax and lets the largest elements saturate; the reference
  follows NVIDIA's.)
- the FP8 (E4M3) block scale rounded to NEAREST even and saturated, after dividing by the double-quantization
  scale s2: TensorRT Model Optimizer's NVFP4QTensor (per_block_amax / 6.0 / weights_scaling_factor_2, then
  .to(torch.float8_e4m3fn)), which makes TensorRT's NVFP4 checkpoints, and TensorRT-LLM's fp4 quantize kernel
  (__nv_fp8_e4m3(SFValue): to nearest, saturating). cuDNN's page writes quantize_round_up for both recipes;
  for E4M3 scales the reference keeps ModelOpt's rounding, as TensorRT's own dequantize chain (DQ(scale, s2)
  then DQ(data, that)) is what ModelOpt exports. The quantize of the scale by s2 is a TensorRT FP8 quantize
  (castToFp8(clip(x / s)), "Quantization Schemes"), computed as the reference's quantize.py computes it: times
  the float32 reciprocal.
- the data: TensorRT's FP8/FP4 quantize of x with the block's effective scale ("Quantization Schemes":
  castToFp8(clip(x / s, -448, 448)), ties to even; FP4 the same on the E2M1 grid, lowbit.round_fp4), times the
  reciprocal like every reference quantize. A block whose scale is 0 (all zeros, or an FP8 scale that rounds to
  0) gives zeros, never NaN (TensorRT-LLM's kernel: outputScale = SFValue != 0 ? ... : 0.0f); an all-zero E8M0
  block gets E8M0's smallest scale, 2^-127 (byte 0), as E8M0 has no zero. A NaN in a block makes its scale NaN.

Everything is computed in float32. dequantize(quantize(x)) (tests/reference/test_dynamic_quantize_run.py) is then
x rounded to the block format: DQ(data, DQ(scale, s2)) for NVFP4, DQ(data, scale) for E8M0 scales (TensorRT-RTX
builds a dequantize with an E8M0 scale, and a cast of it).
"""

from __future__ import annotations

import torch

from ..core import Dims, ITensor
from ..enums import DataType, LayerType
from ..lowbit import FP4_MAX, e8m0_round_up
from ..quantize import FP8_MAX, round_to
from .base import ILayer, param
from .common import FLOATS, fail
from .registry import register

DATA_TYPES = (DataType.FP4, DataType.FP8)
#: the largest finite value of each data type: a block's amax maps to it (E2M1 6, E4M3 448)
VMAX = {DataType.FP4: FP4_MAX, DataType.FP8: FP8_MAX}


class IDynamicQuantizeLayer(ILayer):
    """Input 0: the tensor; input 1: the double quantization scale (set with set_input)."""

    _TYPE = LayerType.DYNAMIC_QUANTIZE
    _MAX_INPUTS = 2
    _OPTIONAL_INPUTS = True
    axis = param("axis", "int")
    #: -1 is add_dynamic_quantize_v2's (a block_shape instead), which a plan restores too
    block_size = param("block_size", "int",
                       lambda v: None if v in (16, 32, -1) else "blocks of 16 (NVFP4) or 32 (MXFP8)")
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
    if len(x) not in (2, 3) and not (len(x) == 4 and p["block_shape"]):
        fail(name, f"the input has shape {x}; a dynamic quantize takes 2-D or 3-D inputs (4-D with a 2-D "
                   "block_shape)")
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
    shape = p["block_shape"]
    two_d = bool(shape) and sum(v != 1 for v in shape) == 2
    out = []
    for i, (d, b) in enumerate(zip(x, blocks)):
        if d < 0 and b != 1 and not two_d:
            fail(name, f"dimension {i} of the input {x} is blocked but dynamic; TensorRT: \"the extent of the blocked "
                       "axis must be a compile-time constant\" (TensorRT-RTX takes a dynamic one in 2-D blocks only)")
        if d < 0:  # a 2-D block: a whole (-1) dynamic dimension gives one scale, a block of it an unknown count
            out.append(1 if shape and shape[i] == -1 else -1)
            continue
        if b <= 0 or d % b:
            fail(name, f"the block extent {b} does not divide the input's dimension {i} ({d})")
        out.append(d // b)
    return [x, tuple(out)], [to, scale]


def _block_view(x: torch.Tensor, blocks: list[int]) -> torch.Tensor:
    """`x` reshaped to (n0, b0, n1, b1, ...): block extent b_i, n_i blocks along dimension i."""
    shape = []
    for d, b in zip(x.shape, blocks):
        shape += [d // b, b]
    return x.reshape(shape)


def _spread(s: torch.Tensor, blocks: list[int]) -> torch.Tensor:
    """A per-block tensor repeated over each block's elements (the input's shape)."""
    for i, b in enumerate(blocks):
        s = s.repeat_interleave(b, dim=i)
    return s


def run(p, w, inputs, plugin):
    """(data, block scales) by the rule of the module doc."""
    x = inputs[0].float()
    to, scale_type = DataType(p["to_type"]), DataType(p["scale_type"])
    blocks = _blocks(p, tuple(x.shape), "")
    view = _block_view(x.abs(), blocks)
    amax = view.amax(dim=tuple(range(1, view.dim(), 2))) if x.numel() else x.new_zeros([0] * x.dim())
    ratio = amax / VMAX[to]
    if scale_type == DataType.E8M0:
        scale = e8m0_round_up(ratio)
        effective = scale.float()
    else:  # FP8 block scales, quantized by the double quantization scale s2 (input 1) as an FP8 quantize would
        s2 = inputs[1].float().reshape(())
        scale = round_to(DataType.FP8, ratio * torch.reciprocal(s2))
        effective = scale.float() * s2
    effective = _spread(effective, blocks)
    v = torch.where(effective == 0, torch.zeros_like(x), x * torch.reciprocal(effective))
    return [round_to(to, v), scale]


def check_build(layer, scale_source) -> None:
    """What TensorRT-RTX 1.7 refuses to build for sm120 though shape inference accepts it (the module doc):
    the reference refuses the same at build. `scale_source`: the network input the double quantization scale is
    computed from, or None for a build-time constant."""
    p, name = layer._params, layer.name
    to, scale_type = DataType(p["to_type"]), DataType(p["scale_type"])
    if to == DataType.FP8 and scale_type != DataType.E8M0:
        fail(name, f"FP8 data takes E8M0 block scales (MXFP8), not {scale_type.name}; TensorRT-RTX builds no other "
                   "(\"Dynamic Quantize Op has wrong output types\")")
    if scale_type == DataType.FP8:
        if p["block_shape"]:
            fail(name, "with FP8 block scales and a double quantization scale (NVFP4) the block is set with axis and "
                       "block_size (add_dynamic_quantize), not a block_shape (TensorRT-RTX: \"DynamicQuantize "
                       "operation with double_quant_scale must have scalar block_size\")")
        if p["block_size"] != 16:
            fail(name, f"NVFP4 (FP4 data, FP8 scales) takes blocks of 16, not {p['block_size']} (TensorRT-RTX: "
                       f"\"Dynamic Quantization Op block_size {p['block_size']} is not supported\")")
        if scale_source is not None:
            fail(name, f"its double quantization scale '{layer._inputs[1].name}' is computed from the network input "
                       f"'{scale_source.name}'; TensorRT: \"The double_quant_scale tensor must be a build-time "
                       "constant\" (make it with add_constant)")
    elif p["block_shape"]:
        _check_block_shape(layer, to)


def _check_block_shape(layer, to) -> None:
    """An E8M0 block_shape. TensorRT-RTX counts its values other than 1 (-1, a whole dimension, included): one is
    a 1-D block, of 16 or 32 elements, smaller than its dimension; two, on the last two dimensions and for FP8
    data only, a 2-D block of any extents (4-D inputs take only these)."""
    x = tuple(layer._inputs[0].shape)
    blocks = _blocks(layer._params, x, layer.name)
    shape = tuple(layer._params["block_shape"])
    non_one = [i for i, v in enumerate(shape) if v != 1]
    if len(non_one) == 1:
        i = non_one[0]
        if shape[i] == -1 or blocks[i] == x[i]:
            fail(layer.name, f"block_shape {shape} blocks no dimension of the input {x}: its one block spans a whole "
                             "dimension (TensorRT-RTX: \"No blocked dimension found\")")
        if blocks[i] not in (16, 32):
            fail(layer.name, f"block_shape {shape} blocks dimension {i} by {blocks[i]}; a 1-D block holds 16 or 32 "
                             "elements")
        if len(x) == 4:
            fail(layer.name, f"block_shape {shape} on the 4-D input {x}: a 4-D input takes a 2-D block (TensorRT's "
                             "DynamicQuantize operator: \"For 2D block quantization, 4D I/O tensors are also "
                             "supported\")")
    elif len(non_one) == 2 and non_one == [len(x) - 2, len(x) - 1]:
        if to != DataType.FP8:
            fail(layer.name, f"block_shape {shape} is a 2-D block, which TensorRT-RTX builds only for FP8 data")
    else:
        fail(layer.name, f"block_shape {shape} has {len(non_one)} values other than 1 on the input {x}; TensorRT-RTX "
                         "takes one (a 1-D block) or two on the last two dimensions (a 2-D block)")


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

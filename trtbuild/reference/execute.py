"""Execution of each layer with PyTorch, following TensorRT's documented semantics.

Tensors travel in their TensorRT type (float16 stays float16, ...). Float layers compute in
float32 and round their output to the output type, so fp16 overflow to inf happens where it
would on the GPU. Formulas are written out from TensorRT's documentation rather than borrowed
from torch's own layer modules, so that tests against torch modules check something.
Each layer type's execution lives in its module under trtbuild/reference/ops; this is the one entry point.
"""

from __future__ import annotations

import torch

from . import arithmetic as _arith
from .enums import DataType
from .lowbit import HOLDER
from .ops import op_for
from .shape_values import bind_run

TORCH_DTYPE = {
    DataType.FLOAT: torch.float32, DataType.HALF: torch.float16, DataType.BF16: torch.bfloat16,
    DataType.INT32: torch.int32, DataType.INT64: torch.int64, DataType.BOOL: torch.bool,
    DataType.INT8: torch.int8, DataType.UINT8: torch.uint8, DataType.FP8: torch.float8_e4m3fn,
    DataType.E8M0: torch.float8_e8m0fnu,  # its bytes are E8M0's (lowbit.py)
}
TRT_DTYPE = {v: k for k, v in TORCH_DTYPE.items()}
#: the torch type each output type is computed into: TORCH_DTYPE, and the holders of INT4/FP4 (lowbit.py)
_RUN_DTYPE = {**TORCH_DTYPE, **HOLDER}


def run_layer(ltype, p, w, inputs, out_dtypes, plugin=None, arithmetic=_arith.DEFAULT):
    """Execute one layer; returns its outputs rounded to their TensorRT types. `arithmetic`:
    the model of arithmetic.py ("fp32-then-round" or "pessimistic")."""
    op = op_for(ltype)
    if op is None:  # pragma: no cover - infer_layer rejects these first
        raise NotImplementedError(ltype)
    p = bind_run(op.cls, p, inputs)
    if (arithmetic == _arith.PESSIMISTIC and op.pessimistic is not None and len(out_dtypes) == 1
            and out_dtypes[0] in (DataType.HALF, DataType.BF16)):
        y = op.pessimistic(p, w, inputs, _arith.rounder(TORCH_DTYPE[out_dtypes[0]]))
        if y is not None:
            return [y.to(TORCH_DTYPE[out_dtypes[0]])]
    outs = op.run(p, w, inputs, plugin)
    return [o.to(_RUN_DTYPE[dt]) for o, dt in zip(outs, out_dtypes)]

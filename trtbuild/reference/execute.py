"""Execution of each layer with PyTorch, following TensorRT's documented semantics.

Tensors travel in their TensorRT type (float16 stays float16, ...). Float layers compute in
float32 and round their output to the output type, so fp16 overflow to inf happens where it
would on the GPU. Formulas are written out from TensorRT's documentation rather than borrowed
from torch's own layer modules, so that tests against torch modules check something.
"""

from __future__ import annotations

import math

import torch

from .enums import (ActivationType, DataType, ElementWiseOperation, LayerType, MatrixOperation, ReduceOperation,
                    SampleMode, UnaryOperation)
from .execute_window import _f, _weights_like, _conv, _deconv, _padding, _pool, _lrn
from . import arithmetic as _arith
from . import quantize as _quant
from .sampling import sample_indices
from .ops import op_for

TORCH_DTYPE = {
    DataType.FLOAT: torch.float32, DataType.HALF: torch.float16, DataType.BF16: torch.bfloat16,
    DataType.INT32: torch.int32, DataType.INT64: torch.int64, DataType.BOOL: torch.bool,
    DataType.INT8: torch.int8, DataType.UINT8: torch.uint8, DataType.FP8: torch.float8_e4m3fn,
}
TRT_DTYPE = {v: k for k, v in TORCH_DTYPE.items()}


def _bits(mask: int, rank: int) -> list[int]:
    return [i for i in range(rank) if mask >> i & 1]


def _scale(p, w, x):
    return _arith.scale(p, w, _f(x), lambda t: t, _weights_like)  # the same steps, rounded only at the output


def _reduce(p, x):
    x = _f(x)
    axes, op, keep = _bits(p["axes"], x.dim()), ReduceOperation(p["op"]), p["keep_dims"]
    if op == ReduceOperation.SUM:
        return x.sum(dim=axes, keepdim=keep)
    if op == ReduceOperation.AVG:
        return (x.mean(dim=axes, keepdim=keep) if x.is_floating_point()
                else x.sum(dim=axes, keepdim=keep) // math.prod(x.shape[a] for a in axes))
    if op == ReduceOperation.MAX:
        return x.amax(dim=axes, keepdim=keep)
    if op == ReduceOperation.MIN:
        return x.amin(dim=axes, keepdim=keep)
    for a in sorted(axes, reverse=True):  # PROD
        x = x.prod(dim=a, keepdim=keep)
    return x


_EW = {
    ElementWiseOperation.SUM: torch.add, ElementWiseOperation.PROD: torch.mul,
    ElementWiseOperation.MAX: torch.maximum, ElementWiseOperation.MIN: torch.minimum,
    ElementWiseOperation.SUB: torch.sub, ElementWiseOperation.POW: torch.pow,
    ElementWiseOperation.AND: torch.logical_and, ElementWiseOperation.OR: torch.logical_or,
    ElementWiseOperation.XOR: torch.logical_xor, ElementWiseOperation.EQUAL: torch.eq,
    ElementWiseOperation.GREATER: torch.gt, ElementWiseOperation.LESS: torch.lt,
}


def _elementwise(p, a, b):
    a, b = _f(a), _f(b)
    op = ElementWiseOperation(p["op"])
    if op in (ElementWiseOperation.DIV, ElementWiseOperation.FLOOR_DIV) and not a.is_floating_point():
        # integer division by zero is undefined in TensorRT; the reference gives 0 instead of failing
        zero = b == 0
        q = torch.div(a, torch.where(zero, torch.ones_like(b), b),
                      rounding_mode="trunc" if op == ElementWiseOperation.DIV else "floor")
        return torch.where(zero, torch.zeros_like(q), q)
    if op == ElementWiseOperation.DIV:
        return a / b
    if op == ElementWiseOperation.FLOOR_DIV:
        return torch.floor(a / b)
    return _EW[op](a, b)


_UNARY = {
    UnaryOperation.EXP: torch.exp, UnaryOperation.LOG: torch.log, UnaryOperation.SQRT: torch.sqrt,
    UnaryOperation.RECIP: torch.reciprocal, UnaryOperation.ABS: torch.abs, UnaryOperation.NEG: torch.neg,
    UnaryOperation.SIN: torch.sin, UnaryOperation.COS: torch.cos, UnaryOperation.TAN: torch.tan,
    UnaryOperation.SINH: torch.sinh, UnaryOperation.COSH: torch.cosh, UnaryOperation.ASIN: torch.asin,
    UnaryOperation.ACOS: torch.acos, UnaryOperation.ATAN: torch.atan, UnaryOperation.ASINH: torch.asinh,
    UnaryOperation.ACOSH: torch.acosh, UnaryOperation.ATANH: torch.atanh, UnaryOperation.CEIL: torch.ceil,
    UnaryOperation.FLOOR: torch.floor, UnaryOperation.ERF: torch.erf, UnaryOperation.NOT: torch.logical_not,
    UnaryOperation.SIGN: torch.sign, UnaryOperation.ROUND: torch.round, UnaryOperation.ISINF: torch.isinf,
    UnaryOperation.ISNAN: torch.isnan,
}


def _activation(p, x):
    x = _f(x)
    t, a, b = ActivationType(p["type"]), p["alpha"], p["beta"]
    if t == ActivationType.RELU:
        return torch.clamp_min(x, 0)
    if t == ActivationType.SIGMOID:
        return torch.sigmoid(x)
    if t == ActivationType.TANH:
        return torch.tanh(x)
    if t == ActivationType.LEAKY_RELU:
        return torch.where(x >= 0, x, a * x)
    if t == ActivationType.ELU:
        return torch.where(x >= 0, x, a * (torch.exp(x) - 1))
    if t == ActivationType.SELU:
        return b * torch.where(x >= 0, x, a * (torch.exp(x) - 1))
    if t == ActivationType.SOFTSIGN:
        return x / (1 + x.abs())
    if t == ActivationType.SOFTPLUS:
        bx = b * x  # a*log(1+exp(bx)), written so large bx does not overflow to inf
        return a * (torch.clamp_min(bx, 0) + torch.log1p(torch.exp(-bx.abs())))
    if t == ActivationType.CLIP:  # TensorRT: max(alpha, min(beta, x)), so alpha wins if alpha > beta
        return torch.clamp(torch.clamp(x, max=b), min=a)
    if t == ActivationType.HARD_SIGMOID:
        return torch.clamp(a * x + b, 0, 1)
    if t == ActivationType.SCALED_TANH:
        return a * torch.tanh(b * x)
    if t == ActivationType.THRESHOLDED_RELU:
        return torch.where(x > a, x, torch.zeros_like(x))
    if t == ActivationType.GELU_ERF:
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))  # GELU_TANH


def _normalization(p, x, scale, bias):
    x, scale, bias = _f(x), _f(scale), _f(bias)
    axes, g, eps = _bits(p["axes"], x.dim()), p["num_groups"], p["epsilon"]
    if g > 1:
        n, c = x.shape[:2]
        xg = x.reshape(n, g, c // g, *x.shape[2:])
        dims = list(range(2, xg.dim()))
        mean = xg.mean(dim=dims, keepdim=True)
        var = ((xg - mean) ** 2).mean(dim=dims, keepdim=True)
        yg = (xg - mean) / torch.sqrt(var + eps)
        if not p["is_v2"]:  # v1: scale and bias are [1, G, 1, ...], applied per group
            shape = [1, g] + [1] * (xg.dim() - 2)
            return (yg * scale.reshape(shape) + bias.reshape(shape)).reshape(x.shape)
        return yg.reshape(x.shape) * scale + bias
    mean = x.mean(dim=axes, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * scale + bias


def _permute(x, perm):
    return x.permute(*perm[:x.dim()]) if perm and list(perm[:x.dim()]) != list(range(x.dim())) else x


def _shuffle(p, x):
    x = _permute(x, p["first_transpose"])
    dims = p["reshape_dims"]
    if dims is not None:
        shape = [x.shape[i] if d == 0 and p["zero_is_placeholder"] else d for i, d in enumerate(dims)]
        x = x.reshape(shape)
    return _permute(x, p["second_transpose"])


def _slice(p, x, fill=None):
    mode = SampleMode(p["mode"])
    if mode == SampleMode.STRICT_BOUNDS and all(a >= 0 and s > 0 for a, s in zip(p["start"], p["stride"])):
        # in bounds with positive strides: a strided view (no copy; CAST/IDENTITY alias too), not an
        # index_select copy per dim
        view = x[tuple(slice(a, a + (n - 1) * s + 1, s) if n > 0 else slice(0, 0)
                       for a, n, s in zip(p["start"], p["shape"], p["stride"]))]
        if tuple(view.shape) == tuple(p["shape"]):  # else: out of bounds, index_select below raises
            return view
    out = x
    for d, (a, n, s) in enumerate(zip(p["start"], p["shape"], p["stride"])):
        size = out.shape[d]
        idx, valid = sample_indices(mode, a + torch.arange(n, device=x.device) * s, size)
        out = out.index_select(d, idx)
        if valid is not None:
            shape = [1] * out.dim()
            shape[d] = n
            value = 0 if fill is None else fill.reshape(())
            out = torch.where(valid.reshape(shape), out, torch.as_tensor(value, dtype=out.dtype, device=out.device))
    return out


def _matmul(p, a, b):
    a, b = _f(a), _f(b)
    op0, op1 = MatrixOperation(p["op0"]), MatrixOperation(p["op1"])
    if op0 == MatrixOperation.TRANSPOSE:
        a = a.transpose(-1, -2)
    if op1 == MatrixOperation.TRANSPOSE:
        b = b.transpose(-1, -2)
    if op0 == MatrixOperation.VECTOR:
        a = a.unsqueeze(-2)
    if op1 == MatrixOperation.VECTOR:
        b = b.unsqueeze(-1)
    y = torch.matmul(a, b)
    if op0 == MatrixOperation.VECTOR:  # a was (..., 1, K): drop the row dim first
        y = y.squeeze(-2)
    if op1 == MatrixOperation.VECTOR:  # b was (..., K, 1): its column dim is now last
        y = y.squeeze(-1)
    return y


def _pessimistic(ltype, p, w, inputs, r):
    """The layer under the pessimistic arithmetic model (see arithmetic.py), or None where it
    equals the default model (one operation rounded once, or exact)."""
    x = _f(inputs[0]) if inputs else None
    if ltype == LayerType.REDUCE:
        return _arith.reduce(p, x, r, _bits)
    if ltype == LayerType.SCALE:
        return _arith.scale(p, w, x, r, _weights_like)
    if ltype == LayerType.NORMALIZATION:
        return _arith.normalization(p, x, _f(inputs[1]), _f(inputs[2]), r, _bits)
    if ltype == LayerType.LRN:
        return _arith.lrn(p, x, r)
    if ltype == LayerType.SOFTMAX:
        return _arith.softmax(x, _bits(p["axes"], x.dim())[0], r)
    if ltype == LayerType.ACTIVATION:
        return _arith.activation(p, x, r)
    if ltype == LayerType.POOLING:
        return _pool(p, x, window_sum=_arith.window_sum(r), rnd=r)
    return None


def run_layer(ltype, p, w, inputs, out_dtypes, plugin=None, arithmetic=_arith.DEFAULT):
    """Execute one layer; returns its outputs rounded to their TensorRT types. `arithmetic`:
    the model of arithmetic.py ("fp32-then-round" or "pessimistic")."""
    x = inputs[0] if inputs else None
    op = op_for(ltype)
    if (arithmetic == _arith.PESSIMISTIC and len(out_dtypes) == 1
            and out_dtypes[0] in (DataType.HALF, DataType.BF16) and ltype != LayerType.PLUGIN_V3):
        if op is not None and op.pessimistic is not None:
            y = op.pessimistic(p, w, inputs, _arith.rounder(TORCH_DTYPE[out_dtypes[0]]))
        else:
            y = _pessimistic(ltype, p, w, inputs, _arith.rounder(TORCH_DTYPE[out_dtypes[0]]))
        if y is not None:
            return [y.to(TORCH_DTYPE[out_dtypes[0]])]
    if op is not None:
        outs = op.run(p, w, inputs, plugin)
    elif ltype == LayerType.SCALE:
        outs = [_scale(p, w, x)]
    elif ltype == LayerType.REDUCE:
        outs = [_reduce(p, x)]
    elif ltype == LayerType.ELEMENTWISE:
        outs = [_elementwise(p, inputs[0], inputs[1])]
    elif ltype == LayerType.UNARY:
        outs = [_UNARY[UnaryOperation(p["op"])](_f(x))]
    elif ltype == LayerType.ACTIVATION:
        outs = [_activation(p, x)]
    elif ltype in (LayerType.CONVOLUTION, LayerType.DECONVOLUTION):
        if len(inputs) > 1 and inputs[1] is not None:  # the kernel as a tensor (a dequantized weight)
            w = dict(w, kernel=inputs[1])
        outs = [(_conv if ltype == LayerType.CONVOLUTION else _deconv)(p, w, x)]
    elif ltype == LayerType.QUANTIZE:
        outs = [_quant.quantize(p, x, inputs[1])]
    elif ltype == LayerType.DEQUANTIZE:
        outs = [_quant.dequantize(p, x, inputs[1])]
    elif ltype == LayerType.POOLING:
        outs = [_pool(p, x)]
    elif ltype == LayerType.LRN:
        outs = [_lrn(p, x)]
    elif ltype == LayerType.NORMALIZATION:
        outs = [_normalization(p, *inputs)]
    elif ltype == LayerType.SHUFFLE:
        outs = [_shuffle(p, x)]
    elif ltype == LayerType.CONCATENATION:
        outs = [torch.cat(inputs, dim=p["axis"])]
    elif ltype == LayerType.SLICE:
        outs = [_slice(p, x, inputs[4] if len(inputs) > 4 else None)]
    elif ltype == LayerType.PADDING:
        outs = [_padding(p, x)]
    elif ltype == LayerType.MATRIX_MULTIPLY:
        outs = [_matmul(p, *inputs)]
    elif ltype == LayerType.SOFTMAX:
        outs = [torch.softmax(_f(x), dim=_bits(p["axes"], x.dim())[0])]
    elif ltype in (LayerType.CAST, LayerType.IDENTITY):
        outs = [x]
    elif ltype == LayerType.PLUGIN_V3:
        outs = list(plugin._execute(list(inputs)))
    else:  # pragma: no cover - infer_layer rejects these first
        raise NotImplementedError(ltype)
    return [o.to(TORCH_DTYPE[dt]) for o, dt in zip(outs, out_dtypes)]

"""Q/DQ builders for explicit quantization (INT8 and FP8 E4M3), placed as NVIDIA's rules want them.

TensorRT 10, 11 and TensorRT-RTX quantize only where a network says so: a quantize layer
(add_quantize) followed by a dequantize layer (add_dequantize) around each tensor that may run in
low precision, in a strongly typed network (no INT8 builder flag and no per-tensor dynamic ranges:
TensorRT 11 removed both). The rules followed here (TensorRT's "Explicit Quantization" guide):

- quantize both inputs of convolutions and matrix multiplies: activations per tensor
  (`quantize_dequantize`), weights per output channel on axis 0 (`quantized_weights`);
- quantize the residual input of an add, so that the add fuses into the convolution before it (`qadd`);
- no Q/DQ after the last layer (the builders only quantize inputs).

Symmetric, zero point 0: INT8 scale = amax / 127 (x * (1 / scale) rounded half to even and saturated
to [-128, 127]); FP8 scale = amax / 448 (saturated to +-448). Each builder is `(network, tensor,
params, name) -> tensor`, names every layer, and runs unchanged on every backend. TensorRT-RTX
compiles FP8 for sm89 and newer only (not sm86).
"""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of

from .basic import check_conv_weight, conv, linear, linear_view
from .common import BuilderError, keep_alive, out
from .tensor import matmul

__all__ = ["QMAX", "scale_of", "quantize_dequantize", "quantized_weights", "qconv", "qlinear", "qadd", "qmatmul"]

#: the largest magnitude of each quantized type: scale = amax / QMAX[dtype]
QMAX = {"int8": 127.0, "fp8": 448.0}
_TRT_TYPE = {"int8": "INT8", "fp8": "FP8"}


def _check_dtype(dtype: str, name: str) -> str:
    if dtype not in QMAX:
        raise BuilderError(f"layer '{name}': quantization type {dtype!r} is not one of {sorted(QMAX)}")
    return dtype


def scale_of(amax, dtype: str, name: str) -> np.ndarray:
    """amax / 127 (int8) or amax / 448 (fp8) as float32; amax must be finite and > 0 (a scalar, or
    one value per channel, where a channel of zeros gets scale 1: its values stay 0)."""
    qmax = QMAX[_check_dtype(dtype, name)]
    a = np.asarray(amax, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a < 0) or (a.ndim == 0 and a <= 0):
        raise BuilderError(f"layer '{name}': amax {amax!r} must be finite and > 0 (the largest |value| to quantize)")
    return np.where(a > 0, a / qmax, 1.0).astype(np.float32)


def _scale_tensor(network, scale: np.ndarray, name: str):
    trt = trt_of(network)
    arr = keep_alive(network, np.ascontiguousarray(scale, dtype=np.float32))
    return out(network.add_constant(trt.Dims(arr.shape), arr), name)


def quantize_dequantize(network, x, amax: float, name: str, dtype: str = "int8"):
    """Per-tensor fake quantization of an activation: quantize (``name/quantize``, scale constant
    ``name/scale``) then dequantize back to ``x``'s type (``name``)."""
    trt = trt_of(network)
    scale = _scale_tensor(network, scale_of(float(amax), dtype, name), f"{name}/scale")
    q = out(network.add_quantize(x, scale, getattr(trt.DataType, _TRT_TYPE[dtype])), f"{name}/quantize")
    return out(network.add_dequantize(q, scale, x.dtype), name)


def quantized_weights(network, w, name: str, dtype: str = "int8", axis: int = 0, like=None):
    """Weights `w` quantized per channel along `axis` (scale = max |w| over the other axes / 127 or
    / 448), as a tensor of `w`'s shape in `like`'s type (FLOAT without `like`).

    INT8: the weights are quantized here as TensorRT's quantize layer would quantize them (w * (1 / scale)
    in float32, rounded half to even, saturated: trtbuild.reference.quantize) and stored as an INT8
    constant (``name/int8``) dequantized by ``name`` — a quarter of the float weights' size.
    FP8: numpy has no float8 type, so a float constant (``name/float``) goes through a quantize
    (``name/quantize``) and a dequantize (``name``). TensorRT-RTX builds both forms."""
    trt = trt_of(network)
    w = np.asarray(w, dtype=np.float32)
    if w.ndim < 1 or not -w.ndim <= axis < w.ndim:
        raise BuilderError(f"layer '{name}': axis {axis} is out of range for weights of shape {w.shape}")
    axis %= w.ndim
    amax = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1) if w.size else np.zeros(0)
    scale = scale_of(amax, dtype, name)
    s = _scale_tensor(network, scale, f"{name}/scale")
    shape = [1] * w.ndim
    shape[axis] = -1
    out_type = trt.DataType.FLOAT if like is None else like.dtype
    if dtype == "int8":
        inverse = np.float32(1) / scale.reshape(shape)  # float32, like w: the product rounds to float32
        q = np.clip(np.round(w * inverse), -128, 127).astype(np.int8)  # np.round: half to even
        qt = out(network.add_constant(trt.Dims(w.shape), keep_alive(network, np.ascontiguousarray(q))), f"{name}/int8")
    else:
        wt = out(network.add_constant(trt.Dims(w.shape), keep_alive(network, np.ascontiguousarray(w))),
                 f"{name}/float")
        q_layer = network.add_quantize(wt, s, trt.DataType.FP8)
        if q_layer is not None:
            q_layer.axis = axis
        qt = out(q_layer, f"{name}/quantize")
    dq = network.add_dequantize(qt, s, out_type)
    if dq is not None:
        dq.axis = axis
    return out(dq, name)


def qconv(network, x, weight, bias, name: str, amax: float, dtype: str = "int8", stride=1, padding=0, dilation=1,
          groups: int = 1):
    """A convolution (trtbuild.layers.basic.conv, layer ``name``) with both inputs quantized: the
    activation per tensor with `amax` (``name/input_q``), the weight per output channel
    (``name/weight_q``). 2-D and 3-D convolutions."""
    weight = check_conv_weight(weight, name)  # before the Q/DQ layers
    xq = quantize_dequantize(network, x, amax, f"{name}/input_q", dtype)
    kernel = quantized_weights(network, weight, f"{name}/weight_q", dtype, axis=0, like=x)
    return conv(network, xq, weight, bias, name, stride, padding, dilation, groups, kernel_tensor=kernel)


def qlinear(network, x, weight, bias, name: str, amax: float, dtype: str = "int8", *, flatten: bool | None = None):
    """``torch.nn.Linear`` (trtbuild.layers.basic.linear: leading dims kept, ``flatten`` as there) with both
    matmul inputs quantized: the activation per tensor (``name/input_q``), the [out, in] weight per
    output row (``name/weight_q``, made with the input's leading size-1 dims so that the dequantize
    feeds the matrix multiply directly)."""
    w, flat = linear_view(x, weight, name, flatten)
    rank = 2 if flat else len(x.shape)
    lead = (1,) * max(rank - 2, 0)
    xq = quantize_dequantize(network, x, amax, f"{name}/input_q", dtype)
    wq = quantized_weights(network, w.reshape(lead + w.shape), f"{name}/weight_q", dtype, axis=len(lead), like=x)
    return linear(network, xq, w, bias, name, weight_tensor=wq, flatten=flat)


def qadd(network, x, residual, name: str, amax: float, dtype: str = "int8"):
    """``x + residual`` with the residual (skip-branch) input quantized per tensor
    (``name/residual_q``), so that TensorRT can fuse the add into the convolution producing `x`."""
    trt = trt_of(network)
    rq = quantize_dequantize(network, residual, amax, f"{name}/residual_q", dtype)
    return out(network.add_elementwise(x, rq, trt.ElementWiseOperation.SUM), name)



def qmatmul(network, a, b, name: str, amax_a: float, amax_b: float, dtype: str = "int8", *,
            transpose_b: bool = False):
    """``torch.matmul(a, b)`` of two activations (attention's ``q @ k^T`` and ``p @ v``; trtbuild.layers.tensor.matmul,
    layer ``name``) with both inputs quantized per tensor: `a` with `amax_a` (``name/input_q``), `b` with `amax_b`
    (``name/input1_q``)."""
    aq = quantize_dequantize(network, a, amax_a, f"{name}/input_q", dtype)
    bq = quantize_dequantize(network, b, amax_b, f"{name}/input1_q", dtype)
    return matmul(network, aq, bq, name, transpose_b=transpose_b)

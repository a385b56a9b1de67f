"""IActivationLayer: the activation functions of TensorRT, with alpha and beta as TensorRT defines them."""

from __future__ import annotations

import math

import torch

from ..enums import ActivationType, DataType, LayerType
from .base import ILayer, param
from .common import f32, need_float
from .registry import register


class IActivationLayer(ILayer):
    _TYPE = LayerType.ACTIVATION
    type = param("type", ActivationType)
    alpha = param("alpha", "float")
    beta = param("beta", "float")


def infer(p, w, shapes, dtypes, name, plugin):
    # TensorRT's Activation operator: "int32 and int64 are also supported only for RELU"
    dt = dtypes[0]
    if not (p["type"] == ActivationType.RELU and dt in (DataType.INT32, DataType.INT64)):
        need_float(name, dt)
    return [tuple(shapes[0])], [dt]


def run(p, w, inputs, plugin):
    x = f32(inputs[0])
    t, a, b = ActivationType(p["type"]), p["alpha"], p["beta"]
    if t == ActivationType.RELU:
        return [torch.clamp_min(x, 0)]
    if t == ActivationType.SIGMOID:
        return [torch.sigmoid(x)]
    if t == ActivationType.TANH:
        return [torch.tanh(x)]
    if t == ActivationType.LEAKY_RELU:
        return [torch.where(x >= 0, x, a * x)]
    if t == ActivationType.ELU:
        return [torch.where(x >= 0, x, a * (torch.exp(x) - 1))]
    if t == ActivationType.SELU:
        return [b * torch.where(x >= 0, x, a * (torch.exp(x) - 1))]
    if t == ActivationType.SOFTSIGN:
        return [x / (1 + x.abs())]
    if t == ActivationType.SOFTPLUS:
        bx = b * x  # a*log(1+exp(bx)), written so large bx does not overflow to inf
        return [a * (torch.clamp_min(bx, 0) + torch.log1p(torch.exp(-bx.abs())))]
    if t == ActivationType.CLIP:  # TensorRT: max(alpha, min(beta, x)), so alpha wins if alpha > beta
        return [torch.clamp(torch.clamp(x, max=b), min=a)]
    if t == ActivationType.HARD_SIGMOID:
        return [torch.clamp(a * x + b, 0, 1)]
    if t == ActivationType.SCALED_TANH:
        return [a * torch.tanh(b * x)]
    if t == ActivationType.THRESHOLDED_RELU:
        return [torch.where(x > a, x, torch.zeros_like(x))]
    if t == ActivationType.GELU_ERF:
        return [0.5 * x * (1 + torch.erf(x / math.sqrt(2)))]
    return [0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))]  # GELU_TANH


def pessimistic(p, w, inputs, r):
    """Multi-step activations with each step rounded; None for single-step ones (output rounding
    is exact rounding of the one operation)."""
    from ..enums import ActivationType as A

    x = f32(inputs[0])
    t, a, b = A(p["type"]), p["alpha"], p["beta"]
    if t in (A.ELU, A.SELU):
        y = torch.where(x >= 0, x, r(a * r(r(torch.exp(x)) - 1)))
        return r(b * y) if t == A.SELU else y
    if t == A.SOFTSIGN:
        return r(x / r(1 + x.abs()))
    if t == A.SOFTPLUS:
        bx = r(b * x)
        return r(a * r(torch.clamp_min(bx, 0) + r(torch.log1p(r(torch.exp(-bx.abs()))))))
    if t == A.HARD_SIGMOID:
        return torch.clamp(r(r(a * x) + b), 0, 1)
    if t == A.SCALED_TANH:
        return r(a * r(torch.tanh(r(b * x))))
    if t == A.GELU_ERF:
        return r(r(0.5 * x) * r(1 + r(torch.erf(r(x / math.sqrt(2))))))
    if t == A.GELU_TANH:
        inner = r(math.sqrt(2 / math.pi) * r(x + r(0.044715 * r(r(x * x) * x))))
        return r(r(0.5 * x) * r(1 + r(torch.tanh(inner))))
    return None


register(IActivationLayer, infer, run, pessimistic)

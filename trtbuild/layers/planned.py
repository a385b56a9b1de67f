"""Layers built as a quantization plan says for their PyTorch module: quantized, kept, or plain.

The zoo's builders take ``quant`` (a :class:`trtbuild.quant.QuantPlan`, or None for a plain
float network) and build every convolution, linear and residual add through these helpers::

    y = planned_conv_bn(network, x, wm, "layer1.0.conv1", "layer1.0.bn1", "layer1.0.conv1", quant, kernel=3)
    y = planned_add(network, y, identity, "layer1.0.add", quant)
    y = planned(network, y, "L2Norm", quant, lambda t, n: l2norm(network, t, w, n), "conv4_3_norm")

For each module, ``quant.layer(module)`` decides (only its methods are used, so this module does not
import trtbuild.quant, which sits above the models):

- quantized (int8/fp8): both inputs of the convolution / matmul through Q/DQ, NVIDIA's placement
  (trtbuild.layers.quantize.qconv / qlinear): the activation per tensor with the calibrated input
  amax, the weights per output channel on axis 0 with the amax of the weights actually used
  (a conv+BN pair is folded first, so the folded weights' own amax: BN is not simulated);
- kept in another float type (``--keep fp32:...`` / ``fp16:...``): the input cast to that type
  (layer ``name/keep_fp32``), the layer built in it (``name/fp32``), the output cast back to the
  network's type (``name``); strongly typed, no precision flags;
- otherwise plain, in the network's type (what the builders do without a plan).

A transposed convolution (``planned_deconv``) is quantized as a convolution, its weight ([in, out, *kernel],
TensorRT's CKRS) per output channel on axis 1. Attention (``planned_attention``, timm's
``F.scaled_dot_product_attention``) quantizes both inputs of its two matrix multiplies: the scaled query and
the key of ``q @ k^T``, the softmax output (amax 1: probabilities) and the value of ``p @ v``, each per
tensor with the calibrated query/key/value amax (trtbuild.quant.record's ``<module>.sdpa.query``...); the
softmax stays in the float type. A kept attention module is built in the network's type.

A residual add (``planned_add``) quantizes its residual (identity) input with that input's
calibrated amax, so that TensorRT can fuse the add into the convolution producing the other input;
which input is the identity comes from the graph and the calibration (trtbuild.layers.residual),
not from the order of the arguments. Only inputs are quantized, so there is no Q/DQ after the last layer.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from trtbuild.backend import trt_of

from .attention import composed_attention, default_scale, scaled_dot_product_attention
from .basic import add, check_conv_weight, conv, linear, linear_view, read_conv_bn
from .common import BuilderError, out, trt_weights
from .quantize import QMAX, qadd, qconv, qlinear, qmatmul, quantize_dequantize, quantized_weights
from .residual import residual_input
from .weight_names import conv_bn_sources, linear_sources, name_new_weights

__all__ = ["FLOAT_TYPES", "planned", "planned_add", "planned_attention", "planned_conv", "planned_conv_bn",
           "planned_deconv", "planned_linear"]

#: precision name -> TensorRT DataType name of the float types a layer can be kept in
FLOAT_TYPES = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16"}


def _kept_type(network, x, precision: str):
    """The DataType to build in when `precision` is a float type other than `x`'s, else None."""
    if precision not in FLOAT_TYPES:
        return None
    dt = getattr(trt_of(network).DataType, FLOAT_TYPES[precision])
    return None if dt == x.dtype else dt


def _in_type(network, x, dtype, precision: str, name: str, build):
    """`build(x cast to dtype, layer name)` with its result cast back to `x`'s type, named `name`."""
    xc = out(network.add_cast(x, dtype), f"{name}/keep_{precision}")
    y = build(xc, f"{name}/{precision}")
    return out(network.add_cast(y, x.dtype), name)


def planned(network, x, module: str, quant, build, name: str):
    """A layer that is never quantized (L2Norm, LRN, pooling...): `build(x, name)` in the network's
    type, or in the type ``--keep`` gives `module` (casts around it, see the module doc)."""
    dt = _kept_type(network, x, quant.precision_of(module)) if quant is not None else None
    if dt is None:
        return build(x, name)
    return _in_type(network, x, dt, quant.precision_of(module), name, build)


def planned_conv(network, x, weight, bias, name: str, quant=None, module: str | None = None, stride=1, padding=0,
                 dilation=1, groups: int = 1):
    """trtbuild.layers.basic.conv as `quant` says for the PyTorch Conv `module` (default `name`)."""
    args = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    weight = check_conv_weight(weight, name)  # before a cast or Q/DQ layer
    lp = quant.layer(module or name) if quant is not None else None
    if lp is not None and lp.quantized:
        return qconv(network, x, weight, bias, name, lp.input_amax, lp.precision, **args)
    dt = _kept_type(network, x, lp.precision) if lp is not None else None
    if dt is None:
        return conv(network, x, weight, bias, name, **args)
    return _in_type(network, x, dt, lp.precision, name, lambda t, n: conv(network, t, weight, bias, n, **args))


def planned_conv_bn(network, x, wm, conv_prefix: str, bn_prefix: str, name: str, quant=None, stride=1, padding=0,
                    dilation=1, groups: int | None = None, eps: float = 1e-5, kernel=None):
    """trtbuild.layers.basic.conv_bn (BN folded into the conv) as `quant` says for `conv_prefix`; the folded
    weights are named after the state_dict keys (trtbuild.layers.weight_names)."""
    w, b, groups = read_conv_bn(wm, x, conv_prefix, bn_prefix, name, groups, eps, kernel)
    first = network.num_layers
    y = planned_conv(network, x, w, b, name, quant, conv_prefix, stride, padding, dilation, groups)
    name_new_weights(network, first, "CONVOLUTION", conv_bn_sources(wm, conv_prefix, bn_prefix, eps, w.shape))
    return y


def planned_linear(network, x, weight, bias, name: str, quant=None, module: str | None = None, *,
                   flatten: bool | None = None, weight_keys: tuple[str, str | None] | None = None):
    """trtbuild.layers.basic.linear (leading dims kept as nn.Linear keeps them; ``flatten`` as there) as
    `quant` says for the PyTorch Linear `module` (default `name`). ``weight_keys``: the state_dict keys of
    ``weight`` and ``bias`` (None where there is none), given where they are those keys' values unchanged: the
    constants are then named after them (trtbuild.layers.weight_names)."""
    if weight_keys is not None:
        first = network.num_layers
        y = planned_linear(network, x, weight, bias, name, quant, module, flatten=flatten)
        name_new_weights(network, first, "CONSTANT", linear_sources(*weight_keys))
        return y
    weight, flat = linear_view(x, weight, name, flatten)  # before a cast or Q/DQ layer
    lp = quant.layer(module or name) if quant is not None else None
    if lp is not None and lp.quantized:
        return qlinear(network, x, weight, bias, name, lp.input_amax, lp.precision, flatten=flat)
    dt = _kept_type(network, x, lp.precision) if lp is not None else None
    if dt is None:
        return linear(network, x, weight, bias, name, flatten=flat)
    return _in_type(network, x, dt, lp.precision, name,
                    lambda t, n: linear(network, t, weight, bias, n, flatten=flat))


def planned_add(network, x, residual, name: str, quant=None, add_name: str | None = None,
                identity: int | None = None):
    """``x + residual`` (layer `name`; the calibrated residual add `add_name`, default `name`, e.g.
    ``layer1.0.add``): when `quant` quantizes the add, its identity input, found from the graph whichever
    argument it is (see trtbuild.layers.residual), quantized per tensor with its own calibrated amax;
    else plain. `identity`: PyTorch's operand index (0 or 1) of the identity, used only where the
    calibration cannot tell (neither or both inputs straight from a Conv/Linear)."""
    add_name = add_name or name
    operands = quant.add_operands(add_name) if quant is not None else None
    if operands is None or quant.precision not in QMAX:
        return add(network, x, residual, name)
    identity, amax = residual_input(network, x, residual, add_name, operands, identity)
    branch = residual if identity is x else x
    return qadd(network, branch, identity, name, amax, quant.precision)


def _deconv(network, x, weight, bias, name: str, stride, kernel=None):
    """A transposed convolution of PyTorch's weight [in, out, *kernel] (groups 1, no padding), layer `name`;
    `kernel`: the weight as a tensor (a dequantized weight) fed as input 1."""
    trt = trt_of(network)
    w = np.asarray(weight, dtype=np.float32)
    nsp = w.ndim - 2
    if nsp not in (2, 3) or int(x.shape[1]) not in (-1, w.shape[0]):
        raise BuilderError(f"layer '{name}': a transposed-conv weight of shape {w.shape} ([in, out, *kernel], 2-D "
                           f"or 3-D) does not fit the input '{x.name}' {tuple(x.shape)}")
    stride = (int(stride),) * nsp if isinstance(stride, int) else tuple(int(s) for s in stride)
    b = trt_weights(network, x, np.asarray(bias, np.float32).reshape(-1)) if bias is not None else trt.Weights()
    layer = network.add_deconvolution_nd(x, w.shape[1], trt.Dims(w.shape[2:]),
                                         trt.Weights() if kernel is not None else trt_weights(network, x, w), b)
    if layer is not None:
        if kernel is not None:
            layer.set_input(1, kernel)
        layer.stride_nd = trt.Dims(stride)
    return out(layer, name)


def planned_deconv(network, x, weight, bias, name: str, quant=None, module: str | None = None, stride=1):
    """``nn.ConvTranspose2d/3d`` (weight [in, out, *kernel], groups 1, no padding; layer `name`) as `quant` says
    for the PyTorch module `module` (default `name`): quantized (input per tensor ``name/input_q``, weight
    per output channel on axis 1 ``name/weight_q``), kept in another float type, or plain."""
    lp = quant.layer(module or name) if quant is not None else None
    if lp is not None and lp.quantized:
        xq = quantize_dequantize(network, x, lp.input_amax, f"{name}/input_q", lp.precision)
        kernel = quantized_weights(network, weight, f"{name}/weight_q", lp.precision, axis=1, like=x)
        return _deconv(network, xq, weight, bias, name, stride, kernel)
    dt = _kept_type(network, x, lp.precision) if lp is not None else None
    if dt is None:
        return _deconv(network, x, weight, bias, name, stride)
    return _in_type(network, x, dt, lp.precision, name, lambda t, n: _deconv(network, t, weight, bias, n, stride))


def planned_attention(network, q, k, v, name: str, quant=None, module: str | None = None, call: str = "sdpa"):
    """``F.scaled_dot_product_attention(q, k, v)`` (no mask, default scale; layers as
    trtbuild.layers.attention's composed path: ``name/scale``, ``name/q_scaled``, ``name/scores``,
    ``name/softmax``, ``name``) with both matmuls' inputs quantized when `quant` calibrated the call `call`
    of the PyTorch module `module` (default `name`; ``blocks.0.attn`` and ``sdpa``, see the module doc), else
    plain. ``--keep fp32:blocks.0.attn`` keeps it (and the module's Linears) in the float type."""
    amax = quant.sdpa_amax(module or name, call) if quant is not None else None
    if amax is None or quant.precision not in QMAX:
        return scaled_dot_product_attention(network, q, k, v, name)
    scale = default_scale(q, name)
    return composed_attention(network, q, k, v, name, (), scale,
                              partial(qmatmul, network, amax_a=amax[0] * scale, amax_b=amax[1], dtype=quant.precision),
                              partial(qmatmul, network, amax_a=1.0, amax_b=amax[2], dtype=quant.precision))

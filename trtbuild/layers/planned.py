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

A residual add (``planned_add``) quantizes its residual (identity) input with that input's
calibrated amax, so that TensorRT can fuse the add into the convolution producing the other input;
which input is the identity comes from the graph and the calibration (trtbuild.layers.residual),
not from the order of the arguments. Only inputs are quantized, so there is no Q/DQ after the last layer.
"""

from __future__ import annotations

from trtbuild.backend import trt_of

from .basic import add, check_conv_weight, conv, linear, linear_view, read_conv_bn
from .weight_names import conv_bn_sources, linear_sources, name_new_weights
from .common import out
from .quantize import QMAX, qadd, qconv, qlinear
from .residual import residual_input

__all__ = ["FLOAT_TYPES", "planned", "planned_add", "planned_conv", "planned_conv_bn", "planned_linear"]

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
    name_new_weights(network, first, "CONVOLUTION", conv_bn_sources(wm, conv_prefix, bn_prefix, eps))
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


def planned_add(network, x, residual, name: str, quant=None):
    """``x + residual`` (the residual add `name`, e.g. ``layer1.0.add``): when `quant` quantizes the
    add, its identity input, found from the graph whichever argument it is (see
    trtbuild.layers.residual), quantized per tensor with its own calibrated amax; else plain."""
    operands = quant.add_operands(name) if quant is not None else None
    if operands is None or quant.precision not in QMAX:
        return add(network, x, residual, name)
    identity, amax = residual_input(network, x, residual, name, operands)
    branch = residual if identity is x else x
    return qadd(network, branch, identity, name, amax, quant.precision)

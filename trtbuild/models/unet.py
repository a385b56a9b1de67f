"""UNet network builder (milesial/Pytorch-UNet names, see trtbuild.models.pytorch.unet), any H and W.

The weights decide the variant: BatchNorm (folded into its conv, ONE convolution layer) or GroupNorm
(no running statistics in the weights: a conv then trtbuild.layers.normalization.group_norm with
``groups`` groups, which the weights cannot tell), bilinear x2 upsampling (trtbuild.layers.resize.interpolate,
``align_corners`` as the PyTorch model) or a transposed conv (``upK.up.weight`` present). Depth, widths
and classes come from the weights.

INT8 / FP8 (``quant``, trtbuild.layers.planned, NVIDIA's explicit-quantization placement): every
convolution and transposed convolution takes quantized inputs (activation per tensor, weight per output
channel); max pools, the bilinear resize, the concats, GroupNorm and ReLU stay in the float type (no add:
UNet's skips are concatenations).

Dynamic H and W: build with an input of shape (N, C, -1, -1) and an optimization profile (build_plan's
``profile``, the CLI's ``--input input:1x3xH1xW1,1x3xH2xW2,1x3xH3xW3``); every layer here keeps H and W
symbolic (the upsampling uses whole-number scales, which scale any size exactly). H and W must be
multiples of 2**depth at run time, as the PyTorch model requires (no padding of odd sizes).

Layer / tensor names (module names; ``D`` = a DoubleConv prefix such as ``inc.double_conv``,
``down1.maxpool_conv.1.double_conv``, ``up1.conv.double_conv``)::

    D.0 (conv [+ bn])  [D.1 (group norm)]  D.2 (relu)  D.3  [D.4]  D.5 (relu, the DoubleConv's output)
    downK.maxpool_conv.0 (2x2 max pool)   upK.up (resize or deconvolution)   upK/cat   outc.conv -> "logits"

Sizes: full = UNet (base 64, depth 4, 2 classes) at 256x256; small = base 8, depth 3 at 64x64.
"""

from __future__ import annotations

import math
import re

from trtbuild.backend import trt_of
from trtbuild.layers.basic import max_pool, relu
from trtbuild.layers.common import BuilderError, named, out
from trtbuild.layers.normalization import group_norm
from trtbuild.layers.planned import planned_conv, planned_conv_bn, planned_deconv
from trtbuild.layers.resize import interpolate
from trtbuild.models import pytorch as tm

from .registry import ModelSpec, register

__all__ = ["build_unet", "unet_layer_map", "unet_depth"]

FULL_SIZE, SMALL_SIZE = 256, 64
SMALL = dict(base=8, depth=3)
OUTPUT = "logits"
GN_EPS = 1e-5
#: build options (first = default): the bilinear upsampling's align_corners (PyTorch's default False)
UNET_OPTIONS = {"align_corners": ("false", "true")}


def _concat(network, tensors, name: str):
    """Concatenate along channels (to be swapped for trtbuild.layers' shared concat builder)."""
    layer = named(network.add_concatenation(list(tensors)), name)
    layer.axis = 1
    return layer.get_output(0)


def unet_depth(wm) -> int:
    """Number of down steps: the ``downK`` modules in the weights, numbered 1..depth."""
    key = re.compile(r"down(\d+)\.maxpool_conv\.1\.double_conv\.0\.weight$")
    ids = {int(m.group(1)) for k in wm.keys() if (m := key.match(k))}
    if not ids or ids != set(range(1, len(ids) + 1)):
        raise BuilderError(f"unet: weights for down1..downN are missing or not numbered 1..N (found {sorted(ids)}) "
                           f"in {wm.source}")
    return len(ids)


def _conv_norm_relu(network, x, wm, p: str, i: int, groups: int, quant=None):
    """Sequential entries i (3x3 conv), i+1 (norm), i+2 (ReLU) of the DoubleConv ``p``."""
    c, n = f"{p}.{i}", f"{p}.{i + 1}"
    if wm.has(f"{n}.running_mean"):
        y = planned_conv_bn(network, x, wm, c, n, c, quant, padding=1, kernel=(3, 3))
    else:
        out_ch = math.prod(wm.shape_of(f"{n}.weight"))  # not read here: each key is read once, for its layer
        y = planned_conv(network, x, wm.get(f"{c}.weight", (out_ch, int(x.shape[1]), 3, 3)), None, c, quant,
                         padding=1)
        y = group_norm(network, y, groups, wm.get(f"{n}.weight"), wm.get(f"{n}.bias"), GN_EPS, n)
    return relu(network, y, f"{p}.{i + 2}")


def _double_conv(network, x, wm, p: str, groups: int, quant=None):
    return _conv_norm_relu(network, _conv_norm_relu(network, x, wm, p, 0, groups, quant), wm, p, 3, groups, quant)


def _transposed(network, x, wm, p: str, quant=None):
    """ConvTranspose2d(k=2, s=2) ``p``: PyTorch's weight [in, out, 2, 2] is TensorRT's deconvolution layout.
    A BF16 network runs it in FLOAT between casts (``p/to_f32``, ``p/deconv``, ``p``): TensorRT-RTX has no BF16
    deconvolution kernel."""
    trt = trt_of(network)
    bf16 = x.dtype == trt.DataType.BF16
    if bf16:
        x = out(network.add_cast(x, trt.DataType.FLOAT), f"{p}/to_f32")
    b = wm.get(f"{p}.bias").reshape(-1)
    w = wm.get(f"{p}.weight", (int(x.shape[1]), b.size, 2, 2))
    y = planned_deconv(network, x, w, b, f"{p}/deconv" if bf16 else p, quant, p, stride=2)
    return out(network.add_cast(y, trt.DataType.BF16), p) if bf16 else y


def build_unet(network, wm, x, groups: int = 8, align_corners: str = "false", quant=None) -> dict:
    """Add a UNet read from ``wm``; returns ``{"logits": ITensor}`` (N, classes, H, W).

    groups: GroupNorm groups (used only by GroupNorm weights). align_corners: "false" | "true", the
    bilinear upsampling's, as the PyTorch model that made the weights. quant: a trtbuild.quant.QuantPlan
    (int8/fp8 Q/DQ or kept layers, trtbuild.layers.planned) or None."""
    if align_corners not in UNET_OPTIONS["align_corners"]:
        raise BuilderError(f"unet: align_corners={align_corners!r} is not one of {UNET_OPTIONS['align_corners']}")
    depth = unet_depth(wm)
    step = 2 ** depth
    bad = [int(d) for d in x.shape[2:] if int(d) >= 0 and int(d) % step]
    if bad:
        raise BuilderError(f"unet: input '{x.name}' {tuple(x.shape)} needs H and W multiples of 2**depth = {step}")
    skips = [_double_conv(network, x, wm, "inc.double_conv", groups, quant)]
    for k in range(1, depth + 1):
        y = max_pool(network, skips[-1], 2, 2, 0, f"down{k}.maxpool_conv.0")
        skips.append(_double_conv(network, y, wm, f"down{k}.maxpool_conv.1.double_conv", groups, quant))
    y = skips.pop()
    for k in range(1, depth + 1):
        if wm.has(f"up{k}.up.weight"):
            y = _transposed(network, y, wm, f"up{k}.up", quant)
        else:
            y = interpolate(network, y, f"up{k}.up", scale_factor=2, mode="bilinear",
                            align_corners=align_corners == "true")
        y = _double_conv(network, _concat(network, [skips.pop(), y], f"up{k}/cat"), wm, f"up{k}.conv.double_conv",
                         groups, quant)
    b = wm.get("outc.conv.bias").reshape(-1)
    logits = planned_conv(network, y, wm.get("outc.conv.weight", (b.size, int(y.shape[1]), 1, 1)), b, "outc.conv",
                          quant)
    logits.name = OUTPUT
    return {OUTPUT: logits}


def unet_layer_map(depth: int, norm: str = "batch", upsample: str = "bilinear") -> dict[str, str]:
    """Network tensor -> torch module (single call per forward) with the same output."""
    def dc(p: str, module: str) -> dict:
        m = {f"{p}.0": f"{p}.1", f"{p}.3": f"{p}.4"} if norm == "batch" else {f"{p}.1": f"{p}.1", f"{p}.4": f"{p}.4"}
        return {**m, f"{p}.2": f"{p}.2", f"{p}.5": module}

    m = dc("inc.double_conv", "inc")
    for k in range(1, depth + 1):
        m[f"down{k}.maxpool_conv.0"] = f"down{k}.maxpool_conv.0"
        m.update(dc(f"down{k}.maxpool_conv.1.double_conv", f"down{k}"))
    for k in range(1, depth + 1):
        if upsample == "transposed":
            m[f"up{k}.up"] = f"up{k}.up"
        m.update(dc(f"up{k}.conv.double_conv", f"up{k}"))
    m[OUTPUT] = "outc"
    return m


def _factory(norm: str, upsample: str):
    def factory(seed: int = 0, small: bool = False):
        model = tm.unet(norm=norm, upsample=upsample, seed=seed, **(SMALL if small else {}))
        return tm.randomize_bn_(model, seed).eval()
    return factory


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


_SIZES = (f"full: 1x3x{FULL_SIZE}x{FULL_SIZE}, base 64, depth 4; small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, base "
          f"{SMALL['base']}, depth {SMALL['depth']}; 2 classes; H and W may be dynamic (multiples of 2**depth)")

register(ModelSpec(
    name="unet",
    description="UNet (milesial layout): BatchNorm folded into the convs, bilinear x2 upsampling, skip concats",
    torch_factory=_factory("batch", "bilinear"),
    build_network=build_unet,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    layer_map=unet_layer_map(SMALL["depth"]),
    options=UNET_OPTIONS,
    notes=_SIZES,
))

register(ModelSpec(
    name="unet_gn_deconv",
    description="UNet variant: GroupNorm (8 groups) and transposed-convolution upsampling",
    torch_factory=_factory("group", "transposed"),
    build_network=build_unet,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    layer_map=unet_layer_map(SMALL["depth"], "group", "transposed"),
    # its PyTorch fake-quant model alone reaches int8 0.0995 (output) / 0.159 (inner layer) and fp8 0.164 / 0.271
    # of max|expected| over 12 input seeds: GroupNorm of one channel per group at the small width
    tolerances={"int8": (0.2, 0.2), "fp8": (0.35, 0.35)},
    notes=_SIZES,
))

"""VGG16 detection backbones (heads-free): SSD (L2Norm on conv4_3, scale 20) and RefineDet
(L2Norms on conv4_3 and conv5_3, scales 10 and 8), tensorrtx style.

Reads ``features.N.{weight,bias}`` plus ``L2Norm.weight`` (SSD) or ``conv4_3_L2Norm.weight`` /
``conv5_3_L2Norm.weight`` (RefineDet) from a WeightMap (see trtbuild.models.pytorch.vgg; use
rename_vgg_keys for ssd.pytorch checkpoints). Channel counts come from the weights. pool3 is
2x2 s2 with ceil_mode (PaddingMode.EXPLICIT_ROUND_UP). L2Norms use trtbuild.layers.l2norm.

Layer / tensor names: ``features.N`` for every conv, ReLU and pool (N as in ssd.pytorch's
``vgg``), ``conv4_3_norm/...`` and ``conv5_3_norm/...`` for the L2Norm layers, whose outputs are
the network outputs ``conv4_3_norm`` [, ``conv5_3_norm``]; the last ReLU (features.34) is
renamed ``conv7``.

Sizes: full = VGG16 widths (conv6/conv7 1024) at 300x300 (SSD300) and 320x320 (RefineDet320);
small = widths / 16 at 84x84 (conv3 maps are 21x21, so the ceil-mode pool3 keeps a partial window).
"""

from __future__ import annotations

from trtbuild.layers.basic import max_pool, read_conv_weight, relu
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.planned import planned, planned_conv
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch.vgg import CONV4_3_RELU, CONV5_3_RELU

from .registry import ModelSpec, register

__all__ = ["build_vgg16_ssd", "build_vgg16_refinedet", "vgg_layers", "vgg_layer_map"]

_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "C", 512, 512, 512, "M", 512, 512, 512]
SMALL_DIVISOR, SMALL_SIZE = 16, 84
FULL_SIZE = {"ssd": 300, "refinedet": 320}
L2NORM_EPS = 1e-10


def vgg_layers(variant: str) -> list[tuple]:
    """``[(index, kind, params)]`` of the base: kind "conv" (kernel, padding, dilation), "relu" or "pool"
    (kernel, stride, padding, ceil_mode)."""
    layers, i = [], 0
    for v in _CFG:
        if v in ("M", "C"):
            layers.append((i, "pool", dict(kernel=2, stride=2, padding=0, ceil_mode=v == "C")))
            i += 1
        else:
            layers += [(i, "conv", dict(kernel=3, padding=1, dilation=1)), (i + 1, "relu", {})]
            i += 2
    if variant == "ssd":
        layers += [(30, "pool", dict(kernel=3, stride=1, padding=1, ceil_mode=False)),
                   (31, "conv", dict(kernel=3, padding=6, dilation=6))]
    else:
        layers += [(30, "pool", dict(kernel=2, stride=2, padding=0, ceil_mode=False)),
                   (31, "conv", dict(kernel=3, padding=3, dilation=3))]
    layers += [(32, "relu", {}), (33, "conv", dict(kernel=1, padding=0, dilation=1)), (34, "relu", {})]
    return layers


def _build(network, wm, x, variant: str, norms: dict, quant=None) -> dict:
    """norms: {relu index: (output name, weight key)}; the L2Norm module is the weight key's prefix."""
    outputs = {}
    y = x
    for i, kind, p in vgg_layers(variant):
        name = f"features.{i}"
        if kind == "conv":
            b = wm.get(f"{name}.bias").reshape(-1)
            w, groups = read_conv_weight(wm, f"{name}.weight", b.size, int(y.shape[1]), p["kernel"])
            y = planned_conv(network, y, w, b, name, quant, padding=p["padding"], dilation=p["dilation"], groups=groups)
        elif kind == "relu":
            y = relu(network, y, name)
        else:
            y = max_pool(network, y, p["kernel"], p["stride"], p["padding"], name, ceil_mode=p["ceil_mode"])
        if i in norms:
            out_name, key = norms[i]
            weight = wm.get(key, (int(y.shape[1]),))
            t = planned(network, y, key.rsplit(".", 1)[0], quant,
                        lambda v, n, w=weight: l2norm(network, v, w, n, eps=L2NORM_EPS), out_name)
            t.name = out_name
            outputs[out_name] = t
    y.name = "conv7"
    outputs["conv7"] = y
    return outputs


def build_vgg16_ssd(network, wm, x, quant=None) -> dict:
    """SSD's VGG16 base: returns ``{"conv4_3_norm", "conv7"}`` tensors (not marked). quant: a
    trtbuild.quant.QuantPlan (Q/DQ convs; the L2Norm, module ``L2Norm``, is never quantized) or None."""
    return _build(network, wm, x, "ssd", {CONV4_3_RELU: ("conv4_3_norm", "L2Norm.weight")}, quant)


def build_vgg16_refinedet(network, wm, x, quant=None) -> dict:
    """RefineDet's VGG16 base: returns ``{"conv4_3_norm", "conv5_3_norm", "conv7"}`` tensors. quant:
    as for build_vgg16_ssd (L2Norm modules ``conv4_3_L2Norm``, ``conv5_3_L2Norm``)."""
    return _build(network, wm, x, "refinedet", {CONV4_3_RELU: ("conv4_3_norm", "conv4_3_L2Norm.weight"),
                                               CONV5_3_RELU: ("conv5_3_norm", "conv5_3_L2Norm.weight")}, quant)


def vgg_layer_map(variant: str, norm_modules: dict) -> dict[str, str]:
    """Network tensor -> torch module (single call per forward) with the same output."""
    m = {f"features.{i}": f"features.{i}" for i, _, _ in vgg_layers(variant)}
    del m["features.34"]
    m["conv7"] = "features.34"
    m.update(norm_modules)
    return m


def _factory(make):
    def factory(seed: int = 0, small: bool = False):
        model = make(width_divisor=SMALL_DIVISOR if small else 1, seed=seed)
        return tm.randomize_bn_(model, seed).eval()
    return factory


def _input_shape(variant: str):
    def shape(small: bool = False) -> tuple:
        s = SMALL_SIZE if small else FULL_SIZE[variant]
        return (1, 3, s, s)
    return shape


register(ModelSpec(
    name="vgg16_ssd",
    description="VGG16 SSD300 backbone with L2Norm (scale 20) on conv4_3; outputs conv4_3_norm and conv7",
    torch_factory=_factory(tm.vgg16_ssd),
    build_network=build_vgg16_ssd,
    input_shape=_input_shape("ssd"),
    output_names=["conv4_3_norm", "conv7"],
    layer_map=vgg_layer_map("ssd", {"conv4_3_norm": "L2Norm"}),
    notes=f"full: 1x3x300x300, VGG16 widths; small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, widths / {SMALL_DIVISOR}",
))

register(ModelSpec(
    name="vgg16_refinedet",
    description="VGG16 RefineDet320 backbone with L2Norms on conv4_3 (scale 10) and conv5_3 (scale 8)",
    torch_factory=_factory(tm.vgg16_refinedet),
    build_network=build_vgg16_refinedet,
    input_shape=_input_shape("refinedet"),
    output_names=["conv4_3_norm", "conv5_3_norm", "conv7"],
    layer_map=vgg_layer_map("refinedet", {"conv4_3_norm": "conv4_3_L2Norm", "conv5_3_norm": "conv5_3_L2Norm"}),
    notes=f"full: 1x3x320x320, VGG16 widths; small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, widths / {SMALL_DIVISOR}",
))

"""AlexNet network builder (original form, with LRN after conv1 and conv2), tensorrtx style.

Reads torchvision-style names (``features.N``, ``classifier.N``; see
trtbuild.models.pytorch.alexnet) from a WeightMap. The original layout (convs at features.0/4/8/
10/12, LRN at 2 and 6) and the torchvision layout (convs at 0/3/6/8/10, no LRN) are told apart
by the weights; channel counts, conv groups and classes come from the weights too.
LRN: size 5, alpha 1e-4, beta 0.75, k 2 (PyTorch's convention: alpha is divided by size), built
with trtbuild.layers.lrn.

Layer / tensor names are the PyTorch module names: ``features.N`` (each conv, ReLU, LRN, pool),
``avgpool`` (AdaptiveAvgPool2d(6): identity at 224x224, exact windows otherwise),
``classifier.1/flatten`` (= ``classifier.0``, dropout is the identity in eval mode),
``classifier.1`` ``classifier.2`` ``classifier.4`` ``classifier.5`` and ``classifier.6`` (output
tensor renamed "logits").

Sizes: full = original AlexNet (96/256/384/384/256, conv2/4/5 in 2 groups as in the paper, 4096
hidden, 1000 classes) at 224x224; small = width 0.125 (12/32/48/48/32), 2 groups, 64 hidden,
10 classes at 96x96 (features end at 2x2, so avgpool really averages/replicates windows).
"""

from __future__ import annotations

from trtbuild.layers.basic import adaptive_avg_pool, flatten, max_pool, read_conv_weight, read_linear, relu
from trtbuild.layers.common import BuilderError
from trtbuild.layers.lrn import lrn
from trtbuild.layers.planned import planned, planned_conv, planned_linear
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch.alexnet import LRN_ALPHA, LRN_BETA, LRN_K, LRN_SIZE

from .registry import ModelSpec, register

__all__ = ["build_alexnet", "alexnet_layer_map", "ORIGINAL_FEATURES", "TORCHVISION_FEATURES"]

# (kind, index in features, conv kernel size and kwargs)
ORIGINAL_FEATURES = (
    ("conv", 0, dict(kernel=11, stride=4, padding=2)), ("relu", 1), ("lrn", 2), ("pool", 3),
    ("conv", 4, dict(kernel=5, padding=2)), ("relu", 5), ("lrn", 6), ("pool", 7),
    ("conv", 8, dict(kernel=3, padding=1)), ("relu", 9), ("conv", 10, dict(kernel=3, padding=1)), ("relu", 11),
    ("conv", 12, dict(kernel=3, padding=1)), ("relu", 13), ("pool", 14),
)
TORCHVISION_FEATURES = (
    ("conv", 0, dict(kernel=11, stride=4, padding=2)), ("relu", 1), ("pool", 2),
    ("conv", 3, dict(kernel=5, padding=2)), ("relu", 4), ("pool", 5),
    ("conv", 6, dict(kernel=3, padding=1)), ("relu", 7), ("conv", 8, dict(kernel=3, padding=1)), ("relu", 9),
    ("conv", 10, dict(kernel=3, padding=1)), ("relu", 11), ("pool", 12),
)
POOL_SIZE = 6
SMALL = dict(width=0.125, hidden=64, num_classes=10, groups=2)
FULL = dict(groups=2)
SMALL_SIZE, FULL_SIZE = 96, 224
OUTPUT = "logits"


def _features_table(wm):
    if wm.has("features.4.weight"):
        return ORIGINAL_FEATURES
    if wm.has("features.3.weight"):
        return TORCHVISION_FEATURES
    raise BuilderError(f"alexnet: {wm.source} has neither features.4.weight (original) nor features.3.weight "
                       "(torchvision layout)")


def build_alexnet(network, wm, x, quant=None) -> dict:
    """Add AlexNet read from ``wm``; returns ``{"logits": ITensor}`` (not marked). quant: a
    trtbuild.quant.QuantPlan (Q/DQ convs and linears, kept layers; trtbuild.layers.planned) or None."""
    y = x
    for kind, i, *kw in _features_table(wm):
        name = f"features.{i}"
        if kind == "conv":
            p = dict(kw[0])
            b = wm.get(f"{name}.bias").reshape(-1)
            w, groups = read_conv_weight(wm, f"{name}.weight", b.size, int(y.shape[1]), p.pop("kernel"))
            y = planned_conv(network, y, w, b, name, quant, groups=groups, **p)
        elif kind == "relu":
            y = relu(network, y, name)
        elif kind == "lrn":
            y = planned(network, y, name, quant, lambda t, n: lrn(network, t, LRN_SIZE, LRN_ALPHA, LRN_BETA, LRN_K, n),
                        name)
            y.name = name
        else:
            y = max_pool(network, y, 3, 2, 0, name)
    y = adaptive_avg_pool(network, y, POOL_SIZE, "avgpool")
    y = flatten(network, y, "classifier.1/flatten")
    for fc, act in (("classifier.1", "classifier.2"), ("classifier.4", "classifier.5")):
        y = relu(network, planned_linear(network, y, *read_linear(wm, fc), fc, quant), act)
    logits = planned_linear(network, y, *read_linear(wm, "classifier.6"), "classifier.6", quant)
    logits.name = OUTPUT
    return {OUTPUT: logits}


def alexnet_layer_map(table=ORIGINAL_FEATURES) -> dict[str, str]:
    """Network tensor -> torch module (single call per forward) with the same output."""
    m = {f"features.{i}": f"features.{i}" for _, i, *_ in table}
    m.update({"avgpool": "avgpool", "classifier.1/flatten": "classifier.0", "classifier.1": "classifier.1",
              "classifier.2": "classifier.2", "classifier.4": "classifier.4", "classifier.5": "classifier.5",
              OUTPUT: "classifier.6"})
    return m


def _factory(seed: int = 0, small: bool = False):
    return tm.randomize_bn_(tm.alexnet(seed=seed, **(SMALL if small else FULL)), seed).eval()


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


register(ModelSpec(
    name="alexnet",
    description="AlexNet, original form: LRN after conv1/conv2, conv2/4/5 in 2 groups",
    torch_factory=_factory,
    build_network=build_alexnet,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    layer_map=alexnet_layer_map(),
    notes=f"full: 1x3x{FULL_SIZE}x{FULL_SIZE}, {FULL}; small: 1x3x{SMALL_SIZE}x{SMALL_SIZE}, {SMALL}",
))

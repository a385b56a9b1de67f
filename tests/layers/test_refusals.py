"""Every refusal of the normalization builders (and of conv, pooling and linear where a message was
missing or misleading), each message written out in full by hand.

A builder's refusal is one sentence that names the layer, the tensor or parameter at fault and what is
wrong; and a refused call adds nothing to the network. The messages are matched whole because matching
only part of one lets a refusal that names the wrong parameter (or none) pass: a mutation audit of the
builders (scripts/mutation_audit.py) shows that 'strategy', 'gamma', the layer name and the reason can
each be dropped from a partly matched message without a test noticing.
"""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from helpers.layer_harness import new_network
from trtbuild.layers.basic import avg_pool, conv, linear, max_pool
from trtbuild.layers.batchnorm import batchnorm, batchnorm_batch_stats
from trtbuild.layers.common import BuilderError
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.lrn import lrn
from trtbuild.layers.normalization import group_norm, instance_norm, layer_norm
from trtbuild.layers.planned import planned_conv, planned_linear
from trtbuild.layers.quantize import qconv, qlinear
from trtbuild.quant.plan import LayerPlan

F, I32 = trt.DataType.FLOAT, trt.DataType.INT32
X = (2, 4, 3, 3)
ONES, ZEROS = np.ones(4), np.zeros(4)


def _l2(x, **kw):
    return lambda n, t: l2norm(n, t, kw.pop("weight", ONES), "l2", **kw)


def _lrn(**kw):
    args = {"size": 3, "alpha": 1e-4, "beta": 0.75, "k": 2.0, **kw}
    return lambda n, t: lrn(n, t, args.pop("size"), args.pop("alpha"), args.pop("beta"), args.pop("k"), "lrn",
                            **args)


def _bn(**kw):
    a = {"gamma": ONES, "beta": ZEROS, "mean": ZEROS, "var": ONES, "eps": 1e-5, **kw}
    return lambda n, t: batchnorm(n, t, a.pop("gamma"), a.pop("beta"), a.pop("mean"), a.pop("var"), a.pop("eps"),
                                  "bn", **a)


def _bs(**kw):
    a = {"gamma": ONES, "beta": ZEROS, "eps": 1e-5, **kw}
    return lambda n, t: batchnorm_batch_stats(n, t, a.pop("gamma"), a.pop("beta"), a.pop("eps"), "bs", **a)


def _in(**kw):
    a = {"gamma": ONES, "beta": ZEROS, "eps": 1e-5, **kw}
    return lambda n, t: instance_norm(n, t, a.pop("gamma"), a.pop("beta"), a.pop("eps"), "in", **a)


def _gn(groups=2, **kw):
    a = {"gamma": ONES, "beta": ZEROS, "eps": 1e-5, **kw}
    return lambda n, t: group_norm(n, t, groups, a.pop("gamma"), a.pop("beta"), a.pop("eps"), "gn", **a)


def _ln(shape=(3, 3), **kw):
    a = {"gamma": np.ones(9), "beta": np.zeros(9), "eps": 1e-5, **kw}
    return lambda n, t: layer_norm(n, t, shape, a.pop("gamma"), a.pop("beta"), a.pop("eps"), "ln", **a)


RANK = "input 'x' has shape {shape} (rank {rank}); rank {span} is needed ({why})"
TYPE = "input 'x' has type DataType.INT32; FLOAT, HALF or BF16 is needed"
DYN = "input 'x' has shape {shape}; dim 1 (C) must be known at build time ({why})"
STRATEGY = "strategy='fast' is not one of 'safe', 'naive'"
IMPL = "impl='fused' is not one of 'auto', 'native', 'composed'"
L2_WHY = "L2Norm normalizes across channel axis 1 of (N, C, ...); IScaleLayer needs rank >= 3"
LRN_WHY = "LRN works across channel axis 1 of (N, C, ...), as torch's local_response_norm"
BN_WHY = "BatchNorm works on (N, C, ...)"

KERNEL = np.ones((4, 4, 3, 3), np.float32)
WHOLE = "must be an integer or 2 integers (one per spatial dim)"
FLAT_KERNEL, FLAT_FC = KERNEL.reshape(-1), np.ones(4 * 36, np.float32)  # as a .wts file stores them
FLAT_CONV = ("layer 'c': conv weight must be [out, in/groups, *kernel] with 1 to 3 kernel dims, got shape (144,): a "
             "weight stored flat (as .wts files store every tensor) needs its shape, wm.get(key, (out, in/groups, kh, "
             "kw)), or read it with read_conv_weight(wm, key, out_channels, in_channels, kernel), which also infers "
             "the groups")
FLAT_LINEAR = ("layer 'fc': linear weight must be [out, in], got shape (144,): a weight stored flat (as .wts files "
               "store every tensor) needs its shape, wm.get(key, (out, in)), or read it with read_linear(wm, prefix)")


class _Plan:
    """The one method of a QuantPlan the planned builders ask: `module` quantized to int8, or kept in fp16."""

    def __init__(self, kept: bool = False):
        self.kept = kept

    def layer(self, module):
        if self.kept:
            return LayerPlan(module, "fp16", False, reason="kept in fp16 by --keep")
        return LayerPlan(module, "int8", True, 1.0, (1.0,) * 4)

# (case id, input shape, input type, call, the whole expected message)
CASES = [
    ("l2-strategy", X, F, _l2(X, strategy="fast"), f"layer 'l2': {STRATEGY}"),
    ("l2-rank", (2, 4), F, _l2(X), "layer 'l2': " + RANK.format(shape=(2, 4), rank=2, span="3..8", why=L2_WHY)),
    ("l2-type", X, I32, _l2(X), f"layer 'l2': {TYPE}"),
    ("l2-dynamic-c", (2, -1, 3, 3), F, _l2(X),
     "layer 'l2': " + DYN.format(shape=(2, -1, 3, 3), why="the channel count sets the weight length")),
    ("l2-weight-length", X, F, _l2(X, weight=np.ones(3)),
     "layer 'l2': weight has 3 values but 4 are needed (one per channel)"),
    ("l2-weight-missing", X, F, _l2(X, weight=None), "layer 'l2': weight is required"),
    ("l2-weight-scalar", X, F, _l2(X, weight=np.float32(2)),
     "layer 'l2': weight must hold 4 values (one per channel), got a scalar"),
    ("l2-weight-nan", X, F, _l2(X, weight=np.array([1, np.nan, 1, 1])), "layer 'l2': weight contains NaN or Inf"),
    ("l2-eps", X, F, _l2(X, eps=-1), "layer 'l2': eps must be finite and >= 0, got -1.0"),

    ("lrn-impl", X, F, _lrn(impl="fused"), f"layer 'lrn': {IMPL}"),
    ("lrn-strategy", X, F, _lrn(strategy="fast"), f"layer 'lrn': {STRATEGY}"),
    ("lrn-rank", (2, 4), F, _lrn(), "layer 'lrn': " + RANK.format(shape=(2, 4), rank=2, span="3..8", why=LRN_WHY)),
    ("lrn-type", X, I32, _lrn(), f"layer 'lrn': {TYPE}"),
    ("lrn-size", X, F, _lrn(size=2.5), "layer 'lrn': size must be a positive integer, got 2.5"),
    ("lrn-size-bool", X, F, _lrn(size=True), "layer 'lrn': size must be a positive integer, got True"),
    ("lrn-nonfinite", X, F, _lrn(k=float("inf")),
     "layer 'lrn': alpha, beta and k must be finite, got 0.0001, 0.75, inf"),
    ("lrn-native-window", X, F, _lrn(size=4, impl="native"),
     "layer 'lrn': impl='native' is not possible: TensorRT's ILRNLayer needs an odd window in [1, 15], got size=4; "
     "use impl='composed' or 'auto'"),
    ("lrn-native-beta", X, F, _lrn(beta=0.001, impl="native"),
     "layer 'lrn': impl='native' is not possible: TensorRT's ILRNLayer needs beta in [0.01, 1e5], got 0.001; "
     "use impl='composed' or 'auto'"),
    ("lrn-native-k", X, F, _lrn(k=0.0, impl="native"),
     "layer 'lrn': impl='native' is not possible: TensorRT's ILRNLayer needs k in [1e-5, 1e10], got 0.0; "
     "use impl='composed' or 'auto'"),
    ("lrn-composed-dynamic-c", (2, -1, 3, 3), F, _lrn(impl="composed"),
     "layer 'lrn': " + DYN.format(shape=(2, -1, 3, 3), why="the composed LRN reshapes to (N, 1, C, S) and back")),
    ("lrn-native-rank5-dynamic-hw", (-1, 4, 2, -1, -1), F, _lrn(impl="native"),
     "layer 'lrn': input 'x' has shape (-1, 4, 2, -1, -1); impl='native' needs all but one of dims 2..4 known at "
     "build time on a rank-5 input (dims 3, 4 are dynamic, and TensorRT's LRN windows over the C of a 4-D view, so "
     "the input is reshaped to (N, C, S, 1) and back, which restores one dynamic dim at most); use impl='composed' "
     "or 'auto'"),

    ("bn-strategy", X, F, _bn(strategy="fast"), f"layer 'bn': {STRATEGY}"),
    ("bn-rank", (4,), F, _bn(), "layer 'bn': " + RANK.format(shape=(4,), rank=1, span="2..8", why=BN_WHY)),
    ("bn-type", X, I32, _bn(), f"layer 'bn': {TYPE}"),
    ("bn-dynamic-c", (2, -1, 3, 3), F, _bn(),
     "layer 'bn': " + DYN.format(shape=(2, -1, 3, 3), why="the channel count sets the parameter length")),
    ("bn-gamma", X, F, _bn(gamma=np.ones(5)), "layer 'bn': gamma has 5 values but 4 are needed (one per channel)"),
    ("bn-beta", X, F, _bn(beta=np.ones(3)), "layer 'bn': beta has 3 values but 4 are needed (one per channel)"),
    ("bn-mean", X, F, _bn(mean=None), "layer 'bn': mean is required"),
    ("bn-var", X, F, _bn(var=[1, 1, np.inf, 1]), "layer 'bn': var contains NaN or Inf"),
    ("bn-var-eps", X, F, _bn(var=[1, -1, 1, 1], eps=0.5),
     "layer 'bn': bn.var: var + eps must be > 0 (channel 1: var=-1.0, eps=0.5)"),

    ("bs-strategy", X, F, _bs(strategy="fast"), f"layer 'bs': {STRATEGY}"),
    ("bs-rank", (4,), F, _bs(), "layer 'bs': " + RANK.format(shape=(4,), rank=1, span="2..8", why=BN_WHY)),
    ("bs-type", X, I32, _bs(), f"layer 'bs': {TYPE}"),
    ("bs-dynamic-c", (2, -1, 3, 3), F, _bs(),
     "layer 'bs': " + DYN.format(shape=(2, -1, 3, 3), why="the channel count sets the parameter length")),
    ("bs-gamma", X, F, _bs(gamma=np.ones(5)), "layer 'bs': gamma has 5 values but 4 are needed (one per channel)"),
    ("bs-beta", X, F, _bs(beta=np.ones(3)), "layer 'bs': beta has 3 values but 4 are needed (one per channel)"),
    ("bs-eps", X, F, _bs(eps=0.0), "layer 'bs': eps must be finite and > 0, got 0.0"),

    ("in-rank", (2, 4), F, _in(),
     "layer 'in': " + RANK.format(shape=(2, 4), rank=2, span="3..8", why="instance norm needs (N, C, spatial...)")),
    ("in-dynamic-c", (2, -1, 3, 3), F, _in(),
     "layer 'in': " + DYN.format(shape=(2, -1, 3, 3), why="the channel count sets gamma/beta")),
    ("in-gamma", X, F, _in(gamma=np.ones(5)), "layer 'in': gamma has 5 values but 4 are needed (one per channel)"),
    ("in-beta", X, F, _in(beta=np.ones(3)), "layer 'in': beta has 3 values but 4 are needed (one per channel)"),
    ("in-eps", X, F, _in(eps=float("nan")), "layer 'in': eps must be finite and > 0, got nan"),
    ("in-strategy", X, F, _in(strategy="fast"), f"layer 'in': {STRATEGY}"),
    ("in-impl", X, F, _in(impl="fused"), f"layer 'in': {IMPL}"),
    ("in-type", X, I32, _in(), f"layer 'in': {TYPE}"),

    ("gn-rank", (4,), F, _gn(),
     "layer 'gn': " + RANK.format(shape=(4,), rank=1, span="2..8", why="group norm needs (N, C, ...)")),
    ("gn-dynamic-c", (2, -1, 3, 3), F, _gn(),
     "layer 'gn': " + DYN.format(shape=(2, -1, 3, 3), why="the channel count sets the groups and gamma/beta")),
    ("gn-groups", X, F, _gn(groups=3),
     "layer 'gn': num_groups=3 must be a positive integer dividing the 4 channels of 'x'"),
    ("gn-groups-bool", X, F, _gn(groups=True),
     "layer 'gn': num_groups=True must be a positive integer dividing the 4 channels of 'x'"),
    ("gn-gamma", X, F, _gn(gamma=np.ones(2)), "layer 'gn': gamma has 2 values but 4 are needed (one per channel)"),
    ("gn-beta", X, F, _gn(beta=np.ones(8)), "layer 'gn': beta has 8 values but 4 are needed (one per channel)"),
    ("gn-eps", X, F, _gn(eps=-1e-5), "layer 'gn': eps must be finite and > 0, got -1e-05"),
    ("gn-native-2d", (2, 4), F, _gn(impl="native"),
     "layer 'gn': impl='native' group norm with 2 groups needs spatial dims (TensorRT normalizes groups over dims "
     "2..), got shape (2, 4); use impl='composed'"),
    ("gn-composed-rank8-dynamic", (1, 4, -1, -1, 1, 1, 1, 1), F, _gn(impl="composed"),
     "layer 'gn': input 'x' has shape (1, 4, -1, -1, 1, 1, 1, 1); impl='composed' needs all but one of dims 2..7 "
     "known at build time on a rank-8 input (with dims 2, 3 dynamic it splits C into (G, C/G) in a rank-9 view, and "
     "TensorRT tensors have at most 8 dims); use impl='native' or 'auto'"),
    ("gn-strategy", X, F, _gn(strategy="fast"), f"layer 'gn': {STRATEGY}"),
    ("gn-impl", X, F, _gn(impl="fused"), f"layer 'gn': {IMPL}"),

    ("ln-shape", X, F, _ln(shape=(4, 3)),
     "layer 'ln': normalized_shape (4, 3) must equal the trailing dims of 'x' (2, 4, 3, 3)"),
    ("ln-dynamic-normalized", (2, 4, 3, -1), F, _ln(),
     "layer 'ln': input 'x' has shape (2, 4, 3, -1); dim 3 must be known at build time (normalized_shape (3, 3) is "
     "normalized over and sets the shape of gamma/beta; only the leading dims may be dynamic)"),
    ("ln-dynamic-normalized-2", (-1, 4, -1, -1), F, _ln(),
     "layer 'ln': input 'x' has shape (-1, 4, -1, -1); dims 2, 3 must be known at build time (normalized_shape "
     "(3, 3) is normalized over and sets the shape of gamma/beta; only the leading dims may be dynamic)"),
    ("ln-rank", (3, 3), F, _ln(shape=(2, 3, 3)),
     "layer 'ln': " + RANK.format(shape=(3, 3), rank=2, span="3..8", why="layer norm over 3 trailing dims (2, 3, 3)")),
    ("ln-gamma", X, F, _ln(gamma=np.ones(3)), "layer 'ln': gamma has 3 values but 9 are needed (one per channel)"),
    ("ln-beta", X, F, _ln(beta=np.ones(10)), "layer 'ln': beta has 10 values but 9 are needed (one per channel)"),
    ("ln-eps", X, F, _ln(eps=0), "layer 'ln': eps must be finite and > 0, got 0.0"),
    ("ln-strategy", X, F, _ln(strategy="fast"), f"layer 'ln': {STRATEGY}"),
    ("ln-impl", X, F, _ln(impl="fused"), f"layer 'ln': {IMPL}"),
    ("ln-type", X, I32, _ln(), f"layer 'ln': {TYPE}"),

    # conv and pooling truncated 2.5 to 2 and 1.9 to 1 (int(v)), building another network than asked for
    ("conv-stride", X, F, lambda n, x: conv(n, x, KERNEL, None, "c", stride=(2.5, 2.5)),
     f"layer 'c': stride=(2.5, 2.5) {WHOLE}"),
    ("conv-padding", X, F, lambda n, x: conv(n, x, KERNEL, None, "c", padding=1.9), f"layer 'c': padding=1.9 {WHOLE}"),
    ("pool-kernel", X, F, lambda n, x: max_pool(n, x, (2.9, 2.9), None, 0, "p"),
     f"layer 'p': kernel=(2.9, 2.9) {WHOLE}"),
    ("pool-kernel-str", X, F, lambda n, x: max_pool(n, x, "2", None, 0, "p"), f"layer 'p': kernel='2' {WHOLE}"),
    ("pool-kernel-float", X, F, lambda n, x: max_pool(n, x, 2.0, None, 0, "p"), f"layer 'p': kernel=2.0 {WHOLE}"),

    # an empty pooling output: TensorRT-RTX accepts it and fails at the next layer, PyTorch refuses it here
    ("pool-empty", X, F, lambda n, x: max_pool(n, x, 4, 1, 0, "pool5"),
     "layer 'pool5': the pooling window 4 is larger than the padded input 'x' (spatial dim 0: size 3, padding 0 on "
     "each side), so no window fits and its output would be empty; PyTorch refuses this and TensorRT would fail at "
     "the next layer"),
    ("pool-empty-1d", (2, 4, 2), F, lambda n, x: avg_pool(n, x, (3,), 1, 0, "pool5"),
     "layer 'pool5': the pooling window 3 is larger than the padded input 'x' (spatial dim 0: size 2, padding 0 on "
     "each side), so no window fits and its output would be empty; PyTorch refuses this and TensorRT would fail at "
     "the next layer"),

    # a flat .wts weight given to a conv or linear builder: said so, before any layer (cast, Q/DQ) is added
    ("conv-flat", X, F, lambda n, x: conv(n, x, FLAT_KERNEL, None, "c"), FLAT_CONV),
    ("qconv-flat", X, F, lambda n, x: qconv(n, x, FLAT_KERNEL, None, "c", 1.0), FLAT_CONV),
    ("planned-conv-flat-int8", X, F, lambda n, x: planned_conv(n, x, FLAT_KERNEL, None, "c", _Plan()), FLAT_CONV),
    ("planned-conv-flat-kept", X, F, lambda n, x: planned_conv(n, x, FLAT_KERNEL, None, "c", _Plan(kept=True)),
     FLAT_CONV),
    ("linear-flat", X, F, lambda n, x: linear(n, x, FLAT_FC, None, "fc"), FLAT_LINEAR),
    ("qlinear-flat", X, F, lambda n, x: qlinear(n, x, FLAT_FC, None, "fc", 1.0), FLAT_LINEAR),
    ("planned-linear-flat-kept", X, F, lambda n, x: planned_linear(n, x, FLAT_FC, None, "fc", _Plan(kept=True)),
     FLAT_LINEAR),
]


@pytest.mark.parametrize("shape,dtype,call,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusal_is_one_exact_sentence_and_adds_nothing(shape, dtype, call, message):
    _, network = new_network()
    x = network.add_input("x", dtype, shape)
    with pytest.raises(BuilderError) as refused:
        call(network, x)
    assert str(refused.value) == message
    assert "\n" not in message and network.num_layers == 0


"""CRNN text recognizer (trtbuild.models.pytorch.crnn): conv blocks, a 2-layer bidirectional LSTM as TensorRT
loops (trtbuild.layers.recurrent.lstm), a linear classifier, log-softmax and the greedy CTC path.

Layer / tensor names follow the modules: ``cnn.{4i}`` (conv + BatchNorm folded into one convolution),
``cnn.{4i+2}`` (ReLU), ``cnn.{4i+3}`` (max pool); ``features`` (the (N, C, 1, T) map as (N, T, C), one shuffle);
``rnn`` (the LSTM: ``rnn/l{k}[_reverse]/...`` inside, see trtbuild.layers.recurrent), ``fc``; the outputs
``log_probs`` (N, T, classes), log-softmax computed as ``x - max - log(sum(exp(x - max)))`` (layers
``log_probs/...``), and ``labels`` (N, T) INT32, the argmax per step (a TopK MAX with k = 1 over the classes,
``labels/topk``, its indices reshaped): the greedy CTC path before repeats and blanks are removed. Where two
classes tie, TensorRT's TopK may pick either; PyTorch's argmax picks the first. Parity therefore forgives a label
that differs from PyTorch's where the two classes' log-probabilities are within their tolerance (``argmax_of``).

INT8 / FP8 (``quant``, trtbuild.layers.planned, NVIDIA's explicit-quantization placement): the four
convolutions and ``fc`` take quantized inputs. The LSTM stays in the float type: calibration records no range
inside nn.LSTM (its input and recurrent projections are parameters of one module, not Linear modules), and the
recurrent product ``h @ W_hh^T`` sits inside the ILoop, where a per-step Q/DQ of ``h`` would need a range for
every step's state; its gates and elementwise updates, the log-softmax and the TopK are float by NVIDIA's
rules anyway.

Sizes: full = 1x1x32x100 (25 time steps); small = the same weights at 1x1x32x32 (8 steps). The width must be
known at build time (it makes the LSTM's trip count); the batch may be dynamic.
"""

from __future__ import annotations

from trtbuild.backend import trt_of
from trtbuild.layers.basic import max_pool, read_linear, relu
from trtbuild.layers.common import BuilderError, named, out
from trtbuild.layers.planned import planned_conv_bn, planned_linear
from trtbuild.layers.recurrent import lstm
from trtbuild.layers.tensor import shuffle
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch.crnn import CRNN_POOLS

from .registry import ModelSpec, register

__all__ = ["build_crnn", "crnn_layer_map", "log_softmax", "greedy_path"]

FULL_WIDTH, SMALL_WIDTH, HEIGHT = 100, 32, 32
OUTPUTS = ("log_probs", "labels")


def log_softmax(network, x, name: str):
    """log_softmax over the last dim, stable: ``x - max - log(sum(exp(x - max)))`` (layers ``name/max``,
    ``name/shifted``, ``name/exp``, ``name/sum``, ``name/log_sum``, ``name``)."""
    trt = trt_of(network)
    axis = 1 << (len(x.shape) - 1)
    ew, red, un = trt.ElementWiseOperation, trt.ReduceOperation, trt.UnaryOperation
    peak = out(network.add_reduce(x, red.MAX, axis, True), f"{name}/max")
    shifted = out(network.add_elementwise(x, peak, ew.SUB), f"{name}/shifted")
    total = out(network.add_reduce(out(network.add_unary(shifted, un.EXP), f"{name}/exp"), red.SUM, axis, True),
                f"{name}/sum")
    return out(network.add_elementwise(shifted, out(network.add_unary(total, un.LOG), f"{name}/log_sum"), ew.SUB),
               name)


def greedy_path(network, x, name: str):
    """Argmax over the last dim as INT32 (the last dim removed): TopK MAX k=1 (``name/topk``), its indices
    reshaped (``name``)."""
    trt = trt_of(network)
    rank = len(x.shape)
    topk = named(network.add_topk(x, trt.TopKOperation.MAX, 1, 1 << (rank - 1)), f"{name}/topk")
    return shuffle(network, topk.get_output(1), name, dims=(0,) * (rank - 1))


def build_crnn(network, wm, x, quant=None) -> dict:
    """Add the CRNN read from ``wm`` (trtbuild.models.pytorch.crnn's names); returns ``{"log_probs": (N, T, C),
    "labels": (N, T) INT32}``. quant: a trtbuild.quant.QuantPlan (int8/fp8 Q/DQ or kept layers,
    trtbuild.layers.planned) or None; the LSTM stays float (see the module doc)."""
    shape = tuple(int(d) for d in x.shape)
    if len(shape) != 4 or shape[2] != HEIGHT or shape[3] < 0 or shape[3] % 4:
        raise BuilderError(f"crnn: input '{x.name}' {shape} must be (N, 1, {HEIGHT}, W) with W known at build time "
                           "and a multiple of 4")
    y = x
    for i, pool in enumerate(CRNN_POOLS):
        p = f"cnn.{4 * i}"
        y = planned_conv_bn(network, y, wm, p, f"cnn.{4 * i + 1}", p, quant, padding=1, kernel=(3, 3))
        y = max_pool(network, relu(network, y, f"cnn.{4 * i + 2}"), pool, pool, 0, f"cnn.{4 * i + 3}")
    feats = shuffle(network, y, "features", dims=(0, 0, -1), then=(0, 2, 1))  # (N, C, 1, T) -> (N, T, C)
    seq = lstm(network, feats, wm, "rnn", prefix="rnn")
    logits = planned_linear(network, seq, *read_linear(wm, "fc"), "fc", quant)  # read_linear: flat .wts weights too
    log_probs = log_softmax(network, logits, OUTPUTS[0])
    return {OUTPUTS[0]: log_probs, OUTPUTS[1]: greedy_path(network, log_probs, OUTPUTS[1])}


def crnn_layer_map() -> dict[str, str]:
    """Network tensor -> torch module with the same output: each conv (with its BatchNorm), ReLU and pool, the
    classifier and the log-probabilities (the LSTM module returns a tuple; its output is compared through fc)."""
    m = {}
    for i in range(len(CRNN_POOLS)):
        m[f"cnn.{4 * i}"] = f"cnn.{4 * i + 1}"
        m[f"cnn.{4 * i + 2}"] = f"cnn.{4 * i + 2}"
        m[f"cnn.{4 * i + 3}"] = f"cnn.{4 * i + 3}"
    m["fc"] = "fc"
    return m


def _factory(seed: int = 0, small: bool = False):
    return tm.randomize_bn_(tm.crnn(seed=seed), seed).eval()


def _input_shape(small: bool = False) -> tuple:
    return (1, 1, HEIGHT, SMALL_WIDTH if small else FULL_WIDTH)


register(ModelSpec(
    name="crnn",
    description="CRNN text recognizer: conv blocks, 2-layer bidirectional LSTM (TensorRT loops), greedy CTC path",
    torch_factory=_factory,
    build_network=build_crnn,
    input_shape=_input_shape,
    output_names=list(OUTPUTS),
    value_range=(0.0, 1.0),
    layer_map=crnn_layer_map(),
    argmax_of={OUTPUTS[1]: OUTPUTS[0]},
    notes=f"full: 1x1x{HEIGHT}x{FULL_WIDTH} (25 steps); small: the same weights at 1x1x{HEIGHT}x{SMALL_WIDTH} "
          "(8 steps); outputs log_probs (N, T, 37) and labels (N, T) INT32, the argmax path",
))

"""Recurrent layer builders: ``torch.nn.LSTM`` as TensorRT loops.

TensorRT 10 and 11 (and TensorRT-RTX) have no RNN layer; a recurrence is an ILoop. Each direction of each
layer is one loop over the time axis:

* the input projection ``x @ W_ih^T + b_ih + b_hh`` of every time step is ONE matrix multiply before the loop
  (``{d}/input_proj``), so the loop body holds only what depends on the previous step;
* an IIteratorLayer walks that projection along the time axis (``reverse=True`` for the backward direction);
* two IRecurrenceLayers carry ``h`` and ``c`` (zeros at the start, as nn.LSTM without ``(h0, c0)``);
* the body computes ``gates = proj_t + h @ W_hh^T``, splits it in PyTorch's gate order (i, f, g, o) with
  gathers on the feature axis (a gather, unlike a slice, needs no batch size), and
  ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')``;
* a loop output stacks each step's ``h'`` along the time axis: CONCATENATE forwards, REVERSE for the backward
  direction, whose reverse iterator visits the steps last to first, so both outputs are in time order.

A bidirectional layer concatenates the two directions' outputs on the feature axis (forward first, as
nn.LSTM); each layer feeds the next. Layer names: ``{name}/l{k}`` and ``{name}/l{k}_reverse`` (the suffixes of
nn.LSTM's weight names) prefix each direction's layers; ``{name}/l{k}`` is also layer k's output (the
concatenation, when bidirectional) and ``name`` the last layer's. The sequence length must be known at build
time (the trip count is a constant); the batch may be dynamic (the zero initial states are then a fill whose
dims come from the input's shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from trtbuild.backend import trt_of
from trtbuild.weights import WeightMap
from trtbuild.weights.provenance import key_of

from .common import BuilderError, constant, named, out
from .weight_names import name_new_weights, sum_source

__all__ = ["lstm", "read_lstm", "LSTMDirection", "GATES"]

#: nn.LSTM's gate order along the 4 * hidden rows of its weights
GATES = ("i", "f", "g", "o")


@dataclass(frozen=True)
class LSTMDirection:
    """One direction of one nn.LSTM layer: ``w_ih`` (4H, I), ``w_hh`` (4H, H), ``bias`` (4H,) = b_ih + b_hh (or
    None for ``bias=False``); ``suffix`` is ``l{k}`` or ``l{k}_reverse``. ``bias_keys``: the state_dict keys of
    b_ih and b_hh where they were read from a WeightMap, so that the summed bias is named and refittable (the
    weights, used whole, are named after their keys anyway: trtbuild.layers.weight_names)."""

    suffix: str
    w_ih: np.ndarray
    w_hh: np.ndarray
    bias: np.ndarray | None
    bias_keys: tuple[str, str] | None = None

    @property
    def hidden(self) -> int:
        return self.w_hh.shape[1]

    @property
    def reverse(self) -> bool:
        return self.suffix.endswith("_reverse")


def _as_weightmap(weights, prefix: str) -> WeightMap:
    wm = weights if isinstance(weights, WeightMap) else WeightMap.from_state_dict(dict(weights))
    return wm.prefix(prefix) if prefix.strip(".") else wm


def read_lstm(weights: WeightMap | Mapping, prefix: str = "", name: str = "lstm") -> list[list[LSTMDirection]]:
    """nn.LSTM's state-dict weights (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, the
    ``_reverse`` ones of a bidirectional LSTM; under ``prefix``) as [layer][direction]. The number of layers and
    whether it is bidirectional come from the names present; projections (``weight_hr_l0``, nn.LSTM's
    ``proj_size``) are refused. Weights stored flat (.wts files keep every tensor 1-D) are shaped from their sizes
    (weight_hh has 4 H x H values)."""
    wm = _as_weightmap(weights, prefix)
    if wm.has("weight_hr_l0"):
        raise BuilderError(f"layer '{name}': LSTM projections (weight_hr_l0, nn.LSTM's proj_size) are not supported")
    if not wm.has("weight_ih_l0"):
        raise BuilderError(f"layer '{name}': no weight_ih_l0 under prefix {prefix!r} in {wm.source}; expected "
                           "nn.LSTM's state-dict names")
    suffixes = ("", "_reverse") if wm.has("weight_ih_l0_reverse") else ("",)
    layers, k = [], 0
    while wm.has(f"weight_ih_l{k}"):
        dirs = []
        for s in suffixes:
            sfx = f"l{k}{s}"
            hh_shape = wm.shape_of(f"weight_hh_{sfx}")
            size = int(np.prod(hh_shape))
            h = int(round((size / 4) ** 0.5))
            if len(hh_shape) not in (1, 2) or size != 4 * h * h or len(hh_shape) == 2 and hh_shape != (4 * h, h):
                raise BuilderError(f"layer '{name}': weight_hh_{sfx} has shape {hh_shape}; expected (4 * hidden, "
                                   "hidden)")
            ih_size = int(np.prod(wm.shape_of(f"weight_ih_{sfx}")))
            if ih_size % (4 * h) or len(wm.shape_of(f"weight_ih_{sfx}")) not in (1, 2):
                raise BuilderError(f"layer '{name}': weight_ih_{sfx} has shape {wm.shape_of(f'weight_ih_{sfx}')}; "
                                   f"expected ({4 * h}, input size)")
            w_ih = wm.get(f"weight_ih_{sfx}", (4 * h, ih_size // (4 * h)))
            bias = keys = None
            if wm.has(f"bias_ih_{sfx}"):
                b_ih, b_hh = wm.get(f"bias_ih_{sfx}", (4 * h,)), wm.get(f"bias_hh_{sfx}", (4 * h,))
                bias, keys = b_ih.astype(np.float64) + b_hh, (key_of(b_ih), key_of(b_hh))
            dirs.append(LSTMDirection(sfx, w_ih, wm.get(f"weight_hh_{sfx}", (4 * h, h)), bias,
                                      None if keys is None or None in keys else keys))
        layers.append(dirs)
        k += 1
    return layers


def _zero_state(network, x, batch_axis: int, hdim: int, p: str):
    """(N, H) zeros typed like ``x``, the initial h and c: a constant (``{p}/state0``) for a known batch; for a
    dynamic one a LINSPACE fill of start 0 and deltas 0 whose dims (N, H) are a shape tensor made from x's
    shape (``{p}/state0/...``), cast to x's type (LINSPACE makes FLOAT, INT32 or INT64 only)."""
    trt = trt_of(network)
    batch = int(x.shape[batch_axis])
    if batch >= 0:
        return constant(network, np.zeros((batch, hdim)), x, f"{p}/state0")
    q = f"{p}/state0"
    shape = out(network.add_shape(x), f"{q}/input_shape")
    axis = out(network.add_constant((1,), trt.Weights(np.array([batch_axis], dtype=np.int32))), f"{q}/batch_axis")
    n = out(network.add_gather(shape, axis, 0), f"{q}/batch")
    hidden = out(network.add_constant((1,), trt.Weights(np.array([hdim], dtype=np.int64))), f"{q}/hidden")
    dims = out(network.add_concatenation([n, hidden]), f"{q}/dims")
    fill = network.add_fill(trt.Dims((1, hdim)), trt.FillOperation.LINSPACE, trt.DataType.FLOAT)
    fill.set_input(0, dims)
    fill.set_input(1, out(network.add_constant((), trt.Weights(np.array(0.0, dtype=np.float32))), f"{q}/start"))
    fill.set_input(2, out(network.add_constant((2,), trt.Weights(np.zeros(2, dtype=np.float32))), f"{q}/delta"))
    zeros = out(fill, f"{q}/fill")
    if x.dtype == trt.DataType.FLOAT:
        return zeros
    return out(network.add_cast(zeros, x.dtype), q)


def _direction(network, x, d: LSTMDirection, name: str, time_axis: int):
    """One loop: ``x`` (N, T, I) or (T, N, I) -> the per-step h, same layout with H features."""
    trt = trt_of(network)
    ew, act = trt.ElementWiseOperation, trt.ActivationType
    shape = tuple(int(v) for v in x.shape)
    steps = shape[time_axis]
    hdim = d.hidden
    p = f"{name}/{d.suffix}"
    lead = (1,) * (len(shape) - 2)
    proj = out(network.add_matrix_multiply(x, trt.MatrixOperation.NONE,
                                           constant(network, d.w_ih.reshape(lead + d.w_ih.shape), x,
                                                    f"{p}/weight_ih"),
                                           trt.MatrixOperation.TRANSPOSE), f"{p}/input_proj")
    if d.bias is not None:
        first = network.num_layers
        proj = out(network.add_elementwise(proj, constant(network, d.bias.reshape(lead + (1, -1)), x, f"{p}/bias"),
                                           ew.SUM), f"{p}/input_proj_bias")
        if d.bias_keys is not None:
            name_new_weights(network, first, "CONSTANT", {"/bias": sum_source(d.bias_keys, d.bias.size)})
    # every constant before the loop: the body is the layers between its boundary layers
    count = out(network.add_constant((), trt.Weights(np.array(steps, dtype=np.int32))), f"{p}/steps")
    h0 = c0 = _zero_state(network, x, 1 - time_axis, hdim, p)
    w_hh = constant(network, d.w_hh, x, f"{p}/weight_hh")
    index = {g: out(network.add_constant((hdim,), trt.Weights(np.arange(j * hdim, (j + 1) * hdim, dtype=np.int32))),
                    f"{p}/gate_{g}/index") for j, g in enumerate(GATES)}
    loop = network.add_loop()
    loop.name = f"{p}/loop"
    named(loop.add_trip_limit(count, trt.TripLimit.COUNT), f"{p}/trip_limit")
    step = out(loop.add_iterator(proj, time_axis, d.reverse), f"{p}/x_t")  # (N, 4H)
    h = named(loop.add_recurrence(h0), f"{p}/h")
    c = named(loop.add_recurrence(c0), f"{p}/c")
    hh = out(network.add_matrix_multiply(h.get_output(0), trt.MatrixOperation.NONE, w_hh,
                                         trt.MatrixOperation.TRANSPOSE), f"{p}/hidden_proj")
    gates = out(network.add_elementwise(step, hh, ew.SUM), f"{p}/gates")
    parts = {}
    for g in GATES:
        pre = out(network.add_gather(gates, index[g], 1), f"{p}/gate_{g}")
        parts[g] = out(network.add_activation(pre, act.TANH if g == "g" else act.SIGMOID), f"{p}/{g}")
    fc = out(network.add_elementwise(parts["f"], c.get_output(0), ew.PROD), f"{p}/f_c")
    ig = out(network.add_elementwise(parts["i"], parts["g"], ew.PROD), f"{p}/i_g")
    c_next = out(network.add_elementwise(fc, ig, ew.SUM), f"{p}/c_next")
    tanh_c = out(network.add_activation(c_next, act.TANH), f"{p}/tanh_c")
    h_next = out(network.add_elementwise(parts["o"], tanh_c, ew.PROD), f"{p}/h_next")
    h.set_input(1, h_next)
    c.set_input(1, c_next)
    kind = trt.LoopOutput.REVERSE if d.reverse else trt.LoopOutput.CONCATENATE
    seq = loop.add_loop_output(h_next, kind, time_axis)
    seq.set_input(1, count)
    return out(seq, f"{p}/out")


def lstm(network, x, weights, name: str, prefix: str = "", batch_first: bool = True):
    """``torch.nn.LSTM(...)(x)[0]`` from its state-dict ``weights`` (a WeightMap or a mapping; names under
    ``prefix``): ``x`` (N, T, I) with ``batch_first`` (else (T, N, I)) -> (N, T, D * H), D = 2 when the
    weights hold the ``_reverse`` direction. Layers and outputs are named as the module doc says; T must be
    known at build time (the trip count), N may be dynamic."""
    layers = read_lstm(weights, prefix, name)
    shape = tuple(int(v) for v in x.shape)
    if len(shape) != 3:
        raise BuilderError(f"layer '{name}': an LSTM input is (N, T, features) with batch_first, else "
                           f"(T, N, features); got '{x.name}' with shape {shape}")
    time_axis = 1 if batch_first else 0
    if shape[time_axis] < 0:
        raise BuilderError(f"layer '{name}': the sequence length of '{x.name}' {shape} must be known at build time "
                           "(it is the loops' trip count)")
    y = x
    for k, dirs in enumerate(layers):
        features = int(y.shape[2])
        if features != dirs[0].w_ih.shape[1]:
            raise BuilderError(f"layer '{name}': '{y.name}' has {features} features but weight_ih_l{k} "
                               f"{dirs[0].w_ih.shape} expects {dirs[0].w_ih.shape[1]}")
        outs = [_direction(network, y, d, name, time_axis) for d in dirs]
        last = k == len(layers) - 1
        label = name if last else f"{name}/l{k}"
        if len(outs) == 1:
            y = out(network.add_identity(outs[0]), label)
        else:
            cat = named(network.add_concatenation(outs), label)
            cat.axis = 2
            y = cat.get_output(0)
    return y

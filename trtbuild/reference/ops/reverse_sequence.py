"""IReverseSequenceLayer: batch-wise reversal (ONNX ReverseSequence). TensorRT: "slices the input tensor along the
axis batch_axis. For the i-th slice, the operation reverses the first N elements, specified by the corresponding
i-th value in sequence_lens, along sequence_axis and keeps the remaining elements unchanged." The output has the
input's shape and type.

sequence_lens is a 1-D INT32/INT64 tensor as long as the input's batch dimension (a run-time tensor: any network
input or layer output). batch_axis (default 1) and sequence_axis (default 0) are in [0, rank) and differ; as in
TensorRT-RTX, the setters refuse an axis out of range and the layer, equal axes. A length outside
[0, sequence dimension] fails the run (ONNX: lengths are at most the sequence dimension).

Checked against TensorRT-RTX 1.7: the input has rank >= 2 and sequence_lens rank 1 when the layer is added; every
input type but UINT8 (refused as by the other data-movement layers).
"""

from __future__ import annotations

import torch

from ..core import ITensor, NetworkError
from ..enums import DataType, LayerType
from .base import ILayer, setter_value
from .common import fail, no_uint8
from .registry import register


def _axis_param(key: str):
    """batch_axis / sequence_axis: TensorRT's setter refuses a value outside [0, rank of the input)."""
    def get(self) -> int:
        return self._params[key]

    def set_(self, value) -> None:
        value = setter_value("int", value, lambda: f"layer '{self.name}': {key} = {value!r}")
        rank = len(self.get_input(0).shape)
        if not 0 <= value < rank:
            raise NetworkError(f"layer '{self.name}': {key} = {value} is refused: it must be in [0, {rank - 1}] for "
                               f"a rank-{rank} input")
        self._params[key] = value
        self._network._touch()

    return property(get, set_)


class IReverseSequenceLayer(ILayer):
    _TYPE = LayerType.REVERSE_SEQUENCE
    _MAX_INPUTS = 2
    batch_axis = _axis_param("batch_axis")
    sequence_axis = _axis_param("sequence_axis")

    @classmethod
    def _type_label(cls) -> str:
        return "ReverseSequence"


def infer(p, w, shapes, dtypes, name, plugin):
    x, lens = tuple(shapes[0]), tuple(shapes[1])
    no_uint8(name, dtypes[:1])
    if dtypes[1] not in (DataType.INT32, DataType.INT64):
        fail(name, f"sequence_lens has type {dtypes[1].name}; a reverse sequence needs INT32 or INT64 lengths")
    r, b, s = len(x), p["batch_axis"], p["sequence_axis"]
    if r < 2 or len(lens) != 1:
        fail(name, f"input {x} and sequence_lens {lens}: a reverse sequence needs an input of rank >= 2 and 1-D "
                   "sequence_lens")
    if not (0 <= b < r and 0 <= s < r):
        fail(name, f"batch_axis {b} and sequence_axis {s} must be in [0, {r - 1}] for a rank-{r} input")
    if b == s:
        fail(name, f"batch_axis and sequence_axis are both {b}; they must differ")
    if lens[0] >= 0 and x[b] >= 0 and lens[0] != x[b]:
        fail(name, f"sequence_lens has {lens[0]} lengths but the batch dimension {b} of input {x} has size {x[b]}")
    return [x], [dtypes[0]]


def run(p, w, inputs, plugin):
    x, lens = inputs[0], inputs[1].long()
    b, s = p["batch_axis"], p["sequence_axis"]
    t = x.shape[s]
    if bool(((lens < 0) | (lens > t)).any()):
        raise IndexError(f"reverse sequence: sequence_lens {lens.tolist()} must be in [0, {t}], the sequence length")
    lengths = torch.unique(lens).tolist()
    if len(lengths) == 1:  # one length for the whole batch: the flipped prefix, then the rest, in one pass
        length = lengths[0]
        return [torch.cat([x.narrow(s, 0, length).flip(s), x.narrow(s, length, t - length)], s)]
    out = x.clone()
    for length in lengths:  # the batch items of one length at a time: a flip of their prefix
        if length < 2:
            continue
        rows = torch.nonzero(lens == length).reshape(-1)
        prefix = x.index_select(b, rows).narrow(s, 0, length).flip(s)
        out.narrow(s, 0, length).index_copy_(b, rows, prefix)
    return [out]


def add_reverse_sequence(self, input: ITensor, sequence_lens: ITensor) -> IReverseSequenceLayer:
    """batch_axis 1 and sequence_axis 0 (TensorRT's defaults). TensorRT refuses an input of rank < 2 or
    sequence_lens of rank other than 1 when the layer is added; the rest is checked when it is used (the axes
    may be set meanwhile)."""
    rx, rl = len(input.shape), len(sequence_lens.shape)
    if rx < 2 or rl != 1:
        raise NetworkError(f"add_reverse_sequence: input '{input.name}' has rank {rx} and sequence_lens "
                           f"'{sequence_lens.name}' rank {rl}; TensorRT needs an input of rank >= 2 and 1-D "
                           "sequence_lens")
    return self._add(IReverseSequenceLayer, [input, sequence_lens], {"batch_axis": 1, "sequence_axis": 0},
                     eager=False)


register(IReverseSequenceLayer, infer, run, adds=(add_reverse_sequence,))

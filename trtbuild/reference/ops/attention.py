"""IAttention: softmax(Q K^T + mask) V as one unit, and its two boundary layers.

TensorRT's IAttention is not a layer: add_attention / add_attention_v2 put an IAttentionInputLayer
(LayerType.ATTENTION_INPUT: query, key, value and the optional tensors) and an IAttentionOutputLayer
(ATTENTION_OUTPUT: the result) into the network and hand back the IAttention that configures them. The
reference keeps the attention's attributes in the input layer's params (so a plan holds them) and computes
the whole attention there; the output layer passes that result on. The tensor between the two is opaque in
TensorRT; it has the query's shape and type here, as TensorRT-RTX 1.7 reports for it.

Semantics (TensorRT's Attention operator page and the IAttention class docs):
- BMM1 is Q K^T with no scaling: TensorRT has no scale attribute, the caller scales Q (TensorRT's ONNX
  parser multiplies Q by ONNX Attention's `scale`, 1/sqrt(head size) by default);
- a BOOL mask keeps the positions where it is true; a float mask (the query's type) is added to BMM1's output;
  it is 4-D and broadcasts to [batch, query heads, query length, key/value length];
- causal_kind UPPER_LEFT keeps key j for query i where j <= i, LOWER_RIGHT where j <= i + (s_kv - s_q);
  the deprecated `causal` is UPPER_LEFT. A mask and a causal kind cannot be combined (TensorRT logs an API
  usage error and ignores the later call);
- norm_op SOFTMAX normalizes over the key/value length; NONE leaves the scores as they are (a position the
  mask or causality excludes then weighs 0);
- key and value may have fewer heads than the query (grouped-query attention): query head h reads key/value
  head h // (query heads / key/value heads);
- key_value_lengths (INT32, [batch]) keeps only the first lengths[b] keys of batch b;
- normalization_quantize_to_type (FP8 or INT8) and normalization_quantize_scale (the query's type, one value)
  quantize the normalized scores before BMM2: P becomes dequantize(quantize(P, scale), scale).
A query row that no key may attend gives NaN, as softmax over nothing. `decomposable` is a kernel choice:
TensorRT refuses a non-decomposable attention where the target has no fused kernel for it, which the
reference cannot know; it computes the same result either way. The packed (PACKED_NHD) layouts are refused:
TensorRT-RTX 1.7 builds them only with a fused packed kernel, which no target it builds for has here.
"""

from __future__ import annotations

import torch

from ..core import ITensor, NetworkError
from ..enums import AttentionIOForm, AttentionNormalizationOp, CausalMaskKind, DataType, LayerType
from .. import quantize
from .base import ILayer, setter_value
from .common import FLOATS, f32, fail
from .registry import register

#: input indices of the attention's input layer (TensorRT's order)
QUERY, KEY, VALUE, MASK, NORM_SCALE, QUERY_LENGTHS, KV_LENGTHS = range(7)
QUANTIZE_TYPES = (DataType.FP8, DataType.INT8)
PACKED_REFUSED = ("the packed (PACKED_NHD) layout is not supported by the reference: TensorRT-RTX 1.7 builds it "
                  "only with a fused packed-attention kernel, which its sm75-sm121 targets lack here")


class IAttentionBoundaryLayer(ILayer):
    """The input or output layer of an IAttention."""

    @property
    def attention(self) -> "IAttention":
        return self._attention


class IAttentionInputLayer(IAttentionBoundaryLayer):
    """Inputs: query, key, value, mask, normalization quantize scale, query lengths, key/value lengths."""

    _TYPE = LayerType.ATTENTION_INPUT
    _OPTIONAL_INPUTS = True
    _MAX_INPUTS = 7

    @classmethod
    def _type_label(cls) -> str:
        return "AttentionInput"


class IAttentionOutputLayer(IAttentionBoundaryLayer):
    _TYPE = LayerType.ATTENTION_OUTPUT

    @classmethod
    def _type_label(cls) -> str:
        return "AttentionOutput"


def _in(shapes, dtypes, i):
    return (tuple(shapes[i]), dtypes[i]) if len(shapes) > i and shapes[i] is not None else (None, None)


def _same(a: int, b: int) -> bool:
    return a == b or a < 0 or b < 0


def infer_input(p, w, shapes, dtypes, name, plugin):
    (q, qdt), (k, kdt), (v, vdt) = (_in(shapes, dtypes, i) for i in (QUERY, KEY, VALUE))
    if AttentionIOForm(p["query_form"]) != AttentionIOForm.PADDED_BHND \
            or AttentionIOForm(p["key_value_form"]) != AttentionIOForm.PADDED_BHND:
        fail(name, PACKED_REFUSED)
    for what, dt in (("query", qdt), ("key", kdt), ("value", vdt)):
        if dt not in FLOATS:
            fail(name, f"the {what} has type {dt.name}; an attention takes FLOAT, HALF or BF16")
    if not qdt == kdt == vdt:
        fail(name, f"query, key and value have types {qdt.name}, {kdt.name}, {vdt.name}; they must be the same")
    for what, s in (("query", q), ("key", k), ("value", v)):
        if len(s) != 4:
            fail(name, f"the {what} has shape {s}; the padded (BHND) layout needs 4-D [batch, heads, tokens, head "
                       "size]")
    if k != v:
        fail(name, f"key {k} and value {v} must have the same shape")
    if not _same(q[3], k[3]):
        fail(name, f"the query's head size {q[3]} differs from the key's and value's {k[3]}")
    if not _same(q[0], k[0]):
        fail(name, f"the query's batch {q[0]} differs from the key's and value's {k[0]}")
    if q[1] > 0 and k[1] > 0 and q[1] % k[1]:
        fail(name, f"the query's {q[1]} heads are not a multiple of the key's and value's {k[1]}")
    m, mdt = _in(shapes, dtypes, MASK)
    if m is not None:
        if mdt != DataType.BOOL and mdt != qdt:
            fail(name, f"the mask has type {mdt.name}; it must be BOOL or the query's type {qdt.name}")
        full = (q[0], q[1], q[2], k[2])
        if len(m) != 4 or not all(a == 1 or _same(a, b) for a, b in zip(m, full)):
            fail(name, f"the mask has shape {m}; it must be 4-D and broadcast to [batch, query heads, query "
                       f"length, key/value length] = {list(full)}")
    s, sdt = _in(shapes, dtypes, NORM_SCALE)
    if s is not None and p["normalization_quantize_to_type"] is not None:
        if sdt != qdt:
            fail(name, f"the normalization quantize scale has type {sdt.name}; it must have the query's type "
                       f"{qdt.name}")
        if len(s) > 1 or (s and s[0] != 1):
            fail(name, f"the normalization quantize scale has shape {s}; it must hold one value")
    lens, ldt = _in(shapes, dtypes, KV_LENGTHS)
    if lens is not None:
        if ldt != DataType.INT32:
            fail(name, f"key_value_lengths has type {ldt.name}; it must be INT32")
        if len(lens) != 1 or not _same(lens[0], k[0]):
            fail(name, f"key_value_lengths has shape {lens}; the padded layout needs one length per batch ({k[0]})")
    return [q], [qdt]


def _allowed(p, inputs, sq: int, skv: int, device) -> torch.Tensor | None:
    """[batch or 1, 1, s_q, s_kv] of which keys each query may attend (causality and key/value lengths), or None."""
    keep = None
    kind = CausalMaskKind(p["causal_kind"])
    if kind != CausalMaskKind.NONE:
        i = torch.arange(sq, device=device).reshape(-1, 1)
        j = torch.arange(skv, device=device).reshape(1, -1)
        keep = (j <= i + (skv - sq if kind == CausalMaskKind.LOWER_RIGHT else 0)).reshape(1, 1, sq, skv)
    lengths = inputs[KV_LENGTHS] if len(inputs) > KV_LENGTHS else None
    if lengths is not None:
        by_length = torch.arange(skv, device=device).reshape(1, 1, 1, -1) < lengths.long().reshape(-1, 1, 1, 1)
        keep = by_length if keep is None else keep & by_length
    return keep


def run_input(p, w, inputs, plugin):
    q, k, v = (f32(inputs[i]) for i in (QUERY, KEY, VALUE))
    groups = q.shape[1] // k.shape[1]
    if groups > 1:  # grouped-query attention: each key/value head serves `groups` consecutive query heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(-1, -2))
    mask = inputs[MASK] if len(inputs) > MASK else None
    keep = _allowed(p, inputs, q.shape[2], k.shape[2], q.device)
    if mask is not None and mask.dtype == torch.bool:
        keep = mask if keep is None else keep & mask
    elif mask is not None:
        scores = scores + f32(mask)
    softmax = AttentionNormalizationOp(p["norm_op"]) == AttentionNormalizationOp.SOFTMAX
    if softmax:
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
    else:
        probs = scores if keep is None else scores.masked_fill(~keep, 0.0)
    to = p["normalization_quantize_to_type"]
    scale = inputs[NORM_SCALE] if len(inputs) > NORM_SCALE else None
    if to is not None and scale is not None:
        qp = {"axis": -1, "to_type": to}
        probs = quantize.dequantize(qp, quantize.quantize(qp, probs, scale.reshape(())), scale.reshape(()))
    return [torch.matmul(probs, v)]


def infer_output(p, w, shapes, dtypes, name, plugin):
    return [tuple(shapes[0])], [dtypes[0]]


def run_output(p, w, inputs, plugin):
    return [inputs[0]]


class IAttention:
    """An attention in a network: the attributes of its input layer, and its output."""

    def __init__(self, network, name: str, input_layer: IAttentionInputLayer, output_layer: IAttentionOutputLayer):
        self._network, self._name = network, name
        self._input_layer, self._output_layer = input_layer, output_layer
        self._metadata = ""
        input_layer._attention = output_layer._attention = self

    def _param(self, key):
        return self._input_layer._params[key]

    def _set(self, key, value):
        self._input_layer._params[key] = value
        self._network._touch()

    def _arg(self, kind, value, attribute: str):
        """`value` as TensorRT's bindings take it for an attribute of this kind (an enum only as itself, ...)."""
        return setter_value(kind, value, lambda: f"IAttention.{attribute} = {value!r}")

    def _refuse(self, call: str, why: str) -> None:
        """TensorRT's way with these setters: an API usage error logged, and the call has no effect."""
        self._network._api_usage_error(f"IAttention::{call}: Error Code 3: API Usage Error ({why})")

    def _tensor(self, value, what: str):
        return None if value is None else self._network._own(value, f"IAttention.{what}")

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    @property
    def metadata(self) -> str:
        return self._metadata

    @metadata.setter
    def metadata(self, value: str) -> None:
        self._metadata = str(value)

    @property
    def norm_op(self) -> AttentionNormalizationOp:
        return AttentionNormalizationOp(self._param("norm_op"))

    @norm_op.setter
    def norm_op(self, value: AttentionNormalizationOp) -> None:
        self._set("norm_op", int(self._arg(AttentionNormalizationOp, value, "norm_op")))

    @property
    def decomposable(self) -> bool:
        return self._param("decomposable")

    @decomposable.setter
    def decomposable(self, value: bool) -> None:
        self._set("decomposable", self._arg("bool", value, "decomposable"))

    @property
    def causal_kind(self) -> CausalMaskKind:
        return CausalMaskKind(self._param("causal_kind"))

    @causal_kind.setter
    def causal_kind(self, value: CausalMaskKind) -> None:
        value = self._arg(CausalMaskKind, value, "causal_kind")
        if value != CausalMaskKind.NONE and self.mask is not None:
            return self._refuse("setCausalKind", "a causal kind cannot be used together with a mask")
        self._set("causal_kind", int(value))

    @property
    def causal(self) -> bool:
        return self.causal_kind != CausalMaskKind.NONE

    @causal.setter
    def causal(self, value: bool) -> None:
        value = self._arg("bool", value, "causal")
        if value and self.mask is not None:
            return self._refuse("setCausal", "causal inference cannot be used together with a mask")
        self._set("causal_kind", int(CausalMaskKind.UPPER_LEFT if value else CausalMaskKind.NONE))

    def _get_input(self, index: int):
        inputs = self._input_layer._inputs
        return inputs[index] if index < len(inputs) else None

    def _set_input(self, index: int, tensor) -> None:
        if tensor is not None:
            self._input_layer.set_input(index, tensor)
        elif index < len(self._input_layer._inputs):  # None clears an optional input (query/key-value lengths)
            self._input_layer._inputs[index] = None
            self._network._touch()

    @property
    def mask(self):
        return self._get_input(MASK)

    @mask.setter
    def mask(self, value: ITensor) -> None:
        if value is None:
            raise TypeError("IAttention.mask = None: incompatible function arguments: an ITensor is needed (TensorRT "
                            "cannot unset a mask)")
        if self.causal:
            return self._refuse("setMask", "a mask cannot be used together with a causal kind other than NONE")
        self._set_input(MASK, self._tensor(value, "mask"))

    @property
    def normalization_quantize_scale(self):
        return self._get_input(NORM_SCALE)

    @normalization_quantize_scale.setter
    def normalization_quantize_scale(self, value: ITensor) -> None:
        self._set_input(NORM_SCALE, self._tensor(value, "normalization_quantize_scale"))

    @property
    def normalization_quantize_to_type(self) -> DataType:
        """FLOAT until set (TensorRT logs that it is unset and answers FLOAT)."""
        to = self._param("normalization_quantize_to_type")
        return DataType.FLOAT if to is None else DataType(to)

    @normalization_quantize_to_type.setter
    def normalization_quantize_to_type(self, value: DataType) -> None:
        value = self._arg(DataType, value, "normalization_quantize_to_type")
        if value not in QUANTIZE_TYPES:
            return self._refuse("setNormalizationQuantizeToType",
                                f"the normalization quantization type must be FP8 or INT8, not {value.name}")
        self._set("normalization_quantize_to_type", int(value))

    @property
    def query_form(self) -> AttentionIOForm:
        return AttentionIOForm(self._param("query_form"))

    @query_form.setter
    def query_form(self, value: AttentionIOForm) -> None:
        self._set("query_form", int(self._arg(AttentionIOForm, value, "query_form")))

    @property
    def key_value_form(self) -> AttentionIOForm:
        return AttentionIOForm(self._param("key_value_form"))

    @key_value_form.setter
    def key_value_form(self, value: AttentionIOForm) -> None:
        self._set("key_value_form", int(self._arg(AttentionIOForm, value, "key_value_form")))

    @property
    def query_lengths(self):
        return self._get_input(QUERY_LENGTHS)

    @query_lengths.setter
    def query_lengths(self, value) -> None:
        self._set_input(QUERY_LENGTHS, self._tensor(value, "query_lengths"))

    @property
    def key_value_lengths(self):
        return self._get_input(KV_LENGTHS)

    @key_value_lengths.setter
    def key_value_lengths(self, value) -> None:
        self._set_input(KV_LENGTHS, self._tensor(value, "key_value_lengths"))

    @property
    def num_ranks(self) -> int:
        return self._param("num_ranks")

    @num_ranks.setter
    def num_ranks(self, value: int) -> None:
        value = self._arg("int", value, "num_ranks")
        if value < 1:
            raise NetworkError(f"attention '{self.name}': num_ranks = {value} is refused: it must be >= 1")
        self._set("num_ranks", int(value))

    @property
    def num_inputs(self) -> int:
        return len(self._input_layer._inputs)

    @property
    def num_outputs(self) -> int:
        return 1

    def get_input(self, index: int):
        return self._get_input(index) if 0 <= index <= NORM_SCALE else None

    def get_output(self, index: int):
        return self._output_layer.get_output(0) if index == 0 else None

    def set_input(self, index: int, tensor: ITensor) -> bool:
        """Query, key or value; the other inputs have their own setters (TensorRT refuses them here)."""
        if index not in (QUERY, KEY, VALUE):
            self._refuse("setInput", f"input {index} is set with its own setter (mask, "
                                     "normalization_quantize_scale), not set_input")
            return False
        self._set_input(index, self._network._own(tensor, f"IAttention.set_input({index})"))
        return True


def _add_attention(network, query, key, value, norm_op, kind: CausalMaskKind) -> IAttention:
    for what, t in (("query", query), ("key", key), ("value", value)):
        network._own(t, f"add_attention {what}")
        if len(t.shape) not in (3, 4):
            raise NetworkError(f"add_attention: the {what} has shape {tuple(t.shape)}; an attention takes 3-D "
                               "(packed) or 4-D (padded) tensors")
    name = network._auto_layer_name("Attention")
    params = {"norm_op": int(AttentionNormalizationOp(norm_op)), "causal_kind": int(kind), "decomposable": False,
              "normalization_quantize_to_type": None, "num_ranks": 1,
              "query_form": int(AttentionIOForm.PADDED_BHND), "key_value_form": int(AttentionIOForm.PADDED_BHND)}
    first = network._add(IAttentionInputLayer, [query, key, value], params, eager=False)
    last = network._add(IAttentionOutputLayer, [first.get_output(0)], {}, eager=False)
    return IAttention(network, name, first, last)


def add_attention(self, query: ITensor, key: ITensor, value: ITensor, norm_op: AttentionNormalizationOp,
                  causal: bool) -> IAttention:
    """Deprecated in TensorRT 11 for add_attention_v2; `causal` is CausalMaskKind.UPPER_LEFT."""
    return _add_attention(self, query, key, value, norm_op,
                          CausalMaskKind.UPPER_LEFT if causal else CausalMaskKind.NONE)


def add_attention_v2(self, query: ITensor, key: ITensor, value: ITensor, norm_op: AttentionNormalizationOp,
                     causal_kind: CausalMaskKind) -> IAttention:
    return _add_attention(self, query, key, value, norm_op, CausalMaskKind(causal_kind))


API = ("IAttention", "IAttentionBoundaryLayer")

register(IAttentionInputLayer, infer_input, run_input, adds=(add_attention, add_attention_v2))
register(IAttentionOutputLayer, infer_output, run_output)

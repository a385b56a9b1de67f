"""Attention builders: ``scaled_dot_product_attention`` (``F.scaled_dot_product_attention``) and
``multi_head_attention`` (``nn.MultiheadAttention``, weights from its state_dict).

Attention is composed from TensorRT layers every backend has (the reference, TensorRT-RTX, TensorRT 10
and 11): the query times the scale (``name/scale``, ``name/q_scaled``; scaling the query before the
product keeps fp16 scores in range, as PyTorch's math path does), ``q @ k^T`` as one matrix multiply
with k transposed by the layer (``name/scores``), the masks (below), a softmax over the last dim
(``name/softmax``) and the product with v (``name``). :func:`attention_path` is where a fused
attention layer (TensorRT's IAttention) would be chosen; today it picks the composed path everywhere.

Masks, as PyTorch applies them, before the softmax: a float mask is added; a boolean mask removes
the positions PyTorch removes (sdpa: where the mask is False; nn.MultiheadAttention: where it is
True). A mask given as an array (numpy or torch) becomes one additive constant of 0 and -inf in the
scores' type (TensorRT constants cannot be boolean); a mask given as a network tensor is applied
with a select layer (boolean) or an elementwise sum (float; cast to the scores' type if it differs).
``is_causal`` is PyTorch's top-left aligned lower-triangular mask, a constant. A row with every
position removed gives NaN, as in PyTorch.
"""

from __future__ import annotations

import math
from functools import partial
from dataclasses import dataclass, field

import numpy as np

from trtbuild.backend import trt_of

from .basic import linear
from .common import BuilderError, constant, out
from .tensor import lead_ones, matmul, shuffle, softmax, unsqueeze_axes
from .weight_names import WeightSource, copy_source, name_new_weights, slice_source

__all__ = ["AttentionWeights", "attention_path", "composed_attention", "default_scale",
           "scaled_dot_product_attention", "multi_head_attention", "planned_multi_head_attention"]


def _array(value) -> np.ndarray | None:
    """`value` as a numpy array when it is data (numpy, torch, a list), None when it is a network tensor."""
    if value is None:
        return None
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if isinstance(value, (np.ndarray, list, tuple, float, int)):
        return np.asarray(value)
    return None


def _shape(x) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def attention_path(network, query, key, value, attn_mask=None, is_causal: bool = False) -> str:
    """Which construction builds this attention: ``"composed"`` (matrix multiplies and a softmax), on
    every backend. The one place to pick a fused attention layer where a backend has one."""
    return "composed"


def _mask(network, scores, mask, name: str, drop_where_true: bool):
    """`scores` with `mask` applied (layers ``name`` and ``name/apply``; see the module docstring)."""
    trt = trt_of(network)
    rank = len(_shape(scores))
    arr = _array(mask)
    if arr is not None:
        if arr.ndim > rank:
            raise BuilderError(f"layer '{name}': a mask of shape {arr.shape} has more dims than the scores "
                               f"{_shape(scores)}")
        for m, s in zip(reversed(arr.shape), reversed(_shape(scores))):
            if m != 1 and s >= 0 and m != s:
                raise BuilderError(f"layer '{name}': a mask of shape {arr.shape} does not broadcast to the scores "
                                   f"{_shape(scores)}")
        if arr.dtype == np.bool_:
            arr = np.where(arr == drop_where_true, -np.inf, 0.0)
        bias = constant(network, np.asarray(arr, np.float64).reshape((1,) * (rank - arr.ndim) + arr.shape), scores,
                        name)
        return out(network.add_elementwise(scores, bias, trt.ElementWiseOperation.SUM), f"{name}/apply")
    mrank = len(_shape(mask))
    if mrank > rank:
        raise BuilderError(f"layer '{name}': the mask '{mask.name}' {_shape(mask)} has more dims than the scores "
                           f"{_shape(scores)}")
    if mask.dtype == trt.DataType.BOOL:
        if mrank < rank:
            mask = lead_ones(network, mask, rank - mrank, name)
        neg = constant(network, np.full((1,) * rank, -np.inf), scores, f"{name}/neg_inf")
        pair = (neg, scores) if drop_where_true else (scores, neg)
        return out(network.add_select(mask, *pair), f"{name}/apply")
    if mask.dtype != scores.dtype:
        mask = out(network.add_cast(mask, scores.dtype), f"{name}/cast")
    if mrank < rank:
        mask = lead_ones(network, mask, rank - mrank, name)
    return out(network.add_elementwise(scores, mask, trt.ElementWiseOperation.SUM), f"{name}/apply")


def composed_attention(network, q, k, v, name: str, masks, scale: float, scores_matmul=None, out_matmul=None):
    """The composed path (module doc). `scores_matmul` and `out_matmul`: the matrix multiplies ``q_scaled @ k^T``
    and ``softmax @ v``, called as ``f(a, b, name, transpose_b=...)`` (default: trtbuild.layers.tensor.matmul;
    trtbuild.layers.planned quantizes their inputs)."""
    trt = trt_of(network)
    factor = constant(network, np.full((1,) * len(_shape(q)), scale), q, f"{name}/scale")
    qs = out(network.add_elementwise(q, factor, trt.ElementWiseOperation.PROD), f"{name}/q_scaled")
    scores = (scores_matmul or partial(matmul, network))(qs, k, f"{name}/scores", transpose_b=True)
    for mask, label, drop in masks:
        scores = _mask(network, scores, mask, f"{name}/{label}", drop)
    return (out_matmul or partial(matmul, network))(softmax(network, scores, -1, f"{name}/softmax"), v, name)


#: attention_path's answer -> the function that builds it
_PATHS = {"composed": composed_attention}


def _causal(q, k, name: str) -> np.ndarray:
    L, S = _shape(q)[-2], _shape(k)[-2]
    if L < 0 or S < 0:
        raise BuilderError(f"layer '{name}': is_causal needs the query and key lengths known at build time, got "
                           f"{L} and {S}")
    return np.tril(np.ones((L, S), dtype=bool))


def default_scale(q, name: str) -> float:
    """F.scaled_dot_product_attention's default scale, ``1 / sqrt(E)`` of the query `q` of layer `name`."""
    e = _shape(q)[-1]
    if e < 0:
        raise BuilderError(f"layer '{name}': the query's last dim must be known for the default scale")
    return 1.0 / math.sqrt(e)


def _attention(network, q, k, v, name: str, masks, scale, is_causal: bool):
    for t in (q, k, v):
        if len(_shape(t)) < 2:
            raise BuilderError(f"layer '{name}': attention needs (..., L, E) tensors, got '{t.name}' {_shape(t)}")
    if scale is None:
        scale = default_scale(q, name)
    if is_causal:
        masks = [(_causal(q, k, name), "causal_mask", False)] + list(masks)
    path = attention_path(network, q, k, v, masks[0][0] if masks else None, is_causal)
    return _PATHS[path](network, q, k, v, name, masks, float(scale))


def scaled_dot_product_attention(network, query, key, value, name: str, attn_mask=None, is_causal: bool = False,
                                 scale: float | None = None):
    """``F.scaled_dot_product_attention(query, key, value, attn_mask, is_causal=..., scale=...)`` at
    inference (no dropout): query ``(..., L, E)``, key ``(..., S, E)``, value ``(..., S, Ev)`` ->
    ``(..., L, Ev)``; batch dims broadcast. ``attn_mask``: boolean (True takes part) or float (added),
    broadcastable to ``(..., L, S)``, an array or a network tensor (layers ``name/attn_mask...``).
    ``scale`` defaults to ``1 / sqrt(E)``."""
    if is_causal and attn_mask is not None:
        raise BuilderError(f"layer '{name}': give attn_mask or is_causal, not both (as in PyTorch)")
    masks = [] if attn_mask is None else [(attn_mask, "attn_mask", False)]
    return _attention(network, query, key, value, name, masks, scale, is_causal)


@dataclass(frozen=True)
class AttentionWeights:
    """The parameters of an ``nn.MultiheadAttention`` in PyTorch's layout: projections ``[E, in]`` for the
    query, key and value (``in`` = E, kdim, vdim) and the output ``[E, E]``; biases ``[E]`` or None.

    ``sources``: where each (``"q_weight"``, ..., ``"out_bias"``) comes from in the state_dict, so that the
    builders name those weights after their keys and an engine refits them (trtbuild.layers.weight_names): the
    rows of ``in_proj_weight`` / ``in_proj_bias`` (``attn.in_proj_weight[0:E]``...), ``q_proj_weight``... and
    ``out_proj.*`` as copies. from_state_dict fills it; weights made by hand have none and stay baked."""

    q_weight: np.ndarray
    k_weight: np.ndarray
    v_weight: np.ndarray
    out_weight: np.ndarray
    q_bias: np.ndarray | None = None
    k_bias: np.ndarray | None = None
    v_bias: np.ndarray | None = None
    out_bias: np.ndarray | None = None
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def embed_dim(self) -> int:
        return int(np.shape(self.out_weight)[0])

    @classmethod
    def from_state_dict(cls, state, prefix: str = "") -> "AttentionWeights":
        """From a state_dict (or a trtbuild WeightMap) of ``nn.MultiheadAttention`` under `prefix` (``"attn."``):
        ``in_proj_weight`` (or ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight`` where kdim or vdim
        differs), ``in_proj_bias``, ``out_proj.weight``, ``out_proj.bias``. Flat (.wts) storage is reshaped.
        add_bias_kv (``bias_k``) is refused: it is not built."""
        key_of = getattr(state, "full_key", str)  # a WeightMap view's names are under its prefix

        def get(key):
            full = prefix + key
            return np.asarray(_array(state.get(full)), np.float64) if full in state else None

        if get("bias_k") is not None or get("bias_v") is not None:
            raise BuilderError(f"attention '{prefix}': add_bias_kv (bias_k, bias_v) is not supported")
        out_w = get("out_proj.weight")
        if out_w is None:
            raise BuilderError(f"attention '{prefix}': the state has no {prefix}out_proj.weight")
        e = int(round(math.sqrt(out_w.size)))
        out_w = out_w.reshape(e, e)
        sources = {"out_weight": copy_source(key_of(prefix + "out_proj.weight"), (e, e))}
        packed = get("in_proj_weight")
        if packed is not None:
            packed = packed.reshape(3 * e, -1)
            q, k, v = np.split(packed, 3)
            sources.update(_rows(key_of(prefix + "in_proj_weight"), e, packed.shape, "weight"))
        else:
            q, k, v = (get(f"{p}_proj_weight") for p in "qkv")
            if q is None or k is None or v is None:
                raise BuilderError(f"attention '{prefix}': the state has neither {prefix}in_proj_weight nor "
                                   "q/k/v_proj_weight")
            q, k, v = (w.reshape(e, -1) for w in (q, k, v))
            for p, w in zip("qkv", (q, k, v)):
                key = key_of(f"{prefix}{p}_proj_weight")
                sources[f"{p}_weight"] = copy_source(key, w.shape)
        bias = get("in_proj_bias")
        qb, kb, vb = np.split(bias.reshape(-1), 3) if bias is not None else (None, None, None)
        if bias is not None:
            sources.update(_rows(key_of(prefix + "in_proj_bias"), e, (3 * e,), "bias"))
        ob = get("out_proj.bias")
        if ob is not None:
            key = key_of(prefix + "out_proj.bias")
            sources["out_bias"] = copy_source(key, (e,))
        return cls(q, k, v, out_w, qb, kb, vb, None if ob is None else ob.reshape(-1), sources)


def _rows(key: str, e: int, shape, part: str) -> dict[str, WeightSource]:
    """The sources of the query, key and value rows of a packed ``in_proj_weight`` / ``in_proj_bias``."""
    return {f"{p}_{part}": slice_source(key, i * e, (i + 1) * e, shape) for i, p in enumerate("qkv")}


def _name_projection(network, first: int, weights: AttentionWeights, which: str) -> None:
    """Name the weight and bias constants of projection `which` (``q``, ``k``, ``v``, ``out``), added since layer
    `first`, after their keys (:attr:`AttentionWeights.sources`)."""
    found = {end: weights.sources.get(f"{which}_{part}") for end, part in (("/weight", "weight"), ("/bias", "bias"))}
    found = {end: s for end, s in found.items() if s is not None}
    if found:
        name_new_weights(network, first, "CONSTANT", found)


def _plain(network, x, w, b, name: str, which: str):
    return linear(network, x, w, b, name, flatten=False)


def _mha(network, query, key, value, weights: AttentionWeights, num_heads: int, name: str, batch_first: bool,
         key_padding_mask, attn_mask, project):
    e = weights.embed_dim
    if num_heads < 1 or e % num_heads:
        raise BuilderError(f"layer '{name}': embed_dim {e} must be divisible by num_heads {num_heads}")
    for t in (query, key, value):
        if len(_shape(t)) != 3:
            layout = "(N, L, E)" if batch_first else "(L, N, E)"
            raise BuilderError(f"layer '{name}': query, key and value must be 3-D {layout}, got '{t.name}' "
                               f"{_shape(t)}")
    d = e // num_heads
    # (L, N, E) or (N, L, E) -> (N, H, L, d): one shuffle per tensor, reshape then transpose
    heads = (0, 2, 1, 3) if batch_first else (1, 2, 0, 3)
    split = []
    for t, w, b, which in ((query, weights.q_weight, weights.q_bias, "q"), (key, weights.k_weight, weights.k_bias, "k"),
                           (value, weights.v_weight, weights.v_bias, "v")):
        first = network.num_layers
        p = project(network, t, w, b, f"{name}/{which}_proj", which)
        _name_projection(network, first, weights, which)
        split.append(shuffle(network, p, f"{name}/{which}_heads", dims=(0, 0, num_heads, d), then=heads))
    q, k, v = split
    masks = []
    if attn_mask is not None:
        masks.append((_mha_attn_mask(network, attn_mask, num_heads, f"{name}/attn_mask_view"), "attn_mask", True))
    if key_padding_mask is not None:
        masks.append((_key_padding(network, key_padding_mask, f"{name}/key_padding_view"), "key_padding_mask", True))
    y = _attention(network, q, k, v, f"{name}/attention", masks, None, False)
    merged = shuffle(network, y, f"{name}/merge", perm=(0, 2, 1, 3) if batch_first else (2, 0, 1, 3), dims=(0, 0, e))
    first = network.num_layers
    y = project(network, merged, weights.out_weight, weights.out_bias, name, "out")
    _name_projection(network, first, weights, "out")
    return y


def _mha_attn_mask(network, mask, heads: int, name: str):
    """nn.MultiheadAttention's attn_mask, (L, S) or (N * H, L, S), viewed to broadcast to (N, H, L, S)."""
    arr = _array(mask)
    shape = arr.shape if arr is not None else _shape(mask)
    if len(shape) == 2:
        return mask if arr is None else arr
    if len(shape) != 3:
        raise BuilderError(f"layer '{name}': attn_mask must be (L, S) or (N * num_heads, L, S), got {shape}")
    if arr is not None:
        return arr.reshape(-1, heads, *shape[1:])
    if any(s < 0 for s in shape[1:]):
        raise BuilderError(f"layer '{name}': a 3-D attn_mask tensor needs L and S known, got {shape}")
    return shuffle(network, mask, name, dims=(-1, heads) + shape[1:], placeholder=False)


def _key_padding(network, mask, name: str):
    """key_padding_mask (N, S) viewed as (N, 1, 1, S)."""
    arr = _array(mask)
    shape = arr.shape if arr is not None else _shape(mask)
    if len(shape) != 2:
        raise BuilderError(f"layer '{name}': key_padding_mask must be (N, S), got {shape}")
    return arr.reshape(shape[0], 1, 1, shape[1]) if arr is not None else unsqueeze_axes(network, mask, (1, 2), name)


def multi_head_attention(network, query, key, value, weights: AttentionWeights, num_heads: int, name: str, *,
                         batch_first: bool = False, key_padding_mask=None, attn_mask=None):
    """``nn.MultiheadAttention(E, num_heads, batch_first=...)(query, key, value, key_padding_mask, need_weights=False,
    attn_mask=attn_mask)[0]``: inputs ``(L, N, E)`` (``(N, L, E)`` with batch_first), output likewise.

    Layers: the projections ``name/q_proj``, ``name/k_proj``, ``name/v_proj`` (linear), the head split
    ``name/{q,k,v}_heads`` (one shuffle each), the attention ``name/attention`` (see the module doc),
    the head merge ``name/merge`` and the output projection ``name``. Masks as nn.MultiheadAttention takes
    them: boolean True (or float, added) for key_padding_mask ``(N, S)`` and attn_mask ``(L, S)`` or
    ``(N * num_heads, L, S)``; arrays or network tensors. The projections' weights and biases are named after the
    state_dict keys :meth:`AttentionWeights.from_state_dict` read them from, so that a refittable engine refits
    them from another state_dict."""
    return _mha(network, query, key, value, weights, num_heads, name, batch_first, key_padding_mask, attn_mask,
                _plain)


def planned_multi_head_attention(network, query, key, value, weights: AttentionWeights, num_heads: int, name: str,
                                 quant=None, module: str | None = None, *, batch_first: bool = False,
                                 key_padding_mask=None, attn_mask=None):
    """:func:`multi_head_attention` with the output projection built as `quant` says for the Linear
    ``<module>.out_proj`` (trtbuild.layers.planned.planned_linear: quantized with its calibrated input,
    kept, or plain); the q/k/v projections stay in the network's type, as ``in_proj_weight`` is a
    parameter of the attention module, not a Linear, and has no calibration entry.

    PyTorch's MultiheadAttention.forward calls ``F.linear`` with ``out_proj.weight`` rather than calling
    ``out_proj``, so trtbuild.quant's forward hooks never see that input: a plan calibrated on
    nn.MultiheadAttention builds out_proj in fp32 ("its input was never seen during calibration").
    A transformer written with nn.Linear projections (timm's ``qkv`` / ``proj``) calibrates them all:
    build it with planned_linear and :func:`scaled_dot_product_attention`."""
    from .planned import planned_linear

    base = module or name

    def project(net, x, w, b, layer_name, which):
        if which != "out" or quant is None:
            return _plain(net, x, w, b, layer_name, which)
        return planned_linear(net, x, w, b, layer_name, quant, f"{base}.out_proj", flatten=False)

    return _mha(network, query, key, value, weights, num_heads, name, batch_first, key_padding_mask, attn_mask,
                project)

"""trtbuild.layers.attention against F.scaled_dot_product_attention and nn.MultiheadAttention (float64), in
fp32, fp16 and bf16: is_causal, boolean and float masks as arrays and as network tensors, scale, both
batch_first layouts, key_padding_mask, 2-D and 3-D attn_mask, kdim/vdim; each built by TensorRT-RTX with the
same layers; layer names and refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trtbuild.layers.attention import (AttentionWeights, attention_path, multi_head_attention,
                                       planned_multi_head_attention, scaled_dot_product_attention)

from trtbuild.layers.common import BuilderError

from helpers.builder_pair import assert_close, build_pair, refused, rounded, seeded

DTYPES = ["fp32", "fp16", "bf16"]
N, H, L, S, E = 2, 3, 4, 5, 8


def _qkv(dtype, lq=L, s=S):
    return (rounded(seeded(N, H, lq, E, seed=1), dtype), rounded(seeded(N, H, s, E, seed=2), dtype),
            rounded(seeded(N, H, s, 6, seed=3), dtype))


def _sdpa_pair(dtype, extra_inputs=None, lq=L, s=S, **kw):
    inputs = {"q": ((N, H, lq, E), dtype), "k": ((N, H, s, E), dtype), "v": ((N, H, s, 6), dtype)}
    inputs.update(extra_inputs or {})

    def build(n, q, k, v, **masks):
        args = dict(kw)
        args.update(masks)
        return scaled_dot_product_attention(n, q, k, v, "attn", **args)

    return build_pair(inputs, build)


BOOL_MASK = torch.rand(L, S, generator=torch.Generator().manual_seed(5)) > 0.4
BOOL_MASK[:, 0] = True  # no row fully masked (PyTorch gives NaN there)
FLOAT_MASK = seeded(N, 1, L, S, seed=6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["plain", "causal", "causal long key", "scale", "bool array", "float array"])
def test_sdpa_matches_torch(case, dtype):
    s = 7 if case == "causal long key" else S
    kw = {"plain": {}, "causal": dict(is_causal=True), "causal long key": dict(is_causal=True),
          "scale": dict(scale=0.7), "bool array": dict(attn_mask=BOOL_MASK.numpy()),
          "float array": dict(attn_mask=FLOAT_MASK.numpy())}[case]
    pair = _sdpa_pair(dtype, s=s, **kw)
    q, k, v = _qkv(dtype, s=s)
    want = F.scaled_dot_product_attention(q, k, v, **{k_: torch.as_tensor(v_) if k_ == "attn_mask" else v_
                                                      for k_, v_ in kw.items()})
    (got,) = pair.run(q=q, k=k, v=v)
    assert_close(got, want, dtype)
    names = pair.names
    assert names[:3] == ["attn/scale", "attn/q_scaled", "attn/scores"] and names[-2:] == ["attn/softmax", "attn"]
    if "mask" in str(kw) or "causal" in case:
        label = "attn/causal_mask" if "causal" in case else "attn/attn_mask"
        assert names[3:5] == [label, f"{label}/apply"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_mask_tensor(kind, dtype):
    mdt = "bool" if kind == "bool" else "fp32"  # a float mask of another type is cast to the scores' type
    mask = BOOL_MASK if kind == "bool" else FLOAT_MASK.float()
    shape = tuple(mask.shape)
    pair = _sdpa_pair(dtype, {"attn_mask": (shape, mdt)})
    pair_names = pair.names
    q, k, v = _qkv(dtype)
    (got,) = pair.run(q=q, k=k, v=v, attn_mask=mask)
    want_mask = mask if kind == "bool" else rounded(mask.double(), dtype)
    assert_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=want_mask), dtype)
    if kind == "bool":  # (L, S) bool: unsqueezed to rank 4, -inf where False
        assert pair_names[3:7] == ["attn/attn_mask/axes", "attn/attn_mask", "attn/attn_mask/neg_inf",
                                   "attn/attn_mask/apply"]


def _mha(kdim=None, vdim=None, batch_first=False, bias=True):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(E, 2, kdim=kdim, vdim=vdim, batch_first=batch_first, bias=bias).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return m


MHA_CASES = {
    "self batch_first": dict(batch_first=True),
    "seq first": dict(),
    "no bias": dict(bias=False, batch_first=True),
    "kdim vdim": dict(kdim=5, vdim=7),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", MHA_CASES)
def test_mha_matches_torch(case, dtype):
    cfg = MHA_CASES[case]
    m = _mha(**cfg)
    bf = cfg.get("batch_first", False)
    kd, vd = cfg.get("kdim") or E, cfg.get("vdim") or E

    def lay(n, length, dim):
        return (n, length, dim) if bf else (length, n, dim)

    shapes = {"q": lay(N, L, E), "k": lay(N, S, kd), "v": lay(N, S, vd)}
    w = AttentionWeights.from_state_dict(m.state_dict())
    pair = build_pair({k: (s, dtype) for k, s in shapes.items()},
                      lambda n, q, k, v: multi_head_attention(n, q, k, v, w, 2, "mha", batch_first=bf))
    q, k, v = (rounded(seeded(*s, seed=i), dtype) for i, s in enumerate(shapes.values()))
    want = m(q, k, v, need_weights=False)[0]
    (got,) = pair.run(q=q, k=k, v=v)
    assert_close(got, want, dtype, scale=2)
    names = pair.names
    for part in ("mha/q_proj", "mha/k_proj", "mha/v_proj", "mha/q_heads", "mha/k_heads", "mha/v_heads",
                 "mha/attention/softmax", "mha/attention", "mha/merge"):
        assert part in names
    assert names[-1] == "mha" and pair.outputs[0].name == "mha"


@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mha_masks(kind, as_tensor):
    """key_padding_mask (N, S) and a 3-D attn_mask (N * heads, L, S), True = removed, as PyTorch takes them."""
    m = _mha(batch_first=True)
    w = AttentionWeights.from_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(9)
    if kind == "bool":
        kpm = torch.zeros(N, S, dtype=torch.bool)
        kpm[0, 3:] = True
        am = torch.rand(N * 2, L, S, generator=g) > 0.7
        am[..., 0] = False
    else:
        kpm, am = seeded(N, S, seed=7), seeded(N * 2, L, S, seed=8)
    inputs = {"q": ((N, L, E), "fp32"), "kv": ((N, S, E), "fp32")}
    if as_tensor:
        mdt = "bool" if kind == "bool" else "fp32"
        inputs.update(kpm=((N, S), mdt), am=((N * 2, L, S), mdt))

        def build(n, q, kv, kpm, am):
            return multi_head_attention(n, q, kv, kv, w, 2, "mha", batch_first=True, key_padding_mask=kpm,
                                        attn_mask=am)
        feeds = dict(kpm=kpm if kind == "bool" else kpm.float(), am=am if kind == "bool" else am.float())
    else:
        def build(n, q, kv):
            return multi_head_attention(n, q, kv, kv, w, 2, "mha", batch_first=True, key_padding_mask=kpm.numpy(),
                                        attn_mask=am.numpy())
        feeds = {}
    pair = build_pair(inputs, build)
    q, kv = seeded(N, L, E, seed=1), seeded(N, S, E, seed=2)
    want = m(q, kv, kv, key_padding_mask=kpm if kind == "bool" else kpm.double(), need_weights=False,
             attn_mask=am if kind == "bool" else am.double())[0]
    assert_close(pair.run(q=q, kv=kv, **feeds)[0], want, "fp32")


def test_mha_2d_attn_mask_seq_first():
    m = _mha()
    w = AttentionWeights.from_state_dict(m.state_dict())
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    pair = build_pair({"x": ((L, N, E), "fp32")},
                      lambda n, x: multi_head_attention(n, x, x, x, w, 2, "mha", attn_mask=causal.numpy()))
    x = seeded(L, N, E)
    assert_close(pair.run(x=x)[0], m(x, x, x, attn_mask=causal, need_weights=False)[0], "fp32")


class _Plan:
    def layer(self, module):
        from trtbuild.quant.plan import LayerPlan

        assert module == "blk.attn.out_proj"
        return LayerPlan(module, "int8", True, 4.0, (1.0,) * E)


def test_planned_mha_quantizes_out_proj():
    m = _mha(batch_first=True)
    w = AttentionWeights.from_state_dict(m.state_dict())
    pair = build_pair({"x": ((N, L, E), "fp32")}, lambda n, x: planned_multi_head_attention(
        n, x, x, x, w, 2, "attn", _Plan(), "blk.attn", batch_first=True))
    names = pair.names
    assert "attn/input_q/quantize" in names and "attn/weight_q/int8" in names and names[-1] == "attn"
    assert not any(n.startswith("attn/q_proj/input_q") for n in names)  # in_proj is not a Linear: not calibrated
    x = seeded(N, L, E)
    # the reference: PyTorch's attention up to the output projection (nn.MultiheadAttention calls F.linear with
    # out_proj's weight, never out_proj itself, so no hook sees that input: computed here from its definition),
    # then int8 fake quantization of that input (per tensor, amax 4) and of the weight (per row)
    qkv = [F.linear(x, wt, b) for wt, b in zip(m.in_proj_weight.chunk(3), m.in_proj_bias.chunk(3))]
    heads = [t.reshape(N, L, 2, E // 2).transpose(1, 2) for t in qkv]
    ctx = {"in": F.scaled_dot_product_attention(*heads).transpose(1, 2).reshape(N, L, E)}
    z = torch.clamp(torch.round(ctx["in"].float() / (4 / 127)), -128, 127) * (4 / 127)
    wq = m.out_proj.weight.float()
    sw = wq.abs().amax(1, keepdim=True) / 127
    want = F.linear(z.double(), (torch.clamp(torch.round(wq / sw), -128, 127) * sw).double(), m.out_proj.bias)
    assert_close(pair.run(x=x)[0].reshape(want.shape), want, "fp32", scale=10)


def test_from_state_dict_flat_and_refusals():
    m = _mha()
    sd = {k: v.reshape(-1) for k, v in m.state_dict().items()}  # as .wts files store them
    w = AttentionWeights.from_state_dict(sd)
    assert w.q_weight.shape == (E, E) and w.out_weight.shape == (E, E) and w.embed_dim == E
    with pytest.raises(BuilderError, match="add_bias_kv"):
        AttentionWeights.from_state_dict(nn.MultiheadAttention(E, 2, add_bias_kv=True).state_dict())
    assert "embed_dim 8 must be divisible by num_heads 3" in refused(
        {"x": ((L, N, E), "fp32")}, lambda n, x: multi_head_attention(n, x, x, x, w, 3, "mha"))
    assert "give attn_mask or is_causal, not both" in refused(
        {"q": ((N, H, L, E), "fp32")},
        lambda n, q: scaled_dot_product_attention(n, q, q, q, "a", attn_mask=BOOL_MASK.numpy(), is_causal=True))
    assert "is_causal needs the query and key lengths known" in refused(
        {"q": ((N, H, -1, E), "fp32")}, lambda n, q: scaled_dot_product_attention(n, q, q, q, "a", is_causal=True))
    assert "does not broadcast to the scores" in refused(
        {"q": ((N, H, L, E), "fp32")},
        lambda n, q: scaled_dot_product_attention(n, q, q, q, "a", attn_mask=BOOL_MASK.numpy()))


def test_attention_path_is_composed_everywhere(rtx):
    import trtbuild.reference as ref

    for module in (ref, rtx):
        assert attention_path(module, None, None, None) == "composed"


def test_mha_dynamic_batch_and_length():
    """Dynamic N and L (seq-first): the head split and merge copy them with reshape placeholders."""
    m = _mha()
    w = AttentionWeights.from_state_dict(m.state_dict())
    pair = build_pair({"x": ((-1, -1, E), "fp32")}, lambda n, x: multi_head_attention(n, x, x, x, w, 2, "mha"),
                      profile={"x": ((1, 1, E), (3, 2, E), (6, 3, E))})
    for shape in ((5, 3, E), (2, 1, E)):
        x = seeded(*shape)
        assert_close(pair.run(x=x)[0], m(x, x, x, need_weights=False)[0], "fp32")

"""trtbuild.reference: IAttention (add_attention / add_attention_v2) against
torch.nn.functional.scaled_dot_product_attention in float64 (scale 1: TensorRT's BMM1 is Q K^T unscaled); each
construction also built by TensorRT-RTX (the `refnet` twin), which needs `decomposable` on its sm86 target."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

import trtbuild.reference as trt
from helpers.refnet import concrete
from helpers.refnet import RefNet, close

SOFTMAX, NONE = trt.AttentionNormalizationOp.SOFTMAX, trt.AttentionNormalizationOp.NONE
Kind = trt.CausalMaskKind
gen = torch.Generator().manual_seed(23)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def qkv(refnet, qs, kvs, dtype=trt.float32):
    return (refnet.input("q", qs, dtype), refnet.input("k", kvs, dtype), refnet.input("v", kvs, dtype))


def attention(refnet, qs, kvs, *, kind=Kind.NONE, norm=SOFTMAX, v1=None, dtype=trt.float32):
    q, k, v = qkv(refnet, qs, kvs, dtype)
    if v1 is not None:
        a = refnet.network.add_attention(q, k, v, norm, v1)
    else:
        a = refnet.network.add_attention_v2(q, k, v, norm, kind)
    a.decomposable = True
    return a


def feeds(qs, kvs):
    return {"q": randn(*qs), "k": randn(*kvs), "v": randn(*kvs)}


def expected(f, **kw):
    return sdpa(f["q"].double(), f["k"].double(), f["v"].double(), scale=1.0, enable_gqa=True, **kw)


def causal_keep(sq, skv, kind):
    i, j = torch.arange(sq).reshape(-1, 1), torch.arange(skv).reshape(1, -1)
    return j <= i + (skv - sq if kind == Kind.LOWER_RIGHT else 0)


@pytest.mark.parametrize("qs,kvs", [((2, 4, 5, 8), (2, 4, 7, 8)), ((1, 4, 6, 16), (1, 2, 6, 16)),
                                    ((2, 6, 3, 4), (2, 1, 9, 4))])
def test_attention_matches_sdpa(refnet, qs, kvs):
    """Plain, and grouped-query attention (fewer key/value heads)."""
    a = attention(refnet, qs, kvs)
    f = feeds(qs, kvs)
    y = refnet.run(f, y=a.get_output(0))["y"]
    close(y, expected(f), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", [Kind.UPPER_LEFT, Kind.LOWER_RIGHT])
@pytest.mark.parametrize("sq,skv", [(5, 5), (3, 7)])
def test_causal_kinds(refnet, kind, sq, skv):
    a = attention(refnet, (1, 2, sq, 8), (1, 2, skv, 8), kind=kind)
    assert a.causal and a.causal_kind == kind
    f = feeds((1, 2, sq, 8), (1, 2, skv, 8))
    y = refnet.run(f, y=a.get_output(0))["y"]
    close(y, expected(f, attn_mask=causal_keep(sq, skv, kind)), atol=1e-5, rtol=1e-5)
    if kind == Kind.UPPER_LEFT:  # torch's is_causal is the top-left triangle
        close(y, sdpa(f["q"].double(), f["k"].double(), f["v"].double(), scale=1.0, is_causal=True), atol=1e-5)


def test_the_deprecated_causal_flag_is_upper_left(refnet):
    a = attention(refnet, (1, 2, 3, 8), (1, 2, 6, 8), v1=True)
    assert a.causal_kind == Kind.UPPER_LEFT
    f = feeds((1, 2, 3, 8), (1, 2, 6, 8))
    close(refnet.run(f, y=a.get_output(0))["y"], expected(f, attn_mask=causal_keep(3, 6, Kind.UPPER_LEFT)),
          atol=1e-5)


def test_causal_and_causal_kind_are_one_setting(refnet):
    a = attention(refnet, (1, 2, 3, 8), (1, 2, 3, 8), v1=False)
    assert not a.causal and a.causal_kind == Kind.NONE
    a.causal_kind = Kind.LOWER_RIGHT
    assert a.causal
    a.causal = False
    assert a.causal_kind == Kind.NONE
    a.causal = True
    assert a.causal_kind == Kind.UPPER_LEFT


@pytest.mark.parametrize("mshape", [(2, 4, 5, 7), (1, 4, 5, 7), (2, 1, 5, 7), (1, 1, 1, 7), (1, 1, 5, 1)])
def test_bool_mask_keeps_where_true(refnet, mshape):
    a = attention(refnet, (2, 4, 5, 8), (2, 4, 7, 8))
    a.mask = refnet.input("m", mshape, trt.bool)
    f = feeds((2, 4, 5, 8), (2, 4, 7, 8))
    keep = torch.rand(*mshape, generator=gen) < 0.7
    keep[..., 0] = True  # every query row keeps a key
    y = refnet.run({**f, "m": keep}, y=a.get_output(0))["y"]
    close(y, expected(f, attn_mask=keep), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [trt.float32, trt.float16])
def test_float_mask_is_added(refnet, dtype):
    a = attention(refnet, (1, 2, 4, 8), (1, 2, 6, 8), dtype=dtype)
    a.mask = refnet.input("m", (1, 2, 4, 6), dtype)
    torch_type = torch.float32 if dtype == trt.float32 else torch.float16
    f = {k: v.to(torch_type) for k, v in feeds((1, 2, 4, 8), (1, 2, 6, 8)).items()}
    bias = randn(1, 2, 4, 6).to(torch_type)
    y = refnet.run({**f, "m": bias}, y=a.get_output(0))["y"]
    assert y.dtype == torch_type
    tol = 1e-5 if dtype == trt.float32 else 3e-3
    close(y, expected(f, attn_mask=bias.double()), atol=tol, rtol=tol)


def test_norm_none_leaves_scores_unnormalized(refnet):
    a = attention(refnet, (1, 2, 3, 4), (1, 2, 5, 4), norm=NONE, kind=Kind.LOWER_RIGHT)
    assert a.norm_op == NONE
    f = feeds((1, 2, 3, 4), (1, 2, 5, 4))
    scores = f["q"].double() @ f["k"].double().transpose(-1, -2)
    scores = scores * causal_keep(3, 5, Kind.LOWER_RIGHT)  # an excluded key weighs 0
    close(refnet.run(f, y=a.get_output(0))["y"], scores @ f["v"].double(), atol=1e-5, rtol=1e-5)


def test_key_value_lengths_keep_the_first_keys_of_each_batch(refnet):
    a = attention(refnet, (3, 2, 4, 8), (3, 2, 6, 8))
    a.key_value_lengths = refnet.input("lengths", (3,), trt.int32)
    f = feeds((3, 2, 4, 8), (3, 2, 6, 8))
    lengths = torch.tensor([6, 2, 4], dtype=torch.int32)
    keep = (torch.arange(6).reshape(1, 1, 1, 6) < lengths.reshape(3, 1, 1, 1).long())
    y = refnet.run({**f, "lengths": lengths}, y=a.get_output(0))["y"]
    close(y, expected(f, attn_mask=keep), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("to", [trt.DataType.INT8, trt.DataType.FP8])
def test_normalization_quantize(refnet, to):
    """The softmax output is quantized with the scale (INT8: round half to even, clamp; FP8: E4M3) and
    dequantized before BMM2."""
    a = attention(refnet, (1, 1, 2, 4), (1, 1, 3, 4))
    scale = np.array(1 / 64, np.float32)
    a.normalization_quantize_to_type = to
    a.normalization_quantize_scale = refnet.network.add_constant((), trt.Weights(scale)).get_output(0)
    assert a.normalization_quantize_to_type == to
    f = feeds((1, 1, 2, 4), (1, 1, 3, 4))
    probs = torch.softmax(f["q"].double() @ f["k"].double().transpose(-1, -2), -1)
    if to == trt.DataType.INT8:
        probs = torch.clamp(torch.round(probs * 64), -128, 127) / 64
    else:
        probs = (probs * 64).float().to(torch.float8_e4m3fn).double() / 64
    close(refnet.run(f, y=a.get_output(0))["y"], probs @ f["v"].double(), atol=1e-5, rtol=1e-5)


def test_boundary_layers_and_attributes(refnet):
    a = attention(refnet, (1, 2, 3, 8), (1, 2, 3, 8))
    net = refnet.network.ref
    first, last = net.get_layer(0), net.get_layer(1)
    assert (first.type, last.type) == (trt.LayerType.ATTENTION_INPUT, trt.LayerType.ATTENTION_OUTPUT)
    assert type(first) is trt.ILayer  # get_layer returns ILayer views, as TensorRT's bindings do
    assert isinstance(concrete(first), trt.IAttentionInputLayer)
    assert isinstance(concrete(last), trt.IAttentionOutputLayer)
    assert first.attention is last.attention is a.ref
    assert a.get_output(0) is not None and a.num_outputs == 1 and a.num_inputs == 3
    assert a.decomposable and a.num_ranks == 1 and a.mask is None
    assert a.query_form == a.key_value_form == trt.AttentionIOForm.PADDED_BHND
    assert a.normalization_quantize_to_type == trt.DataType.FLOAT  # unset
    a.norm_op = NONE
    assert a.norm_op == NONE
    assert a.set_input(2, refnet.input("v2", (1, 2, 3, 8)))
    assert a.get_input(2).name == "v2"


def test_mask_and_causal_exclude_each_other():
    """TensorRT logs an API usage error and ignores the later call (checked on TensorRT-RTX by the twin tests
    of test_layers_attention_twin below)."""
    r = RefNet()
    q, k, v = qkv(r, (1, 2, 3, 8), (1, 2, 3, 8))
    a = r.network.add_attention(q, k, v, SOFTMAX, True)
    a.mask = r.input("m", (1, 1, 3, 3), trt.bool)
    assert a.mask is None and "mask cannot be used together" in r.logger.errors[-1]
    a.causal = False
    a.mask = r.network.get_input(3)
    a.causal = True
    assert not a.causal and "cannot be used together with a mask" in r.logger.errors[-1]
    a.causal_kind = Kind.LOWER_RIGHT
    assert a.causal_kind == Kind.NONE


def test_misused_setters_are_refused_on_both(refnet):
    a = attention(refnet, (1, 2, 3, 8), (1, 2, 3, 8), kind=Kind.UPPER_LEFT)
    a.mask = refnet.input("m", (1, 1, 3, 3), trt.bool)
    assert a.mask is None
    a.normalization_quantize_to_type = trt.DataType.HALF
    assert a.set_input(3, refnet.network.get_input(3)) is False


@pytest.mark.parametrize("qs,kvs,mask,dtype,match", [
    ((2, 4, 5, 8), (2, 3, 7, 8), None, trt.float16, "not a multiple"),
    ((2, 4, 5, 8), (2, 8, 7, 8), None, trt.float16, "not a multiple"),
    ((2, 4, 5, 16), (2, 4, 7, 8), None, trt.float16, "head size"),
    ((2, 4, 5, 8), (1, 4, 7, 8), None, trt.float16, "batch"),
    ((4, 5, 8), (4, 7, 8), None, trt.float16, "needs 4-D"),
    ((2, 4, 5, 8), (2, 4, 7, 8), None, trt.int32, "FLOAT, HALF or BF16"),
    ((2, 4, 5, 8), (2, 4, 7, 8), ((5, 7), trt.bool), trt.float16, "must be 4-D"),
    ((2, 4, 5, 8), (2, 4, 7, 8), ((3, 1, 5, 7), trt.bool), trt.float16, "broadcast"),
    ((2, 4, 5, 8), (2, 4, 7, 8), ((1, 1, 6, 7), trt.bool), trt.float16, "broadcast"),
    ((2, 4, 5, 8), (2, 4, 7, 8), ((1, 1, 5, 7), trt.int32), trt.float16, "BOOL or the query's type"),
    ((2, 4, 5, 8), (2, 4, 7, 8), ((1, 1, 5, 7), trt.float32), trt.float16, "BOOL or the query's type"),
])
def test_refusals(refnet, qs, kvs, mask, dtype, match):
    q, k, v = qkv(refnet, qs, kvs, dtype)
    a = refnet.network.add_attention(q, k, v, SOFTMAX, False)
    a.decomposable = True
    if mask is not None:
        a.mask = refnet.input("m", *mask)
    with pytest.raises(trt.NetworkError, match=match) as info:
        a.get_output(0).shape  # noqa: B018 - the shape query is what raises
    assert str(info.value).startswith("layer '(Unnamed Layer* 1) [AttentionInput]': ")


def test_key_and_value_must_match(refnet):
    q = refnet.input("q", (2, 4, 5, 8), trt.float16)
    k, v = refnet.input("k", (2, 4, 7, 8), trt.float16), refnet.input("v", (2, 4, 7, 8), trt.float32)
    a = refnet.network.add_attention(q, k, v, SOFTMAX, False)
    a.decomposable = True
    with pytest.raises(trt.NetworkError, match="must be the same"):
        a.get_output(0).shape  # noqa: B018


def test_rank_five_is_refused_when_added(refnet):
    q = refnet.input("q", (1, 2, 4, 5, 8))
    with pytest.raises(trt.NetworkError, match="3-D .* or 4-D"):
        refnet.network.add_attention(q, q, q, SOFTMAX, False)


def test_packed_layout_is_refused(refnet):
    q, k = refnet.input("q", (10, 4, 8)), refnet.input("k", (12, 4, 8))
    a = refnet.network.add_attention_v2(q, k, k, SOFTMAX, Kind.NONE)
    a.decomposable = True
    a.query_form = a.key_value_form = trt.AttentionIOForm.PACKED_NHD
    a.query_lengths = refnet.input("ql", (3,), trt.int32)
    a.key_value_lengths = refnet.input("kl", (3,), trt.int32)
    with pytest.raises(trt.NetworkError, match="PACKED_NHD"):
        a.get_output(0).shape  # noqa: B018


def test_a_plan_keeps_the_attention(tmp_path):
    """Serialized and run through the plan, as any network (the params live in the input layer)."""
    r = RefNet()
    q, k, v = qkv(r, (1, 2, 4, 8), (1, 1, 6, 8))
    a = r.network.add_attention_v2(q, k, v, SOFTMAX, Kind.LOWER_RIGHT)
    f = feeds((1, 2, 4, 8), (1, 1, 6, 8))
    y = r.run(f, y=a.get_output(0))["y"]
    close(y, expected(f, attn_mask=causal_keep(4, 6, Kind.LOWER_RIGHT)), atol=1e-5)


def test_not_decomposable_where_a_fused_kernel_exists(refnet):
    """`decomposable` is left False (TensorRT's default): TensorRT-RTX builds it for sm86 where it has a fused
    kernel (HALF, head size 64); elsewhere it refuses it, which the reference cannot know and does not check."""
    q, k, v = qkv(refnet, (1, 2, 64, 64), (1, 2, 64, 64), trt.float16)
    a = refnet.network.add_attention(q, k, v, SOFTMAX, True)
    assert not a.decomposable
    f = {n: t.half() for n, t in feeds((1, 2, 64, 64), (1, 2, 64, 64)).items()}
    y = refnet.run(f, y=a.get_output(0))["y"]
    close(y, expected(f, attn_mask=causal_keep(64, 64, Kind.UPPER_LEFT)), atol=2e-3, rtol=2e-3)


SETTER_CASES = [("norm_op", 1), ("decomposable", 1), ("decomposable", None), ("causal", 1), ("causal_kind", 2),
                ("num_ranks", 0), ("num_ranks", 2.0), ("num_ranks", 3), ("query_form", 0), ("mask", None),
                ("query_lengths", None), ("key_value_lengths", None)]


def _set(module, network, attribute, value) -> str:
    x = network.add_input("x", module.float16, (1, 2, 3, 8))
    a = network.add_attention(x, x, x, module.AttentionNormalizationOp.SOFTMAX, False)
    try:
        setattr(a, attribute, value)
    except TypeError:
        return "TypeError"
    except (RuntimeError, ValueError):  # TensorRT-RTX: RuntimeError; the reference: NetworkError (a ValueError)
        return "refused"
    got = getattr(a, attribute)
    return repr(got if not hasattr(got, "name") or isinstance(got, bool) else got.name)


@pytest.mark.parametrize("attribute,value", SETTER_CASES)
def test_attribute_setters_take_what_tensorrt_rtx_takes(rtx, attribute, value):
    from helpers.refnet import RtxNet

    ours = _set(trt, RefNet().network, attribute, value)
    theirs = _set(rtx, RtxNet(rtx).network, attribute, value)
    assert ours == theirs


def test_a_query_with_no_key_to_attend_is_nan(refnet):
    """LOWER_RIGHT with more queries than keys: queries 0 and 1 precede every key (j <= i - 2 holds for none);
    softmax over nothing is NaN in the reference (TensorRT documents no value for it)."""
    a = attention(refnet, (1, 1, 5, 4), (1, 1, 3, 4), kind=Kind.LOWER_RIGHT)
    f = feeds((1, 1, 5, 4), (1, 1, 3, 4))
    y = refnet.run(f, y=a.get_output(0))["y"]
    assert torch.isnan(y[0, 0, :2]).all()
    q = {**f, "q": f["q"][:, :, 2:]}
    close(y[:, :, 2:], expected(q, attn_mask=causal_keep(3, 3, Kind.UPPER_LEFT)), atol=1e-5, rtol=1e-5)

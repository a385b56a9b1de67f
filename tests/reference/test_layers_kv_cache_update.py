"""trtbuild.reference: KVCacheUpdate (KVCacheMode.LINEAR) against updates written by hand: the output is the cache
with output[i, :, write_indices[i] + t, :] = update[i, :, t, :] (update_form PADDED_BHND, TensorRT 10 and 11) or, for
PACKED_NHD (TensorRT 11), batch i's tokens update[lengths[i]:lengths[i + 1]] written from write_indices[i] on.
Each construction is also built by TensorRT-RTX (the `refnet` twin), which has update_form and update_lengths too.
"""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close
from trtbuild.reference.enums import AttentionIOForm

LINEAR = trt.KVCacheMode.LINEAR
PADDED, PACKED = AttentionIOForm.PADDED_BHND, AttentionIOForm.PACKED_NHD
gen = torch.Generator().manual_seed(54)
CACHE = (2, 3, 8, 4)  # batch, heads, max sequence, head size


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def kv(refnet, u_shape, w_shape=(2,), c_shape=CACHE, dt=trt.float32, w_dt=trt.int32):
    return refnet.network.add_kv_cache_update(refnet.input("c", c_shape, dt), refnet.input("u", u_shape, dt),
                                              refnet.input("w", w_shape, w_dt), LINEAR)


def refused(refnet, make, words: str) -> None:
    """`make()` (returning the layer) is refused, at definition or, as TensorRT-RTX checks shapes, at build."""
    import re

    try:
        layer = make()
        refnet.network.mark_output(layer.get_output(0))
    except trt.NetworkError as e:
        assert re.search(words, str(e)), str(e)
        return
    assert refnet.build() is None
    assert re.search(words, " ".join(refnet.logger.errors)), refnet.logger.errors


def test_attributes_and_defaults(refnet):
    layer = kv(refnet, (2, 3, 2, 4))
    assert layer.cache_mode == LINEAR and layer.update_form == PADDED and layer.update_lengths is None
    assert layer.num_inputs == 3 and tuple(layer.get_output(0).shape) == CACHE
    refnet.network.mark_output(layer.get_output(0))


def test_padded_update_by_hand(refnet):
    cache, update = randn(*CACHE), randn(2, 3, 3, 4)
    w = torch.tensor([0, 5], dtype=torch.int32)
    layer = kv(refnet, (2, 3, 3, 4))
    y = refnet.run({"c": cache, "u": update, "w": w}, y=layer.get_output(0))["y"]
    want = cache.clone()
    for t in range(3):
        want[0, :, 0 + t, :] = update[0, :, t, :]
        want[1, :, 5 + t, :] = update[1, :, t, :]
    close(y, want, atol=0, rtol=0)
    close(y[0, :, 3:], cache[0, :, 3:], atol=0, rtol=0)  # the rest of the cache is copied
    close(y[1, :, :5], cache[1, :, :5], atol=0, rtol=0)


def test_a_smaller_batch_updates_the_first_sequences(refnet):
    cache, update = randn(*CACHE), randn(1, 3, 8, 4)
    layer = kv(refnet, (1, 3, 8, 4), (1,))
    y = refnet.run({"c": cache, "u": update, "w": torch.tensor([0], dtype=torch.int32)}, y=layer.get_output(0))["y"]
    close(y[0], update[0], atol=0, rtol=0)
    close(y[1], cache[1], atol=0, rtol=0)


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_half_types_are_copied_exactly(refnet, dt, torch_dt):
    cache, update = randn(*CACHE).to(torch_dt), randn(2, 3, 1, 4).to(torch_dt)
    layer = kv(refnet, (2, 3, 1, 4), dt=dt)
    y = refnet.run({"c": cache, "u": update, "w": torch.tensor([7, 2], dtype=torch.int32)}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt
    want = cache.clone()
    want[0, :, 7], want[1, :, 2] = update[0, :, 0], update[1, :, 0]
    assert torch.equal(y, want)


def test_packed_update_by_hand(refnet):
    """Two sequences of 3 and 2 tokens packed into [5, heads, head size]; lengths are cumulative: [0, 3, 5]."""
    cache, update = randn(*CACHE), randn(5, 3, 4)
    layer = kv(refnet, (5, 3, 4))
    layer.update_form = PACKED
    layer.update_lengths = refnet.input("len", (3,), trt.int32)
    assert layer.update_form == PACKED and layer.update_lengths.name == "len" and layer.num_inputs == 4
    feeds = {"c": cache, "u": update, "w": torch.tensor([4, 1], dtype=torch.int32),
             "len": torch.tensor([0, 3, 5], dtype=torch.int32)}
    y = refnet.run(feeds, y=layer.get_output(0))["y"]
    want = cache.clone()
    for t in range(3):
        want[0, :, 4 + t, :] = update[t]
    for t in range(2):
        want[1, :, 1 + t, :] = update[3 + t]
    close(y, want, atol=0, rtol=0)


def test_packed_with_an_empty_sequence(refnet):
    cache, update = randn(*CACHE), randn(2, 3, 4)
    layer = kv(refnet, (2, 3, 4))
    layer.update_form = PACKED
    layer.update_lengths = refnet.input("len", (3,), trt.int32)
    feeds = {"c": cache, "u": update, "w": torch.tensor([0, 6], dtype=torch.int32),
             "len": torch.tensor([0, 0, 2], dtype=torch.int32)}
    y = refnet.run(feeds, y=layer.get_output(0))["y"]
    want = cache.clone()
    want[1, :, 6], want[1, :, 7] = update[0], update[1]
    close(y, want, atol=0, rtol=0)


def test_update_lengths_can_be_cleared(refnet):
    """Setting None leaves an empty input 3 (num_inputs stays 4, as in TensorRT-RTX); PACKED_NHD then fails."""
    layer = kv(refnet, (5, 3, 4))
    layer.update_form = PACKED
    layer.update_lengths = refnet.input("len", (3,), trt.int32)
    layer.update_lengths = None
    assert layer.update_lengths is None and layer.num_inputs == 4
    refused(refnet, lambda: layer, "update_form is PACKED_NHD but update_lengths is not set")


def test_update_lengths_are_not_set_through_set_input(refnet):
    layer = kv(refnet, (5, 3, 4))
    with pytest.raises(trt.NetworkError, match="input 3 is update_lengths; set it through the update_lengths"):
        layer.set_input(3, refnet.input("len", (3,), trt.int32))


@pytest.mark.parametrize("u_shape, w_shape, c_shape, words", [
    ((3, 2, 4), (3,), (3, 8, 4), "cache has rank 3"),
    ((1, 2, 3, 2, 4), (1,), (1, 2, 3, 8, 4), "cache has rank 5"),
    ((2, 3, 2, 4), (2, 1), CACHE, "write_indices have rank 2"),
    ((3, 2), (2,), CACHE, "the update has rank 2; it is rank 4 .* or 3"),
    ((2, 3, 2, 4), (), CACHE, "write_indices have rank 0"),
    ((3, 2, 4), (2,), CACHE, "the update has rank 3; with update_form PADDED_BHND"),
    ((2, 1, 2, 4), (2,), CACHE, "the update's head count is 1 but the cache's is 3"),
    ((2, 3, 2, 5), (2,), CACHE, "the update's head size is 5 but the cache's is 4"),
    ((1, 3, 2, 4), (2,), CACHE, "the update's batch is 1 but write_indices have 2"),
    ((3, 3, 2, 4), (3,), CACHE, "the update's batch 3 is larger than the cache's 2"),
    ((2, 3, 9, 4), (2,), CACHE, "the update's sequence length 9 is larger than the cache's 8"),
    ((2, 3, 2, 4), (2,), (2, 3, -1, 4), "sequence dimension .* is dynamic"),
])
def test_refused_padded_shapes(refnet, u_shape, w_shape, c_shape, words):
    refused(refnet, lambda: kv(refnet, u_shape, w_shape, c_shape), words)


@pytest.mark.parametrize("u_shape, w_shape, len_shape, len_dt, words", [
    ((2, 3, 2, 4), (2,), (3,), trt.int32, "the update has rank 4; with update_form PACKED_NHD"),
    ((5, 2, 4), (2,), (3,), trt.int32, "the update's head count is 2 but the cache's is 3"),
    ((5, 3, 5), (2,), (3,), trt.int32, "the update's head size is 5 but the cache's is 4"),
    ((5, 3, 4), (2,), (2,), trt.int32, "update_lengths have 2 elements but write_indices 2; there must be one more"),
    ((5, 3, 4), (2,), (3, 1), trt.int32, "update_lengths have rank 2"),
    ((5, 3, 4), (2,), (3,), trt.int64, "update_lengths have type INT64; they must be INT32"),
])
def test_refused_packed_shapes(refnet, u_shape, w_shape, len_shape, len_dt, words):
    def make():
        layer = kv(refnet, u_shape, w_shape)
        layer.update_form = PACKED
        layer.update_lengths = refnet.input("len", len_shape, len_dt)
        return layer

    refused(refnet, make, words)


def test_update_lengths_need_the_packed_form(refnet):
    layer = kv(refnet, (2, 3, 2, 4))
    layer.update_lengths = refnet.input("len", (3,), trt.int32)
    with pytest.raises(trt.NetworkError, match="only valid with PACKED_NHD"):
        layer.get_output(0).shape  # noqa: B018


@pytest.mark.parametrize("c_dt, u_dt, w_dt, words", [
    (trt.float32, trt.float16, trt.int32, "the update has type HALF but the cache has FLOAT"),
    (trt.int32, trt.int32, trt.int32, "the cache has type INT32; this layer needs FLOAT, HALF or BF16"),
    (trt.float32, trt.int32, trt.int32, "the update has type INT32"),
    (trt.float32, trt.float32, trt.float32, "write_indices have type FLOAT"),
    (trt.float32, trt.float32, trt.int64, "write_indices have type INT64; TensorRT-RTX builds INT32"),
])
def test_refused_types(refnet, c_dt, u_dt, w_dt, words):
    refused(refnet, lambda: refnet.network.add_kv_cache_update(
        refnet.input("c", CACHE, c_dt), refnet.input("u", (2, 3, 2, 4), u_dt), refnet.input("w", (2,), w_dt), LINEAR),
        words)


def test_the_cache_must_be_a_network_input(refnet):
    x = refnet.input("c", CACHE)
    layer = refnet.network.add_kv_cache_update(refnet.network.add_identity(x).get_output(0),
                                               refnet.input("u", (2, 3, 2, 4)), refnet.input("w", (2,), trt.int32),
                                               LINEAR)
    refnet.network.mark_output(layer.get_output(0))
    assert refnet.build() is None
    assert "is not a network input; TensorRT updates the cache in place" in " ".join(refnet.logger.errors)


def test_the_output_must_be_a_network_output(refnet):
    layer = kv(refnet, (2, 3, 2, 4))
    refnet.network.mark_output(refnet.network.add_identity(layer.get_output(0)).get_output(0))
    assert refnet.build() is None
    assert "is not a network output" in " ".join(refnet.logger.errors)


def test_one_cache_feeds_one_update(refnet):
    layer = kv(refnet, (2, 3, 2, 4))
    other = refnet.network.add_kv_cache_update(refnet.network.get_input(0), refnet.input("u2", (2, 3, 2, 4)),
                                               refnet.network.get_input(2), LINEAR)
    refnet.network.mark_output(layer.get_output(0))
    refnet.network.mark_output(other.get_output(0))
    assert refnet.build() is None
    assert "also feeds the KV cache update" in " ".join(refnet.logger.errors)


def test_the_output_may_also_feed_other_layers(refnet):
    cache, update = randn(*CACHE), randn(2, 3, 1, 4)
    layer = kv(refnet, (2, 3, 1, 4))
    refnet.network.mark_output(layer.get_output(0))
    doubled = refnet.network.add_elementwise(layer.get_output(0), layer.get_output(0), trt.ElementWiseOperation.SUM)
    out = refnet.run({"c": cache, "u": update, "w": torch.tensor([0, 0], dtype=torch.int32)}, z=doubled.get_output(0))
    want = cache.clone()
    want[:, :, 0] = update[:, :, 0]
    close(out["z"], 2 * want, atol=0, rtol=0)


@pytest.mark.parametrize("starts", [[7, 0], [-1, 0]])
def test_a_write_outside_the_cache_fails_the_run(starts):
    from trtbuild.reference.ops.kv_cache_update import run

    p = {"cache_mode": int(LINEAR), "update_form": int(PADDED)}
    with pytest.raises(IndexError, match="outside a cache of batch 2 and max sequence 8"):
        run(p, {}, [randn(*CACHE), randn(2, 3, 2, 4), torch.tensor(starts)], None)


def test_packed_lengths_must_be_cumulative_counts():
    from trtbuild.reference.ops.kv_cache_update import run

    p = {"cache_mode": int(LINEAR), "update_form": int(PACKED)}
    with pytest.raises(IndexError, match="not cumulative counts of the 5 tokens"):
        run(p, {}, [randn(*CACHE), randn(5, 3, 4), torch.tensor([0, 0]), torch.tensor([0, 4, 2])], None)


def test_dynamic_batch(refnet):
    from helpers.refnet import add_profile

    net = refnet.network
    layer = net.add_kv_cache_update(refnet.input("c", (-1, 3, 8, 4)), refnet.input("u", (-1, 3, 2, 4)),
                                    refnet.input("w", (-1,), trt.int32), LINEAR)
    assert tuple(layer.get_output(0).shape) == (-1, 3, 8, 4)
    add_profile(refnet, {"c": ((1, 3, 8, 4), (2, 3, 8, 4), (3, 3, 8, 4)), "u": ((1, 3, 2, 4), (2, 3, 2, 4),
                                                                                (3, 3, 2, 4)),
                         "w": ((1,), (2,), (3,))})
    cache, update = randn(3, 3, 8, 4), randn(3, 3, 2, 4)
    y = refnet.run({"c": cache, "u": update, "w": torch.tensor([6, 0, 3], dtype=torch.int32)}, y=layer.get_output(0))
    want = cache.clone()
    for i, start in enumerate([6, 0, 3]):
        want[i, :, start:start + 2] = update[i]
    close(y["y"], want, atol=0, rtol=0)

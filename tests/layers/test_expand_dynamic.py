"""trtbuild.layers.tensor.expand with a size read from another tensor (``DimOf``, PyTorch's ``t.shape[d]``):
a class token broadcast to a dynamic batch, built on the reference and on TensorRT-RTX with the same layers
(the slice's size a shape tensor), run at several batch sizes against PyTorch; known dims stay one slice."""

from __future__ import annotations

import pytest
import torch

from trtbuild.layers import tensor as T
from trtbuild.layers.common import constant

from helpers.builder_pair import build_pair, refused, rounded, seeded

PROFILE = {"x": ((1, 5, 8), (2, 5, 8), (4, 5, 8))}
TOKEN = seeded(1, 1, 8, seed=3)


def _cls_cat(network, x):
    cls = T.expand(network, constant(network, TOKEN.numpy(), x, "cls_token"), (T.DimOf(x, 0), -1, -1), "cls")
    return T.concat(network, [cls, x], 1, "tokens")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_class_token_follows_a_dynamic_batch(dtype):
    pair = build_pair({"x": ((-1, 5, 8), dtype)}, _cls_cat, profile=PROFILE)
    assert tuple(pair.outputs[0].shape) == (-1, 6, 8)
    assert pair.names == ["cls_token", "cls/shape0", "cls/dim0/index", "cls/dim0", "cls/size1", "cls/size2",
                          "cls/size", "cls", "tokens"]
    for batch in (1, 3, 4):
        x = rounded(seeded(batch, 5, 8, seed=batch), dtype)
        (got,) = pair.run(x=x)
        want = torch.cat([rounded(TOKEN, dtype).expand(batch, -1, -1), x], 1)
        assert torch.equal(got.double(), want)


def test_new_leading_dim_from_a_dynamic_dim():
    """``v.expand(x.shape[1], 3, -1)`` where x's dim 1 is dynamic: the new dim comes first (``name/view``)."""
    def build(network, x, v):
        return T.expand(network, v, (T.DimOf(x, -1), 3, -1), "e")

    pair = build_pair({"x": ((2, -1), "fp32"), "v": ((1, 4), "fp32")}, build,
                      profile={"x": ((2, 1), (2, 3), (2, 6)), "v": ((1, 4),) * 3})
    assert tuple(pair.outputs[0].shape) == (-1, 3, 4) and "e/view" in pair.names
    v = rounded(seeded(1, 4, seed=1), "fp32")
    (got,) = pair.run(x=torch.zeros(2, 5), v=v)
    assert torch.equal(got.double(), v.expand(5, 3, -1))


def test_a_known_dim_of_is_a_plain_slice():
    pair = build_pair({"x": ((3, 5, 8), "fp32")}, _cls_cat)
    assert pair.names == ["cls_token", "cls", "tokens"]
    x = rounded(seeded(3, 5, 8), "fp32")
    assert torch.equal(pair.run(x=x)[0].double(), torch.cat([rounded(TOKEN, "fp32").expand(3, -1, -1), x], 1))


def test_refusals_name_the_layer():
    msg = refused({"x": ((-1, 5, 8), "fp32"), "t": ((2, 1, 8), "fp32")},
                  lambda n, x, t: T.expand(n, t, (T.DimOf(x, 0), -1, -1), "e"))
    assert msg == "layer 'e': cannot expand 't' (2, 1, 8) to ('x.shape[0]', -1, -1): only known size-1 dims can grow " \
                  "(-1 keeps a dim)"
    msg = refused({"x": ((-1, 5), "fp32"), "t": ((1, 5), "fp32")},
                  lambda n, x, t: T.expand(n, t, (T.DimOf(x, 2), -1), "e"))
    assert msg.startswith("layer 'e': dim 2 is out of range for 'x' of rank 2")
    msg = refused({"t": ((1, 5), "fp32")}, lambda n, t: T.expand(n, t, (2.5, -1), "e"))
    assert msg == "layer 'e': expand size 2.5 must be an integer or a DimOf"

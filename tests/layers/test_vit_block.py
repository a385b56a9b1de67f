"""The tiny ViT of helpers.tiny_vit, built with trtbuild.layers builders only: the network function has no raw
``network.add_*`` call. The reference's fp32 engine equals the PyTorch module, fp16 and bf16 within their
rounding, and TensorRT-RTX builds the same network, layer by layer."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
import torch

from trtbuild.weights import WeightMap

from helpers.builder_pair import assert_close, build_pair, rounded, seeded
from helpers.tiny_vit import BATCH, CLASSES, IMG, TinyViT, vit_network


def test_network_function_has_no_raw_tensorrt_call():
    tree = ast.parse(textwrap.dedent(inspect.getsource(vit_network)))
    raw = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr.startswith("add_")]
    assert raw == []


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = TinyViT().double().eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:  # LayerNorm's default 1 / 0 would leave gamma and beta untested
                p.add_(torch.randn_like(p) * 0.2)
    return m


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_vit_matches_pytorch_and_builds_on_rtx(model, dtype):
    wm = WeightMap.from_state_dict({k: v.float() for k, v in model.state_dict().items()})
    pair = build_pair({"x": ((BATCH, 3, IMG, IMG), dtype)}, lambda n, x: vit_network(n, x, wm))
    x = rounded(seeded(BATCH, 3, IMG, IMG), dtype)
    with torch.no_grad():
        want = model(x)
    (got,) = pair.run(x=x)
    assert tuple(got.shape) == (BATCH, CLASSES) and pair.outputs[0].name == "head"
    assert_close(got, want, dtype, scale=float(want.abs().max()) * (5 if dtype == "bf16" else 1))
    names = pair.names
    assert len(names) == len(set(names))  # every layer has its own name
    for part in ("patch", "patch/tokens", "cls", "tokens", "pos", "attn/attention/softmax", "attn", "gelu", "head"):
        assert part in names


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_vit_builds_through_the_tensorrt_rtx_backend(model, precision):
    """The user's path: trtbuild.backend picks TensorRT-RTX, build_plan builds the network function, and its
    cross-check builds it on the reference too, with every tensor's name, shape and dtype equal."""
    from trtbuild.backend import load_trt
    from trtbuild.engine.build import build_plan

    wm = WeightMap.from_state_dict({k: v.float() for k, v in model.state_dict().items()})
    plan = build_plan(load_trt("tensorrt-rtx"), lambda n, x: {"logits": vit_network(n, x, wm)},
                      input_shape=(BATCH, 3, IMG, IMG), precision=precision, progress=False, cross_check=True)
    check = plan.info["cross_check"]
    assert check["outputs"] == [{"name": "logits", "shape": [BATCH, CLASSES], "dtype": "FLOAT"}]
    assert check["tensors_compared"] >= 60 and not check["notes"]  # every layer output of the network

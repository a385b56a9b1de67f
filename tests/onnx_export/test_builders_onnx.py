"""Networks made by the transformer builders (trtbuild.layers.tensor, activation, attention, embeddings, and the
tiny ViT of helpers.tiny_vit) export to ONNX, run in onnxruntime equal to the reference, and are
parsed and built by TensorRT-RTX's ONNX parser (helpers.onnx_rtx). A scalar constant (select's index) stays
a scalar initializer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.layers import activation, attention, embeddings, tensor
from trtbuild.onnx_export import export_onnx
from trtbuild.weights import WeightMap

from helpers.onnx_layer_check import F16, F32, build, check
from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse)
from helpers.tiny_vit import BATCH, IMG, TinyViT, vit_network



def test_scalar_constant_stays_a_scalar():
    net = build(lambda n, dt: {"y": tensor.select(n, n.add_input("x", dt, (2, 3, 4)), 1, -1, "s")}, F32)
    model = export_onnx(net)
    (index,) = [i for i in model.graph.initializer if i.name == "s/index"]
    assert list(index.dims) == []


@pytest.mark.parametrize("dt", [F32, F16])
@pytest.mark.parametrize("label", ["chunk", "matmul", "activations", "sdpa masked"])
def test_builders_export(label, dt):
    def define(n, dt):
        x = n.add_input("x", dt, (2, 3, 4, 6))
        if label == "chunk":
            return {f"c{i}": c for i, c in enumerate(tensor.chunk(n, x, 3, "c", dim=-1))}
        if label == "matmul":
            return {"y": tensor.matmul(n, x, tensor.flatten(n, tensor.select(n, x, 0, 0, "s"), "f", 0, 1), "mm",
                                       transpose_b=True)}
        if label == "activations":
            y = activation.mish(n, activation.hardswish(n, activation.gelu(n, x, "g", "tanh"), "hs"), "m")
            return {"y": activation.prelu(n, activation.silu(n, y, "si"), np.linspace(0.1, 0.3, 3), "p")}
        mask = np.tril(np.ones((4, 4), dtype=bool))
        return {"y": attention.scaled_dot_product_attention(n, x, x, x, "a", attn_mask=mask)}

    check(define, dt)


def test_embedding_exports():
    def define(n, dt):
        ids = n.add_input("ids", trt.int32, (2, 5))
        return {"y": embeddings.embedding(n, ids, np.random.default_rng(0).standard_normal((9, 4)), "tok")}

    check(define, F32, feeds={"ids": np.array([[0, 1, 2, 3, 8], [4, 4, 5, 6, 7]], np.int32)})


def test_tiny_vit_exports():
    torch.manual_seed(0)
    wm = WeightMap.from_state_dict(TinyViT().eval().state_dict())
    check(lambda n, dt: {"y": vit_network(n, n.add_input("x", dt, (BATCH, 3, IMG, IMG)), wm)}, F32)

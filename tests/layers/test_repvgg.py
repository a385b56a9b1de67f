"""trtbuild.layers.repvgg: build-time fusion of training-form RepVGG blocks, vs the PyTorch block."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from trtbuild.layers.common import BuilderError
from trtbuild.layers.repvgg import repvgg_block, repvgg_block_unfused
from trtbuild.engine.quick import run_network
from trtbuild.weights import WeightMap, WeightsError

from helpers.builder_cases import REPVGG_CASES as CASES, make_repvgg_block, repvgg_weights
from helpers.refnet import concrete


def run_block(wm, x, stride, groups, builder=repvgg_block, half=False, prefix="blk"):
    holder = {}

    def define(network):
        t = network.add_input("x", trt.DataType.HALF if half else trt.DataType.FLOAT, trt.Dims(tuple(x.shape)))
        holder["network"] = network
        return {"y": builder(network, t, wm, prefix, stride, groups, "b")}

    y = run_network(define, {"x": x.half() if half else x})["y"]
    return y.float(), holder["network"]


@pytest.mark.parametrize("c_in,c_out,stride,groups", CASES)
def test_fused_block_matches_training_form(c_in, c_out, stride, groups):
    block = make_repvgg_block(c_in, c_out, stride, groups)
    assert (block.rbr_identity is not None) == (c_in == c_out and stride == 1)
    x = torch.randn(2, c_in, 9, 9, generator=torch.Generator().manual_seed(1))
    wm = repvgg_weights(block)
    y, net = run_block(wm, x, stride, groups)
    with torch.no_grad():
        ref = block(x)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    kinds = [type(concrete(net.get_layer(i))) for i in range(net.num_layers)]
    assert kinds == [trt.IConvolutionLayer, trt.IActivationLayer]
    conv = concrete(net.get_layer(0))
    assert tuple(conv.kernel_size_nd) == (3, 3) and conv.num_groups == groups and tuple(conv.stride_nd) == (stride,) * 2
    assert [k for k in wm.unused() if not k.endswith("num_batches_tracked")] == []


def test_fused_block_fp16():
    block = make_repvgg_block(8, 8, 1, 2)
    x = torch.rand(1, 8, 10, 10, generator=torch.Generator().manual_seed(2)) * 2 - 1
    y, net = run_block(repvgg_weights(block), x, 1, 2, half=True)
    with torch.no_grad():
        ref = block(x)
    assert concrete(net.get_layer(0)).kernel.dtype == trt.DataType.HALF
    err = (y - ref).abs().max().item()
    assert err <= 1e-2 * ref.abs().max().item()
    assert F.cosine_similarity(y.flatten(), ref.flatten(), dim=0).item() > 0.999


def test_deploy_form_weights_are_used_as_is():
    block = make_repvgg_block(8, 8, 1, 1)
    deployed = copy.deepcopy(block)
    deployed.switch_to_deploy()  # `block` stays in training form
    x = torch.randn(1, 8, 7, 7, generator=torch.Generator().manual_seed(3))
    y, net = run_block(repvgg_weights(deployed), x, 1, 1)
    with torch.no_grad():
        torch.testing.assert_close(y, block(x), atol=1e-5, rtol=1e-5)
    assert net.num_layers == 2


def test_identity_branch_with_stride_is_rejected():
    block = make_repvgg_block(8, 8, 1, 1)
    with pytest.raises(BuilderError, match=r"'b'.*blk.rbr_identity exists.*stride 2"):
        run_block(repvgg_weights(block), torch.zeros(1, 8, 8, 8), 2, 1)


def test_wrong_groups_is_rejected():
    block = make_repvgg_block(8, 8, 1, 2)
    with pytest.raises(BuilderError, match=r"'b'.*8 channels.*implies groups=2, but groups=1"):
        run_block(repvgg_weights(block), torch.zeros(1, 8, 8, 8), 1, 1)


def test_missing_branch_weight_names_the_key():
    block = make_repvgg_block(8, 16, 2, 1)
    sd = {f"blk.{k}": v for k, v in block.state_dict().items() if not k.startswith("rbr_dense.bn.running_var")}
    with pytest.raises(WeightsError, match=r"blk.rbr_dense.bn.running_var"):
        run_block(WeightMap.from_state_dict(sd), torch.zeros(1, 8, 8, 8), 2, 1)


@pytest.mark.parametrize("c_in,c_out,stride,groups", [(8, 8, 1, 1), (8, 16, 2, 2)])
def test_unfused_block_matches_and_keeps_three_branches(c_in, c_out, stride, groups):
    block = make_repvgg_block(c_in, c_out, stride, groups)
    x = torch.randn(1, c_in, 9, 9, generator=torch.Generator().manual_seed(4))
    y, net = run_block(repvgg_weights(block), x, stride, groups, builder=repvgg_block_unfused)
    with torch.no_grad():
        torch.testing.assert_close(y, block(x), atol=1e-5, rtol=1e-5)
    convs = [layer for layer in map(concrete, net) if isinstance(layer, trt.IConvolutionLayer)]
    assert sorted(tuple(c.kernel_size_nd) for c in convs) == [(1, 1), (3, 3)]
    adds = [layer.name for layer in map(concrete, net) if isinstance(layer, trt.IElementWiseLayer)]
    assert "b/add" in adds and ("b/add_identity" in adds) == (block.rbr_identity is not None)

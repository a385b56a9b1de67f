"""trtbuild.parity.automap: the layer map derived from the layer names agrees with the zoo's
hand-written maps, and layerwise parity of a user network (no layer_map) catches a planted bug."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trtbuild import reference as ref_trt
from trtbuild.layers.basic import add, conv, conv_bn, global_avg_pool, linear, max_pool, read_linear, relu
from trtbuild.layers.batchnorm import batchnorm
from trtbuild.layers.l2norm import l2norm
from trtbuild.layers.lrn import lrn
from trtbuild.layers.normalization import group_norm
from trtbuild.models import registry
from trtbuild.models.pytorch.l2norm import L2Norm
from trtbuild.models.registry import ModelSpec
from trtbuild.parity import check_model_parity
from trtbuild.parity.automap import automap_spec
from trtbuild.weights import WeightMap
from helpers.refnet import concrete

# Tensors of the hand-written layer_map that no torch module of the same name produces (hand data):
# AlexNet's flatten is compared with the Dropout classifier.0, which has no layer of its name.
HAND_ONLY = {"alexnet": {"classifier.1/flatten"}, "resnet18": set()}


@pytest.mark.parametrize("name", sorted(HAND_ONLY))
def test_automatic_map_agrees_with_the_hand_written_one(name):
    spec = registry.get(name)
    module = registry.get_torch_model(name, seed=0, small=True)
    auto, unmapped = automap_spec(spec, WeightMap.from_module(module), module, small=True)
    hand = spec.layer_map
    shared = set(auto) & set(hand)
    assert {t: auto[t] for t in shared} == {t: hand[t] for t in shared}
    assert set(hand) - set(auto) == HAND_ONLY[name]
    assert set(auto) - set(hand) == set()
    if name == "resnet18":  # conv+BN folded: the conv layer stands for the BatchNorm module
        assert auto["layer1.0.conv1"] == "layer1.0.bn1" and auto["conv1"] == "bn1"
    assert unmapped == []  # resnet18's residual adds, layer1.0.add..., belong to their blocks


class Net(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.norm = L2Norm(width, 20.0)
        self.lrn = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.gn = nn.GroupNorm(2, width)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, 4)

    def forward(self, x):
        x = self.lrn(self.norm(self.relu1(self.bn1(self.conv1(x)))))
        x = self.relu2(x + self.gn(self.conv2(x)))
        return self.fc(torch.flatten(self.avgpool(self.pool(x)), 1))


def network(broken: str | None):
    def build(net, wm, x):
        w = wm.shape_of("bn1.weight")[0]
        y = relu(net, conv_bn(net, x, wm, "conv1", "bn1", "conv1", padding=1, kernel=3), "relu1")
        y = l2norm(net, y, wm.get("norm.weight"), "norm")
        y = lrn(net, y, 5, 1e-4, 0.75, 1.0 if broken == "lrn" else 2.0, "lrn")  # the planted bug: k=1, not 2
        b = conv(net, y, wm.get("conv2.weight", (w, w, 3, 3)), wm.get("conv2.bias"), "conv2", padding=1)
        b = group_norm(net, b, 2, wm.get("gn.weight"), wm.get("gn.bias"), 1e-1 if broken == "gn" else 1e-5, "gn")
        y = max_pool(net, relu(net, add(net, y, b, "add"), "relu2"), 2, 2, 0, "pool")
        return {"logits": linear(net, global_avg_pool(net, y, "avgpool"), *read_linear(wm, "fc"), "fc")}
    return build


def make_model():
    torch.manual_seed(0)
    model = Net()
    with torch.no_grad():
        model.bn1.running_mean.uniform_(-0.5, 0.5)
        model.bn1.running_var.uniform_(0.5, 2.0)
    return model.eval()


def user_spec(broken=None):
    return ModelSpec(name="automap_net", description="test", torch_factory=lambda seed=0, small=False: make_model(),
                     build_network=network(broken), input_shape=lambda small=False: (1, 3, 16, 16),
                     output_names=["logits"])


ORDER = ["conv1", "relu1", "norm", "lrn", "conv2", "gn", "relu2", "pool", "avgpool", "fc"]


def test_user_network_layerwise_without_a_map_passes_and_lists_unmapped_layers():
    report = check_model_parity(user_spec(), ref_trt, layerwise=True, module=make_model())
    assert report.passed and [r.name for r in report.layers] == ORDER
    assert [r.module for r in report.layers] == ["bn1"] + ORDER[1:]
    assert all(r.passed for r in report.layers)
    assert report.meta["unmapped_layers"] == ["add"]
    assert "unmapped layers (1, no torch module found by name and shape): add" in report.to_table()


@pytest.mark.parametrize("broken", ["lrn", "gn"])
def test_layerwise_report_points_at_the_planted_bug(broken):
    report = check_model_parity(user_spec(broken), ref_trt, layerwise=True, module=make_model())
    assert not report.passed
    assert report.first_failure == broken
    before = ORDER[:ORDER.index(broken)]
    assert [r.name for r in report.layers if r.passed][:len(before)] == before


def test_a_network_whose_names_match_no_module_is_refused_in_one_sentence():
    spec = user_spec()
    spec.build_network = lambda net, wm, x: _rename_all(net, network(None)(net, wm, x))
    with pytest.raises(ValueError, match="model 'automap_net': no network tensor matches a torch module by name "
                                         "and shape, so layerwise parity has nothing to compare"):
        check_model_parity(spec, ref_trt, layerwise=True, module=make_model())


def _rename_all(net, outputs):
    for i in range(net.num_layers):
        layer = concrete(net.get_layer(i))
        layer.name = f"layer_{i}"
        for j in range(layer.num_outputs):
            layer.get_output(j).name = f"t_{i}_{j}"
    return outputs


class Attention(nn.Module):
    """Ends in a submodule (`ending` "child": returns proj's output itself; "view": a view of it) or
    in an operation of its own after proj ("own")."""

    def __init__(self, ending: str, width: int = 8):
        super().__init__()
        self.ending = ending
        self.qkv = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        y = self.proj(torch.tanh(self.qkv(x)))
        return {"child": y, "view": y.view(y.shape), "own": torch.sigmoid(y)}[self.ending]


class AttentionNet(nn.Module):
    def __init__(self, ending: str):
        super().__init__()
        self.attn = Attention(ending)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.attn(x))


def attention_spec(ending: str):
    def build(net, wm, x):
        trt = ref_trt
        y = linear(net, x, *read_linear(wm, "attn.qkv"), "attn.qkv")
        act = net.add_activation(y, trt.ActivationType.TANH)
        act.name = act.get_output(0).name = "attn/tanh"  # the module's own operation, between its submodules
        y = linear(net, act.get_output(0), *read_linear(wm, "attn.proj"), "attn.proj")
        if ending == "own":
            act = net.add_activation(y, trt.ActivationType.SIGMOID)
            act.name = act.get_output(0).name = "attn/sigmoid"
            y = act.get_output(0)
        return {"logits": linear(net, y, *read_linear(wm, "head"), "head")}

    def model(seed=0, small=False):
        torch.manual_seed(seed)
        return AttentionNet(ending).eval()

    return ModelSpec(name="attention_net", description="test", torch_factory=model, build_network=build,
                     input_shape=lambda small=False: (2, 8), output_names=["logits"])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("ending", ["child", "view"])
def test_a_module_ending_in_its_submodule_is_never_compared_with_its_own_last_layer(ending, precision):
    spec = attention_spec(ending)
    report = check_model_parity(spec, ref_trt, layerwise=True, precision=precision, module=spec.torch_factory())
    assert [(r.name, r.module) for r in report.layers] == [("attn.qkv", "attn.qkv"), ("attn.proj", "attn.proj"),
                                                           ("head", "head")]
    assert report.passed and all(r.passed for r in report.layers)
    assert report.first_jump is None and report.first_failure is None
    # attn's output is attn.proj's: its own layer attn/tanh is accounted for only when nothing else is
    assert report.meta["unmapped_layers"] == ([] if ending == "child" else ["attn/tanh"])


def test_a_module_ending_in_its_own_layer_is_still_mapped():
    spec = attention_spec("own")
    report = check_model_parity(spec, ref_trt, layerwise=True, module=spec.torch_factory())
    assert [(r.name, r.module) for r in report.layers] == [("attn.qkv", "attn.qkv"), ("attn.proj", "attn.proj"),
                                                           ("attn/sigmoid", "attn"), ("head", "head")]
    assert report.passed and all(r.passed for r in report.layers)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(x + self.bn(self.conv(x)))


class Inverted(nn.Module):
    """MobileNetV2's residual form: the module returns its add's result."""

    def __init__(self, width):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width))

    def forward(self, x):
        return x + self.conv(x)


class Unfolded(nn.Module):
    """Convolutions followed by BatchNorms that the network builds as layers of their own, and two
    blocks whose residual adds are named as calibration names them (``block.add``, ``inv.add``)."""

    def __init__(self, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.block = Block(width)
        self.inv = Inverted(width)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.inv(self.block(self.relu1(self.bn1(self.conv1(x)))))), 1))


def _unfolded_network(net, wm, x):
    def conv_then_bn(y, c, b):
        w = wm.get(f"{c}.weight")
        y = conv(net, y, w, wm.get(f"{c}.bias"), c, padding=1)
        return batchnorm(net, y, wm.get(f"{b}.weight"), wm.get(f"{b}.bias"), wm.get(f"{b}.running_mean"),
                         wm.get(f"{b}.running_var"), 1e-5, b)

    y = relu(net, conv_then_bn(x, "conv1", "bn1"), "relu1")
    y = relu(net, add(net, y, conv_then_bn(y, "block.conv", "block.bn"), "block.add"), "block")
    y = add(net, y, conv_then_bn(y, "inv.conv.0", "inv.conv.1"), "inv.add")
    return {"logits": linear(net, global_avg_pool(net, y, "pool"), *read_linear(wm, "fc"), "fc")}


def _unfolded_model():
    torch.manual_seed(0)
    model = Unfolded()
    with torch.no_grad():
        for bn in (model.bn1, model.block.bn, model.inv.conv[1]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return model.eval()


def test_unfolded_batchnorms_and_their_convolutions_map_by_name_and_adds_belong_to_their_module():
    spec = ModelSpec(name="automap_unfolded", description="test", torch_factory=lambda seed=0, small=False:
                     _unfolded_model(), build_network=_unfolded_network, input_shape=lambda small=False: (1, 3, 8, 8),
                     output_names=["logits"])
    report = check_model_parity(spec, ref_trt, layerwise=True, module=_unfolded_model())
    order = ["conv1", "bn1", "relu1", "block.conv", "block.bn", "block", "inv.conv.0", "inv.conv.1", "inv.add",
             "pool", "fc"]
    modules = [n if n != "inv.add" else "inv" for n in order]  # the add is the output of the module returning it
    assert [(r.name, r.module) for r in report.layers] == list(zip(order, modules))
    assert report.passed and all(r.passed for r in report.layers)  # each compared with PyTorch's own tensor
    assert report.meta["unmapped_layers"] == []

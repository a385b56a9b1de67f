"""Layerwise debugging of a planted bug: the network function below builds its GroupNorm with 2
groups where the PyTorch module has 4 (a typical porting slip). The engine's output no longer
matches PyTorch; layerwise parity compares every layer with the PyTorch module of the same name and
names the first one that fails. The check passes when that layer is the planted one.

    python examples/04_layerwise_bug/layerwise_bug.py [--out DIR]          # the planted bug
    python examples/04_layerwise_bug/layerwise_bug.py --fixed [--out DIR]  # the corrected network
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

from trtbuild.engine import select_backend
from trtbuild.layers.basic import conv, conv_bn, global_avg_pool, linear, read_linear, relu
from trtbuild.layers.normalization import group_norm
from trtbuild.models.registry import ModelSpec
from trtbuild.parity import check_model_parity
from trtbuild.weights import WeightMap
from trtbuild.files.outputs import HTML, PARITY_REPORT, check_outputs

PLANTED_LAYER = "gn"
GROUPS = 4


class BranchNet(nn.Module):
    def __init__(self, width: int = 8, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.gn = nn.GroupNorm(GROUPS, width)
        self.relu2 = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.gn(self.conv2(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_model(seed: int = 0, small: bool = False) -> BranchNet:
    torch.manual_seed(seed)
    model = BranchNet()
    with torch.no_grad():  # statistics and affine parameters as after training
        model.bn1.running_mean.uniform_(-0.5, 0.5)
        model.bn1.running_var.uniform_(0.5, 2.0)
        model.gn.weight.uniform_(0.5, 1.5)
        model.gn.bias.uniform_(-0.5, 0.5)
    return model.eval()


def branch_net(groups: int):
    """The network function, with the GroupNorm's group count as a parameter so the bug can be planted."""
    def build(network, weights, x):
        y = relu(network, conv_bn(network, x, weights, "conv1", "bn1", "conv1", padding=1), "relu1")
        y = conv(network, y, weights.get("conv2.weight"), weights.get("conv2.bias"), "conv2", padding=1)
        y = group_norm(network, y, groups, weights.get("gn.weight"), weights.get("gn.bias"), 1e-5, "gn")
        y = global_avg_pool(network, relu(network, y, "relu2"), "avgpool")
        return {"logits": linear(network, y, *read_linear(weights, "fc"), "fc")}
    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("out/examples/04_layerwise_bug"), help="folder to write into")
    parser.add_argument("--fixed", action="store_true", help="build the GroupNorm with the right group count")
    args = parser.parse_args(argv)
    report_json, report_html = args.out / "layerwise.json", args.out / "layerwise.html"
    check_outputs([("report", report_json, PARITY_REPORT), ("HTML report", report_html, HTML)])

    trt, backend_line = select_backend()
    print(backend_line)
    groups = GROUPS if args.fixed else 2
    spec = ModelSpec(name="branch_net", description="examples/04", torch_factory=make_model,
                     build_network=branch_net(groups), input_shape=lambda small=False: (1, 3, 16, 16),
                     output_names=["logits"])
    model = make_model(seed=0)
    print(f"GroupNorm built with {groups} groups; PyTorch's has {GROUPS}")
    report = check_model_parity(spec, trt, weights=WeightMap.from_module(model), module=model, layerwise=True)
    print(report.to_table())
    report.to_json(report_json)
    report.to_html(report_html)
    print(f"wrote {report_json} and {report_html}")

    if args.fixed:
        print(f"\nfixed network against PyTorch: {'PASS' if report.passed else 'FAIL'}")
        return 0 if report.passed else 1
    found = report.first_failure
    print(f"\nfirst failing layer: {found}; suspect layer: {report.suspect_layer}")
    passed = not report.passed and found == PLANTED_LAYER
    print(f"layerwise parity points at the planted bug '{PLANTED_LAYER}': {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

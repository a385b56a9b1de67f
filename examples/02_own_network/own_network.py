"""Your own network: a small PyTorch module, its weights exported to a .wts file, the same
computation written with trtbuild's layer builders, an fp32 engine saved with its sidecar, and
parity against the PyTorch module, output and layer by layer.

    python examples/02_own_network/own_network.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

from trtbuild.engine import build_and_save, load_engine, select_backend, sidecar_path
from trtbuild.layers.basic import conv, conv_bn, global_avg_pool, linear, max_pool, read_linear, relu
from trtbuild.layers.normalization import group_norm
from trtbuild.models.registry import ModelSpec
from trtbuild.parity import check_model_parity
from trtbuild.weights import export_weights
from trtbuild.files.outputs import ENGINE, SIDECAR, WTS, check_outputs

INPUT_SHAPE = (1, 3, 32, 32)


class SmallNet(nn.Module):
    def __init__(self, width: int = 8, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.gn = nn.GroupNorm(4, 2 * width)
        self.relu2 = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        x = self.relu2(self.gn(self.conv2(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_model(seed: int = 0, small: bool = False) -> SmallNet:
    """The PyTorch model, seeded, with BatchNorm statistics as after training."""
    torch.manual_seed(seed)
    model = SmallNet()
    with torch.no_grad():
        model.bn1.running_mean.uniform_(-0.5, 0.5)
        model.bn1.running_var.uniform_(0.5, 2.0)
    return model.eval()


def small_net(network, weights, x):
    """SmallNet with trtbuild's builders; each layer is named after the PyTorch module it implements,
    which is all layerwise parity needs to pair them (conv1 stands for bn1's output: BN is folded).
    A .wts file stores every tensor flat, so the builders are told the kernel and weight shapes."""
    width = weights.shape_of("bn1.weight")[0]
    y = conv_bn(network, x, weights, "conv1", "bn1", "conv1", padding=1, kernel=3)
    y = max_pool(network, relu(network, y, "relu1"), 2, 2, 0, "pool")
    y = conv(network, y, weights.get("conv2.weight", (2 * width, width, 3, 3)), weights.get("conv2.bias"), "conv2",
             padding=1)
    y = group_norm(network, y, 4, weights.get("gn.weight"), weights.get("gn.bias"), 1e-5, "gn")
    y = global_avg_pool(network, relu(network, y, "relu2"), "avgpool")
    return {"logits": linear(network, y, *read_linear(weights, "fc"), "fc")}


SPEC = ModelSpec(name="small_net", description="examples/02: conv-BN-ReLU, pool, conv-GroupNorm-ReLU, linear",
                 torch_factory=make_model, build_network=small_net, input_shape=lambda small=False: INPUT_SHAPE,
                 output_names=["logits"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("out/examples/02_own_network"), help="folder to write into")
    args = parser.parse_args(argv)
    weights, engine_path = args.out / "small_net.wts", args.out / "small_net-fp32.engine"
    check_outputs([("weights", weights, WTS), ("engine", engine_path, ENGINE),
                   ("sidecar", sidecar_path(engine_path), SIDECAR)])

    trt, backend_line = select_backend()
    print(backend_line)
    model = make_model(seed=0)
    args.out.mkdir(parents=True, exist_ok=True)  # export_weights writes into an existing folder only
    export_weights(model, weights)  # tensorrtx .wts, keyed by the state_dict's names
    print(f"weights: {weights}")
    build_and_save(SPEC, weights, engine_path, trt, "fp32", progress=False)
    print(f"engine: {engine_path} + {sidecar_path(engine_path).name}")

    engine = load_engine(engine_path, trt)
    report = check_model_parity(SPEC, trt, weights=weights, engine=engine, module=model)
    print(report.to_table())
    layerwise = check_model_parity(SPEC, trt, weights=weights, layerwise=True, module=model)
    print(layerwise.to_table())
    passed = report.passed and layerwise.passed
    print(f"\nsmall_net against PyTorch (outputs and every mapped layer): {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

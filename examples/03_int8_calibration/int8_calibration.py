"""INT8 with calibration, and `debug precision` to find the layer that must stay in fp32.

The network has an outlier channel, as trained networks often do: one channel of conv1's output is
1000x larger than the others, and conv2's weights for that channel are 1000x smaller, so the float
network computes what it would without the outlier. Quantized per tensor, conv2's input gets a step
set by the outlier and its other channels round to a few levels. The script calibrates the ranges on
seeded random data, builds the INT8 network (explicit Q/DQ), checks parity, lets `debug precision`
find the modules to keep in fp32, and saves the INT8 engine built with them kept.

    python examples/03_int8_calibration/int8_calibration.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

from trtbuild.debug import search_precision
from trtbuild.engine import build_and_save, quant_plan, select_backend, sidecar_path
from trtbuild.layers.basic import global_avg_pool, read_linear, relu
from trtbuild.layers.planned import planned_conv, planned_linear
from trtbuild.models.registry import ModelSpec
from trtbuild.parity import check_model_parity
from trtbuild.quant import calibrate_data, random_source, write_calibration
from trtbuild.weights import export_weights
from trtbuild.files.outputs import CALIBRATION, ENGINE, SAFETENSORS, SIDECAR, check_outputs

WIDTH = 8
OUTLIER_CHANNEL = 3
OUTLIER_GAIN = 1000.0
INPUT_SHAPE = (1, 3, 16, 16)


class OutlierNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, WIDTH, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(WIDTH, WIDTH, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(WIDTH, classes)

    def forward(self, x):
        x = self.relu2(self.conv2(self.relu1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_model(seed: int = 0, small: bool = False) -> OutlierNet:
    """Seeded; conv1's outlier channel scaled up and conv2's weights for it scaled down by the same gain."""
    torch.manual_seed(seed)
    model = OutlierNet()
    with torch.no_grad():
        model.conv1.weight[OUTLIER_CHANNEL] *= OUTLIER_GAIN
        model.conv1.bias[OUTLIER_CHANNEL] *= OUTLIER_GAIN
        model.conv2.weight[:, OUTLIER_CHANNEL] /= OUTLIER_GAIN
    return model.eval()


def outlier_net(network, weights, x, quant=None):
    """Convolutions and the linear go through trtbuild.layers.planned, so `quant` (the calibrated
    plan with its kept modules) decides for each PyTorch module: quantized, kept in fp32, or plain."""
    y = planned_conv(network, x, weights.get("conv1.weight"), weights.get("conv1.bias"), "conv1", quant, padding=1)
    y = relu(network, y, "relu1")
    y = planned_conv(network, y, weights.get("conv2.weight"), weights.get("conv2.bias"), "conv2", quant, padding=1)
    y = global_avg_pool(network, relu(network, y, "relu2"), "avgpool")
    return {"logits": planned_linear(network, y, *read_linear(weights, "fc"), "fc", quant)}


SPEC = ModelSpec(name="outlier_net", description="examples/03: conv, conv with an outlier input channel, linear",
                 torch_factory=make_model, build_network=outlier_net, input_shape=lambda small=False: INPUT_SHAPE,
                 output_names=["logits"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("out/examples/03_int8_calibration"),
                        help="folder to write into")
    args = parser.parse_args(argv)
    weights_path, calib_path = args.out / "outlier_net.safetensors", args.out / "calibration.json"
    engine_path = args.out / "outlier_net-int8.engine"
    check_outputs([("weights", weights_path, SAFETENSORS), ("calibration", calib_path, CALIBRATION),
                   ("engine", engine_path, ENGINE), ("sidecar", sidecar_path(engine_path), SIDECAR)])

    trt, backend_line = select_backend()
    print(backend_line)
    model = make_model(seed=0)
    # seeded random data stands in for real samples here; calibrate on what the model will see
    data = random_source(INPUT_SHAPE[1:], batches=4, batch_size=8, seed=0)
    calibration = calibrate_data(model, data, "max", model_name=SPEC.name)
    args.out.mkdir(parents=True, exist_ok=True)
    export_weights(model, weights_path)
    write_calibration(calibration, calib_path)
    print(f"calibration: {calib_path} (method max, {data.description})")

    plain = quant_plan(SPEC, "int8", calib_path, module=model, weights=weights_path)
    before = check_model_parity(SPEC, trt, precision="int8", quant=plain, module=model)
    print(f"\nint8, nothing kept:\n{before.to_table()}")

    print("\ndebug precision: which modules must stay in fp32?")
    result = search_precision(SPEC, trt, "int8", calibration=calib_path,
                              on_trial=lambda i, t: print(f"  trial {i}: kept {list(t.kept) or 'nothing'} -> "
                                                       f"{'PASS' if t.passed else 'FAIL'}"))
    print(result.summary())
    if not result.kept:
        print("\nint8 passes with nothing kept: nothing for debug precision to find: FAIL")
        return 1
    print(f"for trtbuild build: --keep {result.keep_option}")

    kept = quant_plan(SPEC, "int8", calib_path, [result.keep_option], module=model, weights=weights_path)
    build_and_save(SPEC, weights_path, engine_path, trt, "int8", quant=kept, progress=False)
    after = check_model_parity(SPEC, trt, engine=engine_path, module=model)
    print(f"\nint8, kept {result.keep_option}: {engine_path} + {sidecar_path(engine_path).name}\n{after.to_table()}")
    passed = not before.passed and after.passed
    print(f"\nint8 fails as it is and passes with {result.keep_option}: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""A real INT8/FP8 accuracy number with no download: a small CNN trained on scikit-learn's bundled
digits (1797 8x8 images, 10 classes), its trtbuild network in fp32 and as a Q/DQ network from a
calibration of the training split, and top-1 on the held-out split.

Shared by tests/quant/test_digits_accuracy.py and scripts/quant_digits_table.py (the README's table).

    data = load_split()                         # fixed stratified split, pixels scaled to [0, 1]
    model = train(data)                         # seeded, deterministic, a few seconds on CPU
    calib = calibrate_model(model, data, "mse")
    logits, info = engine_logits(model, data.x_test, calib, "int8")   # reference backend
    top1(logits, data.y_test)

The network function names every layer after its PyTorch module (``conv1``, ``block.conv2``,
``block.add``, ``fc``), so the calibration's keys (``conv1.input``, ``block.add``...) map onto it.
Each Conv+BatchNorm is folded into one convolution; in a quantized build that convolution gets
both inputs quantized (trtbuild.layers.quantize.qconv: activation per tensor with the calibrated
amax, folded weight per output channel), the linear head likewise (qlinear), and the residual
input of the block's add (qadd). Nothing after the last layer is quantized.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

import trtbuild.reference as reference
from trtbuild.engine import Engine, build_plan
from trtbuild.layers.basic import global_avg_pool, read_linear, relu
from trtbuild.layers.planned import planned_add, planned_conv_bn, planned_linear
from trtbuild.quant import QuantPlan, calibrate
from trtbuild.weights import WeightMap

SEED = 0
STEPS = 300
CALIB_BATCH = 256
#: the issue's target: quantized top-1 within this many points of fp32
TOLERANCE_POINTS = 1.0


@dataclass
class Split:
    x_train: torch.Tensor  # (N, 1, 8, 8) float32 in [0, 1]
    y_train: torch.Tensor  # (N,) int64
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_split() -> Split:
    """sklearn's digits (pixels 0..16 scaled to [0, 1]), split 80/20, stratified, random_state=0."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None]
    x_tr, x_te, y_tr, y_te = train_test_split(x, digits.target, test_size=0.2, random_state=0, stratify=digits.target)
    return Split(torch.from_numpy(x_tr), torch.from_numpy(y_tr).long(), torch.from_numpy(x_te),
                 torch.from_numpy(y_te).long())


class Block(nn.Module):
    """A ResNet basic block: relu(x + bn2(conv2(relu(bn1(conv1(x))))))."""

    def __init__(self, ch: int):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)
        self.relu2 = nn.ReLU()

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(out + x)


class DigitsNet(nn.Module):
    """1x8x8 -> conv 16 (3x3) -> conv 32 (3x3, stride 2) -> residual block -> global pool -> linear 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu2 = nn.ReLU()
        self.block = Block(32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.relu2(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
        x = self.pool(self.block(x))
        return self.fc(torch.flatten(x, 1))


def train(data: Split, steps: int = STEPS, seed: int = SEED) -> DigitsNet:
    """Adam (lr 1e-2) on minibatches of 128 of the training split, `steps` steps, seeded, with
    deterministic algorithms; returned in eval mode. The caller's global RNG state and
    deterministic-algorithms setting are left as they were."""
    saved = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = DigitsNet()
            gen = torch.Generator().manual_seed(seed)
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)
            n = len(data.y_train)
            order = torch.randperm(n, generator=gen)
            model.train()
            for step in range(steps):
                start = (step * 128) % n
                if start + 128 > n:
                    order = torch.randperm(n, generator=gen)
                    start = 0
                idx = order[start:start + 128]
                loss = nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    return model.eval()


def top1(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Top-1 accuracy in percent."""
    return 100.0 * float((logits.argmax(1) == labels).float().mean())


def mean_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean over samples of the cosine similarity of two (N, classes) logit tensors."""
    return float(nn.functional.cosine_similarity(a.double(), b.double(), dim=1).mean())


def calibrate_model(model: DigitsNet, data: Split, method: str):
    """trtbuild.quant.calibrate on the training split, in batches of CALIB_BATCH."""
    batches = data.x_train.split(CALIB_BATCH)
    return calibrate(model, batches, method, model_name="digits")


def digits_network(wm: WeightMap, plan: QuantPlan | None = None):
    """DigitsNet as a network function `(network, x) -> {"logits": ITensor}`: fp32 without `plan`,
    else with Q/DQ where the trtbuild.quant.QuantPlan says (int8 or fp8)."""

    def define(network, x):
        def conv_bn(y, name, bn, **args):  # conv + BatchNorm folded, quantized as the plan says
            return planned_conv_bn(network, y, wm, name, bn, name, plan, **args)

        y = relu(network, conv_bn(x, "conv1", "bn1", padding=1), "relu1")
        y = relu(network, conv_bn(y, "conv2", "bn2", stride=2, padding=1), "relu2")
        b = relu(network, conv_bn(y, "block.conv1", "block.bn1", padding=1), "block.relu1")
        b = conv_bn(b, "block.conv2", "block.bn2", padding=1)
        y = relu(network, planned_add(network, b, y, "block.add", plan), "block.relu2")
        y = global_avg_pool(network, y, "pool")
        return {"logits": planned_linear(network, y, *read_linear(wm, "fc"), "fc", plan)}

    return define


def kept_layers(calib, precision: str, keep=()) -> list[str]:
    """The Conv/Linear modules a `precision` build from `calib` does not quantize (kept by `keep`)."""
    plan = QuantPlan.build(calib, precision, keep)
    return [m for m in (k[: -len(".weight")] for k in calib.weights) if not plan.layer(m).quantized]


def engine_logits(model: DigitsNet, x: torch.Tensor, calib=None, precision: str = "fp32", keep=(),
                  trt=reference, runs: int = 1, **build_args) -> tuple[torch.Tensor, dict]:
    """Build the digits network (fp32, or int8/fp8 from `calib` with --keep-style `keep` pairs) for
    a static batch of len(x) on `trt` and run it on `x` `runs` times: (logits, the plan's info plus
    ``run_ms``, the median time of one run in milliseconds)."""
    plan = None if precision == "fp32" else QuantPlan.build(calib, precision, keep)
    wm = WeightMap.from_module(model)
    built = build_plan(trt, digits_network(wm, plan), input_shape=tuple(x.shape), progress=False, **build_args)
    engine = Engine(built, trt)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        logits = engine(x)["logits"]
        times.append(1000 * (time.perf_counter() - start))
    return logits.float().cpu(), dict(built.info, run_ms=statistics.median(times))

"""Engines for the Triton tests (tests/serving/test_repository.py and test_python_backend_server.py): zoo
models and a user network, built on the reference backend into a work directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: A user network as the README's "Your own model" describes: a PyTorch module and the same network
#: written with trtbuild's builders, layers named after the modules.
NET_PY = '''
import torch
from torch import nn

from trtbuild.layers.basic import conv, global_avg_pool, linear, read_linear, relu


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.relu1(self.conv1(x))), 1))


def make_model():
    return Small().eval()


def smallnet(network, weights, x):
    y = conv(network, x, weights.get("conv1.weight", (8, 3, 3, 3)), weights.get("conv1.bias"), "conv1", padding=1)
    y = global_avg_pool(network, relu(network, y, "relu1"), "avgpool")
    return {"scores": linear(network, y, *read_linear(weights, "fc"), "fc")}
'''

USER_INPUT = "input:1x3x16x16"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip with `reason`; under CI (CI=true) fail instead: these tests must run there."""
    if in_ci():
        pytest.fail(f"CI must run the Triton tests, but: {reason}")
    pytest.skip(reason)


def build_zoo(workdir: Path, model: str, batch=None, backend: str = "reference", suffix: str = "") -> Path:
    """engine of the small registry `model` built in `workdir` with seeded weights (seed 0)."""
    from trtbuild.backend import load_trt
    from trtbuild.engine import build_and_save, export_seeded_weights

    weights = workdir / f"{model}-small.wts"
    if not weights.exists():
        export_seeded_weights(model, weights, 0, small=True)
    out = workdir / f"{model}{suffix}-{backend}.engine"
    path, _ = build_and_save(model, weights, out, load_trt(backend), "fp32", small=True, batch=batch, progress=False)
    return path


def build_user(workdir: Path, batch=(1, 4, 8)) -> tuple[str, Path]:
    """(MODEL argument net.py:smallnet, its reference engine) in `workdir`."""
    import torch

    from trtbuild.backend import load_trt
    from trtbuild.engine import build_and_save
    from trtbuild.models.user import resolve_model
    from trtbuild.weights import export_weights

    (workdir / "net.py").write_text(NET_PY)
    ref = f"{workdir / 'net.py'}:smallnet"
    spec = resolve_model(ref, input=USER_INPUT, torch=f"{workdir / 'net.py'}:make_model")
    torch.manual_seed(0)
    export_weights(spec.torch_factory(), workdir / "smallnet.wts")
    path, _ = build_and_save(spec, workdir / "smallnet.wts", workdir / "smallnet.engine", load_trt("reference"), "fp32",
                             batch=batch, progress=False)
    return ref, path

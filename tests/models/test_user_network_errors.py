"""Mistakes in a user's own network, said in one sentence: a network function without quant= given
--calibration or --keep, a --torch factory that raises or needs arguments, and an --input without
its batch dimension; a network function taking quant= builds int8 from a calibration file."""

from __future__ import annotations

import pytest

import trtbuild.reference as trt
from trtbuild.cli import main


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err


NET = '''
import torch
from torch import nn

from trtbuild.layers.basic import conv, global_avg_pool, linear, read_linear, relu
from trtbuild.layers.planned import planned_conv, planned_linear


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.relu(self.conv1(x))), 1))


def make_model():
    return Small().eval()


def plain(network, weights, x):
    y = relu(network, conv(network, x, weights.get("conv1.weight", (8, 3, 3, 3)), weights.get("conv1.bias"), "conv1",
                           padding=1), "relu")
    return {"logits": linear(network, global_avg_pool(network, y, "pool"), *read_linear(weights, "fc"), "fc")}


def planned(network, weights, x, quant=None):
    y = planned_conv(network, x, weights.get("conv1.weight", (8, 3, 3, 3)), weights.get("conv1.bias"), "conv1", quant,
                     padding=1)
    y = relu(network, y, "relu")
    return {"logits": planned_linear(network, global_avg_pool(network, y, "pool"), *read_linear(weights, "fc"), "fc",
                                     quant)}
'''


@pytest.fixture
def own_net(tmp_path, monkeypatch):
    from trtbuild.models import registry

    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET)
    before = set(registry.MODELS)
    yield tmp_path
    for name in set(registry.MODELS) - before:
        registry.MODELS.pop(name, None)
        registry.ORIGINS.pop(name, None)


OWN = ["--input", "input:1x3x16x16", "--torch", "net.py:make_model"]


@pytest.mark.parametrize("extra, given", [(["--precision", "int8", "--calibration", "c.json"], "--calibration c.json"),
                                          (["--precision", "fp16", "--keep", "fp32:conv1"], "--keep")])
def test_plain_network_function_with_calibration_or_keep_says_it_needs_quant(own_net, capsys, extra, given):
    (own_net / "c.json").write_text("{}")
    for torch in ([], ["--torch", "net.py:make_model"]):  # the reason comes first, with or without --torch
        code, text = _run(capsys, ["build", "net.py:plain", "--input", "input:1x3x16x16", *torch, *extra,
                                   "--backend", "reference", "-o", "p.engine"])
        assert code != 0 and "Traceback" not in text and "has no PyTorch model" not in text
        assert f"its network function takes no quant= parameter, so {given} cannot reach its layers" in text
        assert "trtbuild.layers.planned" in text and not (own_net / "p.engine").exists()


def test_network_function_taking_quant_builds_int8_from_a_calibration_file(own_net, capsys):
    from trtbuild.engine import load_engine

    assert main(["calibrate", "net.py:planned", *OWN, "--data", "random", "-o", "c.json", "--no-progress"]) == 0
    code, text = _run(capsys, ["build", "net.py:planned", *OWN, "--precision", "int8", "--calibration", "c.json",
                               "--backend", "reference", "-o", "q.engine", "--no-progress"])
    assert code == 0, text
    assert "2 convolutions/matmuls" in text  # conv1 and fc quantized
    engine = load_engine(own_net / "q.engine", trt)
    assert engine.sidecar["precision"] == "int8"


FACTORIES = '''
def buggy():
    raise TypeError("inner bug")


def needs_arg(width):
    return None
'''


@pytest.mark.parametrize("factory, want", [
    ("buggy", "--torch f.py:buggy raised TypeError: inner bug ("),
    ("needs_arg", "--torch f.py:needs_arg cannot be called without arguments")])
def test_torch_factory_errors_are_told_apart(tmp_path, monkeypatch, factory, want):
    from trtbuild.models.user import load_module_factory

    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.py").write_text(FACTORIES)
    with pytest.raises(ValueError) as info:
        load_module_factory(f"f.py:{factory}")(0, False)
    assert want in str(info.value)
    if factory == "buggy":
        assert str(info.value).endswith("f.py, line 3)")  # the user's own raise, file and line


def test_rank_3_input_of_a_conv_network_says_the_batch_comes_first(own_net, capsys):
    code, text = _run(capsys, ["build", "net.py:plain", "--input", "input:3x16x16", "--torch", "net.py:make_model",
                               "--backend", "reference", "-o", "p.engine"])
    assert code != 0 and "Traceback" not in text and not (own_net / "p.engine").exists()
    assert "--input input:3x16x16 has rank 3, but --input gives the batch first, e.g. input:1x3x16x16" in text
    code, text = _run(capsys, ["build", "net.py:plain", "--input", "input:1x3x16x16", "--torch", "net.py:make_model",
                               "--backend", "reference", "-o", "p.engine"])
    assert code == 0 and (own_net / "p.engine").is_file()  # with the batch it builds

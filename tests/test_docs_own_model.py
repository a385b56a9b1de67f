"""The docs' "Your own model" page (docs/your-own-model.md): its exact code blocks run, the Python ones and the CLI
commands, so the section cannot rot. Files the page says to save ("Save as `net.py`:") are written to a tmp dir;
Python blocks are executed there; each `trtbuild ...` line runs through trtbuild.cli.main in a
fresh tmp dir (reference backend)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.own_model_page import PAGE, section_blocks
from trtbuild.cli import main
from trtbuild.models import registry
from trtbuild.weights import WeightMap

@pytest.fixture
def user_models():
    """Unregister the models the page's commands registered (origin file/module) afterwards."""
    yield
    for name, origin in list(registry.ORIGINS.items()):
        if origin.startswith(("file ", "module ")):
            registry.unregister(name)


def _seeded_fc_weight(workdir: Path) -> np.ndarray:
    """fc.weight of the page's make_model under seed 0, computed here with torch directly."""
    namespace: dict = {}
    exec(compile((workdir / "net.py").read_text(), str(workdir / "net.py"), "exec"), namespace)
    torch.manual_seed(0)
    return namespace["make_model"]().fc.weight.detach().numpy()


def test_section_has_the_promised_blocks():
    files, python, commands = section_blocks()
    assert list(files) == ["net.py"] and len(python) == 1
    assert [c.split()[:3] for c in commands] == [["trtbuild", "export-weights", "net.py:make_model"],
                                                  ["trtbuild", "build", "net.py:tinynet"],
                                                  ["trtbuild", "calibrate", "net.py:tinynet"],
                                                  ["trtbuild", "build", "net.py:tinynet"],
                                                  ["trtbuild", "parity", "net.py:tinynet"]]
    assert "--precision fp16" in commands[1] and "--layerwise --html r.html" in commands[4]
    assert "--precision int8 --calibration c.json" in commands[3]  # the own-model INT8 path is not a dead end


def test_python_blocks_run(tmp_path, monkeypatch, capsys, user_models):
    files, python, _ = section_blocks()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRTBUILD_BACKEND", "reference")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "net", raising=False)
    try:
        for body in python:
            exec(compile(body, str(PAGE), "exec"), {"__name__": "__readme__"})
    finally:
        sys.modules.pop("net", None)
    out = capsys.readouterr().out
    assert (tmp_path / "engines" / "tinynet-fp32.engine").is_file()
    assert (tmp_path / "engines" / "tinynet-fp16.engine").is_file()
    assert "precision=fp16" in out and "engine=engines/tinynet-fp16.engine" in out
    rows = re.findall(r"^\d+\s+(\S+)\s+(\S+)\s+1x", out, re.M)  # layerwise rows: tensor, torch module
    assert ("conv1", "bn1") in rows and ("gn", "gn") in rows and ("fc", "fc") in rows
    assert "unmapped layers (1, no torch module found by name and shape): add" in out
    assert out.count("result: PASS") == 2
    np.testing.assert_array_equal(WeightMap.load(tmp_path / "weights" / "tinynet.wts").get("fc.weight", (10, 16)),
                                  _seeded_fc_weight(tmp_path))


def test_cli_commands_run(tmp_path, monkeypatch, capsys, user_models):
    files, _, commands = section_blocks()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRTBUILD_BACKEND", "reference")
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, (command, capsys.readouterr())
    out = capsys.readouterr().out
    assert (tmp_path / "engines" / "tinynet-fp16.engine").is_file() and (tmp_path / "r.html").is_file()
    assert (tmp_path / "engines" / "tinynet-int8.engine").is_file()
    assert "quantization: int8; 3 convolutions/matmuls and 1 residual adds quantized" in out
    assert "weights: weights/tinynet.wts\n" in out  # build used the exported file, did not export again
    assert "unmapped layers (1, no torch module found by name and shape): add" in out
    assert out.rstrip().endswith("wrote r.html") and "result: PASS" in out
    np.testing.assert_array_equal(WeightMap.load(tmp_path / "weights" / "tinynet.wts").get("fc.weight", (10, 16)),
                                  _seeded_fc_weight(tmp_path))

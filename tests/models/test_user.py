"""User networks in the CLI: FILE.py[:NAME] and package.module:NAME (ModelSpec or network function),
one-sentence errors, no sys.modules pollution, entry-point models, export-weights from a factory
with a checkpoint, and the command-line conventions (python -m, -o, -v after the command, empty values)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from trtbuild.cli import main
from trtbuild.models import registry
from trtbuild.weights import WeightMap

REF = ["--backend", "reference"]

TORCH_PART = '''
import torch
from torch import nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.relu(self.conv1(x))), 1))


def make_model():
    return Small()
'''

NETWORK_PART = '''
from trtbuild.layers.basic import conv, global_avg_pool, linear, read_linear, relu


def small_net(network, weights, x):
    y = conv(network, x, weights.get("conv1.weight", (4, 3, 3, 3)), weights.get("conv1.bias"), "conv1", padding=1)
    y = global_avg_pool(network, relu(network, y, "relu"), "pool")
    return {"scores": linear(network, y, *read_linear(weights, "fc"), "fc")}
'''

SPEC_PART = '''
from trtbuild.models.registry import ModelSpec

SPEC = ModelSpec(name="small_spec", description="test", torch_factory=lambda seed=0, small=False: make_model().eval(),
                 build_network=small_net, input_shape=lambda small=False: (1, 3, 8, 8), output_names=["scores"])
'''


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name, origin in list(registry.ORIGINS.items()):  # models the test's commands registered
        if origin.startswith(("file ", "module ")):
            registry.unregister(name)


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def seeded_small(seed=0):
    torch.manual_seed(seed)
    ns: dict = {}
    exec(TORCH_PART, ns)
    return ns["make_model"]().eval()


FUNC = ["--input", "input:1x3x8x8", "--torch", "net.py:make_model"]


def test_network_function_builds_with_seeded_weights_and_default_paths(cwd, capsys):
    write(cwd / "net.py", TORCH_PART + NETWORK_PART)
    code, out, err = run(capsys, ["build", "net.py:small_net", *FUNC, "--no-progress", *REF])
    assert code == 0, err
    assert "weights: weights/small_net.wts (exported from the seeded PyTorch model, seed 0)" in out
    side = json.loads((cwd / "engines" / "small_net-fp32.engine.json").read_text())
    assert [t["name"] for t in side["outputs"]] == ["scores"] and side["inputs"][0]["shape"] == [1, 3, 8, 8]
    np.testing.assert_array_equal(WeightMap.load("weights/small_net.wts").get("fc.weight", (5, 4)),
                                  seeded_small(0).fc.weight.detach().numpy())


def test_network_function_parity_and_engine_parity(cwd, capsys):
    write(cwd / "net.py", TORCH_PART + NETWORK_PART)
    code, out, err = run(capsys, ["parity", "net.py:small_net", *FUNC, *REF])
    assert code == 0 and "scores  1x5" in out and "result: PASS" in out, err
    assert run(capsys, ["build", "net.py:small_net", *FUNC, "--precision", "fp16", "--no-progress", *REF])[0] == 0
    code, out, err = run(capsys, ["parity", "net.py:small_net", *FUNC, "--engine", "engines/small_net-fp16.engine",
                                  *REF])
    assert code == 0 and "precision=fp16" in out and "scores  1x5" in out, err


def test_parity_of_a_saved_engine_runs_the_batch_of_input_or_refuses_it(cwd, capsys):
    write(cwd / "net.py", TORCH_PART + NETWORK_PART)
    torch_part = ["--torch", "net.py:make_model"]
    assert run(capsys, ["build", "net.py:small_net", *FUNC, "--batch", "1,2,4", "--out", "dyn.engine",
                        "--no-progress", *REF])[0] == 0
    assert run(capsys, ["build", "net.py:small_net", *FUNC, "--out", "static.engine", "--no-progress", *REF])[0] == 0
    code, out, err = run(capsys, ["parity", "net.py:small_net", "--input", "input:3x3x8x8", *torch_part,
                                  "--engine", "dyn.engine", "--json", "r.json", *REF])
    assert code == 0 and "scores  3x5" in out, err
    assert json.loads((cwd / "r.json").read_text())["meta"]["batch"] == 3
    code, out, err = run(capsys, ["parity", "net.py:small_net", "--input", "input:3x3x8x8", *torch_part,
                                  "--engine", "dyn.engine", "--batch", "2", *REF])  # --batch says otherwise
    assert code == 0 and "scores  2x5" in out, err
    code, _, err = run(capsys, ["parity", "net.py:small_net", "--input", "input:8x3x8x8", *torch_part,
                                "--engine", "dyn.engine", *REF])
    assert code == 1 and ("batch 8 by --input input:8x3x8x8 is outside the batch range [1, 4] of engine dyn.engine "
                          "(input 'input')") in err
    code, _, err = run(capsys, ["parity", "net.py:small_net", "--input", "input:2x3x8x8", *torch_part,
                                "--engine", "static.engine", *REF])
    assert code == 1 and ("engine static.engine has a static batch of 1 (input 'input' (1, 3, 8, 8)) but batch 2 was "
                          "requested by --input input:2x3x8x8; give the engine's batch there or pass --batch 1") in err


def test_only_modelspec_of_a_file_is_the_default(cwd, capsys):
    write(cwd / "net.py", TORCH_PART + NETWORK_PART + SPEC_PART)
    code, out, err = run(capsys, ["build", "net.py", "--no-progress", *REF])
    assert code == 0, err
    assert (cwd / "engines" / "small_spec-fp32.engine").is_file() and (cwd / "weights" / "small_spec.wts").is_file()
    code, out, _ = run(capsys, ["models", *REF])
    assert "small_spec" in out and "file net.py" in out  # registered with its origin


def test_importable_module_reference(cwd, capsys, monkeypatch):
    pkg = cwd / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write(pkg / "nets.py", TORCH_PART + NETWORK_PART)
    monkeypatch.syspath_prepend(str(cwd))
    code, out, err = run(capsys, ["parity", "userpkg.nets:small_net", "--input", "input:1x3x8x8",
                                  "--torch", "userpkg.nets:make_model", *REF])
    assert code == 0 and "result: PASS" in out, err
    monkeypatch.delitem(sys.modules, "userpkg.nets")
    monkeypatch.delitem(sys.modules, "userpkg")


TWO_OUTPUTS_PART = '''

class Two(Small):
    def forward(self, x):  # (scores, pooled): the order --output gives
        pooled = self.pool(self.relu(self.conv1(x)))
        return self.fc(torch.flatten(pooled, 1)), pooled


def make_two():
    return Two()


def two_outputs(network, weights, x):  # returns pooled first
    y = conv(network, x, weights.get("conv1.weight", (4, 3, 3, 3)), weights.get("conv1.bias"), "conv1", padding=1)
    pooled = global_avg_pool(network, relu(network, y, "relu"), "pool")
    return {"pooled": pooled, "scores": linear(network, pooled, *read_linear(weights, "fc"), "fc")}
'''


def test_output_option_orders_and_checks_outputs(cwd, capsys):
    write(cwd / "net.py", TORCH_PART + NETWORK_PART + TWO_OUTPUTS_PART)
    code, _, err = run(capsys, ["build", "net.py:small_net", *FUNC, "--output", "nope", "--no-progress", *REF])
    assert code == 1 and "build_network returned no tensor for outputs ['nope']" in err
    two = ["--input", "input:1x3x8x8", "--torch", "net.py:make_two"]
    # the function returns {pooled, scores}, the torch forward (scores, pooled): --output gives the order
    code, out, err = run(capsys, ["parity", "net.py:two_outputs", *two, "--output", "scores", "--output", "pooled",
                                  *REF])
    assert code == 0 and "result: PASS" in out, out + err
    assert out.index("scores  1x5") < out.index("pooled  1x4x1x1")
    code, out, _ = run(capsys, ["build", "net.py:two_outputs", *two, "--output", "scores", "--output", "pooled",
                                "--no-progress", *REF])
    side = json.loads((cwd / "engines" / "two_outputs-fp32.engine.json").read_text())
    assert code == 0 and [t["name"] for t in side["outputs"]] == ["scores", "pooled"]
    # without --output, the function's order is taken: pooled is compared with the torch scores
    code, out, _ = run(capsys, ["parity", "net.py:two_outputs", *two, *REF])
    assert code == 1 and "result: FAIL" in out and "shape mismatch" in out


@pytest.mark.parametrize("setup, argv, message", [
    (None, ["missing.py:f"], "model file missing.py does not exist"),
    ("notpy.txt", ["notpy.txt:f"], "model file notpy.txt is not a Python file (.py)"),
    ("syntax", ["net.py:f"], "cannot import model file {cwd}/net.py, line 3: syntax error"),
    ("raises", ["net.py:f"], "cannot import model file {cwd}/net.py, line 4: RuntimeError: boom"),
    ("good", ["net.py:nope"], "net.py has no attribute 'nope'; what it defines that could fit: functions "
                              "make_model, small_net"),
    ("good", ["net.py:torch"], "net.py:torch is a module, not a ModelSpec or a network function"),
    ("good", ["net.py:small_net"], "net.py:small_net is a network function: give its input as --input NAME:SHAPE"),
    ("good", ["net.py:small_net", "--input", "input:1x3xfoo"], "--input 'input:1x3xfoo': expected NAME:SHAPE"),
    ("good", ["net.py:small_net", "--input", "1x3x8x8"], "--input '1x3x8x8': expected NAME:SHAPE"),
    ("good", ["net.py"], "net.py defines no ModelSpec; name the ModelSpec or network function to use as net.py:NAME"),
    ("two", ["net.py"], "net.py defines 2 ModelSpecs (SPEC, OTHER); name the ModelSpec or network function"),
    ("clash", ["net.py"], "net.py:SPEC defines a model named 'alexnet', the name of a built-in model; rename it"),
    ("good", ["alexnet", "--input", "x:1x3x8x8"], "--input only apply to a network function"),
    ("bare", ["net.py:bare_net", "--input", "input:1x3x8x8", "--torch", "net.py:make_model"],
     "network function net.py:bare_net returned an ITensor, not a dict"),
    ("bare", ["net.py:bare_net", "--input", "input:1x3x8x8", "--torch", "net.py:make_int"],
     "--torch net.py:make_int returned an int, not a torch.nn.Module"),
    ("good", ["nosuchmodel"], "unknown model 'nosuchmodel'; known models: alexnet"),
    ("good", ["no_such_pkg.mod:f"], "no module named 'no_such_pkg'"),
])
def test_errors_are_one_sentence(cwd, capsys, setup, argv, message):
    body = {"good": TORCH_PART + NETWORK_PART, "syntax": "x = 1\n\ndef f(:\n",
            "raises": "import os\n\n\nraise RuntimeError('boom')\n",
            "two": TORCH_PART + NETWORK_PART + SPEC_PART + "OTHER = SPEC\n",
            "bare": TORCH_PART + NETWORK_PART + "\n\ndef bare_net(network, weights, x):\n"
                    "    return small_net(network, weights, x)['scores']\n\n\ndef make_int():\n    return 3\n",
            "clash": TORCH_PART + NETWORK_PART + SPEC_PART.replace('"small_spec"', '"alexnet"')}.get(setup)
    if setup == "notpy.txt":
        (cwd / "notpy.txt").write_text("")
    elif body is not None:
        (cwd / "net.py").write_text(body)
    code, out, err = run(capsys, ["build", *argv, "--no-progress", *REF])
    assert code == 1
    line = err.strip()
    assert line.startswith("trtbuild: error: ") and "\n" not in line and "Traceback" not in err
    assert message.format(cwd=cwd.resolve()) in line
    assert registry.ORIGINS.get("alexnet") == "built-in"


def test_user_file_does_not_shadow_real_modules(cwd, capsys):
    import json as real_json

    write(cwd / "json.py", TORCH_PART + NETWORK_PART)
    before = set(sys.modules)
    code, _, err = run(capsys, ["parity", "json.py:small_net", "--input", "input:1x3x8x8", "--torch",
                                "json.py:make_model", *REF])
    assert code == 0, err
    assert sys.modules["json"] is real_json
    added = set(sys.modules) - before
    assert added and all(name.startswith("_trtbuild_user_json_") for name in added if "json" in name)
    assert str(cwd) not in sys.path


def test_export_weights_from_factory_with_checkpoint(cwd, capsys):
    write(cwd / "net.py", TORCH_PART + NETWORK_PART)
    assert run(capsys, ["export-weights", "net.py:make_model", "--seed", "3", "-o", "seeded.wts"])[0] == 0
    np.testing.assert_array_equal(WeightMap.load("seeded.wts").get("conv1.weight", (4, 3, 3, 3)),
                                  seeded_small(3).conv1.weight.detach().numpy())
    trained = seeded_small(7)
    torch.save({"state_dict": trained.state_dict()}, cwd / "ckpt.pt")
    code, out, err = run(capsys, ["export-weights", "net.py:make_model", "--checkpoint", "ckpt.pt", "-o", "t.wts"])
    assert code == 0 and "loaded ckpt.pt into net.py:make_model" in out, err
    for name, tensor in trained.state_dict().items():
        np.testing.assert_array_equal(WeightMap.load("t.wts").get(name, tuple(tensor.shape)), tensor.numpy())
    bad = dict(trained.state_dict(), extra=torch.zeros(2))
    torch.save(bad, cwd / "bad.pt")
    code, _, err = run(capsys, ["export-weights", "net.py:make_model", "--checkpoint", "bad.pt", "-o", "b.wts"])
    assert code == 1 and "checkpoint bad.pt has 1 tensors that net.py:make_model lacks, e.g. ['extra']" in err
    assert not (cwd / "b.wts").exists()


FAKE_ENTRY_POINTS = """\
[trtbuild.models]
fake_good = fake_pkg.models:all_specs
fake_broken = fake_pkg.missing:SPEC
fake_wrong = fake_pkg.models:NOT_A_SPEC
"""


def test_entry_point_models_are_listed_built_and_broken_ones_reported(cwd, capsys, monkeypatch):
    site = cwd / "site"
    (site / "fake_pkg").mkdir(parents=True)
    (site / "fake_pkg" / "__init__.py").write_text("")
    write(site / "fake_pkg" / "models.py", TORCH_PART + NETWORK_PART + SPEC_PART.replace('"small_spec"', '"fake_net"')
          + "\nNOT_A_SPEC = 42\n\ndef all_specs():\n    return [SPEC]\n")
    info = site / "fake_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake_dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(FAKE_ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    from trtbuild.models.entry_points import register_entry_points

    try:
        register_entry_points()
        code, out, err = run(capsys, ["models", *REF])
        assert code == 0, err
        row = next(line for line in out.splitlines() if line.startswith("fake_net "))
        assert "entry point fake_dist" in row and "1x3x8x8" in row and "auto" in row
        assert next(line for line in out.splitlines() if line.startswith("alexnet ")).split()[1] == "built-in"
        errors = [line for line in out.splitlines() if line.startswith("error: ")]
        assert len(errors) == 2
        assert "entry point 'fake_broken = fake_pkg.missing:SPEC' of fake_dist failed to load: ModuleNotFoundError" \
            in errors[0]
        assert ("entry point 'fake_wrong = fake_pkg.models:NOT_A_SPEC' of fake_dist gave int, not a ModelSpec"
                in errors[1])
        code, out, err = run(capsys, ["parity", "fake_net", *REF])
        assert code == 0 and "result: PASS" in out, err
        code, out, err = run(capsys, ["build", "fake_broken", *REF])
        assert code == 1 and "2 entry point(s) failed to load, see `trtbuild models`" in err
    finally:
        monkeypatch.undo()
        for name in [n for n in sys.modules if n == "fake_pkg" or n.startswith("fake_pkg.")]:
            del sys.modules[name]
        register_entry_points()
    assert "fake_net" not in registry.MODELS and not registry.LOAD_ERRORS


def test_python_dash_m_trtbuild(cwd):
    import os

    import trtbuild

    env = dict(os.environ, PYTHONPATH=str(os.path.dirname(os.path.dirname(trtbuild.__file__))))
    done = subprocess.run([sys.executable, "-m", "trtbuild", "--version"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.startswith(f"trtbuild {trtbuild.__version__}")


def test_short_out_and_verbose_after_the_command(cwd, capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: calls.append(kw["level"]))
    code, out, err = run(capsys, ["build", "alexnet", "--small", "-o", "a.engine", "--no-progress", "-v", *REF])
    assert code == 0, err
    assert (cwd / "a.engine").is_file() and calls == [logging.INFO]
    assert run(capsys, ["models", *REF])[0] == 0 and calls[-1] == logging.WARNING


@pytest.mark.parametrize("argv, option", [
    (["build", "alexnet", "--out", ""], "-o/--out"),
    (["build", "alexnet", "--weights", ""], "--weights"),
    (["parity", "alexnet", "--engine", ""], "--engine"),
    (["parity", "alexnet", "--json", ""], "--json"),
    (["parity", "alexnet", "--html", " "], "--html"),
    (["export-weights", "alexnet", "-o", ""], "-o/--out"),
    (["export-weights", "--checkpoint", "", "-o", "x.wts"], "--checkpoint"),
    (["export-onnx", "alexnet", "--out", ""], "-o/--out"),
    (["build", ""], "model"),
])
def test_empty_values_are_refused_naming_the_option(cwd, capsys, argv, option):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"error: argument {option}: empty value: give a file name or value, or leave the option out" in err
    assert list(cwd.iterdir()) == []

"""The export-weights command module: checkpoint conversion, registry models (get_torch_model faked), errors."""

import argparse

import numpy as np
import pytest
import safetensors.numpy
import torch

from trtbuild.cli import export_weights as cmd
from trtbuild.models import registry
from trtbuild.weights import WeightMap


def parse(argv):
    parser = argparse.ArgumentParser(prog="trtbuild")
    cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def trained_model():
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    model(torch.randn(2, 3, 6, 6))
    return model


def test_parser_registers_command_and_defaults():
    args = parse(["export-weights", "--checkpoint", "a.pth", "--out", "a.wts"])
    assert args.command == "export-weights" and args.func is cmd.run
    assert args.model is None and args.seed is None and args.format is None


def test_a_source_is_required_and_given_once(tmp_path, capsys):
    assert cmd.run(parse(["export-weights", "--out", str(tmp_path / "a.wts")])) == 2
    assert "give a model (a name, FILE.py:FACTORY or module:FACTORY) or --checkpoint FILE" in capsys.readouterr().err
    assert cmd.run(parse(["export-weights", "m", "--model", "m", "--out", str(tmp_path / "a.wts")])) == 2
    assert "give the model once" in capsys.readouterr().err
    assert not (tmp_path / "a.wts").exists()


def test_checkpoint_pth_to_wts(tmp_path, capsys):
    model = trained_model()
    src, out = tmp_path / "model.pth", tmp_path / "model.wts"
    torch.save({"epoch": 4, "state_dict": model.state_dict()}, src)
    assert cmd.run(parse(["export-weights", "--checkpoint", str(src), "--out", str(out)])) == 0
    printed = capsys.readouterr().out
    assert "wrote 6 tensors" in printed and "[wts]" in printed
    assert "num_batches_tracked" in printed and "checkpoint['state_dict']" in printed
    assert out.read_bytes().startswith(b"6\n0.weight 108 ")
    wm = WeightMap.load(out)
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point():
            expected = tensor.numpy()
            np.testing.assert_array_equal(wm.get(name, expected.shape).view(np.uint32), expected.view(np.uint32))


def test_checkpoint_wts_to_safetensors_with_explicit_format(tmp_path):
    src, out = tmp_path / "w.wts", tmp_path / "w.bin"
    src.write_bytes(b"2\na 2 3f800000 c0000000\nb 1 3f000000\n")
    argv = ["export-weights", "--checkpoint", str(src), "--out", str(out), "--format", "safetensors"]
    assert cmd.run(parse(argv)) == 0
    back = safetensors.numpy.load_file(str(out))
    np.testing.assert_array_equal(back["a"], [1.0, -2.0])
    np.testing.assert_array_equal(back["b"], [0.5])


def test_checkpoint_errors_are_reported_not_raised(tmp_path, capsys):
    src = tmp_path / "bad.wts"
    src.write_bytes(b"1\nw 2 3f800000 zz\n")
    assert cmd.run(parse(["export-weights", "--checkpoint", str(src), "--out", str(tmp_path / "o.pt")])) == 1
    err = capsys.readouterr().err
    assert "export-weights: error:" in err and "line 2, column 14" in err and "'w'" in err
    assert not (tmp_path / "o.pt").exists()

    assert cmd.run(parse(["export-weights", "--checkpoint", str(src), "--out", str(tmp_path / "o.npy")])) == 1
    assert "unknown weight file extension '.npy'" in capsys.readouterr().err


def test_nonfinite_checkpoint_needs_flag(tmp_path, capsys):
    src, out = tmp_path / "nan.pt", tmp_path / "nan.wts"
    torch.save({"w": torch.tensor([1.0, float("nan")])}, src)
    assert cmd.run(parse(["export-weights", "--checkpoint", str(src), "--out", str(out)])) == 1
    assert "non-finite" in capsys.readouterr().err and not out.exists()
    argv = ["export-weights", "--checkpoint", str(src), "--out", str(out), "--allow-nonfinite"]
    assert cmd.run(parse(argv)) == 0
    assert out.read_bytes() == b"1\nw 2 3f800000 7fc00000\n"


def test_seed_with_checkpoint_is_a_usage_error(tmp_path, capsys):
    argv = ["export-weights", "--checkpoint", "x.pth", "--out", str(tmp_path / "x.wts"), "--seed", "3"]
    assert cmd.run(parse(argv)) == 2
    assert "--seed and --small only apply with --model" in capsys.readouterr().err


@pytest.fixture
def fake_registry(monkeypatch):
    calls = []

    def get_torch_model(name, seed, small=False):
        calls.append((name, seed, small) if small else (name, seed))
        if name != "tiny":
            raise KeyError(f"unknown model {name!r}; known: tiny")
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))

    monkeypatch.setattr(registry, "get_torch_model", get_torch_model)  # the module the command imported
    return calls


@pytest.mark.parametrize("fmt, suffix", [("wts", ".wts"), ("safetensors", ".safetensors"), ("pt", ".pt")])
def test_model_from_registry(tmp_path, fake_registry, capsys, fmt, suffix):
    out = tmp_path / f"tiny{suffix}"
    assert cmd.run(parse(["export-weights", "--model", "tiny", "--out", str(out), "--seed", "5"])) == 0
    assert fake_registry == [("tiny", 5)]
    torch.manual_seed(5)
    expected = torch.nn.Linear(3, 2).weight.detach().numpy()
    np.testing.assert_array_equal(WeightMap.load(out).get("0.weight", (2, 3)), expected)
    assert ("1.num_batches_tracked" in WeightMap.load(out)) == (fmt != "wts")


def test_model_seed_defaults_to_zero_and_unknown_model_fails(tmp_path, fake_registry, capsys):
    assert cmd.run(parse(["export-weights", "--model", "tiny", "--out", str(tmp_path / "a.wts")])) == 0
    assert fake_registry[-1] == ("tiny", 0)
    assert cmd.run(parse(["export-weights", "--model", "huge", "--out", str(tmp_path / "b.wts")])) == 1
    assert "cannot build model 'huge'" in capsys.readouterr().err
    assert not (tmp_path / "b.wts").exists()


def test_small_variant_feeds_build_small(tmp_path, capsys, monkeypatch):
    """export-weights --small writes the weights that `build --small --weights` expects."""
    from trtbuild.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["export-weights", "--model", "resnet18", "--small", "--out", "r.wts"]) == 0
    assert main(["build", "resnet18", "--small", "--weights", "r.wts", "--backend", "reference",
                 "--no-progress", "--out", "r.engine"]) == 0
    full = tmp_path / "full.wts"
    assert main(["export-weights", "--model", "resnet18", "--out", str(full)]) == 0
    assert WeightMap.load(full).shape_of("conv1.weight") == (64 * 3 * 7 * 7,)  # .wts stores tensors flat
    assert WeightMap.load("r.wts").shape_of("conv1.weight") == (8 * 3 * 7 * 7,)


def test_out_parent_directories_are_created_like_build_and_parity(tmp_path, fake_registry):
    src = tmp_path / "w.wts"
    src.write_bytes(b"1\na 1 3f800000\n")
    out = tmp_path / "new" / "dir" / "w.safetensors"
    assert cmd.run(parse(["export-weights", "--checkpoint", str(src), "--out", str(out)])) == 0
    np.testing.assert_array_equal(safetensors.numpy.load_file(str(out))["a"], [1.0])
    out2 = tmp_path / "other" / "tiny.wts"
    assert cmd.run(parse(["export-weights", "--model", "tiny", "--out", str(out2)])) == 0
    assert WeightMap.load(out2).shape_of("0.weight") == (6,)


def test_out_directory_that_cannot_be_created_is_reported(tmp_path, capsys):
    src = tmp_path / "w.wts"
    src.write_bytes(b"1\na 1 3f800000\n")
    (tmp_path / "file").write_bytes(b"")
    out = tmp_path / "file" / "sub" / "w.wts"  # a path "under" a regular file
    assert cmd.run(parse(["export-weights", "--checkpoint", str(src), "--out", str(out)])) == 1
    err = capsys.readouterr().err
    assert f"the parent {tmp_path / 'file'} of --out {out} is a file, not a directory" in err  # before any work
    assert not out.parent.exists() and (tmp_path / "file").read_bytes() == b""

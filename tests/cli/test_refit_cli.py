"""`trtbuild build --refit/--strip-weights` and `trtbuild refit ENGINE --weights W -o OUT` on the reference backend:
the refit engine file equals an engine built from the new weights; bad requests are one sentence, nothing written."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from trtbuild.backend import load_trt
from trtbuild.cli import main
from trtbuild.engine import load_engine
from trtbuild.engine.model import build_model
from trtbuild.engine.runner import Engine
from trtbuild.models import registry
from trtbuild.weights import WeightMap, export_weights

trt = load_trt("reference")


@pytest.fixture
def built(tmp_path, monkeypatch, capsys):
    """A weight-stripped resnet18 --small engine built by the CLI from seed 0 (weights/…wts), refittable with
    other weights (--refit any)."""
    monkeypatch.chdir(tmp_path)
    rc = main(["build", "resnet18", "--small", "--strip-weights", "--refit", "any", "--backend", "reference",
               "--no-progress", "-o", "s.engine"])
    assert rc == 0
    assert "refit: any, weights stripped; 42 named weights, 0 state_dict keys baked in" in capsys.readouterr().out
    return tmp_path / "s.engine"


def test_build_refit_any_records_the_mode(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["build", "repvgg_a0", "--small", "--refit", "any", "--backend", "reference", "--no-progress",
                 "-o", "r.engine"]) == 0
    side = json.loads((tmp_path / "r.engine.json").read_text())
    assert side["refit"]["mode"] == "any" and side["refit"]["stripped"] is False
    assert side["weights"]["sha256"] == hashlib.sha256((tmp_path / side["weights"]["path"]).read_bytes()).hexdigest()
    assert load_engine(tmp_path / "r.engine")._engine.refittable
    capsys.readouterr()
    assert main(["inspect", "r.engine"]) == 0
    assert "  refit               any; 46 named weights, 0 state_dict keys baked in\n" in capsys.readouterr().out


def test_refit_writes_an_engine_equal_to_one_built_from_the_new_weights(built, tmp_path, capsys):
    new = tmp_path / "new.safetensors"
    export_weights(registry.get_torch_model("resnet18", seed=1, small=True), new)
    assert main(["refit", str(built), "--weights", str(new), "-o", "out.engine"]) == 0
    assert "refit 42 weights from" in capsys.readouterr().out
    engine = load_engine(tmp_path / "out.engine")
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    rebuilt = Engine(build_model("resnet18", WeightMap.load(new), trt, small=True, progress=False))
    assert torch.equal(engine(x)["logits"], rebuilt(x)["logits"])
    assert engine.sidecar.weights == {"path": str(new), "sha256": hashlib.sha256(new.read_bytes()).hexdigest()}
    with pytest.raises(Exception, match="weight-stripped"):  # the input engine is still the stripped one
        load_engine(built)(x)


def test_refit_refuses_overwriting_its_input_and_foreign_weights(built, tmp_path, capsys):
    before = built.read_bytes()
    new = tmp_path / "other.wts"
    export_weights(registry.get_torch_model("repvgg_a0", seed=1, small=True), new)
    assert main(["refit", str(built), "--weights", str(new), "-o", str(built)]) == 1
    assert capsys.readouterr().err == (f"trtbuild: error: -o {built} is the engine being refit (or its sidecar); write "
                                       "the refit engine to another file so that the original stays as it is\n")
    assert main(["refit", str(built), "--weights", str(new), "-o", "out.engine"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trtbuild: error: 'conv1.weight' (and ") and err.count("\n") == 1
    assert f"is missing from {new}, and engine weights 'conv1.weight' are computed from it" in err
    assert built.read_bytes() == before and not (tmp_path / "out.engine").exists()


def test_a_default_stripped_engine_is_refit_with_its_own_weights_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["build", "resnet18", "--small", "--strip-weights", "--backend", "reference", "--no-progress",
                 "-o", "s.engine"]) == 0
    assert "refit: identical, weights stripped" in capsys.readouterr().out
    new = tmp_path / "new.safetensors"
    export_weights(registry.get_torch_model("resnet18", seed=1, small=True), new)
    assert main(["refit", "s.engine", "--weights", str(new), "-o", "bad.engine"]) == 1
    assert capsys.readouterr().err == (f"trtbuild: error: engine weights 'conv1.weight' from {new} differ from the "
                                       "build's, but the engine was built with --refit identical "
                                       "(BuilderFlag.REFIT_IDENTICAL), where TensorRT's results with other weights "
                                       "are unpredictable: rebuild it with --refit any\n")
    assert not (tmp_path / "bad.engine").exists()
    own = tmp_path / "weights" / "resnet18-small.wts"
    assert main(["refit", "s.engine", "--weights", str(own), "-o", "full.engine"]) == 0
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = registry.get_torch_model("resnet18", seed=0, small=True).eval()(x)
    torch.testing.assert_close(load_engine(tmp_path / "full.engine")(x)["logits"], expected, rtol=1e-4, atol=1e-4)

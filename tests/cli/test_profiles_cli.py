"""`trtbuild build --profile ... --profile ...` (several optimization profiles), then `parity` (a
table per profile) and `export-triton` (every profile in Triton's configuration), on the reference
backend with resnet18 --small."""

from __future__ import annotations

import json

import pytest

from helpers.cli_run import REF, main_in, run_cli

PROFILES = ["--profile", "input:1x3x64x64..4x3x64x64", "--profile", "8x3x64x64,8x3x64x64,16x3x64x64"]
ENGINE = "engines/resnet18-small-fp32.engine"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("profiles-cli")
    main_in(work, ["build", "resnet18", "--small", "--no-progress", *PROFILES, *REF])
    return work


def test_build_records_and_prints_every_profile(built, capsys, monkeypatch):
    monkeypatch.chdir(built)
    side = json.loads((built / f"{ENGINE}.json").read_text())
    assert side["inputs"] == [{"name": "input", "shape": [-1, 3, 64, 64], "dtype": "FLOAT"}]
    assert [(p["input"]["min"][0], p["input"]["opt"][0], p["input"]["max"][0]) for p in side["profiles"]] == \
        [(1, 4, 4), (8, 8, 16)]  # MIN..MAX means OPT = MAX
    assert side["profile"] == side["profiles"][0]  # read by a trtbuild that knows one profile
    code, out, err = run_cli(capsys, ["build", "resnet18", "--small", "--no-progress", "--out", "again.engine",
                                      *PROFILES, *REF])
    assert code == 0, err
    assert "profile 0 input: min [1, 3, 64, 64] opt [4, 3, 64, 64] max [4, 3, 64, 64]" in out
    assert "profile 1 input: min [8, 3, 64, 64] opt [8, 3, 64, 64] max [16, 3, 64, 64]" in out


@pytest.mark.parametrize("args, message", [
    (["--profile", "image:1x3x64x64..4x3x64x64"], "--profile 'image:1x3x64x64..4x3x64x64' names input 'image', "
                                                    "but the model's input is 'input'"),
    (["--profile", "1x3x64x64..4x3x64x64", "--batch", "1,2,4"], "--profile and --batch exclude each other"),
    (["--profile", "1x3x64x64..4x3x64x64", "--profile", "1x64x64..2x64x64"],
     "optimization profiles must all have the input's rank, got ranks [4, 3] (profiles 1x3x64x64..4x3x64x64, "
     "1x64x64..2x64x64)"),
])
def test_bad_profiles_are_one_sentence(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, ["build", "resnet18", "--small", "--no-progress", *args, *REF])
    assert code != 0 and message in err
    assert not (tmp_path / "engines").exists()


def test_parity_prints_a_table_per_profile(built, capsys, monkeypatch):
    monkeypatch.chdir(built)
    code, out, err = run_cli(capsys, ["parity", "resnet18", "--small", "--engine", ENGINE, "--json", "p.json", *REF])
    assert code == 0, err
    assert "optimization profile 0: PASS" in out and "optimization profile 1: PASS" in out
    assert "batch=4 profile=0" in out and "batch=8 profile=1" in out  # each profile's opt batch
    reports = [json.loads((built / f"p.profile{k}.json").read_text()) for k in (0, 1)]
    assert [r["meta"]["profile"] for r in reports] == [0, 1]
    code, _, err = run_cli(capsys, ["parity", "resnet18", "--small", "--engine", ENGINE, "--batch", "6", *REF])
    assert code != 0 and ("batch 6 is in no optimization profile of engine engines/resnet18-small-fp32.engine "
                          "(input 'input' batch ranges: profile 0 [1, 4]; profile 1 [8, 16])") in err


def test_parity_refuses_a_profile_file_that_names_its_engine(built, capsys, monkeypatch, tmp_path):
    """--html x.engine writes x.profile0.engine for profile 0: refused, before any work, when that is the engine."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(built / ENGINE, "x.profile0.engine")
    shutil.copy(built / f"{ENGINE}.json", "x.profile0.engine.json")
    before = (tmp_path / "x.profile0.engine").read_bytes()
    code, _, err = run_cli(capsys, ["parity", "resnet18", "--small", "--engine", "x.profile0.engine", "--html",
                                    "x.engine", *REF])
    assert code != 0 and "x.profile0.engine" in err
    assert (tmp_path / "x.profile0.engine").read_bytes() == before


def test_export_triton_lists_every_profile(built, capsys, monkeypatch):
    text_format = pytest.importorskip("google.protobuf.text_format")
    mc = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    from trtbuild.serving.config import config_text

    monkeypatch.chdir(built)
    code, _, err = run_cli(capsys, ["export-triton", "resnet18", "--small", "--engine", ENGINE, "--repo", "repo",
                                    "--kind", "python"])
    assert code == 0, err
    text = (built / "repo" / "resnet18" / "config.pbtxt").read_text()
    cfg = text_format.Parse(text, mc.ModelConfig())
    assert cfg.max_batch_size == 16  # the largest batch of any profile
    assert list(cfg.dynamic_batching.preferred_batch_size) == [4, 8, 16]
    assert [list(g.profile) for g in cfg.instance_group] == [[]]  # trtbuild's Engine picks the profile itself
    assert text.startswith("# batches 5 to 7: in no optimization profile of the engine")
    side = json.loads((built / f"{ENGINE}.json").read_text())
    # Triton's TensorRT backend chooses among the profiles an instance group lists (a real TensorRT engine's
    # sidecar has the same profile keys; the reference plan itself is refused by --kind tensorrt)
    cfg = text_format.Parse(config_text(side, "r18", kind="tensorrt"), mc.ModelConfig())
    assert [list(g.profile) for g in cfg.instance_group] == [["0", "1"]] and cfg.max_batch_size == 16
    cfg = text_format.Parse(config_text(side, "r18", kind="tensorrt", max_batch=4), mc.ModelConfig())
    assert cfg.max_batch_size == 4 and list(cfg.dynamic_batching.preferred_batch_size) == [4]


def test_the_cache_key_covers_every_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def build(*profiles):
        code, out, err = run_cli(capsys, ["build", "resnet18", "--small", "--no-progress", "--cache", "c", "--out",
                                          "e.engine", *(a for p in profiles for a in ("--profile", p)), *REF])
        assert code == 0, err
        return next(line for line in out.splitlines() if line.startswith("cache "))

    first = build("1x3x64x64..4x3x64x64", "8x3x64x64..16x3x64x64")
    assert first.startswith("cache miss") and build("1x3x64x64..4x3x64x64", "8x3x64x64..16x3x64x64") == \
        first.replace("miss", "hit")
    assert build("1x3x64x64..4x3x64x64", "8x3x64x64..12x3x64x64").startswith("cache miss")  # another second profile
    assert build("1x3x64x64..4x3x64x64").startswith("cache miss")  # the first profile alone

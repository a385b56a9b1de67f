"""`trtbuild build --cache DIR` / TRTBUILD_CACHE and `trtbuild cache ls|clear` on the reference and TensorRT-RTX."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import trtbuild.engine.build as engine_build
from trtbuild.backend import load_trt
from trtbuild.engine import load_engine
from trtbuild.engine.cache import EngineCache, key_for_model_build
from trtbuild.engine.model import get_spec

from helpers.cli_run import REF, run_cli

BUILD = ["build", "alexnet", "--small", "--no-progress"]


@pytest.fixture
def builds(monkeypatch):
    """A list that grows by one for every engine the builder really serializes."""
    calls = []
    real = engine_build.serialize_network

    def counting(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(engine_build, "serialize_network", counting)
    return calls


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_second_build_is_a_hit_without_building(cwd, capsys, builds):
    code, out, err = run_cli(capsys, [*BUILD, *REF, "--cache", "c"])
    assert code == 0, err
    miss = next(line for line in out.splitlines() if line.startswith("cache miss: "))
    assert len(builds) == 1 and (cwd / "engines" / "alexnet-small-fp32.engine").is_file()
    before = _files(cwd)
    code, out, err = run_cli(capsys, [*BUILD, *REF, "--cache", "c", "-o", "again.engine", "--timing-cache", "t.cache"])
    assert code == 0, err
    assert len(builds) == 1  # nothing was built
    assert "timing cache: not used: the engine came from the cache" in out
    assert f"cache hit: {miss.split()[2]} (c)" in out
    assert "reused alexnet (small) [fp32] from the cache in" in out
    after = _files(cwd)
    # nothing but the requested engine and its sidecar was written (the cache only records the use)
    assert set(after) - set(before) == {"again.engine", "again.engine.json"}
    assert all(after[name] == data for name, data in before.items() if not name.startswith("c/"))
    assert after["again.engine"] == before["engines/alexnet-small-fp32.engine"]
    side = json.loads(after["again.engine.json"])
    assert "cache_key" not in side and side["weights"]["path"] == "weights/alexnet-small.wts"
    x = torch.rand(1, 3, 96, 96)
    torch.testing.assert_close(load_engine("again.engine")(input=x)["logits"],
                               load_engine("engines/alexnet-small-fp32.engine")(input=x)["logits"], rtol=0, atol=0)
    code, out, _ = run_cli(capsys, [*BUILD, *REF, "--cache", "c", "--precision", "fp16", "-o", "h.engine"])
    assert code == 0 and "cache miss: " in out and len(builds) == 2  # another precision: another key


def test_environment_variable_and_truncated_entry(cwd, capsys, builds, monkeypatch):
    monkeypatch.setenv("TRTBUILD_CACHE", str(cwd / "envcache"))
    assert run_cli(capsys, [*BUILD, *REF])[0] == 0
    [entry] = (cwd / "envcache").glob("*.engine")
    entry.write_bytes(entry.read_bytes()[:1000])  # a truncated entry: a miss, rebuilt and stored again
    code, out, err = run_cli(capsys, [*BUILD, *REF, "-o", "b.engine"])
    assert code == 0, err
    assert "cache miss: " in out and len(builds) == 2
    code, out, _ = run_cli(capsys, [*BUILD, *REF, "-o", "c.engine"])
    assert code == 0 and "cache hit: " in out and len(builds) == 2
    assert Path("c.engine").read_bytes() == Path("b.engine").read_bytes() == entry.read_bytes()


def test_ls_json_and_clear(cwd, capsys, monkeypatch):
    assert run_cli(capsys, [*BUILD, *REF, "--cache", "c"])[0] == 0
    assert run_cli(capsys, [*BUILD, *REF, "--cache", "c", "--precision", "fp16"])[0] == 0
    code, out, _ = run_cli(capsys, ["cache", "ls", "--dir", "c"])
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("cache c: 2 entries, ") and lines[0].endswith(" of 4.0 GiB")
    assert "alexnet  reference  fp16  any device  " in lines[1]  # most recently used first
    assert "alexnet  reference  fp32  any device  " in lines[2]
    code, out, _ = run_cli(capsys, ["cache", "ls", "--dir", "c", "--json"])
    entries = json.loads(out)
    assert run_cli(capsys, ["cache", "ls", "--cache", "c", "--json"])[1] == out  # build's spelling of the option
    assert [e["precision"] for e in entries] == ["fp16", "fp32"]
    sizes = [os.path.getsize(e["path"]) + os.path.getsize(e["path"] + ".json") for e in entries]
    assert [e["bytes"] for e in entries] == sizes and all(len(e["digest"]) == 64 for e in entries)
    monkeypatch.setenv("TRTBUILD_CACHE", "c")
    code, out, _ = run_cli(capsys, ["cache", "clear"])
    assert code == 0 and out.startswith("cache c: removed 2 entries (")
    assert not list(Path("c").glob("*.engine*")) and Path("engines/alexnet-small-fp16.engine").is_file()
    assert json.loads(run_cli(capsys, ["cache", "ls", "--json"])[1]) == []
    monkeypatch.delenv("TRTBUILD_CACHE")
    code, _, err = run_cli(capsys, ["cache", "ls"])
    assert code == 1 and "trtbuild cache ls: no cache directory: give --dir DIR or set TRTBUILD_CACHE" in err


def test_two_concurrent_builds_make_one_entry_and_two_valid_engines(cwd, capsys):
    assert run_cli(capsys, ["export-weights", "alexnet", "--small", "-o", "w.wts"])[0] == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(engine_build.__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-m", "trtbuild", *BUILD, *REF, "--weights", "w.wts", "--cache", "c",
                               "-o", f"{name}.engine"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for name in ("a", "b")]
    # hold the whole cache until both processes are waiting for it, so that they look the key up together:
    # without the key's build lock both would miss and build
    key = key_for_model_build(load_trt("reference"), get_spec("alexnet"), "w.wts", small=True)
    with EngineCache("c")._locked():
        started = [[p.stdout.readline() for _ in range(2)] for p in procs]  # "backend: ...", "weights: w.wts"
        time.sleep(2.0)  # the key is computed (the network defined and hashed) in well under that
    assert all(lines[1] == "weights: w.wts\n" for lines in started), started
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    said = sorted(next(line.split(":")[0] for line in out.splitlines() if line.startswith("cache ")) for out, _ in outs)
    assert said == ["cache hit", "cache miss"]  # the second waited for the first and reused its engine
    assert all(f": {key.short} (c)" in out for out, _ in outs)
    assert len(list(Path("c").glob("*.engine"))) == 1 and not list(Path("c").glob(".*.tmp"))
    x = torch.rand(1, 3, 96, 96)
    a, b = (load_engine(f"{name}.engine")(input=x)["logits"] for name in ("a", "b"))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert torch.isfinite(a).all() and a.shape == (1, 10)


def test_tensorrt_rtx_build_is_cached_per_target(cwd, capsys, builds, rtx):
    rtx_build = [*BUILD, "--backend", "tensorrt-rtx", "--cache", "c"]
    code, out, err = run_cli(capsys, [*rtx_build, "--target", "sm86"])
    assert code == 0, err
    assert "cache miss: " in out and len(builds) == 1
    code, out, err = run_cli(capsys, [*rtx_build, "--target", "sm86", "-o", "again.engine"])
    assert code == 0 and "cache hit: " in out and len(builds) == 1, err
    assert Path("again.engine").read_bytes()[:4] == b"vtrt"
    code, out, err = run_cli(capsys, [*rtx_build, "--target", "sm89", "-o", "sm89.engine"])
    assert code == 0 and "cache miss: " in out and len(builds) == 2, err
    targets = sorted(e["target"] for e in json.loads(run_cli(capsys, ["cache", "ls", "--dir", "c", "--json"])[1]))
    assert targets == ["targets sm86", "targets sm89"]

"""Engine files: atomic save with a JSON sidecar, load checks (TensorRT version, GPU, sha256,
truncation, foreign files) before TensorRT is called, and failed builds that touch nothing."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import types

import pytest
import torch

import trtbuild
import trtbuild.reference as trt
from trtbuild.engine import (BuildError, EngineCompatibilityError, EngineFileError, EngineWriteError, build_plan,
                             check_compatible, load_engine, make_sidecar, read_engine_file, save_engine, sha256_bytes,
                             sidecar_path)
from trtbuild.engine import serialize as ser
from trtbuild.files import atomic

from helpers.tiny_net import TINY_SHAPE, TinyNet, tiny_define


@pytest.fixture(scope="module")
def net():
    return TinyNet(seed=2)


@pytest.fixture(scope="module")
def plan(net):
    return build_plan(trt, tiny_define(net), input_shape=TINY_SHAPE, precision="fp16", batch=(1, 2, 3), progress=False)


@pytest.fixture
def saved(tmp_path, plan):
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"some weights")
    path = tmp_path / "tiny.engine"
    save_engine(path, plan, make_sidecar(trt, plan, weights_path=weights))
    return path


def test_sidecar_contents(saved, plan):
    side = json.loads(sidecar_path(saved).read_text())
    assert side["trtbuild_version"] == trtbuild.__version__
    assert side["tensorrt_version"] == "reference" and side["backend"] == "reference"
    assert side["gpu"] == "cpu" and side["compute_capability"] == "cpu"  # no GPU on the test machine
    assert side["precision"] == "fp16"
    assert side["inputs"] == [{"name": "input", "shape": [-1, 3, 8, 8], "dtype": "FLOAT"}]
    assert side["outputs"] == [{"name": "y", "shape": [-1, 2, 8, 8], "dtype": "FLOAT"}]
    assert side["profile"] == {"input": {"min": [1, 3, 8, 8], "opt": [2, 3, 8, 8], "max": [3, 3, 8, 8]}}
    import hashlib

    assert side["weights"]["sha256"] == hashlib.sha256(b"some weights").hexdigest()
    assert side["engine_sha256"] == hashlib.sha256(saved.read_bytes()).hexdigest()
    assert side["engine_bytes"] == len(plan) == saved.stat().st_size


def test_round_trip_runs_like_the_in_memory_engine(saved, net):
    engine = load_engine(saved)
    assert engine.backend == "reference" and engine.sidecar["precision"] == "fp16"
    x = torch.rand(3, 3, 8, 8)
    expected = net(x)
    out = engine(x)["y"]
    assert (out - expected).abs().max().item() < 2e-2 * expected.abs().max().item()


def test_truncated_engine_is_rejected_by_the_checksum(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    with pytest.raises(EngineFileError, match=r"does not match the sha256 in its sidecar \(it has "
                                              rf"{len(data) // 2} bytes, the sidecar says {len(data)}\)"):
        load_engine(saved)


def test_changed_engine_same_size(saved):
    data = bytearray(saved.read_bytes())
    data[100] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(EngineFileError, match="same size, different content"):
        load_engine(saved)


def test_truncated_engine_without_sidecar_fails_in_deserialization(saved, caplog):
    sidecar_path(saved).unlink()
    data = saved.read_bytes()
    saved.write_bytes(data[:-100])
    with caplog.at_level(logging.WARNING, logger="trtbuild.engine"), pytest.raises(EngineFileError) as info:
        load_engine(saved)
    assert "has no sidecar" in caplog.text
    assert "could not be loaded by reference" in str(info.value) and "checksum mismatch" in str(info.value)


def test_missing_sidecar_loads_with_a_warning(saved, caplog):
    sidecar_path(saved).unlink()
    with caplog.at_level(logging.WARNING, logger="trtbuild.engine"):
        engine = load_engine(saved)
    assert "has no sidecar" in caplog.text
    assert engine.sidecar is None and engine.output_names == ["y"]


def test_not_an_engine_at_all(tmp_path):
    path = tmp_path / "notes.engine"
    path.write_text("this is a text file, not an engine\n" * 10)
    with pytest.raises(EngineCompatibilityError, match="is not a trtbuild reference plan, so it needs real TensorRT, "
                                                       "but TensorRT cannot be used here"):
        load_engine(path)
    with pytest.raises(EngineFileError, match="bad magic bytes"):
        load_engine(path, trt)  # forcing the reference: its deserializer's error is quoted


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(EngineFileError, match="does not exist"):
        load_engine(tmp_path / "nothing.engine", trt)
    (tmp_path / "empty.engine").write_bytes(b"")
    with pytest.raises(EngineFileError, match="is empty"):
        load_engine(tmp_path / "empty.engine", trt)


def test_corrupt_sidecar(saved):
    sidecar_path(saved).write_text("{not json")
    with pytest.raises(EngineFileError, match="is not valid JSON"):
        load_engine(saved)


def _as_tensorrt(saved, version="10.16.0.42", cc="9.0", gpu="NVIDIA H100 80GB HBM3"):
    side = json.loads(sidecar_path(saved).read_text())
    side.update(backend="tensorrt", tensorrt_version=version, gpu=gpu, compute_capability=cc)
    sidecar_path(saved).write_text(json.dumps(side))


def test_engine_for_tensorrt_on_a_machine_without_it(saved):
    _as_tensorrt(saved)
    with pytest.raises(EngineCompatibilityError) as info:
        load_engine(saved)
    msg = str(info.value)
    assert "was built with TensorRT 10.16.0.42 for NVIDIA H100 80GB HBM3, but TensorRT cannot be used here" in msg


class _Untouchable(types.ModuleType):
    """A stand-in tensorrt module: any use of its API (Runtime, ...) fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"TensorRT was called ({name}) before the compatibility check failed")


def _fake_trt(version):
    fake = _Untouchable("tensorrt")
    fake.__dict__["__version__"] = version
    return fake


def test_other_tensorrt_version_fails_before_tensorrt_is_called(saved):
    _as_tensorrt(saved, version="10.16.0.42")
    with pytest.raises(EngineCompatibilityError,
                       match=r"was built with TensorRT 10\.16\.0\.42 but TensorRT 11\.4\.0\.106 "
                                                       r"is installed"):
        load_engine(saved, _fake_trt("11.4.0.106"))


def test_other_gpu_architecture_fails_before_tensorrt_is_called(saved, monkeypatch):
    _as_tensorrt(saved, version="11.4.0.106", cc="9.0")
    monkeypatch.setattr(ser, "device_info",
                        lambda trt_: {"gpu": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6"})
    with pytest.raises(EngineCompatibilityError) as info:
        load_engine(saved, _fake_trt("11.4.0.106"))
    assert str(info.value).endswith("was built for compute capability 9.0 (NVIDIA H100 80GB HBM3) but this GPU is "
                                    "NVIDIA GeForce RTX 3090 with compute capability 8.6; rebuild the "
                                    "engine on this GPU")


def test_reference_engine_loaded_with_tensorrt_backend_is_refused(saved):
    with pytest.raises(EngineCompatibilityError, match="was built by the reference backend but is being loaded with "
                                                       "the tensorrt backend"):
        check_compatible(json.loads(sidecar_path(saved).read_text()), _fake_trt("10.16.0.42"), saved)


def test_matching_version_and_gpu_pass(saved):
    _as_tensorrt(saved, version="10.16.0.42", cc="8.9")
    side = json.loads(sidecar_path(saved).read_text())
    check_compatible(side, _fake_trt("10.16.0.42"), saved, current_device={"gpu": "L4", "compute_capability": "8.9"})
    plan, got = read_engine_file(saved, _fake_trt("10.16.0.42"),
                                 current_device={"gpu": "L4", "compute_capability": "8.9"})
    assert got["tensorrt_version"] == "10.16.0.42" and sha256_bytes(plan) == side["engine_sha256"]


def test_failed_build_leaves_existing_engine_and_sidecar_untouched(tmp_path, saved, net):
    from trtbuild.engine.model import build_and_save

    before = (saved.read_bytes(), sidecar_path(saved).read_bytes())
    mtimes = (os.stat(saved).st_mtime_ns, os.stat(sidecar_path(saved)).st_mtime_ns)
    inner = tiny_define(net)

    from trtbuild.models.registry import ModelSpec
    from trtbuild.weights import WeightMap

    broken = ModelSpec(  # its network fails inside build_serialized_network (duplicate output name)
        name="broken", description="test", torch_factory=lambda seed, small: TinyNet(seed),
        build_network=lambda network, wm, x: {"conv1": inner(network, x)["y"]},
        input_shape=lambda small=False: TINY_SHAPE, output_names=["conv1"])
    wm = WeightMap.from_module(net)
    with pytest.raises(BuildError):
        build_and_save(broken, wm, saved, trt, "fp32", extra_outputs=["conv1"], progress=False)
    assert (saved.read_bytes(), sidecar_path(saved).read_bytes()) == before
    assert (os.stat(saved).st_mtime_ns, os.stat(sidecar_path(saved)).st_mtime_ns) == mtimes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.engine", "tiny.engine.json", "w.bin"]


def test_save_failing_midway_leaves_old_files_and_no_temp(tmp_path, saved, plan, monkeypatch):
    """The sidecar's temp file fails to reach the disk after the engine's was written: nothing is
    renamed, both temp files are removed, and the error names the sidecar, not its temp file."""
    before = (saved.read_bytes(), sidecar_path(saved).read_bytes())
    real_fsync = atomic._fsync
    calls = []

    def failing(path):
        calls.append(path.name)
        if ".tiny.engine.json." in path.name:
            raise OSError(28, "No space left on device", str(path))
        return real_fsync(path)

    monkeypatch.setattr(atomic, "_fsync", failing)
    with pytest.raises(EngineWriteError) as info:
        save_engine(saved, plan[:10] + plan[10:], {"tensorrt_version": "reference"})
    assert str(info.value) == f"cannot write {sidecar_path(saved)}: No space left on device"
    assert isinstance(info.value, EngineFileError) and isinstance(info.value, OSError)
    assert [re.sub(r"\.[0-9a-f]{12}\.tmp$", ".<hex>.tmp", n) for n in calls] == [
        ".tiny.engine.<hex>.tmp", ".tiny.engine.json.<hex>.tmp"]  # the engine's temp file was complete first
    assert (saved.read_bytes(), sidecar_path(saved).read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.engine", "tiny.engine.json", "w.bin"]


def test_save_renames_only_after_both_temp_files_are_complete(tmp_path, plan, monkeypatch):
    real_replace = os.replace
    seen = []

    def replace(src, dst):
        seen.append((os.path.basename(dst), sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))))
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    path = save_engine(tmp_path / "two.engine", plan, {"tensorrt_version": "reference"})
    assert [dst for dst, _ in seen] == ["two.engine", "two.engine.json"]
    temps_at_first_rename = seen[0][1]
    # at the first rename both temp files exist: the sidecar's was completely written too
    assert [re.sub(r"\.[0-9a-f]{12}\.tmp$", ".<hex>.tmp", t) for t in temps_at_first_rename] == [
        ".two.engine.<hex>.tmp", ".two.engine.json.<hex>.tmp"]
    assert path.read_bytes() == bytes(plan)
    assert json.loads(sidecar_path(path).read_text())["engine_sha256"] == sha256_bytes(plan)


def test_engine_writes_use_the_shared_atomic_writer(tmp_path, monkeypatch):
    """engine.serialize and parity reports write through trtbuild.files.atomic (one writer)."""

    def broken_fsync(path):
        raise OSError(5, "Input/output error", str(path))

    monkeypatch.setattr(atomic, "_fsync", broken_fsync)
    with pytest.raises(EngineWriteError, match=f"^cannot write {tmp_path / 't.cache'}: Input/output error$"):
        ser.atomic_write_bytes(tmp_path / "t.cache", b"data")
    from trtbuild.parity.report import render_json
    from trtbuild.parity import compare

    report = compare({"y": torch.ones(2)}, {"y": torch.ones(2)})
    with pytest.raises(atomic.AtomicWriteError, match=f"^cannot write {tmp_path / 'r' / 'p.json'}: Input/output"):
        render_json(report, tmp_path / "r" / "p.json")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["r"]  # the directory was made, no temp file left


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_unwritable_target_error_names_the_target_not_the_temp_file(plan):
    with pytest.raises(EngineWriteError) as info:
        save_engine("/proc/trtbuild-x.engine", plan, {"tensorrt_version": "reference"})
    assert str(info.value) == "cannot write /proc/trtbuild-x.engine: No such file or directory"
    assert ".tmp" not in str(info.value)


def test_save_into_missing_directories_creates_them(tmp_path, plan):
    """save_engine creates missing parents as the CLI does (instead of failing with "directory does not exist")."""
    path = save_engine(tmp_path / "a" / "b" / "x.engine", plan, {"tensorrt_version": "reference"})
    assert path.read_bytes() == bytes(plan)
    assert json.loads(sidecar_path(path).read_text())["engine_sha256"] == hashlib.sha256(bytes(plan)).hexdigest()
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.engine", "x.engine.json"]


def test_save_engine_never_writes_over_its_weights(tmp_path):
    from trtbuild.engine import EngineWriteError

    plan = b"TRTBREF not really a plan"
    weights = tmp_path / "model.wts"
    weights.write_bytes(b"my weights")
    with pytest.raises(EngineWriteError, match="model.wts is the weight file the engine was built from"):
        save_engine(weights, plan, {"tensorrt_version": "reference", "weights": {"path": str(weights)}})
    sidecar_named_weights = tmp_path / "e.engine.json"  # the engine's sidecar would land on the weights
    sidecar_named_weights.write_bytes(b"my weights")
    with pytest.raises(EngineWriteError, match="e.engine.json is the weight file"):
        save_engine(tmp_path / "e.engine", plan,
                    {"tensorrt_version": "reference", "weights": {"path": str(sidecar_named_weights)}})
    assert weights.read_bytes() == sidecar_named_weights.read_bytes() == b"my weights"
    assert not (tmp_path / "e.engine").exists()


def test_save_engine_refuses_a_target_of_another_kind(tmp_path, plan):
    """A weight file that is not the sidecar's weights, or a sidecar path holding a weight file, is
    left alone (today both are overwritten)."""
    wts = b"1\nconv1.weight 2 3f800000 c0000000\n"  # tensorrtx gen_wts.py layout
    (tmp_path / "other.wts").write_bytes(wts)
    with pytest.raises(EngineWriteError, match=r"engine .*other.wts exists and is a .wts weight file, not an engine"):
        save_engine(tmp_path / "other.wts", plan, {"tensorrt_version": "reference"})
    (tmp_path / "e.engine.json").write_bytes(wts)
    with pytest.raises(EngineWriteError, match=r"its sidecar .*e.engine.json exists and is a .wts weight file, not an "
                                               r"engine sidecar"):
        save_engine(tmp_path / "e.engine", plan, {"tensorrt_version": "reference"})
    assert (tmp_path / "other.wts").read_bytes() == (tmp_path / "e.engine.json").read_bytes() == wts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.engine.json", "other.wts"]

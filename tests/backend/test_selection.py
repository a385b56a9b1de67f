"""Backend selection: explicit choice > TRTBUILD_BACKEND > auto, and one-sentence errors."""

from __future__ import annotations

import sys
import types

import pytest

import trtbuild.reference as reference
from trtbuild import backend
from trtbuild.backend import BackendError, backend_name, is_reference, load_trt, trt_of


def _fake_tensorrt(monkeypatch, version: str | None, gpus: int):
    module = types.ModuleType("tensorrt")
    if version is not None:
        module.__version__ = version
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    monkeypatch.setattr(backend, "_cuda_gpu_count", lambda: gpus)
    return module


def _no_tensorrt(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # makes `import tensorrt` raise ImportError


def test_reference_by_argument_and_by_environment(monkeypatch):
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    assert load_trt("reference") is reference
    monkeypatch.setenv(backend.ENV_VAR, "reference")
    assert load_trt() is reference and is_reference(load_trt()) and backend_name(reference) == "reference"


def test_argument_overrides_environment(monkeypatch):
    fake = _fake_tensorrt(monkeypatch, "10.16.1.11", gpus=1)
    monkeypatch.setenv(backend.ENV_VAR, "reference")
    assert load_trt("tensorrt") is fake
    assert load_trt() is reference


def test_auto_prefers_tensorrt_with_a_gpu_and_falls_back_without(monkeypatch):
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    fake = _fake_tensorrt(monkeypatch, "11.4.0.106", gpus=1)
    assert load_trt() is fake and load_trt("auto") is fake and backend_name(fake) == "tensorrt 11.4.0.106"
    monkeypatch.setattr(backend, "_cuda_gpu_count", lambda: 0)
    assert load_trt() is reference
    _no_tensorrt(monkeypatch)
    assert load_trt("auto") is reference


@pytest.mark.parametrize("setup, expected", [
    (lambda mp: _no_tensorrt(mp), "`import tensorrt` failed"),
    (lambda mp: _fake_tensorrt(mp, None, 1), "without a usable version"),
    (lambda mp: _fake_tensorrt(mp, "8.6.1", 1), "supports TensorRT 10.x and 11.x, but TensorRT 8.6.1 is installed"),
    (lambda mp: _fake_tensorrt(mp, "10.16.1.11", 0), "no CUDA GPU is visible"),
])
def test_explicit_tensorrt_that_cannot_load_says_why_in_one_sentence(monkeypatch, setup, expected):
    setup(monkeypatch)
    with pytest.raises(BackendError) as err:
        load_trt("tensorrt")
    message = str(err.value)
    assert expected in message and "\n" not in message and "Traceback" not in message


def test_unknown_choice_is_rejected(monkeypatch):
    with pytest.raises(BackendError, match=r"unknown backend 'tensorrtx' \(from --backend\)"):
        load_trt("tensorrtx")
    monkeypatch.setenv(backend.ENV_VAR, "gpu")
    with pytest.raises(BackendError, match=r"unknown backend 'gpu' \(from TRTBUILD_BACKEND\)"):
        load_trt()


def test_cli_reports_an_unloadable_backend_without_a_traceback(monkeypatch, capsys):
    from trtbuild.cli import main

    _no_tensorrt(monkeypatch)
    assert main(["models", "--backend", "tensorrt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trtbuild: error: the tensorrt backend needs") and "Traceback" not in err


def test_trt_of_a_reference_network():
    network = reference.Builder(reference.Logger()).create_network(
        1 << int(reference.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    assert trt_of(network) is reference

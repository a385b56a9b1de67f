"""GPU discovery without torch CUDA: trtbuild.engine.device and trtbuild.backend share one CUDA
driver probe (backend.load_cuda_driver), exercised here with a fake driver object."""

from __future__ import annotations

import ctypes

import pytest
import torch

from trtbuild import backend
from trtbuild.engine import device


class FakeDriver:
    """The subset of the CUDA driver API that the probes call, answering like one GPU."""

    def __init__(self, count=1, name=b"Fake GPU 9000", cc=(8, 9)):
        self.count, self.name, self.cc = count, name, cc
        self.calls = []

    def cuDeviceGetCount(self, ref):
        self.calls.append("cuDeviceGetCount")
        ref._obj.value = self.count
        return 0

    def cuDeviceGet(self, ref, index):
        self.calls.append(("cuDeviceGet", index))
        if index >= self.count:
            return 101  # CUDA_ERROR_INVALID_DEVICE
        ref._obj.value = index
        return 0

    def cuDeviceGetName(self, buf, size, dev):
        buf.value = self.name[: size - 1]
        return 0

    def cuDeviceGetAttribute(self, ref, attribute, dev):
        ref._obj.value = {75: self.cc[0], 76: self.cc[1]}[attribute]
        return 0


@pytest.fixture
def fake_driver(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(backend, "load_cuda_driver", lambda: driver)
    return driver


def test_device_info_comes_from_the_shared_driver_probe(fake_driver):
    assert device.gpu_info() == {"gpu": "Fake GPU 9000", "compute_capability": "8.9"}
    assert device.gpu_info(1) is None  # cuDeviceGet fails for a device that does not exist
    assert ("cuDeviceGet", 0) in fake_driver.calls and ("cuDeviceGet", 1) in fake_driver.calls


def test_gpu_count_uses_the_same_probe(fake_driver):
    fake_driver.count = 3
    assert backend._cuda_gpu_count() == 3
    assert fake_driver.calls == ["cuDeviceGetCount"]


def test_no_driver_means_no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(backend, "load_cuda_driver", lambda: None)
    assert device.gpu_info() is None and backend._cuda_gpu_count() == 0


def test_load_cuda_driver_without_a_library_returns_none(monkeypatch):
    def no_library(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert backend.load_cuda_driver() is None

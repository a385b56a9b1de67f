"""Fixtures used across the test folders: reference networks twinned with TensorRT-RTX (`refnet`),
the TensorRT-RTX module (`rtx`, `rtxnet`), readable parametrize ids, and the markers that follow
from what a test uses."""

from __future__ import annotations

import enum

import pytest

from helpers.markers import markers_for
from helpers.refnet import RtxNet, import_rtx, rtx_missing_summary
from trtbuild.reference.tf32 import no_tf32

#: session fixtures shared by several folders
pytest_plugins = ["helpers.calibrated_resnet"]


@pytest.fixture(autouse=True)
def _true_fp32():
    """Every test computes its expected values in true fp32: PyTorch lets cuDNN convolutions use TF32 on
    CUDA by default (about 5e-4 relative error, against tolerances of 1e-5), while TensorRT uses TF32 only
    where BuilderFlag.TF32 asks for it. TF32 off for cuDNN and matmuls, the settings restored after the test."""
    with no_tf32():
        yield


@pytest.fixture
def refnet():
    """A fresh strongly typed reference network, twinned with a TensorRT-RTX network (tests/helpers/twin.py):
    every construction is made on both and they must agree on acceptance, shapes and dtypes. Never a
    plain RefNet: without TensorRT-RTX the test fails or is skipped (helpers.refnet.import_rtx)."""
    module = import_rtx()
    from helpers.twin import TwinRefNet

    net = TwinRefNet(module)
    yield net
    net.twin.finish()


def pytest_make_parametrize_id(config, val, argname):
    """Show TensorRT enum members by name in test ids (CLIP, SAME_UPPER) instead of numbers."""
    if isinstance(val, enum.Enum) and type(val).__module__.startswith("trtbuild.reference"):
        return val.name
    return None


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """The test's tmp_path, made the working directory (for commands that write relative paths)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def rtx():
    """NVIDIA's TensorRT-RTX module (`tensorrt_rtx`), the real builder that judges the reference.

    The `test` extra installs it, so under CI (CI=true) or where the extra installed it a failed import
    is a test failure, not a skip: the cross-check must never silently stop running. Where it is not
    installed at all the tests skip, and the terminal summary counts them."""
    return import_rtx()


@pytest.fixture
def rtxnet(rtx) -> RtxNet:
    """A fresh TensorRT-RTX network (sm86 target, no GPU needed to build)."""
    return RtxNet(rtx)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark each test from the fixtures it uses (helpers.markers: `rtx` for TensorRT-RTX, `network` for a
    download), before -m selects."""
    for item in items:
        for marker in markers_for(getattr(item, "fixturenames", ())):
            item.add_marker(getattr(pytest.mark, marker))

def pytest_terminal_summary(terminalreporter):
    """Says loudly, with a count, when the TensorRT-RTX cross-check did not run."""
    line = rtx_missing_summary(terminalreporter.stats.get("skipped", []))
    if line:
        terminalreporter.write_sep("=", line, red=True, bold=True)

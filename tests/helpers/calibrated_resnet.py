"""A calibrated resnet18 --small on the reference backend, built once per session for the tests of
engine sidecars and calibration files (a plugin of tests/conftest.py, so both folders share it)."""

from __future__ import annotations

import pytest

import trtbuild.reference as trt
from trtbuild.cli import main


@pytest.fixture(scope="session")
def calibrated(tmp_path_factory):
    """resnet18 --small on the reference backend: the seeded weights, other (trained) weights, a
    calibration file made with the seeded weights, and fp32 and int8 engines (with sidecars)."""
    from trtbuild.engine import build_and_save
    from trtbuild.engine.model import export_seeded_weights

    d = tmp_path_factory.mktemp("calibrated")
    export_seeded_weights("resnet18", d / "seeded.wts", seed=0, small=True)
    export_seeded_weights("resnet18", d / "trained.wts", seed=1, small=True)
    assert main(["calibrate", "resnet18", "--small", "--data", "random", "--weights", str(d / "seeded.wts"),
                 "-o", str(d / "calib.json"), "--no-progress"]) == 0
    fp32, _ = build_and_save("resnet18", d / "seeded.wts", d / "r32.engine", trt, "fp32", small=True, progress=False)
    assert main(["build", "resnet18", "--small", "--weights", str(d / "seeded.wts"), "--precision", "int8",
                 "--calibration", str(d / "calib.json"), "-o", str(d / "r8.engine"), "--backend", "reference",
                 "--no-progress"]) == 0
    return {"dir": d, "fp32": fp32, "int8": d / "r8.engine"}

"""Fixtures of the model tests."""

from __future__ import annotations

import pytest

from helpers.zoo_quant import calibration_files


@pytest.fixture(scope="module")
def calib_file(tmp_path_factory):
    """calib_file(name) -> a calibration file of the small seeded model `name`, made once per test module."""
    return calibration_files(tmp_path_factory)

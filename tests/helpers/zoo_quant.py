"""What the quantized-zoo tests share: each small seeded PyTorch model built once, and the `calib_file` fixture
(tests/models/conftest.py): one calibration file per model (seeded random data, 2 batches of 4, method max), made
once per test module."""

from __future__ import annotations

from trtbuild.models import registry
from trtbuild.quant import calibrate_data, random_source, write_calibration

_MODULES = {}


def torch_model(name):
    """The seeded small PyTorch model, built once per model (the tests must not modify it)."""
    if name not in _MODULES:
        _MODULES[name] = registry.get_torch_model(name, small=True)
    return _MODULES[name]


def calibration_files(tmp_path_factory):
    """calib_file(name) -> the path of that model's calibration file, made on first use."""
    made = {}

    def get(name):
        if name not in made:
            spec = registry.get(name)
            source = random_source(spec.input_shape(True)[1:], 2, 4, spec.value_range, seed=0)
            calib = calibrate_data(torch_model(name), source, "max", model_name=name, small=True)
            made[name] = write_calibration(calib, tmp_path_factory.mktemp("calib") / f"{name}.json")
        return made[name]
    return get

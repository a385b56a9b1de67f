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


def fake_quant_errors(got, fake, fp32):
    """(quant_error, engine_vs_fake) of one output: how far the fake-quant PyTorch model is from the fp32 one,
    and how far the engine is from the fake-quant model, both relative to the fp32 output's largest magnitude."""
    scale = fp32.abs().max()
    return (fake - fp32).abs().max() / scale, (got.float() - fake).abs().max() / scale


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

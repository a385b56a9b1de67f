"""`trtbuild export-triton` checks every optimization profile for outputs that do not start with the
batch (batch_dims.outputs_off_batch). Two small reference engines of two batch profiles (1..4 and
8..16): `flat` (the input reshaped to one row, so its first dimension is N*192 in every profile) and
`head` (the first min(N, 4) rows of the input: the batch at 1 and 4, but 4 at batch 8 and 16, so it
follows the batch in profile 0 only). The expected dimensions follow from those definitions by hand."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.engine import BatchProfile, build_plan
from trtbuild.engine.serialize import make_sidecar, read_engine_file, save_engine
from trtbuild.serving.batch_dims import outputs_off_batch
from trtbuild.serving.config import ConfigError
from trtbuild.serving.repository import export_model

PROFILES = (BatchProfile(1, 2, 4), BatchProfile(8, 8, 16))


def _rows(network, x):
    return network.add_unary(x, trt.UnaryOperation.ABS).get_output(0)


def _flat(network, x):
    shuffle = network.add_shuffle(x)
    shuffle.reshape_dims = (-1,)
    return {"rows": _rows(network, x), "flat": shuffle.get_output(0)}


def _head(network, x):
    """x[:min(N, 4)], its size computed from x's shape at run time (so the sidecar shows -1 first)."""
    shape = network.add_shape(x).get_output(0)
    cap = network.add_constant((4,), trt.Weights(np.array([4, 3, 8, 8], np.int64))).get_output(0)
    size = network.add_elementwise(shape, cap, trt.ElementWiseOperation.MIN).get_output(0)
    head = network.add_slice(x, (0, 0, 0, 0), (1, 3, 8, 8), (1, 1, 1, 1))
    head.set_input(2, size)
    return {"rows": _rows(network, x), "head": head.get_output(0)}


def _saved(tmp_path, define, name):
    plan = build_plan(trt, define, input_shape=(1, 3, 8, 8), profiles=PROFILES, progress=False)
    path = save_engine(tmp_path / f"{name}.engine", plan, make_sidecar(trt, plan, plan.info))
    return path, read_engine_file(path, trt)


def test_an_output_off_the_batch_in_every_profile_is_listed(tmp_path):
    path, (data, sidecar) = _saved(tmp_path, _flat, "flat")
    assert [o["shape"][0] for o in sidecar.build.outputs] == [-1, -1]  # the sidecar cannot tell them apart
    assert outputs_off_batch(data, sidecar, str(path)) == ["flat"]


def test_an_output_on_the_batch_in_one_profile_only_is_refused(tmp_path):
    path, (data, sidecar) = _saved(tmp_path, _head, "head")
    message = (f"output 'head' of {path} starts with the batch dimension in optimization profile 0 but not in "
               "profile 1, and Triton's configuration has one batch layout for every profile; build the engine "
               "with profiles that agree")
    with pytest.raises(ConfigError) as refused:
        outputs_off_batch(data, sidecar, str(path))
    assert str(refused.value) == message
    repo = tmp_path / "repo"
    with pytest.raises(ConfigError) as refused:
        export_model(path, repo, "head", kind="python")
    assert str(refused.value) == message
    assert not (repo / "head").exists()  # nothing written

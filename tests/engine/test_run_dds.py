"""Engine.run and check_parity with outputs whose shape is known only after the run (a non-zero layer's count):
the Engine gives them memory through an IOutputAllocator and returns them with their real shape."""

from __future__ import annotations

import numpy as np
import torch

import trtbuild.reference as trt
from trtbuild.engine import Engine, build_plan
from trtbuild.parity import check_parity


def _define(network):
    x = network.add_input("x", trt.float32, (3, 5))
    relu = network.add_activation(x, trt.ActivationType.RELU).get_output(0)
    return {"idx": network.add_non_zero(relu).get_output(0), "y": relu}


class NonZeroOfRelu(torch.nn.Module):
    def __init__(self, drop_last: bool = False):
        super().__init__()
        self.drop_last = drop_last

    def forward(self, x):
        y = torch.relu(x)
        idx = torch.nonzero(y).T.to(torch.int32)
        return idx[:, :-1] if self.drop_last else idx, y


def _engine():
    return Engine(build_plan(trt, _define, progress=False), trt, name="dds")


def test_engine_returns_data_dependent_outputs_with_their_shape():
    engine = _engine()
    assert engine.tensors["idx"].shape == (2, -1) and engine.tensors["idx"].dtype == torch.int32
    assert "output idx: (2, -1)" in engine.describe()
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):  # a different count each run
        x = (torch.rand(3, 5, generator=gen) - 0.6).to(engine.device)
        out = engine.run({"x": x})
        assert list(out) == ["idx", "y"]
        expected = np.stack(np.nonzero(np.maximum(x.cpu().numpy(), 0)))
        np.testing.assert_array_equal(out["idx"].cpu().numpy(), expected)
        torch.testing.assert_close(out["y"], torch.relu(x))
    out = engine.run({"x": -torch.ones(3, 5, device=engine.device)})
    assert tuple(out["idx"].shape) == (2, 0)


def test_parity_compares_data_dependent_outputs():
    engine = _engine()
    x = torch.rand(3, 5, generator=torch.Generator().manual_seed(2)) - 0.5
    report = check_parity(engine, NonZeroOfRelu(), {"x": x}, output_names=["idx", "y"])
    assert report.passed, report.to_table()
    assert report.outputs[0].shape == [2, int((x > 0).sum())]
    wrong = check_parity(engine, NonZeroOfRelu(drop_last=True), {"x": x}, output_names=["idx", "y"])
    assert not wrong.passed
    assert wrong.outputs[0].note.startswith("shape mismatch: actual (2, ")

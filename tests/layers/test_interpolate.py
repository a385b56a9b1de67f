"""trtbuild.layers.resize.interpolate against F.interpolate, exactly in fp32 for the nearest modes and within
float32 rounding for the others; every construction is also built on TensorRT-RTX, which must accept it with
the same output shape and dtype."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trtbuild.layers.common import BuilderError
from trtbuild.layers.resize import interpolate

from helpers.refnet import RefNet, RtxNet, close, import_rtx

GEN = torch.Generator().manual_seed(11)
RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def _input(mode, spatial=None):
    spatial = spatial or {3: (7,), 4: (5, 6), 5: (3, 4, 5)}[RANK.get(mode, 4)]
    return torch.randn(2, 3, *spatial, generator=GEN)


@pytest.fixture
def refnet():
    """A plain reference network; `_run` builds each construction on TensorRT-RTX as well."""
    return RefNet()


def _run(refnet, x, **kw):
    y = interpolate(refnet.network, refnet.input("x", tuple(x.shape)), "up", **kw)
    assert y.name == "up" and refnet.network.get_layer(0).name == "up"
    rtx = RtxNet(import_rtx())
    ry = interpolate(rtx.network, rtx.network.add_input("x", rtx.trt.float32, tuple(x.shape)), "up", **kw)
    rtx.network.mark_output(ry)
    assert rtx.build() is not None, rtx.errors
    assert tuple(ry.shape) == tuple(y.shape) and ry.dtype.name == y.dtype.name
    return refnet.run({"x": x}, y=y)["y"]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("kw", [dict(size=(10, 12)), dict(size=(3, 4)), dict(size=(7, 13)), dict(scale_factor=2),
                                dict(scale_factor=(3, 0.5)), dict(size=1)])
def test_nearest_modes_are_exact(refnet, mode, kw):
    x = _input(mode)
    close(_run(refnet, x, mode=mode, **kw), F.interpolate(x, mode=mode, **kw), atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["linear", "bilinear", "bicubic", "trilinear"])
@pytest.mark.parametrize("align", [None, False, True])
@pytest.mark.parametrize("which", ["up", "down", "scale", "one"])
def test_interpolating_modes(refnet, mode, align, which):
    x = _input(mode)
    n = x.dim() - 2
    kw = {"up": dict(size=(9, 11, 7)[:n]), "down": dict(size=(3, 2, 4)[:n]), "scale": dict(scale_factor=2.0),
          "one": dict(size=1)}[which]
    close(_run(refnet, x, mode=mode, align_corners=align, **kw),
          F.interpolate(x, mode=mode, align_corners=align, **kw), atol=2e-6, rtol=1e-5)


def test_nearest_3d(refnet):
    x = _input("nearest", (3, 4, 5))
    close(_run(refnet, x, size=(5, 2, 9)), F.interpolate(x, size=(5, 2, 9)), atol=0, rtol=0)


@pytest.mark.parametrize("kw,match", [
    (dict(size=(4, 4), scale_factor=2), "exactly one of size and scale_factor"),
    (dict(scale_factor=1.5), "not an integer"),
    (dict(size=(4, 4), mode="nearest", align_corners=False), "align_corners applies"),
    (dict(size=(4, 4), mode="trilinear"), "needs a 5-D input"),
    (dict(size=(4, 4), mode="area"), "is not one of"),
    (dict(size=(4, 4, 4)), "3 values for 2 spatial dims"),
])
def test_refusals_name_the_layer(kw, match):
    net = RefNet()
    with pytest.raises(BuilderError, match=f"layer 'up'.*{match}"):
        interpolate(net.network, net.input("x", (1, 2, 5, 5)), "up", **kw)

"""The twin harness (tests/helpers/twin.py) itself: planted differences between the reference and
TensorRT-RTX must fail, and documented "reference stricter" rejections must pass.

Each difference is planted by wrapping the reference's shape/type inference (or its activation
defaults) for one layer type, so the harness sees exactly what a reference bug would show it."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
import trtbuild.reference.infer as infer
import trtbuild.reference.network as network_module
import trtbuild.reference.network_layers as network_layers
from helpers import twin
from helpers.twin import Disagreement, Stricter, TwinRefNet


@pytest.fixture
def pair(rtx):
    return TwinRefNet(rtx)


def plant(monkeypatch, layer_type, change):
    """Make the reference's inference of `layer_type` return change(shapes, dtypes) (or raise)."""
    real = infer.infer_layer

    def planted(ltype, p, w, shapes, dtypes, name, plugin=None, **shape_values):
        out = real(ltype, p, w, shapes, dtypes, name, plugin=plugin, **shape_values)
        return change(*out, name) if ltype == layer_type else out

    monkeypatch.setattr(infer, "infer_layer", planted)


def test_agreeing_network_passes(pair):
    y = pair.network.add_unary(pair.input("x", (2, 3)), trt.UnaryOperation.EXP).get_output(0)
    assert tuple(y.shape) == (2, 3)
    y.name = "y"
    pair.network.mark_output(y)
    assert pair.build() is not None


def test_shape_difference_fails_where_the_shape_is_read(pair, monkeypatch):
    plant(monkeypatch, trt.LayerType.UNARY, lambda shapes, dtypes, name: ([s[::-1] for s in shapes], dtypes))
    y = pair.network.add_unary(pair.input("x", (2, 3)), trt.UnaryOperation.EXP).get_output(0)
    with pytest.raises(Disagreement, match=r"reference gives \(3, 2\) FLOAT, TensorRT-RTX \(2, 3\) FLOAT"):
        y.shape  # noqa: B018


def test_dtype_difference_fails_the_build(pair, monkeypatch):
    plant(monkeypatch, trt.LayerType.CAST, lambda shapes, dtypes, name: (shapes, [trt.DataType.FLOAT]))
    y = pair.network.add_cast(pair.input("x", (2, 3)), trt.float16).get_output(0)
    pair.network.mark_output(y)
    with pytest.raises(Disagreement, match="FLOAT, TensorRT-RTX .* HALF"):
        pair.build()


def test_rejection_that_rtx_does_not_make_fails(pair, monkeypatch):
    def reject(shapes, dtypes, name):
        raise trt.NetworkError(f"layer '{name}': planted rejection")

    plant(monkeypatch, trt.LayerType.IDENTITY, reject)
    with pytest.raises(Disagreement, match="planted rejection.*TensorRT-RTX .* accepts it"):
        pair.network.add_identity(pair.input("x", (2, 3)))


@pytest.mark.parametrize("entry", twin.REFERENCE_STRICTER, ids=lambda e: e.pattern)
def test_stricter_entries_are_still_stricter(pair, entry):
    """Each documented exception: the reference rejects its example (with a message the entry
    matches) and TensorRT-RTX accepts it; otherwise the entry is stale and must go."""
    try:
        entry.example(pair.network, trt)
        pair.build()
    except trt.NetworkError:
        pass
    assert [e for _, e in pair.twin.exempted] == [entry], "TensorRT-RTX rejects it now (or the reference accepts it)"


def test_documented_stricter_rejection_passes(pair, monkeypatch):
    def reject(shapes, dtypes, name):
        raise trt.NetworkError(f"layer '{name}': planted stricter rule")

    plant(monkeypatch, trt.LayerType.IDENTITY, reject)
    entry = Stricter("planted stricter rule", "TensorRT's documentation (planted for this test)",
                     lambda network, trt: network.add_identity(network.add_input("x", trt.float32, (2, 3))))
    monkeypatch.setattr(twin, "REFERENCE_STRICTER", [entry])
    with pytest.raises(trt.NetworkError):
        pair.network.add_identity(pair.input("x", (2, 3)))
    assert [e for _, e in pair.twin.exempted] == [entry]


def test_acceptance_that_rtx_does_not_share_fails_at_the_end(pair, monkeypatch):
    """An LRN window of 4: the planted reference skips its window check, RTX refuses the layer."""
    real = infer.infer_layer

    def no_window_check(ltype, p, w, shapes, dtypes, name, plugin=None, **shape_values):
        if ltype == trt.LayerType.LRN:
            return [tuple(shapes[0])], [dtypes[0]]
        return real(ltype, p, w, shapes, dtypes, name, plugin=plugin, **shape_values)

    monkeypatch.setattr(infer, "infer_layer", no_window_check)
    pair.network.add_lrn(pair.input("x", (1, 8, 4, 4)), 4, 1e-4, 0.75, 1.0)
    with pytest.raises(Disagreement, match="TensorRT-RTX rejected"):
        pair.twin.finish()


def test_rejection_both_make_passes(pair):
    """A wrong kernel count: both builds fail (the reference's test checks the message)."""
    layer = pair.network.add_convolution_nd(pair.input("x", (1, 1, 5, 5)), 2, (3, 3), np.ones(8, np.float32))
    pair.network.mark_output(layer.get_output(0))
    assert pair.build() is None


def test_attribute_default_difference_fails_where_it_is_read(pair, monkeypatch):
    monkeypatch.setattr(network_layers, "_ACTIVATION_DEFAULTS", {})
    layer = pair.network.add_activation(pair.input("x", (1, 4)), trt.ActivationType.LEAKY_RELU)
    with pytest.raises(Disagreement, match=r"\.alpha: the reference gives 0.0, TensorRT-RTX 0.0099"):
        layer.alpha  # noqa: B018


def test_attribute_sets_reach_rtx(pair):
    layer = pair.network.add_convolution_nd(pair.input("x", (1, 2, 9, 9)), 4, (3, 3), np.ones(72, np.float32))
    layer.stride_nd, layer.padding_mode = (2, 2), trt.PaddingMode.SAME_UPPER
    assert tuple(layer.rtx.stride_nd) == (2, 2) and layer.rtx.padding_mode.name == "SAME_UPPER"
    assert tuple(layer.get_output(0).shape) == (1, 4, 5, 5)  # compared with RTX's (1, 4, 5, 5)


def test_refusals_logged_on_both_pass(pair):
    """TensorRT's refusals of misused API calls (an error logged, the call ignored) made on both: the
    networks stay valid and build. On main the reference raised NetworkError for the input's name."""
    x = pair.input("x", (2, 3))
    assert pair.network.add_input("x", trt.float32, (2, 3)) is None
    unary = pair.network.add_unary(x, trt.UnaryOperation.EXP)
    y = unary.get_output(0)
    y.name = "x"  # an input's name: refused on both
    unary.name = "exp"
    pair.network.add_unary(y, trt.UnaryOperation.ABS).name = "exp"  # a renamed layer's name: refused on both
    assert (y.name, unary.name) == ("exp_output", "exp")  # the layer rename renamed its output
    assert len(pair.logger.errors) == 3
    y.name = "y"
    pair.network.mark_output(y)
    assert pair.build() is not None


def test_a_refusal_rtx_does_not_make_fails(pair, monkeypatch):
    refuse = network_module.INetworkDefinition._refuse_rename
    monkeypatch.setattr(network_module.INetworkDefinition, "_rename_tensor",
                        lambda self, tensor, name: refuse(self, "ITensor", "tensor", tensor.name, name))
    y = pair.network.add_unary(pair.input("x", (2, 3)), trt.UnaryOperation.EXP).get_output(0)
    with pytest.raises(Disagreement, match=r"the reference refuses .*\.name = 'y' \(ITensor::setName: Error Code 3: "
                                           r".* but TensorRT-RTX .* accepts it"):
        y.name = "y"

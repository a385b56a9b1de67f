"""Layer attributes take what TensorRT's bindings take, and refuse the rest with a TypeError.

The same value is set on the same attribute of a reference layer and a TensorRT-RTX 1.7 layer; both must
end alike (the value read back, or a TypeError). A reference that converts anything it can (Dims((2.5, 0))
as (2, 0), `type = 1` as ActivationType.SIGMOID, `average_count_excludes_padding = None` stored as None and
"x" as True, `pre_padding = 1` as (1,)) lets a builder computing `size / 2` work on the reference and fail
with TensorRT."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as reference
from trtbuild.engine.build import new_network

from helpers.layer_attributes import ATTRIBUTES, set_attribute

VALUES = {"None": None, "True": True, "1": 1, "3": 3, "2.5": 2.5, "2.0": 2.0, "int64": np.int64(3),
          "float32": np.float32(3.0), "str": "x", "tuple": (1, 1), "list": [1, 1], "array": np.array([1, 1]),
          "float tuple": (2.5, 0), "integral float tuple": (2.0, 0)}


@pytest.mark.parametrize("owner,attribute", ATTRIBUTES, ids=[a for _, a in ATTRIBUTES])
def test_attribute_setters_take_what_tensorrt_rtx_takes(owner, attribute, rtx):
    ours = {k: set_attribute(reference, owner, attribute, v) for k, v in VALUES.items()}
    theirs = {k: set_attribute(rtx, owner, attribute, v) for k, v in VALUES.items()}
    assert ours == theirs


def test_written_out_cases():
    """What TensorRT-RTX 1.7.1.116 did when probed, written out."""
    assert set_attribute(reference, "pool", "average_count_excludes_padding", None) is False
    assert set_attribute(reference, "pool", "average_count_excludes_padding", 0.5) is True
    assert set_attribute(reference, "pool", "average_count_excludes_padding", "x") == "TypeError"
    assert set_attribute(reference, "act", "type", 1) == "TypeError"
    assert set_attribute(reference, "act", "type", reference.ActivationType.SIGMOID) == "SIGMOID"
    assert set_attribute(reference, "lrn", "window_size", 2.0) == "TypeError"
    assert set_attribute(reference, "lrn", "window_size", np.int64(3)) == 3
    assert set_attribute(reference, "pool", "pre_padding", 1) == "TypeError"
    assert set_attribute(reference, "pool", "pre_padding", [1, 1]) == (1, 1)
    with pytest.raises(TypeError, match=r"Dims: incompatible function arguments: an integer is needed, got 2\.5"):
        reference.Dims((2.5, 0))
    assert tuple(reference.Dims((True, 2))) == (1, 2)


DIMS_VALUES = {"generator": lambda: (d for d in (2, 3)), "range": lambda: range(1, 3), "int": lambda: 3,
               "int64": lambda: np.int64(3), "float32 element": lambda: [np.float32(2.5)],
               "float64 element": lambda: [np.float64(2)], "str element": lambda: ["1"], "bool": lambda: [True],
               "int array": lambda: np.array([2, 3]), "float array": lambda: np.array([2.0, 3.0]),
               "None element": lambda: [None], "empty": lambda: (), "str": lambda: "12"}


def _dims(trt, make):
    try:
        return tuple(trt.Dims(make()))
    except TypeError:
        return "TypeError"


def test_dims_take_what_tensorrt_rtx_dims_take(rtx):
    """A generator is read once (a check that iterated it first left Dims empty), a bare integer or a string
    is refused, elements follow pybind11's int caster (np.float32 truncates, a Python float is refused)."""
    ours = {k: _dims(reference, make) for k, make in DIMS_VALUES.items()}
    assert ours == {k: _dims(rtx, make) for k, make in DIMS_VALUES.items()}
    assert (ours["generator"], ours["int"], ours["float32 element"]) == ((2, 3), "TypeError", (2,))


@pytest.mark.parametrize("what", ["network", "metadata"])
def test_network_name_and_layer_metadata_take_names_as_tensorrt_rtx_does(what, rtx):
    def scenario(trt):
        _, network, logger = new_network(trt)
        logger.clear()
        x = network.add_input("x", trt.float32, (1, 2))
        owner, attribute = (network, "name") if what == "network" else (network.add_identity(x), "metadata")
        got = []
        for value in ("m", None, b"ab", 3):
            try:
                setattr(owner, attribute, value)
                got.append(getattr(owner, attribute))
            except TypeError:
                got.append("TypeError")
        errors = [e for e in logger.errors if "nullptr" in e]
        return got, len(errors)

    assert scenario(reference) == scenario(rtx) == (["m", "m", "ab", "TypeError"], 1)


def test_num_ranks_is_one_and_refuses_other_values_as_tensorrt_rtx_does(rtx):
    """ILayer.num_ranks (TensorRT 10/11): only IDistCollectiveLayer takes more than one rank."""
    def scenario(trt):
        _, network, _ = new_network(trt)
        layer = network.add_identity(network.add_input("x", trt.float32, (1, 2)))
        got = [layer.num_ranks]
        for value in (1, 2, 0, -1, 2.0, "2", True):
            try:
                layer.num_ranks = value
                got.append(layer.num_ranks)
            except RuntimeError as e:
                got.append(("RuntimeError", str(e)))
            except TypeError:
                got.append("TypeError")
        return got

    refused = ("RuntimeError", "Failed to set num_ranks. Only IDistCollectiveLayer supports num_ranks > 1 via ILayer.")
    ours = scenario(reference)
    assert ours == scenario(rtx)
    assert ours[:5] == [1, 1, refused, refused, refused]

"""The layer-type registry: every layer class the reference exports is registered once, with its
inference and execution, and the ONNX exporter has a lowering for each."""

from __future__ import annotations

import pytest

import trtbuild.reference as trt
from trtbuild.reference import layers
from trtbuild.reference.ops import op_for, register, registered


def test_every_exported_layer_class_is_registered_under_its_type():
    classes = [getattr(trt, n) for n in trt.__all__ if n.startswith("I") and n.endswith("Layer") and n != "ILayer"
               and getattr(trt, n)._TYPE is not None]  # not the bases of a construct's boundary layers
    assert classes
    for cls in classes:
        op = op_for(cls._TYPE)
        assert op is not None and op.cls is cls, cls.__name__
        assert getattr(layers, cls.__name__) is cls
    assert set(registered()) == {cls._TYPE for cls in classes}


def test_every_registered_type_has_an_onnx_lowering():
    import trtbuild.onnx_export.lower  # noqa: F401 - registers the lowerings

    missing = [t.name for t, op in registered().items() if op.lower is None]
    assert missing == []


def test_a_type_registers_once():
    cls = op_for(trt.LayerType.CONSTANT).cls
    with pytest.raises(RuntimeError, match="registered twice"):
        register(cls, None, None)


def test_an_unregistered_type_is_refused_naming_the_layer():
    from trtbuild.reference.infer import infer_layer

    assert op_for(trt.LayerType.PLUGIN) is None
    with pytest.raises(trt.NetworkError, match="layer 'r': layer type PLUGIN is not supported"):
        infer_layer(trt.LayerType.PLUGIN, {}, {}, [(1,)], [trt.DataType.FLOAT], "r")


def test_a_failed_op_module_import_is_raised_on_every_lookup(monkeypatch):
    """A broken op module must not leave the registry half-filled and silent: each lookup raises its error."""
    from trtbuild.reference.ops import registry

    monkeypatch.setattr(registry, "_loaded", [False])
    monkeypatch.setattr(registry, "_OPS", {})
    monkeypatch.setattr(registry, "MODULES", ["no_such_op_module"])
    for _ in range(2):
        with pytest.raises(ModuleNotFoundError, match="no_such_op_module"):
            registry.op_for(registry.LayerType.CONSTANT)


def test_an_op_module_method_that_a_network_mixin_defines_is_refused():
    """INetworkDefinition is made of mixins; an add_* method both a mixin and an op module define would be
    silently replaced by the op's, so attaching the op methods refuses it."""
    from trtbuild.reference.network import _with_layer_methods

    class Mixin:
        def add_assertion(self):  # an op module (ops/assertion.py) defines it too
            return "mixin"

    class Network(Mixin):
        pass

    with pytest.raises(RuntimeError, match=r"INetworkDefinition\.add_assertion is defined by the network and by a "
                                           r"layer type's module"):
        _with_layer_methods(Network)
    assert Network().add_assertion() == "mixin"

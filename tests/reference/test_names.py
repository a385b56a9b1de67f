"""Tensor and layer names: the reference names them exactly as TensorRT-RTX 1.7 does.

Each scenario makes the same network-definition calls on a reference network and on a TensorRT-RTX
network; what both end with (every input's name, every layer's name and its outputs' names, what each
call returned, the errors logged) must be equal, and equal to the names written by hand from what
TensorRT-RTX 1.7.1.116 printed when probed. The rules (trtbuild/reference/network_names.py):
automatic layer names count on past renamed layers' names; automatic output names get "_<n>" from one
counter per network when taken; an explicit name (add_input, a rename) takes an automatic name from its
holder, which is renamed; a layer rename renames its automatic outputs."""

from __future__ import annotations

import re

import pytest

import trtbuild.reference as reference
from trtbuild.engine.build import new_network
from helpers.refnet import concrete

A = "(Unnamed Layer* {}) [Identity]"
OUT = A + "_output"


def _names(network):
    return {"inputs": [network.get_input(i).name for i in range(network.num_inputs)],
            "layers": [(concrete(network.get_layer(k)).name, [concrete(network.get_layer(k)).get_output(j).name
                                                    for j in range(concrete(network.get_layer(k)).num_outputs)])
                       for k in range(network.num_layers)]}


def _clean(message: str) -> str:
    """TensorRT-RTX's message without its source location (" In addInput at /_src/...:2397")."""
    return re.sub(r"\s+In \w+ at [^)]*\)", ")", message)


def _run(trt, scenario):
    _, network, logger = new_network(trt)
    logger.clear()  # TensorRT-RTX's logger is shared by its builders
    returned = scenario(network, trt)
    errors = [_clean(m) for m in logger.errors if not re.search(r"catchCudaError|CUDA driver version", m)]
    return {**_names(network), "returned": returned, "errors": errors}


def _both(rtx, scenario, expected):
    """The scenario on both backends: equal results, and equal to `expected` (the probe's)."""
    got_ref, got_rtx = _run(reference, scenario), _run(rtx, scenario)
    assert got_rtx == expected, "TensorRT-RTX no longer does what it did when probed"
    assert got_ref == got_rtx


def _ident(network, x):
    return network.add_identity(x)


def test_a_taken_automatic_output_name_gets_a_suffix_from_one_counter(rtx):
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        network.add_input(OUT.format(0), trt.float32, (2, 3))
        network.add_input(OUT.format(0) + "_1", trt.float32, (2, 3))  # _1 is taken: the first clash gives _2
        _ident(network, x)
        network.add_input(OUT.format(1), trt.float32, (2, 3))
        _ident(network, x)  # the counter goes on: _3, not _1
        _ident(network, x)  # no clash: no suffix
        for name in (OUT.format(3), OUT.format(3) + "_4"):
            network.add_input(name, trt.float32, (2, 3))
        _ident(network, x)  # _4 taken: _5
        return None

    _both(rtx, scenario, {
        "inputs": ["x", OUT.format(0), OUT.format(0) + "_1", OUT.format(1), OUT.format(3), OUT.format(3) + "_4"],
        "layers": [(A.format(0), [OUT.format(0) + "_2"]), (A.format(1), [OUT.format(1) + "_3"]),
                   (A.format(2), [OUT.format(2)]), (A.format(3), [OUT.format(3) + "_5"])],
        "returned": None, "errors": []})


def test_a_renamed_tensor_holding_the_next_automatic_name(rtx):
    """The audit's case: a tensor renamed in advance to the next layer's automatic output name."""
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        _ident(network, x).get_output(0).name = "(Unnamed Layer* 1) [ElementWise]_output"
        network.add_elementwise(x, x, trt.ElementWiseOperation.SUM)
        return None

    _both(rtx, scenario, {
        "inputs": ["x"],
        "layers": [(A.format(0), ["(Unnamed Layer* 1) [ElementWise]_output"]),
                   ("(Unnamed Layer* 1) [ElementWise]", ["(Unnamed Layer* 1) [ElementWise]_output_1"])],
        "returned": None, "errors": []})


def test_an_automatic_layer_name_a_renamed_layer_has_is_skipped(rtx):
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        _ident(network, x).name = A.format(1)
        _ident(network, x)  # (Unnamed Layer* 1) is taken: 2, and every later layer is one further on
        _ident(network, x)
        _ident(network, x).name = "(Unnamed Layer* 5) [ElementWise]"  # another type: no clash for Identity 5
        _ident(network, x)
        network.add_elementwise(x, x, trt.ElementWiseOperation.SUM)
        return None

    _both(rtx, scenario, {
        "inputs": ["x"],
        "layers": [(A.format(1), [OUT.format(1)]), (A.format(2), [OUT.format(2)]), (A.format(3), [OUT.format(3)]),
                   ("(Unnamed Layer* 5) [ElementWise]", ["(Unnamed Layer* 5) [ElementWise]_output"]),
                   (A.format(5), [OUT.format(5)]),
                   ("(Unnamed Layer* 6) [ElementWise]", ["(Unnamed Layer* 6) [ElementWise]_output"])],
        "returned": None, "errors": []})


def test_add_input_refuses_an_input_name_and_an_explicit_tensor_name(rtx):
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        returned = [network.add_input("x", trt.float32, (2, 3)) is None]
        a = _ident(network, x)
        a.get_output(0).name = "mine"
        returned.append(network.add_input("mine", trt.float32, (2, 3)) is None)
        x.name = "x2"  # a rename frees the old name
        returned.append(network.add_input("x", trt.float32, (4,)) is None)
        return returned

    _both(rtx, scenario, {
        "inputs": ["x2", "x"], "layers": [(A.format(0), ["mine"])], "returned": [True, True, False],
        "errors": [
            "INetworkDefinition::addInput: Error Code 3: API Usage Error (Parameter check failed, condition: "
            "inName != knownInput->getName().)",
            "INetworkDefinition::addInput: Error Code 3: API Usage Error (Failed attempt to add tensor mine to the "
            "network as it uses an existing name.)"]})


def test_an_explicit_name_takes_an_automatic_name_from_its_holder(rtx):
    """add_input with, or a rename to, a layer output's automatic name is accepted; the output is renamed
    '<layer>_output_<n>' (never a duplicate); once explicit, the name is refused to others."""
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        a, b = _ident(network, x), _ident(network, x)
        returned = [network.add_input(OUT.format(0), trt.float32, (2, 3)) is None]  # a: _output_1
        b.get_output(0).name = OUT.format(0) + "_1"  # taken from a again: a gets _output_2
        a.get_output(0).name = OUT.format(0) + "_1"  # explicit now: refused
        c = _ident(network, x)
        x.name = OUT.format(2)  # an input's rename takes it too: c gets _output_3
        returned.append([t.get_output(0).name for t in (a, b, c)])
        return returned

    _both(rtx, scenario, {
        "inputs": [OUT.format(2), OUT.format(0)],
        "layers": [(A.format(0), [OUT.format(0) + "_2"]), (A.format(1), [OUT.format(0) + "_1"]),
                   (A.format(2), [OUT.format(2) + "_3"])],
        "returned": [False, [OUT.format(0) + "_2", OUT.format(0) + "_1", OUT.format(2) + "_3"]],
        "errors": [f"ITensor::setName: Error Code 3: API Usage Error (Failed attempt to rename a tensor from "
                   f"{OUT.format(0)}_2 to {OUT.format(0)}_1 as the new name is already in use.)"]})


def test_a_layer_rename_renames_its_automatic_outputs(rtx):
    def scenario(network, trt):
        x = network.add_input("foo_output", trt.float32, (2, 3))
        a, b, c, d = (_ident(network, x) for _ in range(4))
        a.name = "foo"  # foo_output is an input's: foo_output_1
        b.get_output(0).name = "kept"
        b.name = "bar"  # an explicit output name stays
        c.name = "baz"
        c.name = "baz"  # again: its own name counts as taken: baz_output_2
        d.name = A.format(0)  # an automatic layer name (a's old one): accepted
        d.name = A.format(0)  # again: the output is suffixed
        network.add_identity(x).name = "foo"  # a renamed layer's name: refused, nothing changes
        return None

    _both(rtx, scenario, {
        "inputs": ["foo_output"],
        "layers": [("foo", ["foo_output_1"]), ("bar", ["kept"]), ("baz", ["baz_output_2"]),
                   (A.format(0), [OUT.format(0) + "_3"]), (A.format(4), [OUT.format(4)])],
        "returned": None, "errors": [
            f"ILayer::setName: Error Code 3: API Usage Error (Failed attempt to rename a layer from {A.format(4)} "
            "to foo as the new name is already in use.)"]})


def test_later_outputs_are_named_output_space_index():
    """TensorRT-RTX names output 1 of a two-output layer '<layer>_output (1)' (probed with add_topk:
    '(Unnamed Layer* 0) [TopK]_output (1)', '_output (1)_1' when taken, and when an explicit name takes it,
    the output becomes '<layer>_output_<n>', without ' (1)'); the reference's multi-output layers are
    plugins, which TensorRT-RTX cannot host here."""
    class Two(reference.IPluginV3):
        def _output_shapes(self, shapes):
            return [shapes[0], shapes[0]]

        def _output_dtypes(self, dtypes):
            return [dtypes[0], dtypes[0]]

        def _execute(self, inputs):
            return [inputs[0], -inputs[0]]

    class Creator(reference.IPluginCreatorV3One):
        name, plugin_version = "TwoOutputs", "1"

        def create_plugin(self, name, field_collection, phase):
            plugin = Two()
            plugin._setup(name, {}, self)
            return plugin

    creator = Creator()
    assert reference.get_plugin_registry().register_creator(creator, "")
    try:
        _, network, logger = new_network(reference)
        x = network.add_input("x", reference.float32, (2, 3))
        plugin = creator.create_plugin("two", reference.PluginFieldCollection([]), reference.TensorRTPhase.BUILD)
        layer = network.add_plugin_v3([x], [], plugin)
        names = [[layer.get_output(j).name for j in range(2)]]
        network.add_input("(Unnamed Layer* 1) [PluginV3]_output (1)", reference.float32, (2, 3))
        layer = network.add_plugin_v3([x], [], plugin)
        names.append([layer.get_output(j).name for j in range(2)])
        _ident(network, x).get_output(0).name = "(Unnamed Layer* 0) [PluginV3]_output (1)"
        first = concrete(network.get_layer(0))
        names.append([first.get_output(j).name for j in range(2)])
        first.get_output(0).name = "v"
        _ident(network, x).get_output(0).name = "(Unnamed Layer* 0) [PluginV3]_output_2"
        names.append([first.get_output(j).name for j in range(2)])
    finally:
        reference.get_plugin_registry().deregister_creator(creator)
    L0, L1 = "(Unnamed Layer* 0) [PluginV3]_output", "(Unnamed Layer* 1) [PluginV3]_output"
    assert names == [[L0, f"{L0} (1)"], [L1, f"{L1} (1)_1"], [L0, f"{L0}_2"], ["v", L0]]
    assert logger.errors == []


def test_topk_probe_still_holds(rtx):
    """The multi-output probe the reference's plugin naming follows (the reference has no add_topk)."""
    _, network, logger = new_network(rtx)
    logger.clear()
    x = network.add_input("x", rtx.float32, (2, 8))
    top = [network.add_topk(x, rtx.TopKOperation.MAX, 2, 2)]
    network.add_input("(Unnamed Layer* 1) [TopK]_output (1)", rtx.float32, (2, 8))
    top += [network.add_topk(x, rtx.TopKOperation.MAX, 2, 2) for _ in range(2)]
    network.add_identity(x).get_output(0).name = "(Unnamed Layer* 0) [TopK]_output (1)"
    L0, L1, L2 = (f"(Unnamed Layer* {k}) [TopK]_output" for k in range(3))
    assert [[t.get_output(j).name for j in range(2)] for t in top] == [[L0, f"{L0}_2"], [L1, f"{L1} (1)_1"],
                                                                        [L2, f"{L2} (1)"]]
    assert [e for e in logger.errors if "Cuda Runtime" not in e] == []


def test_a_layer_may_take_an_automatic_layer_name_but_not_a_renamed_one(rtx):
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        a, b, c = (_ident(network, x) for _ in range(3))
        b.name = a.name  # two layers named (Unnamed Layer* 0) [Identity]; b's output: _output_1
        c.name = a.name  # b's is explicit now: refused
        return None

    _both(rtx, scenario, {
        "inputs": ["x"],
        "layers": [(A.format(0), [OUT.format(0)]), (A.format(0), [OUT.format(0) + "_1"]),
                   (A.format(2), [OUT.format(2)])],
        "returned": None, "errors": [
            f"ILayer::setName: Error Code 3: API Usage Error (Failed attempt to rename a layer from {A.format(2)} "
            f"to {A.format(0)} as the new name is already in use.)"]})


def test_renaming_a_layer_to_its_own_name_and_releasing_a_shared_name(rtx):
    """Found by the random test below: a layer renamed to the name it has is neither checked nor
    registered (only its automatic outputs are named again); a layer renamed away from a name it shares
    with a renamed layer frees that name for everyone."""
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        a, b, c, d = (_ident(network, x) for _ in range(4))
        a.name = a.name  # its own automatic name: not registered (its output: _output_1, its own name taken)
        c.name = a.name  # so c may take it: a and c share (Unnamed Layer* 0), c's explicitly
        a.name = "a"  # a gives it up, and the name is free again although c holds it
        d.name = c.name
        b.name = b.name  # its own name: no error, its output named again
        c.name = c.name  # its own name, although d holds it explicitly: not checked, no error
        return None

    _both(rtx, scenario, {
        "inputs": ["x"],
        "layers": [("a", ["a_output"]), (A.format(1), [OUT.format(1) + "_3"]),
                   (A.format(0), [OUT.format(0) + "_4"]), (A.format(0), [OUT.format(0) + "_2"])],
        "returned": None, "errors": []})


def _random_scenario(seed: int):
    """A random sequence of adds and renames, names drawn from taken, automatic and future ones."""
    import random

    rng = random.Random(seed)
    steps = [rng.random() for _ in range(40)]

    def scenario(network, trt):
        r = random.Random(seed)
        returned = []
        tensors = [network.add_input("x", trt.float32, (2, 3))]
        layers = []

        def some_name():
            k = r.randrange(max(len(layers), 1) + 2)
            label = r.choice(["Identity", "ElementWise"])
            return r.choice(["a", "b", "foo", "foo_output", "foo_output_1", f"(Unnamed Layer* {k}) [{label}]",
                             f"(Unnamed Layer* {k}) [{label}]_output", f"(Unnamed Layer* {k}) [{label}]_output_1",
                             r.choice(tensors).name] + ([r.choice(layers).name] if layers else []))

        for u in steps[:r.randrange(5, 40)]:
            if u < 0.15:
                t = network.add_input(some_name(), trt.float32, (2, 3))
                returned.append(t is None)
                if t is not None:
                    tensors.append(t)
            elif u < 0.45:
                layer = (network.add_identity(r.choice(tensors)) if r.random() < 0.7 else
                         network.add_elementwise(r.choice(tensors), r.choice(tensors), trt.ElementWiseOperation.SUM))
                layers.append(layer)
                tensors.append(layer.get_output(0))
            elif u < 0.75:
                r.choice(tensors).name = some_name()
            elif layers:
                r.choice(layers).name = some_name()
        return returned

    return scenario


@pytest.mark.parametrize("seed", range(150))
def test_random_adds_and_renames_name_alike(rtx, seed):
    scenario = _random_scenario(seed)
    assert _run(reference, scenario) == _run(rtx, scenario)


def test_a_null_name_is_refused_and_bytes_are_decoded(rtx):
    """TensorRT-RTX 1.7 probed: None as a name logs "Parameter check failed, condition: (name) != nullptr."
    and changes nothing (add_input returns None); bytes are taken as UTF-8 text."""
    null = "Error Code 3: API Usage Error (Parameter check failed, condition: (name) != nullptr.)"

    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        refused = network.add_input(None, trt.float32, (2, 3))
        layer = network.add_identity(x)
        layer.name = None
        layer.get_output(0).name = None
        network.add_identity(x).name = b"ab"
        return refused

    _both(rtx, scenario, {"inputs": ["x"],
                          "layers": [(A.format(0), [OUT.format(0)]), ("ab", ["ab_output"])],
                          "returned": None,
                          "errors": [f"INetworkDefinition::addInput: {null}", f"ILayer::setName: {null}",
                                     f"ITensor::setName: {null}"]})


@pytest.mark.parametrize("backend", ["reference", "rtx"])
def test_a_name_of_another_type_is_a_type_error(backend, rtx):
    trt = reference if backend == "reference" else rtx
    _, network, _ = new_network(trt)
    x = network.add_input("x", trt.float32, (2, 3))
    layer = network.add_identity(x)
    for call in (lambda: setattr(layer, "name", 3), lambda: setattr(layer.get_output(0), "name", 3.5),
                 lambda: network.add_input(7, trt.float32, (2, 3))):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            call()
    assert layer.name == A.format(0) and network.num_inputs == 1


def test_marking_an_input_or_an_output_again_is_refused(rtx):
    """TensorRT-RTX 1.7 probed: marking a network input as an output, or an output a second time, logs an
    API usage error and changes nothing (the reference made the input an output too)."""
    def scenario(network, trt):
        x = network.add_input("x", trt.float32, (2, 3))
        network.mark_output(x)
        y = network.add_identity(x).get_output(0)
        network.mark_output(y)
        network.mark_output(y)
        return [network.get_output(i).name for i in range(network.num_outputs)]

    usage = "INetworkDefinition::markOutput: Error Code 4: API Usage Error (Failed attempt to set a tensor"
    _both(rtx, scenario, {"inputs": ["x"], "layers": [(A.format(0), [OUT.format(0)])], "returned": [OUT.format(0)],
                          "errors": [f"{usage} x as network-level output. It was previously set as a network-level "
                                     "input. Tensor can't be both input and output at network level.)",
                                     f"{usage} {OUT.format(0)} as network-level output as it was already set as "
                                     "network-level output.)"]})

"""A TensorRT network method the reference backend lacks is one sentence naming it and the backend that builds
it, not a bare AttributeError that reads like a typo or a CLI traceback."""

from __future__ import annotations

import textwrap

import pytest

import trtbuild.reference as trt
from trtbuild.cli import main
from trtbuild.reference.missing_api import TENSORRT_ADD_METHODS, MissingLayerError

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
MISSING = sorted(name for name in TENSORRT_ADD_METHODS if name not in dir(trt.INetworkDefinition))


def _network():
    return trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)


def test_the_list_holds_every_add_method_of_tensorrt_rtx(rtx):
    """The names come from TensorRT 11.4; TensorRT-RTX 1.7's INetworkDefinition must have none beyond them."""
    assert {m for m in dir(rtx.INetworkDefinition) if m.startswith("add_")} <= TENSORRT_ADD_METHODS


@pytest.mark.parametrize("name", MISSING)
def test_a_missing_method_is_one_sentence_naming_it(name, rtx):
    network = _network()
    assert not hasattr(network, name)  # code probing for a layer still takes its other path
    with pytest.raises(MissingLayerError) as info:
        getattr(network, name)
    text = str(info.value)
    assert isinstance(info.value, AttributeError) and isinstance(info.value, NotImplementedError)
    assert text.startswith(f"INetworkDefinition.{name} is ") and "\n" not in text
    if name in ("add_plugin", "add_plugin_v2"):
        assert "use add_plugin_v3" in text and not hasattr(rtx.INetworkDefinition, name)
    elif name == "add_dist_collective":
        assert "multi-GPU collective" in text
    elif name == "add_moe":  # the refusal names what TensorRT leaves undefined, and the backend that builds it
        assert "does not define" in text and "`--backend tensorrt-rtx`" in text
        assert hasattr(rtx.INetworkDefinition, name)
    else:  # the backend it names must really have the method
        assert "`--backend tensorrt-rtx`" in text and hasattr(rtx.INetworkDefinition, name)


def test_other_unknown_attributes_stay_plain_attribute_errors():
    network = _network()
    with pytest.raises(AttributeError) as info:
        network.add_resise  # noqa: B018 - the attribute read is what raises
    assert type(info.value) is AttributeError and info.value.name == "add_resise"
    assert "has no attribute 'add_resise'" in str(info.value)


def test_the_cli_reports_a_missing_method_in_one_line(tmp_path, monkeypatch, capsys):
    # add_moe: the one layer the reference cannot compute (TensorRT does not define its result), so it stays missing
    name = "add_moe"
    (tmp_path / "up.py").write_text(textwrap.dedent(f"""
        import torch


        def boxes(network, weights, x):
            return {{"out": network.{name}(x, x, x).get_output(0)}}


        def make_model():
            return torch.nn.Identity()
    """))
    monkeypatch.chdir(tmp_path)
    code = main(["build", "up.py:boxes", "--torch", "up.py:make_model", "--input", "input:1x3x8x8",
                 "--backend", "reference", "-o", str(tmp_path / "up.engine")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("trtbuild: error: INetworkDefinition.add_moe is a mixture-of-experts layer whose result "
                           "TensorRT does not define")
    assert line.endswith("build it with `--backend tensorrt-rtx` or TensorRT itself")
    assert not (tmp_path / "up.engine").exists()

"""trtbuild.forward_hooks: the one forward-hook capture helper of layerwise parity, the automatic
layer map and int8 calibration."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trtbuild.forward_hooks import CaptureOptions, ForwardCapture, capture_forward


class Pair(nn.Module):
    """Returns a tuple; its first element is later changed in place by the caller."""

    def forward(self, x):
        return x * 2, x * 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 1)
        self.relu = nn.ReLU(inplace=True)
        self.pair = Pair()
        self.block = nn.Sequential(nn.Identity(), nn.Identity())

    def forward(self, x):
        y = self.relu(self.conv(x))
        a, _ = self.pair(y)
        a += 100  # in place, after the capture
        y = self.relu(y)  # relu runs twice
        return self.block(a + y)


def _hooks(module: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


@pytest.fixture
def net():
    torch.manual_seed(0)
    return Net()


def test_every_call_in_call_order_with_the_tensors_themselves(net):
    x = torch.randn(1, 1, 2, 2)
    result, cap = capture_forward(net, x)
    assert [c.name for c in cap.calls] == ["conv", "relu", "pair", "relu", "block.0", "block.1", "block"]
    assert cap.counts == {"conv": 1, "relu": 2, "pair": 1, "block.0": 1, "block.1": 1, "block": 1}
    conv, relu = cap.calls[0], cap.calls[1]
    assert conv.module is net.conv and conv.input is x
    assert relu.input is conv.output  # identity kept: no copy by default (the in-place ReLU changed it)
    assert isinstance(cap.calls[2].output, tuple) and cap.calls[6].output is result
    assert not cap.first and _hooks(net) == 0 and not result.requires_grad


def test_first_output_copied_and_first_of_tuple(net):
    x = torch.randn(1, 1, 2, 2)
    options = CaptureOptions(names=["conv", "pair", "relu", "conv"], keep="first", first_of_tuple=True, copy=True)
    _, cap = capture_forward(net, x, options=options)
    conv = net.conv(x)
    assert (conv < 0).any()
    torch.testing.assert_close(cap.first["conv"], conv)  # not clipped by the in-place ReLU
    torch.testing.assert_close(cap.first["pair"], torch.relu(conv) * 2)  # not + 100
    torch.testing.assert_close(cap.first["relu"], torch.relu(conv))
    assert cap.counts == {"conv": 1, "pair": 1, "relu": 2} and not cap.calls and _hooks(net) == 0


def test_without_copy_the_caller_sees_in_place_changes(net):
    _, cap = capture_forward(net, torch.randn(1, 1, 2, 2), options=CaptureOptions(names=["pair"], keep="first",
                                                                                  first_of_tuple=True))
    assert bool((cap.first["pair"] >= 100).all())


def test_callbacks_run_around_each_module_and_nothing_is_kept(net):
    events = []
    options = CaptureOptions(keep="none")
    with ForwardCapture(net, options, before=lambda name, module, args: events.append(("in", name)),
                        after=lambda call: events.append(("out", call.name))) as cap:
        net(torch.randn(1, 1, 2, 2))
    assert events[:4] == [("in", "conv"), ("out", "conv"), ("in", "relu"), ("out", "relu")]
    assert events[-6:] == [("in", "block"), ("in", "block.0"), ("out", "block.0"), ("in", "block.1"),
                           ("out", "block.1"), ("out", "block")]
    assert not cap.calls and not cap.first and cap.counts["relu"] == 2 and _hooks(net) == 0


def test_hooks_are_removed_when_the_forward_raises(net):
    with pytest.raises(RuntimeError):
        capture_forward(net, torch.randn(1, 3, 2, 2))  # conv wants 1 channel
    assert _hooks(net) == 0


def test_bad_names_and_options_are_refused_in_one_sentence(net):
    with pytest.raises(ValueError, match=r"^Net has no submodule named 'conv3', 'x'$"):
        with ForwardCapture(net, CaptureOptions(names=["conv", "conv3", "x"])):
            pass
    assert _hooks(net) == 0
    with pytest.raises(ValueError, match=r"^keep must be 'calls', 'first' or 'none', not 'all'$"):
        CaptureOptions(keep="all")


def test_a_shared_submodule_answers_to_each_of_its_names():
    """`self.b = self.a`: PyTorch lists the module once, but the user may name either attribute."""

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = self.a

        def forward(self, x):
            return self.b(x)

    model, x = Shared(), torch.ones(1, 3)
    result, capture = capture_forward(model, x, options=CaptureOptions(names=["b"], keep="first"))
    torch.testing.assert_close(capture.first["b"], result)


def test_a_string_of_names_is_refused():
    with pytest.raises(TypeError, match="sequence of submodule names, not the string 'conv1'"):
        with ForwardCapture(nn.Sequential(), CaptureOptions(names="conv1")):
            pass

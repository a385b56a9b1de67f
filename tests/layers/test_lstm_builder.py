"""trtbuild.layers.recurrent.lstm (nn.LSTM as ILoops) against torch.nn.LSTM with the same state-dict weights:
fp32 (tight) and fp16 on the reference, both directions, several layers, batch_first or not, without biases;
the same network built by TensorRT-RTX (sm86, no GPU needed), which judges the loops' acceptance, shapes and
types; the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import trtbuild.reference as ref
from trtbuild.engine.build import new_network
from trtbuild.engine.quick import run_builder
from trtbuild.layers.common import BuilderError
from trtbuild.layers.recurrent import lstm, read_lstm


def _lstm(seed: int, *args, **kwargs) -> nn.LSTM:
    torch.manual_seed(seed)
    return nn.LSTM(*args, **kwargs).eval()


CASES = {  # id -> (nn.LSTM arguments, input shape)
    "bi-2layers-batch_first": (dict(input_size=6, hidden_size=5, num_layers=2, bidirectional=True,
                                    batch_first=True), (2, 7, 6)),
    "uni-1layer": (dict(input_size=4, hidden_size=8, num_layers=1, batch_first=True), (3, 5, 4)),
    "uni-3layers-seq_first": (dict(input_size=3, hidden_size=4, num_layers=3, batch_first=False), (6, 2, 3)),
    "bi-no-bias-seq_first": (dict(input_size=5, hidden_size=3, num_layers=1, bidirectional=True, bias=False,
                                  batch_first=False), (4, 1, 5)),
    "one-step": (dict(input_size=2, hidden_size=2, num_layers=1, bidirectional=True, batch_first=True), (1, 1, 2)),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_torch_lstm_fp32_and_fp16(case):
    args, shape = CASES[case]
    m = _lstm(1, **args)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = m.double()(x.double())[0]
    sd = {k: v.float() for k, v in m.state_dict().items()}
    got = run_builder(lambda n, t: lstm(n, t, sd, "rnn", batch_first=args["batch_first"]), x)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    assert (got.double() - expected).abs().max().item() < 2e-6
    half = run_builder(lambda n, t: lstm(n, t, sd, "rnn", batch_first=args["batch_first"]), x.half())
    assert half.dtype == torch.float16
    assert (half.double() - expected).abs().max().item() < 5e-3


def test_the_backward_direction_is_in_time_order():
    """The backward direction at step t reads x[t:] only: changing x[0] changes its output at step 0 alone
    (were the REVERSE output or the reverse iterator missing, another step would change)."""
    m = _lstm(0, 1, 1, 1, bidirectional=True, batch_first=True)
    x = torch.tensor([[[0.0], [0.0], [3.0]]])
    with torch.no_grad():
        expected = m(x)[0]
    got = run_builder(lambda n, t: lstm(n, t, m.state_dict(), "rnn"), x)
    assert torch.allclose(got, expected, atol=1e-6)
    x2 = x.clone()
    x2[0, 0, 0] = 5.0  # changes the backward output at step 0 only, and the forward output from step 0 on
    got2 = run_builder(lambda n, t: lstm(n, t, m.state_dict(), "rnn"), x2)
    back, back2 = got[0, :, 1], got2[0, :, 1]
    assert back[0] != back2[0] and torch.equal(back[1:], back2[1:])


def test_layer_names_and_weights_read_from_a_prefix():
    model = nn.Sequential(nn.Identity(), _lstm(3, 4, 3, 2, bidirectional=True, batch_first=True))
    wm_keys = set(model.state_dict())
    _, net, _ = new_network(ref)
    x = net.add_input("x", ref.float32, (1, 5, 4))
    y = lstm(net, x, model.state_dict(), "rnn", prefix="1")
    names = [net.get_layer(i).name for i in range(net.num_layers)]
    assert y.name == "rnn" and tuple(y.shape) == (1, 5, 6)
    for d in ("l0", "l0_reverse", "l1", "l1_reverse"):
        for part in ("weight_ih", "input_proj", "bias", "input_proj_bias", "trip_limit", "x_t", "h", "c",
                     "hidden_proj", "gates", "gate_i", "gate_f", "gate_g", "gate_o", "i", "f", "g", "o",
                     "c_next", "h_next", "out"):
            assert f"rnn/{d}/{part}" in names, (d, part)
    assert "rnn/l0" in names and names.count("rnn") == 1
    layers = read_lstm(model.state_dict(), "1")
    assert [[d.suffix for d in dirs] for dirs in layers] == [["l0", "l0_reverse"], ["l1", "l1_reverse"]]
    assert len(wm_keys) == 16
    b = model.state_dict()
    np.testing.assert_allclose(layers[1][1].bias, (b["1.bias_ih_l1_reverse"] + b["1.bias_hh_l1_reverse"]).numpy(),
                               rtol=1e-6)


def test_a_dynamic_batch_starts_from_a_fill_of_zeros():
    """With N dynamic the initial states are a LINSPACE fill (start 0, deltas 0) of dims (N, H) from the input's
    shape; one engine runs batches 1 and 3."""
    from trtbuild.engine import build_plan
    from trtbuild.engine.runner import Engine

    m = _lstm(5, 4, 3, 2, bidirectional=True, batch_first=True)
    plan = build_plan(ref, lambda net, x: {"y": lstm(net, x, m.state_dict(), "rnn")}, input_shape=(1, 6, 4),
                      batch=(1, 2, 3), progress=False)
    engine = Engine(plan, ref)
    for n in (1, 3):
        x = torch.randn(n, 6, 4, generator=torch.Generator().manual_seed(n))
        with torch.no_grad():
            expected = m(x)[0]
        got = engine.run({"input": x})["y"]
        assert got.shape == (n, 6, 6) and (got - expected).abs().max().item() < 1e-6


@pytest.mark.parametrize("batch", [2, -1])
@pytest.mark.parametrize("dtype", ["FLOAT", "HALF"])
def test_tensorrt_rtx_builds_it(rtx, rtxnet, dtype, batch):
    """TensorRT-RTX accepts the loops (iterator, reverse iterator, recurrences, CONCATENATE and REVERSE outputs)
    and infers the shapes and types the reference infers."""
    m = _lstm(4, 6, 5, 2, bidirectional=True, batch_first=True)
    shapes = {}
    for trt, net in ((rtx, rtxnet.network), (ref, new_network(ref)[1])):
        x = net.add_input("x", getattr(trt.DataType, dtype), (batch, 7, 6))
        y = lstm(net, x, m.state_dict(), "rnn")
        net.mark_output(y)
        shapes[trt.__name__] = (tuple(y.shape), y.dtype.name, net.num_layers)
    assert shapes["tensorrt_rtx"] == shapes["trtbuild.reference"]
    assert shapes["tensorrt_rtx"][:2] == ((batch, 7, 10), dtype)
    if batch < 0:
        profile = rtxnet.builder.create_optimization_profile()
        profile.set_shape("x", (1, 7, 6), (2, 7, 6), (4, 7, 6))
        rtxnet.config.add_optimization_profile(profile)
    assert rtxnet.build() is not None, rtxnet.errors


def test_refusals_name_the_layer():
    _, net, _ = new_network(ref)
    m = _lstm(0, 4, 3, 1, batch_first=True)
    with pytest.raises(BuilderError, match=r"layer 'rnn': the sequence length of 'd' \(1, -1, 4\) must be known at "
                                           "build time"):
        lstm(net, net.add_input("d", ref.float32, (1, -1, 4)), m.state_dict(), "rnn")
    with pytest.raises(BuilderError, match=r"layer 'rnn': an LSTM input is \(N, T, features\).*got 'r' with shape "
                                           r"\(5, 4\)"):
        lstm(net, net.add_input("r", ref.float32, (5, 4)), m.state_dict(), "rnn")
    with pytest.raises(BuilderError, match="layer 'rnn': 'f' has 6 features but weight_ih_l0 \\(12, 4\\) expects 4"):
        lstm(net, net.add_input("f", ref.float32, (1, 5, 6)), m.state_dict(), "rnn")
    proj = _lstm(0, 4, 3, 1, proj_size=2)
    with pytest.raises(BuilderError, match="layer 'rnn': LSTM projections .* are not supported"):
        lstm(net, net.add_input("p", ref.float32, (1, 5, 4)), proj.state_dict(), "rnn")
    with pytest.raises(BuilderError, match="layer 'rnn': no weight_ih_l0 under prefix 'enc'"):
        lstm(net, net.add_input("q", ref.float32, (1, 5, 4)), {"enc.weight": torch.zeros(1)}, "rnn", prefix="enc")
    assert net.num_layers == 0  # every refusal comes before any layer is added

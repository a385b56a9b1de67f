"""crnn: the PyTorch model's keys and shapes by hand, the network against it on the reference (fp32 tight, fp16,
layerwise with the hand-written and the automatic map), TensorRT-RTX building it with a dynamic batch, the ONNX
export (an ONNX Loop per LSTM direction) in onnxruntime and parsed and built by TensorRT-RTX, the refusals.
Tolerances as in tests/models/test_zoo_parity.py (helpers.model_checks)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import trtbuild.reference as ref_trt
from trtbuild.engine import build_plan
from trtbuild.engine.build import new_network
from trtbuild.engine.quick import build_spec_network, run_spec
from trtbuild.layers.common import BuilderError
from trtbuild.models import registry
from trtbuild.models.pytorch.crnn import crnn
from trtbuild.weights import WeightMap

from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32


def test_state_dict_by_hand():
    sd = crnn().state_dict()
    convs = [(1, 32), (32, 64), (64, 128), (128, 128)]
    expected = []
    for i, (cin, cout) in enumerate(convs):
        expected += [(f"cnn.{4 * i}.weight", (cout, cin, 3, 3)), (f"cnn.{4 * i}.bias", (cout,))]
        expected += [(f"cnn.{4 * i + 1}.{k}", (cout,)) for k in ("weight", "bias", "running_mean", "running_var")]
        expected += [(f"cnn.{4 * i + 1}.num_batches_tracked", ())]
    for k, cin in ((0, 128), (1, 256)):  # layer 1 reads both directions of layer 0
        for s in ("", "_reverse"):
            expected += [(f"rnn.weight_ih_l{k}{s}", (512, cin)), (f"rnn.weight_hh_l{k}{s}", (512, 128)),
                         (f"rnn.bias_ih_l{k}{s}", (512,)), (f"rnn.bias_hh_l{k}{s}", (512,))]
    expected += [("fc.weight", (37, 256)), ("fc.bias", (37,))]
    assert [(k, tuple(v.shape)) for k, v in sd.items()] == expected
    # conv 9*(1*32 + 32*64 + 64*128 + 128*128) + biases and BN affine 3 * 352; LSTM 2 * 4*128*(128 + 128 + 2) +
    # 2 * 4*128*(256 + 128 + 2); fc 256*37 + 37
    conv = 9 * (32 + 32 * 64 + 64 * 128 + 128 * 128) + 3 * (32 + 64 + 128 + 128)
    assert sum(p.numel() for p in crnn().parameters()) == conv + 2 * 512 * 258 + 2 * 512 * 386 + 256 * 37 + 37


@pytest.fixture(scope="module")
def small():
    spec = registry.get("crnn")
    model = registry.get_torch_model("crnn", small=True)
    x = torch.rand(2, 1, 32, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = model(x)
    return spec, model, x, ref


def test_small_model_matches_torch_in_fp32(small):
    spec, model, x, (log_probs, labels) = small
    out = run_spec(spec, WeightMap.from_module(model), x[:1], "fp32", small=True)
    check_fp32(out["log_probs"], log_probs[:1], "crnn log_probs fp32")
    assert out["labels"].dtype == torch.int32 and torch.equal(out["labels"], labels[:1])
    assert out["log_probs"].shape == (1, 8, 37)
    assert torch.allclose(out["log_probs"].exp().sum(-1), torch.ones(1, 8), atol=1e-5)  # a distribution per step


def test_small_model_matches_torch_in_fp16(small):
    """fp16: log-probs within the fp16 tolerance; the argmax may differ only where the fp32 reference's top two
    classes are closer than the fp16 error."""
    spec, model, x, (log_probs, labels) = small
    out = run_spec(spec, WeightMap.from_module(model), x[:1], "fp16", small=True)
    check_fp16(out["log_probs"], log_probs[:1], "crnn log_probs fp16")
    err = (out["log_probs"].float() - log_probs[:1]).abs().max().item()
    top2 = log_probs[:1].topk(2, -1).values
    near_tie = (top2[..., 0] - top2[..., 1]) <= 2 * err
    assert out["labels"].dtype == torch.int32
    assert bool(((out["labels"] == labels[:1]) | near_tie).all())


def test_builds_from_flat_weights(small):
    """Weights stored flat, as .wts files keep them (what `trtbuild build crnn` exports): the conv kernels and
    the LSTM matrices are shaped from their sizes."""
    spec, model, x, (log_probs, labels) = small
    flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in model.state_dict().items()})
    out = run_spec(spec, flat, x[:1], "fp32", small=True)
    check_fp32(out["log_probs"], log_probs[:1], "crnn from flat weights")
    assert [k for k in flat.unused() if not k.endswith("num_batches_tracked")] == []


def test_every_mapped_tensor_matches_torch(small):
    spec, model, x, _ = small
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: model(x[:1]))
    extra = [t for t in spec.layer_map if t not in spec.output_names]
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x[:1], "fp32", small=True, extra_outputs=extra)
    assert [k for k in wm.unused() if not k.endswith("num_batches_tracked")] == []
    assert len(spec.layer_map) == 13  # 4 blocks x (conv+bn, relu, pool), fc
    for tname, mname in spec.layer_map.items():
        assert len(captured[mname]) == 1
        check_fp32(out[tname], captured[mname][0], f"tensor {tname} vs module {mname}")


def test_layerwise_parity_with_the_automatic_map(small):
    """The automatic map finds the same 13 tensors as the hand-written one. nn.LSTM returns a tuple (output,
    (h_n, c_n)), which no tensor stands for, so the LSTM is compared through fc; the layers inside the loops
    (their tensors live in the loop body and cannot be network outputs) and the functional log_softmax and
    argmax stay unmapped."""
    from trtbuild.parity.check import check_model_parity

    spec, model, _, _ = small
    report = check_model_parity(dataclasses.replace(spec, layer_map={}), ref_trt, small=True, layerwise=True,
                                module=model)
    assert report.passed, report.to_table()
    assert report.meta["layer_map"] == "automatic (from the layer names)"
    assert {row.name: row.module for row in report.layers} == spec.layer_map
    unmapped = report.meta["unmapped_layers"]
    assert {"features", "rnn", "rnn/l0", "log_probs", "labels/topk", "labels"} <= set(unmapped)
    assert "rnn/l1_reverse/h_next" in unmapped and not any(u.startswith("cnn.") for u in unmapped)


def test_tensorrt_rtx_builds_it_with_a_dynamic_batch(rtx, small):
    spec, model, x, (log_probs, labels) = small
    plan = build_plan(ref_trt, spec, weights=WeightMap.from_module(model), small=True, progress=False,
                      cross_check=True, batch=(1, 2, 4))
    cross = plan.info["cross_check"]  # CrossCheckError otherwise
    assert cross["tensors_compared"] > 100 and cross["rtx_engine_bytes"] > 0
    assert plan.info["outputs"] == [{"name": "log_probs", "shape": [-1, 8, 37], "dtype": "FLOAT"},
                                    {"name": "labels", "shape": [-1, 8], "dtype": "INT32"}]
    from trtbuild.engine.runner import Engine

    got = Engine(plan, ref_trt).run({"input": x})  # the reference engine at batch 2
    check_fp32(got["log_probs"], log_probs, "crnn batch 2")
    assert torch.equal(got["labels"], labels)


def test_onnx_export_runs_in_onnxruntime_and_tensorrt_rtx_parses_it(rtx, small):
    from trtbuild.onnx_export import export_onnx, parse_with_tensorrt_rtx, run_onnxruntime

    spec, model, x, (log_probs, labels) = small
    net = new_network(ref_trt)[1]
    outs = build_spec_network(net, spec, WeightMap.from_module(model), "fp32", small=True)
    for name in spec.output_names:
        outs[name].name = name
        net.mark_output(outs[name])
    onnx_model = export_onnx(net)
    assert [n.op_type for n in onnx_model.graph.node].count("Loop") == 4  # 2 layers x 2 directions
    got = run_onnxruntime(onnx_model, {"input": x[:1]})
    check_fp32(torch.from_numpy(got["log_probs"]), log_probs[:1], "crnn onnxruntime")
    assert got["labels"].dtype == np.int32 and np.array_equal(got["labels"], labels[:1].numpy())
    parsed = parse_with_tensorrt_rtx(onnx_model, rtx)
    assert parsed.ok, parsed.reason()


def test_refusals_name_the_model(small):
    spec, model, _, _ = small
    wm = WeightMap.from_module(model)
    net = new_network(ref_trt)[1]
    with pytest.raises(BuilderError, match=r"crnn: input 'x' \(1, 1, 32, 30\) must be \(N, 1, 32, W\) with W known "
                                           "at build time and a multiple of 4"):
        spec.build_network(net, wm, net.add_input("x", ref_trt.float32, (1, 1, 32, 30)))
    with pytest.raises(BuilderError, match=r"crnn: input 'h' \(1, 1, 64, 32\)"):
        spec.build_network(net, wm, net.add_input("h", ref_trt.float32, (1, 1, 64, 32)))
    with pytest.raises(ValueError, match="CRNN: input height must be 32"):
        model(torch.zeros(1, 1, 64, 32))


def test_spec_fields_and_cli_listing(capsys):
    spec = registry.get("crnn")
    assert spec.name in registry.names() and spec.output_names == ["log_probs", "labels"]
    assert spec.input_shape(False) == (1, 1, 32, 100) and spec.input_shape(True) == (1, 1, 32, 32)
    assert spec.value_range == (0.0, 1.0) and spec.uses_plugins is False and spec.options == {}
    a, b = registry.get_torch_model("crnn", seed=0), registry.get_torch_model("crnn", seed=1)
    assert not a.training and not torch.equal(a.fc.weight, b.fc.weight)
    assert not torch.all(a.cnn[1].running_var == 1)  # statistics randomized
    from trtbuild.cli import main

    main(["models"])
    assert "crnn" in capsys.readouterr().out


@pytest.mark.slow
def test_full_size_matches_torch():
    spec = registry.get("crnn")
    model = registry.get_torch_model("crnn")
    x = torch.rand(1, 1, 32, 100, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        log_probs, labels = model(x)
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x, "fp32")
    check_fp32(out["log_probs"], log_probs, "crnn 32x100 fp32")
    assert out["log_probs"].shape == (1, 25, 37) and torch.equal(out["labels"], labels)
    check_fp16(run_spec(spec, wm, x, "fp16")["log_probs"], log_probs, "crnn 32x100 fp16")

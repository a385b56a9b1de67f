"""QuantPlan on hand-made calibration data: what is quantized, with which ranges and scales, what
--keep keeps in which precision, and the one-sentence refusals."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trtbuild.quant import Calibration, QuantPlan, folded_weight_amax, parse_keep, scale_of, weight_amax

MODULES = ["conv1", "bn1", "layer1", "layer1.0", "layer1.0.conv1", "layer1.0.bn1", "layer1.0.conv2",
           "layer1.0.bn2", "layer4", "layer4.0", "layer4.0.conv1", "layer4.0.conv2", "conv4_3_norm", "fc"]
CONVS = ["conv1", "layer1.0.conv1", "layer1.0.conv2", "layer4.0.conv1", "layer4.0.conv2", "fc"]


def _calibration(precision=None):
    acts = {f"{m}.input": 1.0 + i for i, m in enumerate(CONVS)}
    acts.update({"layer1.0.bn2.output": 7.5, "conv1.output": 2.54})
    acts.pop("layer4.0.conv2.input")  # a module that never ran during calibration
    return Calibration(model="toy", method={"name": "max"}, activations=acts,
                       weights={f"{m}.weight": [0.5, 1.27, 4.48] for m in CONVS},
                       shapes={"activations": {}, "weights": {}},
                       adds={"layer1.0.add": ["layer1.0.bn2.output", "conv1.output"]}, modules=MODULES,
                       precision=precision)


def test_parse_keep():
    assert parse_keep(["fp32:conv4_3_norm,layer4.*", "fp16: fc "]) == [
        ("conv4_3_norm", "fp32"), ("layer4.*", "fp32"), ("fc", "fp16")]
    for bad in ("int8:conv1", "conv1", "fp32:", "fp32: , "):
        with pytest.raises(ValueError, match="--keep"):
            parse_keep([bad])


def test_int8_plan_gives_ranges_and_scales():
    plan = QuantPlan.build(_calibration(), "int8")
    lp = plan.layer("layer1.0.conv2")
    assert lp.quantized and lp.precision == "int8"
    assert lp.input_amax == 3.0 and lp.weight_amax == (0.5, 1.27, 4.48)
    assert lp.input_scale() == pytest.approx(3.0 / 127)
    assert lp.weight_scales() == pytest.approx([0.5 / 127, 0.01, 4.48 / 127])
    assert plan.add_inputs("layer1.0.add") == (7.5, 2.54)
    assert plan.output_amax("conv1") == 2.54 and plan.output_amax("layer1.0.conv1") is None
    assert plan.precision_of("bn1") == "int8"


def test_fp8_uses_the_same_amax_with_scale_over_448():
    lp = QuantPlan.build(_calibration(), "fp8").layer("fc")
    assert lp.input_amax == 6.0 and lp.weight_scales() == pytest.approx([0.5 / 448, 1.27 / 448, 0.01])
    assert scale_of(4.48, "int8") == pytest.approx(4.48 / 127)


def test_a_module_that_did_not_run_is_not_quantized():
    lp = QuantPlan.build(_calibration(), "int8").layer("layer4.0.conv2")
    assert not lp.quantized and lp.precision == "fp32" and "never seen" in lp.reason


def test_keep_globs_cover_submodules_and_the_innermost_match_wins():
    keep = parse_keep(["fp16:layer4", "fp32:layer4.0.conv2,conv4_3_norm", "fp32:layer1.0.*"])
    plan = QuantPlan.build(_calibration(), "int8", keep)
    assert plan.layer("layer4.0.conv1").precision == "fp16" and not plan.layer("layer4.0.conv1").quantized
    assert plan.layer("layer4.0.conv2").precision == "fp32"
    assert plan.precision_of("conv4_3_norm") == "fp32"
    assert plan.layer("layer1.0.conv1").precision == "fp32"  # layer1.0.* matches inside layer1.0
    assert plan.add_inputs("layer1.0.add") is None  # the add's module is kept
    assert plan.layer("conv1").quantized and plan.precision_of("layer1") == "int8"
    assert "2 of 6 Conv/Linear quantized" in plan.summary()  # conv1 and fc


def test_fp32_beats_fp16_on_the_same_module():
    plan = QuantPlan.build(_calibration(), "int8", parse_keep(["fp16:fc", "fp32:f*"]))
    assert plan.layer("fc").precision == "fp32"


def test_unknown_patterns_are_named():
    with pytest.raises(ValueError, match=r"--keep: layer9\.\*, nosuch match no module of the network"):
        QuantPlan.build(_calibration(), "int8", parse_keep(["fp32:layer9.*,conv1,nosuch"]))


def test_refusals():
    with pytest.raises(ValueError, match="needs a calibration file"):
        QuantPlan.build(None, "int8")
    with pytest.raises(ValueError, match="made for fp8, not --precision int8"):
        QuantPlan.build(_calibration("fp8"), "int8")
    with pytest.raises(ValueError, match=r"--keep fp16:fc keeps nothing in a fp16 build"):  # not the fp32 entry
        QuantPlan.build(None, "fp16", parse_keep(["fp32:conv4_3_norm", "fp16:fc"]), modules=MODULES)
    with pytest.raises(ValueError, match=r"module bn1 is not a Conv/Linear of the calibrated model 'toy'"):
        QuantPlan.build(_calibration(), "int8").layer("bn1")


def test_fp16_plan_keeps_modules_without_calibration():
    plan = QuantPlan.build(None, "fp16", parse_keep(["fp32:conv4_3_norm"]), modules=MODULES)
    assert plan.precision_of("conv4_3_norm") == "fp32" and plan.precision_of("conv1") == "fp16"
    assert not plan.layer("conv1").quantized and plan.add_inputs("layer1.0.add") is None


def test_folded_weight_amax_is_the_amax_of_the_bn_folded_weight():
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4).eval()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([2.0, -0.5, 1.0, 3.0]))
        bn.running_var.uniform_(0.5, 2.0)
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    folded = conv.weight.detach() * scale.detach()[:, None, None, None]
    expected = folded.abs().reshape(4, -1).amax(1).tolist()
    assert folded_weight_amax(weight_amax(conv.weight), scale.tolist()) == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="4 channel amax values but 3"):
        folded_weight_amax([1.0] * 4, [1.0] * 3)

"""ONNX export of Q/DQ (QuantizeLinear / DequantizeLinear): onnxruntime's values equal the
reference's, and TensorRT-RTX's ONNX parser reads and builds each export (sm89: FP8 does not
compile for sm86)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trtbuild.reference as trt
from trtbuild.layers.quantize import qadd, qconv, qlinear
from trtbuild.onnx_export import OnnxExportError, export_onnx
from trtbuild.onnx_export.reference_network import new_reference_network
from trtbuild.onnx_export.rtx_parse import output_differences, parse_with_tensorrt_rtx
from trtbuild.onnx_export.verify import export_and_run


def _net(build):
    net = new_reference_network()
    outs = build(net)
    for i, t in enumerate(outs):
        t.name = f"y{i}"
        net.mark_output(t)
    return net


def _const(net, array):
    array = np.ascontiguousarray(array)
    return net.add_constant(array.shape, array).get_output(0)


def _qdq(net, x, scale, to, axis=None, out=trt.float32, dq=True):
    s = _const(net, np.asarray(scale, np.float32))
    q = net.add_quantize(x, s, to)
    if axis is not None:
        q.axis = axis
    if not dq:
        return q.get_output(0)
    d = net.add_dequantize(q.get_output(0), s, out)
    if axis is not None:
        d.axis = axis
    return d.get_output(0)


W = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
FC = np.random.default_rng(1).standard_normal((5, 12)).astype(np.float32)

CASES = {
    "int8 per tensor": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 3, 4)), 0.02, trt.DataType.INT8)],
    "int8 per channel": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 3, 4)), [0.01, 0.02, 0.05],
                                        trt.DataType.INT8, axis=1)],
    "int8 (1,) scale": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 3, 4)), [0.02], trt.DataType.INT8)],
    "int8 q as output": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 3, 4)), 0.02, trt.DataType.INT8,
                                        dq=False)],
    "int8 half in, half out": lambda n: [_qdq(n, n.add_input("x", trt.float16, (2, 3, 4)), 0.02, trt.DataType.INT8,
                                              out=trt.float16)],
    "fp8 per tensor": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 3, 4)), 0.005, trt.DataType.FP8)],
    "fp8 per channel": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 3, 4)), [0.001, 0.004, 0.01],
                                       trt.DataType.FP8, axis=1)],
    "qconv int8 + qadd": lambda n: [qadd(n, qconv(n, x := n.add_input("x", trt.float32, (1, 3, 6, 6)), W,
                                                  np.ones(4, np.float32), "conv", 1.0, padding=1),
                                         qconv(n, x, W, None, "conv_b", 1.0, padding=1), "add", 8.0)],
    "qconv fp8": lambda n: [qconv(n, n.add_input("x", trt.float32, (1, 3, 6, 6)), W, None, "conv", 1.0, "fp8")],
    "qlinear int8": lambda n: [qlinear(n, n.add_input("x", trt.float32, (2, 12)), FC, None, "fc", 1.0)],
}


@pytest.mark.parametrize("case", list(CASES))
def test_onnxruntime_matches_the_reference(case):
    net = _net(CASES[case])
    model, ref, got = export_and_run(net, seed=1)
    fp8 = "fp8" in case
    assert model.opset_import[0].version == (19 if fp8 else 17)
    ops = {n.op_type for n in model.graph.node}
    assert "QuantizeLinear" in ops
    for name, value in ref.items():
        r = value.astype(np.float32) if value.dtype != np.int8 else value
        o = got[name].astype(np.float32) if got[name].dtype != np.int8 else got[name]
        assert r.dtype == o.dtype and r.shape == o.shape, (name, r.dtype, o.dtype)
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6, err_msg=f"{case}: {name}")


def test_values_saturate_and_round_half_to_even_in_onnxruntime():
    net = _net(lambda n: [_qdq(n, n.add_input("x", trt.float32, (1, 6)), 1.0, trt.DataType.INT8, dq=False)])
    feeds = {"x": torch.tensor([[0.5, 1.5, 2.5, 127.5, -300.0, -128.5]])}
    _, ref, got = export_and_run(net, feeds)
    assert ref["y0"].tolist() == got["y0"].tolist() == [[0, 2, 2, 127, -128, -128]]


def test_onnxruntime_divides_where_tensorrt_multiplies_by_the_reciprocal():
    """The one documented difference (docs/onnx.md): with scale 0.1, 8.15 / 0.1 is 81.49999 in float32 and
    8.15 * (1 / 0.1) is 81.5; onnxruntime follows the ONNX spec's division (81), the reference TensorRT (82)."""
    net = _net(lambda n: [_qdq(n, n.add_input("x", trt.float32, (1, 3)), 0.1, trt.DataType.INT8, dq=False)])
    _, ref, got = export_and_run(net, {"x": torch.tensor([[8.15, -8.15, 11.15]])})
    assert ref["y0"].tolist() == [[82, -82, 112]]
    assert got["y0"].tolist() == [[81, -81, 111]]


def test_fp8_saturates_in_onnxruntime():
    net = _net(lambda n: [_qdq(n, n.add_input("x", trt.float32, (1, 4)), 1.0, trt.DataType.FP8)])
    _, ref, got = export_and_run(net, {"x": torch.tensor([[500.0, -1e5, 1.0625, 1.1875]])})
    assert ref["y0"].tolist() == got["y0"].tolist() == [[448.0, -448.0, 1.0, 1.25]]


def test_fp8_needs_opset_19():
    net = _net(CASES["fp8 per tensor"])
    with pytest.raises(OnnxExportError, match=r"FP8 .* needs ONNX opset >= 19, exporting opset 17"):
        export_onnx(net, opset=17)


@pytest.mark.parametrize("case", list(CASES))
def test_tensorrt_rtx_parses_and_builds_the_export(rtx, case):
    net = _net(CASES[case])
    model = export_onnx(net)
    result = parse_with_tensorrt_rtx(model, rtx, targets=("8.9",))
    assert result.ok, result.reason()
    assert not output_differences(result, model, net)


def test_layerwise_against_onnxruntime_covers_a_quantized_network():
    """Every layer output but the INT8 weight constant (which TensorRT allows only into a dequantize)
    is compared; the quantized activations are equal in onnxruntime and the reference."""
    from trtbuild.onnx_export.layerwise import layerwise_against_onnxruntime

    rows = layerwise_against_onnxruntime(lambda n: {"y": CASES["qconv int8 + qadd"](n)[0]}, seed=2)
    names = {r["tensor"] for r in rows}
    assert {"conv/input_q/quantize", "conv/weight_q", "conv", "add/residual_q", "y"} <= names, names
    assert "conv/weight_q/int8" not in names
    bad = [(r["tensor"], r["max_abs_err"]) for r in rows if r["max_abs_err"] > 1e-5]
    assert not bad, bad

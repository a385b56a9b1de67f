"""ONNX export of INT4 and block-scaled Q/DQ (QuantizeLinear / DequantizeLinear with block_size, opset 21):
onnxruntime's values equal the reference's, and TensorRT-RTX's ONNX parser reads and builds each export (sm86:
INT4 builds there). FP4 needs opset 23's FLOAT4E2M1, above the exporter's highest opset: refused in one sentence."""

from __future__ import annotations

import numpy as np
import pytest

import trtbuild.reference as trt
from trtbuild.onnx_export import OnnxExportError, export_onnx
from trtbuild.onnx_export.reference_network import new_reference_network
from trtbuild.onnx_export.rtx_parse import output_differences, parse_with_tensorrt_rtx
from trtbuild.onnx_export.verify import export_and_run

INT4, INT8, FP4 = trt.DataType.INT4, trt.DataType.INT8, trt.DataType.FP4
RNG = np.random.default_rng(11)


def _net(build):
    net = new_reference_network()
    for i, t in enumerate(build(net)):
        t.name = f"y{i}"
        net.mark_output(t)
    return net


def _const(net, array):
    array = np.ascontiguousarray(array)
    return net.add_constant(array.shape, trt.Weights(array)).get_output(0)


def _qdq(net, x, scale, to):
    s = _const(net, np.asarray(scale, np.float32))
    q = net.add_quantize(x, s, to)
    return net.add_dequantize(q.get_output(0), s, trt.float32).get_output(0)


def _int4_linear(net):
    """x [3, 8] times INT4 weights [8, 4] with one scale per 4 rows of K (weight-only quantization)."""
    w = RNG.integers(-8, 8, size=(8, 4))
    nib = (w.reshape(-1) & 0xF).astype(np.uint8)
    raw = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)
    net._keep = raw  # TensorRT reads weights by pointer at build time
    c = net.add_constant((8, 4), trt.Weights(INT4, raw.ctypes.data, 32)).get_output(0)
    d = net.add_dequantize(c, _const(net, RNG.uniform(0.01, 0.1, (2, 4)).astype(np.float32)), trt.float32)
    x = net.add_input("x", trt.float32, (3, 8))
    return [net.add_matrix_multiply(x, trt.MatrixOperation.NONE, d.get_output(0), trt.MatrixOperation.NONE)
            .get_output(0)]


CASES = {
    "int4 per tensor": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 4)), 0.25, INT4)],
    "int4 block last": lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 8)),
                                       RNG.uniform(0.1, 0.5, (2, 2)), INT4)],
    "int8 block second to last": lambda n: [_qdq(n, n.add_input("x", trt.float32, (4, 3)),
                                                 RNG.uniform(0.01, 0.05, (2, 3)), INT8)],
    "int4 weight-only linear": _int4_linear,
}


@pytest.mark.parametrize("case", list(CASES))
def test_onnxruntime_matches_the_reference(case):
    net = _net(CASES[case])
    model, ref, got = export_and_run(net, seed=3)
    assert model.opset_import[0].version == 21
    ops = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    assert ops
    if "block" in case or "linear" in case:
        assert any(a.name == "block_size" for n in ops for a in n.attribute)
    for name, value in ref.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6, err_msg=f"{case}: {name}")


@pytest.mark.parametrize("case", list(CASES))
def test_tensorrt_rtx_parses_and_builds_the_export(rtx, case):
    net = _net(CASES[case])
    model = export_onnx(net)
    result = parse_with_tensorrt_rtx(model, rtx, targets=("8.6",))
    assert result.ok, result.reason()
    assert not output_differences(result, model, net)


def test_block_quantization_needs_opset_21():
    with pytest.raises(OnnxExportError, match=r"block quantization needs ONNX opset >= 21, exporting opset 19"):
        export_onnx(_net(CASES["int8 block second to last"]), opset=19)


def test_fp4_is_refused_in_one_sentence():
    net = _net(lambda n: [_qdq(n, n.add_input("x", trt.float32, (2, 4)), 1.0, FP4)])
    with pytest.raises(OnnxExportError) as info:
        export_onnx(net)
    assert "FP4 quantization needs ONNX's FLOAT4E2M1 (opset 23)" in str(info.value)
    assert "\n" not in str(info.value)


def test_layerwise_covers_an_int4_network():
    """Every layer output but the INT4 weights and the INT4 activations (no torch or numpy type holds them) is
    compared with onnxruntime."""
    from trtbuild.onnx_export.layerwise import layerwise_against_onnxruntime

    def define(n):
        x = n.add_input("x", trt.float32, (2, 8))
        q = n.add_quantize(x, _const(n, np.full((2, 2), 0.25, np.float32)), INT4)
        q.name = "q"
        return {"y": n.add_dequantize(q.get_output(0), _const(n, np.full((2, 2), 0.25, np.float32)),
                                      trt.float32).get_output(0)}

    rows = layerwise_against_onnxruntime(define, seed=4)
    names = {r["tensor"] for r in rows}
    assert "y" in names and "q_output" not in names and len(names) == 3, names  # y and the two scales
    assert all(r["max_abs_err"] <= 1e-6 for r in rows), rows

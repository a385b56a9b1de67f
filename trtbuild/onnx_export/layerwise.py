"""Layer-by-layer comparison of the reference backend with onnxruntime on the exported model.

    rows = layerwise_against_onnxruntime("resnet18", small=True)
    print(format_rows(rows))

Each row is a plain dict, one per layer output, in network order:
    {"layer": layer name, "type": LayerType name, "tensor": tensor (= ONNX value) name,
     "shape": [dims], "dtype": DataType name, "ref_max_abs": max |ref| (finite values),
     "max_abs_err": max |ort - ref|, "max_rel_err": max |ort - ref| / max(|ref|, 1e-6),
     "cosine": cosine similarity of the flattened outputs (1.0 when both are all zero)}
Equal infinities and NaN at the same place count as equal; any other non-finite mismatch makes
the errors inf. onnxruntime is the "actual" side, the reference backend the "expected" side.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from trtbuild import reference as trt
from trtbuild.reference.enums import LayerType

from .export import export_onnx
from .graph import OnnxExportError
from .ort import run_onnxruntime
from .reference_network import build_reference_network, new_reference_network
from .verify import random_feeds, run_reference

REL_FLOOR = 1e-6


def compare_arrays(actual, expected) -> dict:
    """max_abs_err, max_rel_err and cosine of `actual` against `expected` (see module doc)."""
    a = _f64(actual)
    b = _f64(expected)
    if a.shape != b.shape:
        return {"max_abs_err": math.inf, "max_rel_err": math.inf, "cosine": 0.0, "ref_max_abs": 0.0,
                "note": f"shape {list(a.shape)} vs {list(b.shape)}"}
    if a.size == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "cosine": 1.0, "ref_max_abs": 0.0}
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    with np.errstate(invalid="ignore"):
        rel = diff / np.maximum(np.where(np.isfinite(b), np.abs(b), np.inf), REL_FLOOR)
    rel = np.where(same, 0.0, np.where(np.isnan(rel), np.inf, rel))
    fin = np.isfinite(a) & np.isfinite(b)
    af, bf = a[fin], b[fin]
    na, nb = float(np.linalg.norm(af)), float(np.linalg.norm(bf))
    if na == 0.0 and nb == 0.0:
        cos = 1.0
    elif na == 0.0 or nb == 0.0:
        cos = 0.0
    else:
        cos = float(np.dot(af, bf) / (na * nb))
    return {"max_abs_err": float(diff.max()), "max_rel_err": float(rel.max()), "cosine": cos,
            "ref_max_abs": float(np.abs(bf).max()) if bf.size else 0.0}


def _f64(x) -> np.ndarray:
    if torch.is_tensor(x):
        x = x.detach().cpu().to(torch.float64).numpy()
    return np.asarray(x).astype(np.float64)


def _network_from(source, weights, precision: str, small: bool, seed: int):
    """(network, value_range) from a model name, a ModelSpec, a define(network) callable or a network."""
    if isinstance(source, trt.INetworkDefinition):
        return source, (-1.0, 1.0)
    if callable(source) and not hasattr(source, "build_network"):
        network = new_reference_network()
        outs = source(network) or {}
        for name, t in dict(outs).items():
            t.name = name
            network.mark_output(t)
        return network, (-1.0, 1.0)
    from trtbuild.models import registry

    spec = registry.get(source) if isinstance(source, str) else source
    network, _ = build_reference_network(spec, weights, precision=precision, small=small, seed=seed)
    return network, tuple(spec.value_range)


_QUANTIZED = (trt.DataType.INT8, trt.DataType.INT4, trt.DataType.FP4, trt.DataType.FP8)
_PACKED = (trt.DataType.INT4, trt.DataType.FP4)


def layerwise_against_onnxruntime(spec_or_network, inputs: dict | None = None, *, weights=None,
                                  precision: str = "fp32", small: bool = True, seed: int = 0,
                                  opset: int | None = None) -> list[dict]:
    """Compare every layer output of the reference backend with onnxruntime running the export.

    `spec_or_network`: a registry model name, a ModelSpec, a `define(network) -> {name: ITensor}`
    callable, or a reference INetworkDefinition (its marked outputs are restored afterwards).
    `inputs`: {input name: array}; default uniform random in the model's value_range (seeded).
    Model weights come from `weights` (a weight file) or the registry's torch model (seed, small).
    Returns the rows described in the module docstring. Networks with plugin layers raise
    OnnxExportError: onnxruntime cannot execute TensorRT plugins.
    """
    network, value_range = _network_from(spec_or_network, weights, precision, small, seed)
    plugins = [layer.name for layer in network._layers if layer._TYPE == LayerType.PLUGIN_V3]
    if plugins:
        raise OnnxExportError(f"network has TensorRT plugin layers {plugins}: onnxruntime cannot execute them, "
                              "so a layerwise comparison against onnxruntime is not possible")
    feeds = dict(inputs) if inputs is not None else random_feeds(network, seed, *value_range)
    taken = {t.name for t in network._inputs + network._outputs}
    names = [t.name for layer in network._layers for t in layer._outputs]
    added = []
    for layer in network._layers:
        if layer._TYPE == LayerType.CONSTANT and layer._weights["weights"].dtype in _QUANTIZED:
            continue  # a quantized constant may only feed dequantize layers, never be an output (TensorRT)
        for t in layer._outputs:
            if t.dtype in _PACKED:  # 4-bit tensors have no torch or numpy type to compare them in
                continue
            if t not in network._outputs and t.name not in taken and names.count(t.name) == 1:
                network.mark_output(t)
                added.append(t)
    try:
        ref = run_reference(network, feeds)
        model = export_onnx(network, None, opset)
        got = run_onnxruntime(model, feeds)
    finally:
        for t in added:
            network.unmark_output(t)
    rows = []
    for layer in network._layers:
        for t in layer._outputs:
            if t.name in ref and t.name in got:
                rows.append({"layer": layer.name, "type": layer._TYPE.name, "tensor": t.name,
                             "shape": list(ref[t.name].shape), "dtype": t.dtype.name,
                             **compare_arrays(got[t.name], ref[t.name])})
    return rows


def format_rows(rows: list[dict]) -> str:
    """The rows as a fixed-width text table."""
    head = f"{'layer':40s} {'type':15s} {'max_abs_err':>12s} {'max_rel_err':>12s} {'cosine':>10s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['layer'][:40]:40s} {r['type'][:15]:15s} {r['max_abs_err']:12.3e} {r['max_rel_err']:12.3e} "
                     f"{r['cosine']:10.6f}")
    return "\n".join(lines)


__all__ = ["layerwise_against_onnxruntime", "run_reference", "compare_arrays", "format_rows"]

"""Run an exported model with onnxruntime (CPU): an engine written outside this project."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper


class OnnxRuntimeError(RuntimeError):
    """onnxruntime could not load or run the model; the message says which model and why."""


def _as_numpy(value, bf16_as_float: bool = False) -> np.ndarray:
    try:
        import torch

        if torch.is_tensor(value):
            value = value.detach().cpu()
            if value.dtype == torch.bfloat16:
                return value.float().numpy()
            return value.numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    value = np.asarray(value)
    return value.astype(np.float32) if value.dtype.name == "bfloat16" else value


def _fresh(base: str, taken: set) -> str:
    name, i = base, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def widen_bf16_io(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose BFLOAT16 graph inputs/outputs are FLOAT, with Cast nodes at the
    boundary (exact: every bf16 value is a float32 value). onnxruntime's Python API cannot take
    or return bfloat16 arrays; the graph between the casts is unchanged."""
    io = [v for v in list(model.graph.input) + list(model.graph.output)
          if v.type.tensor_type.elem_type == TensorProto.BFLOAT16]
    if not io:
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    taken = {n.name for n in g.node} | {n for node in g.node for n in list(node.input) + list(node.output)}
    taken |= {i.name for i in g.initializer} | {v.name for v in list(g.input) + list(g.output)}
    renamed = {}
    for v in g.input:
        if v.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            renamed[v.name] = _fresh(v.name + "__bf16", taken)
    for v in g.output:
        if v.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            renamed[v.name] = _fresh(v.name + "__bf16", taken)
    for node in g.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
    casts_in, casts_out = [], []
    for v in g.input:
        if v.name in renamed:
            casts_in.append(helper.make_node("Cast", [v.name], [renamed[v.name]],
                                             name=_fresh(v.name + "/ort_io_to_bf16", taken),
                                             to=TensorProto.BFLOAT16))
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    for v in g.output:
        if v.name in renamed:
            if any(i.name == v.name for i in g.input):
                continue
            casts_out.append(helper.make_node("Cast", [renamed[v.name]], [v.name],
                                              name=_fresh(v.name + "/ort_io_to_f32", taken),
                                              to=TensorProto.FLOAT))
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = casts_in + list(g.node) + casts_out
    del g.node[:]
    g.node.extend(nodes)
    return m


def session(model, optimize: bool = False, threads: int | None = None):
    """An onnxruntime InferenceSession on the CPU. Graph optimizations are off by default, so what
    runs is the exported graph node by node (fusions could hide a lowering mistake)."""
    try:
        import onnxruntime as ort
    except ImportError as e:  # pragma: no cover - onnxruntime is a test dependency
        raise OnnxRuntimeError(f"onnxruntime is not installed ({e}); `pip install onnxruntime`") from None
    opts = ort.SessionOptions()
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                     else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    opts.log_severity_level = 3
    if threads:
        opts.intra_op_num_threads = int(threads)
    if isinstance(model, onnx.ModelProto):
        source = widen_bf16_io(model).SerializeToString()
    elif isinstance(model, (bytes, bytearray)):
        source = bytes(model)
    else:
        source = os.fspath(model)
    try:
        return ort.InferenceSession(source, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise OnnxRuntimeError(f"onnxruntime cannot load the model: {e}") from None


def run_onnxruntime(model, feeds: dict, outputs: list[str] | None = None, optimize: bool = False) -> dict:
    """Run `model` (ModelProto, bytes or path) on `feeds` ({input name: numpy array or torch
    tensor}); returns {output name: numpy array} for `outputs` (default: all graph outputs).
    BFLOAT16 inputs/outputs travel as float32 (see widen_bf16_io)."""
    if not isinstance(model, onnx.ModelProto):
        model = (onnx.load_model_from_string(bytes(model)) if isinstance(model, (bytes, bytearray))
                 else onnx.load(os.fspath(model)))
    sess = session(model, optimize=optimize)
    expected = {i.name for i in sess.get_inputs()}
    missing, extra = expected - set(feeds), set(feeds) - expected
    if missing or extra:
        raise OnnxRuntimeError(f"feeds do not match the model inputs: missing {sorted(missing)}, "
                               f"unknown {sorted(extra)}")
    names = outputs or [o.name for o in sess.get_outputs()]
    try:
        values = sess.run(names, {k: _as_numpy(v) for k, v in feeds.items()})
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise OnnxRuntimeError(f"onnxruntime failed to run the model: {e}") from None
    return dict(zip(names, values))

"""Lowering of the data-movement layers (Shuffle, Concatenation, Slice, Padding), MatrixMultiply
and PluginV3."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from trtbuild.reference.enums import LayerType, MatrixOperation, SampleMode
from trtbuild.reference.ops import lowers
from trtbuild.reference.sampling import sample_indices

from .graph import GraphBuilder, onnx_type

INT64_MIN = -(2 ** 63)


@lowers(LayerType.SHUFFLE)
def lower_shuffle(g: GraphBuilder, layer, ins, outs):
    """Transpose -> Reshape -> Transpose, skipping identities. zero_is_placeholder=True is ONNX
    Reshape's allowzero=0 (0 copies the input dimension); a literal 0 needs allowzero=1."""
    p = layer._params
    rank = len(layer.get_input(0).shape)
    steps = []
    perm1 = list(p["first_transpose"])[:rank]
    if perm1 != list(range(rank)):
        steps.append(("Transpose", None, {"perm": perm1}))
    dims = p["reshape_dims"]
    if len(ins) > 1 and ins[1]:  # the dims as a shape tensor: the same Reshape, its dims an ONNX value
        from .lower_shape_tensors import int64_input

        if not p["zero_is_placeholder"]:
            g.require_opset(14, "a reshape whose 0 dims are literal (allowzero=1)")
        steps.append(("Reshape", int64_input(g, layer, 1, ins[1]),
                      {"allowzero": None if p["zero_is_placeholder"] else 1}))
        rank = layer.get_input(1).shape[0]
    elif dims is not None:
        dims = list(dims)
        literal_zero = 0 in dims and not p["zero_is_placeholder"]
        if literal_zero:
            g.require_opset(14, "a reshape to a literal 0 dimension (allowzero=1)")
        steps.append(("Reshape", dims, {"allowzero": 1 if literal_zero else None}))
        rank = len(dims)
    perm2 = list(p["second_transpose"])[:rank]
    if perm2 != list(range(rank)):
        steps.append(("Transpose", None, {"perm": perm2}))
    if not steps:
        g.add("Identity", ins, outs)
        return
    cur = ins[0]
    for i, (op, dims, attrs) in enumerate(steps):
        inputs = [cur] if dims is None else [cur, dims if isinstance(dims, str) else g.ints(dims)]
        cur = g.add(op, inputs, outs if i == len(steps) - 1 else None, **attrs)


@lowers(LayerType.CONCATENATION)
def lower_concatenation(g: GraphBuilder, layer, ins, outs):
    g.add("Concat", ins, outs, axis=layer._params["axis"])


@lowers(LayerType.SLICE)
def lower_slice(g: GraphBuilder, layer, ins, outs):
    """STRICT_BOUNDS with non-zero strides -> Slice; other modes -> Gather with constant indices per
    dim (WRAP/CLAMP/REFLECT/FILL need the dims known at export time), FILL adds a Where with 0."""
    if any(layer.get_input(i) is not None for i in (1, 2, 3, 5)):  # start/size/stride/axes as shape tensors
        from .lower_shape_tensors import lower_dynamic_slice

        return lower_dynamic_slice(g, layer, ins, outs)
    p = layer._params
    x = layer.get_input(0)
    shape, dt = tuple(x.shape), x.dtype
    mode = SampleMode(p["mode"])
    starts, sizes, strides = list(p["start"]), list(p["shape"]), list(p["stride"])
    if mode == SampleMode.STRICT_BOUNDS and all(s != 0 for s in strides):
        axes, b, e, st = [], [], [], []
        for d, (a, n, s) in enumerate(zip(starts, sizes, strides)):
            if shape[d] >= 0 and a == 0 and s == 1 and n == shape[d]:
                continue
            end = a + (n - 1) * s + (1 if s > 0 else -1) if n > 0 else a
            if s < 0 and end < 0:
                end = INT64_MIN  # "before index 0": a negative end would count from the back
            axes.append(d), b.append(a), e.append(end), st.append(s)
        if not axes:
            g.add("Identity", ins, outs)
            return
        g.add("Slice", [ins[0], g.ints(b, "starts"), g.ints(e, "ends"), g.ints(axes, "axes"), g.ints(st, "steps")],
              outs)
        return
    plan = []
    for d, (a, n, s) in enumerate(zip(starts, sizes, strides)):
        if shape[d] < 0:
            g.fail(f"slice mode {mode.name} (or stride 0) needs the input shape known at export time, got {shape}")
        idx, valid = sample_indices(mode, a + np.arange(n, dtype=np.int64) * s, shape[d])
        if (valid is None or valid.all()) and np.array_equal(idx, np.arange(shape[d])):
            continue
        plan.append((d, idx, valid))
    if not plan:
        g.add("Identity", ins, outs)
        return
    cur = ins[0]
    masks = [(d, v) for d, _, v in plan if v is not None and not v.all()]
    for i, (d, idx, _) in enumerate(plan):
        last = i == len(plan) - 1 and not masks
        cur = g.add("Gather", [cur, g.ints(idx, "indices")], outs if last else None, axis=d)
    zero = g.const(np.zeros(()), onnx_type(dt, layer.name), "fill") if masks else None
    for i, (d, valid) in enumerate(masks):
        mshape = [1] * len(shape)
        mshape[d] = valid.size
        mask = g.const(valid.reshape(mshape), TensorProto.BOOL, "inside")
        cur = g.add("Where", [mask, cur, zero], outs if i == len(masks) - 1 else None)


@lowers(LayerType.PADDING)
def lower_padding(g: GraphBuilder, layer, ins, outs):
    """Pad (constant 0) on the trailing dims; negative padding crops, written as a Slice first."""
    p = layer._params
    shape = tuple(layer.get_input(0).shape)
    pre, post = list(p["pre_padding_nd"]), list(p["post_padding_nd"])
    lead = len(shape) - len(pre)
    crop = [(lead + i, -a if a < 0 else 0, b if b < 0 else None) for i, (a, b) in enumerate(zip(pre, post))
            if a < 0 or b < 0]
    grow = [0] * lead + [max(a, 0) for a in pre] + [0] * lead + [max(b, 0) for b in post]
    cur = ins[0]
    if crop:
        axes = [c[0] for c in crop]
        ends = [c[2] if c[2] is not None else np.iinfo(np.int64).max for c in crop]
        cur = g.add("Slice", [cur, g.ints([c[1] for c in crop], "starts"), g.ints(ends, "ends"), g.ints(axes, "axes")],
                    outs if not any(grow) else None)
    if any(grow):
        g.add("Pad", [cur, g.ints(grow, "pads")], outs, mode="constant")
    elif not crop:
        g.add("Identity", ins, outs)


@lowers(LayerType.MATRIX_MULTIPLY)
def lower_matrix_multiply(g: GraphBuilder, layer, ins, outs):
    """MatMul; TRANSPOSE swaps the last two dims first, VECTOR operands are unsqueezed to matrices
    and the extra dims squeezed from the product."""
    ops = [MatrixOperation(layer._params["op0"]), MatrixOperation(layer._params["op1"])]
    operands = []
    for i, (name, op) in enumerate(zip(ins, ops)):
        rank = len(layer.get_input(i).shape)
        if op == MatrixOperation.TRANSPOSE:
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            name = g.add("Transpose", [name], None, perm=perm)
        elif op == MatrixOperation.VECTOR:
            name = g.add("Unsqueeze", [name, g.ints([-2 if i == 0 else -1], "axes")])
        operands.append(name)
    squeeze = [a for a, op in ((-2, ops[0]), (-1, ops[1])) if op == MatrixOperation.VECTOR]
    if not squeeze:
        g.add("MatMul", operands, outs)
        return
    y = g.add("MatMul", operands)
    g.add("Squeeze", [y, g.ints(squeeze, "axes")], outs)


PLUGIN_DOMAIN = "trtbuild"


def plugin_attributes(layer) -> dict:
    """The plugin's creation fields as ONNX attributes, plus plugin_version and plugin_namespace,
    which TensorRT's ONNX parser reads to find the creator. The parser turns INT/INTS into INT32
    fields, FLOAT/FLOATS into FLOAT32 and STRING into CHAR, and keeps a TENSOR attribute's type:
    int32/int64/bool/uint8 fields -> INT(S), float32 -> FLOAT(S), text -> STRING, and fp16, bf16,
    fp64, int8 and int16 fields -> TENSOR so they reach the creator in their own type.
    A 0-d field becomes a scalar attribute, anything else a list (flattened)."""
    plugin = layer._plugin
    creator = plugin._creator
    attrs = {"plugin_version": str(creator.plugin_version), "plugin_namespace": str(creator.plugin_namespace or "")}
    for key, value in plugin._fields.items():
        if key in attrs:
            raise ValueError(f"plugin field '{key}' clashes with the attribute TensorRT's parser reserves")
        arr = np.asarray(value)
        if arr.dtype.kind in "USO":
            attrs[key] = "".join(v.decode() if isinstance(v, bytes) else str(v) for v in arr.reshape(-1))
        elif arr.size == 0 or arr.dtype in (np.float16, np.float64, np.int8, np.int16) or arr.dtype.name == "bfloat16":
            attrs[key] = numpy_helper.from_array(np.ascontiguousarray(arr), key)
        elif arr.dtype.kind in "iub":
            attrs[key] = int(arr) if arr.ndim == 0 else [int(v) for v in arr.reshape(-1)]
        elif arr.dtype.kind == "f":
            attrs[key] = float(arr) if arr.ndim == 0 else [float(v) for v in arr.reshape(-1)]
        else:
            raise ValueError(f"plugin field '{key}' has dtype {arr.dtype}, which has no ONNX attribute type")
    return attrs


@lowers(LayerType.PLUGIN_V3)
def lower_plugin_v3(g: GraphBuilder, layer, ins, outs):
    """A node in a custom domain: op_type = the creator's name. TensorRT's ONNX parser imports an
    op it does not know through the plugin registry (op_type = plugin name, attributes
    plugin_version/plugin_namespace select the creator, the other attributes become PluginFields).
    onnxruntime cannot run it; ONNX shape inference skips it (its outputs carry value_info)."""
    creator = layer._plugin._creator
    domain = creator.plugin_namespace or PLUGIN_DOMAIN
    try:
        attrs = plugin_attributes(layer)
    except ValueError as e:
        g.fail(str(e))
    g.domains[domain] = 1
    g.add(creator.name, ins, outs, domain=domain, **attrs)

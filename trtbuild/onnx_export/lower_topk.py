"""Lowering of TopK: ONNX TopK with largest = 1 for MAX and 0 for MIN and sorted = 1; K is an INT64
initializer holding the layer's k (the attribute, or the constant k tensor the reference resolved). ONNX keeps the
lower index first among equal values, as the reference does; ONNX gives INT64 indices, cast to INT32 where the
layer's indices_type is INT32. HALF, BF16 and INT8 values are sorted in FLOAT or INT32 (exact, and types every
runtime's TopK takes) and cast back."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from trtbuild.reference.enums import DataType, LayerType, TopKOperation
from trtbuild.reference.ops import lowers
from trtbuild.reference.ops.topk import k_value

from .graph import GraphBuilder, onnx_type

#: the type a value type is sorted in
_SORTED_IN = {DataType.HALF: TensorProto.FLOAT, DataType.BF16: TensorProto.FLOAT, DataType.INT8: TensorProto.INT32}


@lowers(LayerType.TOPK)
def lower_topk(g: GraphBuilder, layer, ins, outs):
    layer._infer()  # resolves a constant k tensor into params
    p, dt = layer._params, layer.get_input(0).dtype
    k = g.const(np.asarray([k_value(p)], np.int64), TensorProto.INT64, "k")
    attrs = {"axis": p["axes"].bit_length() - 1, "largest": int(TopKOperation(p["op"]) == TopKOperation.MAX),
             "sorted": 1}
    x, values = ins[0], outs[0]
    if dt in _SORTED_IN:
        x, values = g.add("Cast", [x], None, to=_SORTED_IN[dt]), g.tmp("values")
    indices = outs[1] if DataType(p["indices_type"]) == DataType.INT64 else g.tmp("indices")
    g.add("TopK", [x, k], [values, indices], **attrs)
    if values != outs[0]:
        g.add("Cast", [values], [outs[0]], to=onnx_type(dt, layer.name))
    if indices != outs[1]:
        g.add("Cast", [indices], [outs[1]], to=TensorProto.INT32)

"""Dispatch: one lowering function per TensorRT layer type (see docs/onnx.md for the table)."""

from __future__ import annotations

from trtbuild.reference.enums import LayerType
from trtbuild.reference.ops import op_for

from .graph import GraphBuilder, OnnxExportError
from .lower_math import (lower_activation, lower_cast, lower_elementwise, lower_identity, lower_reduce,
                         lower_scale, lower_softmax, lower_unary)
from .lower_norm import lower_normalization
from .lower_shape import (lower_concatenation, lower_matrix_multiply, lower_padding, lower_plugin_v3, lower_shuffle,
                          lower_slice)
from .lower_quant import lower_dequantize, lower_quantize
from .lower_spatial import lower_convolution, lower_deconvolution, lower_lrn, lower_pooling

LOWERINGS = {
    LayerType.SCALE: lower_scale, LayerType.REDUCE: lower_reduce, LayerType.ELEMENTWISE: lower_elementwise,
    LayerType.UNARY: lower_unary, LayerType.ACTIVATION: lower_activation, LayerType.SOFTMAX: lower_softmax,
    LayerType.CAST: lower_cast, LayerType.IDENTITY: lower_identity,
    LayerType.CONVOLUTION: lower_convolution, LayerType.DECONVOLUTION: lower_deconvolution,
    LayerType.POOLING: lower_pooling, LayerType.LRN: lower_lrn, LayerType.NORMALIZATION: lower_normalization,
    LayerType.SHUFFLE: lower_shuffle, LayerType.CONCATENATION: lower_concatenation, LayerType.SLICE: lower_slice,
    LayerType.PADDING: lower_padding, LayerType.MATRIX_MULTIPLY: lower_matrix_multiply,
    LayerType.PLUGIN_V3: lower_plugin_v3, LayerType.QUANTIZE: lower_quantize, LayerType.DEQUANTIZE: lower_dequantize,
}


def lower_layer(g: GraphBuilder, layer, constant_is_output: bool = False) -> None:
    """Append the ONNX nodes of one layer. Its input tensors must already be bound in `g`."""
    ltype = layer._TYPE  # not .type: IActivationLayer.type / IPoolingLayer.type shadow it, as in TensorRT
    op = op_for(ltype)
    fn = op.lower if op is not None and op.lower is not None else LOWERINGS.get(ltype)
    if fn is None:
        raise OnnxExportError(f"layer '{layer.name}': layer type {getattr(ltype, 'name', ltype)} has no ONNX lowering")
    ins = [g.name_of(t) for t in layer._inputs]
    outs = [g.name_of(t) for t in layer._outputs]
    g.begin_layer(layer, outs, writes_graph_output=constant_is_output)
    try:
        fn(g, layer, ins, outs)
    finally:
        g.begin_layer(None, [])

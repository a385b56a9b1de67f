"""The layer types of the reference backend, one module per type, each registered once.

A module holds everything the backend knows of its type: the I*Layer class (attributes and the
setters' argument rules), shape and type inference with TensorRT's checks, execution with PyTorch,
and, where fp16/bf16 rounding inside the layer matters, its pessimistic-arithmetic model. The ONNX
exporter adds each type's lowering to the same registry entry (`lowers`), so a new layer type is
one new module here, one lowering there, and no dispatch code to edit.
"""

from .registry import LayerOp, lowers, op_for, register, registered

__all__ = ["LayerOp", "lowers", "op_for", "register", "registered"]

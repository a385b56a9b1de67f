"""Shape and type inference, and the checks TensorRT applies to each layer.

Shapes may hold -1 for dimensions known only at run time. Every error names the layer.
Strongly typed rules: a layer's output type follows from its input types (and add_cast);
float layers accept FLOAT, HALF and BF16; weights must have the input's type.
Each layer type's rules live in its module under trtbuild/reference/ops; this is the one entry point.
"""

from __future__ import annotations

from .ops import op_for
from .ops.common import bits, broadcast, check_weights_type, fail  # noqa: F401 - shared helpers, importable here


def infer_layer(ltype, p, w, shapes, dtypes, name, plugin=None):
    """Return ([output shapes], [output dtypes]) for a layer, or raise NetworkError."""
    op = op_for(ltype)
    if op is None:
        fail(name, f"layer type {ltype.name} is not supported by the reference backend")
    return op.infer(p, w, shapes, dtypes, name, plugin)

"""Shape and type inference, and the checks TensorRT applies to each layer.

Shapes may hold -1 for dimensions known only at run time. Every error names the layer.
Strongly typed rules: a layer's output type follows from its input types (and add_cast);
float layers accept FLOAT, HALF and BF16; weights must have the input's type.
Each layer type's rules live in its module under trtbuild/reference/ops; this is the one entry point.
"""

from __future__ import annotations

from .ops import op_for
from .shape_values import bind
from .ops.common import bits, broadcast, check_weights_type, fail  # noqa: F401 - shared helpers, importable here


def infer_layer(ltype, p, w, shapes, dtypes, name, plugin=None, values=None, keys=None):
    """Return ([output shapes], [output dtypes]) for a layer, or raise NetworkError. `values`/`keys`: the
    values of its shape inputs where known, and the keys of its inputs (trtbuild.reference.shape_values)."""
    op = op_for(ltype)
    if op is None:
        fail(name, f"layer type {ltype.name} is not supported by the reference backend")
    return op.infer(bind(op.cls, p, shapes, dtypes, values, keys, name), w, shapes, dtypes, name, plugin)

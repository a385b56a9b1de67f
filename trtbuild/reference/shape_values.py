"""Values of shape tensors: the small INT32/INT64 tensors that add_shape, constants and arithmetic on
them compute, which layers take as *shape inputs* (a shuffle's reshape dimensions, a slice's start,
size and stride, a resize's output shape, a fill's dimensions).

TensorRT computes such values at build time where it can (constant folding, and the static dims of
add_shape), so that a reshape of (N, 3, 4, 4) to concat(shape(x)[0], -1) is known to give (N, 48), and
at run time from the real input shapes. The reference does the same with one mechanism: a layer class
names its shape inputs (`_SHAPE_INPUTS`: input index -> the param they replace), and `bind` writes the
input's value into a copy of the params before the layer's own inference or execution, which read
them as if they were attributes. At build time a value may be partly known: an unknown element is
None, or a `Sym` (dim `axis` of the tensor `key`, from add_shape of a dynamic dim), which `bind` turns
into `InputDim(axis)` where it names a dim of the same layer's data input (how a shuffle tells that a
reshape keeps the batch dim). Values are computed only where a shape input needs them (`needed`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .core import NetworkError
from .enums import DataType, ElementWiseOperation, LayerType

#: the largest shape tensor whose value is tracked (TensorRT limits shape tensors to small volumes too)
MAX_VOLUME = 1024
#: the types a shape input takes (TensorRT-RTX 1.7 asserts on a FLOAT one: "value->type() == ValueType::kINT")
SHAPE_TYPES = (DataType.INT32, DataType.INT64)


class Sym(NamedTuple):
    """Dim `axis` of the tensor identified by `key`, unknown until run time."""

    key: object
    axis: int


class InputDim(NamedTuple):
    """Equal to dim `axis` of the layer's data input (input 0), whatever its size."""

    axis: int


def known(d) -> bool:
    """Whether a bound element is a number (not None, Sym or InputDim)."""
    return isinstance(d, (int, float))


def shape_inputs(op_cls) -> dict[int, str]:
    return getattr(op_cls, "_SHAPE_INPUTS", {})


def bind(op_cls, p: dict, shapes, dtypes, values, keys, name: str) -> dict:
    """`p` with each shape input's value written to its param (a copy; `p` itself where the class has no
    shape inputs or none is set). `values[i]`: the input's flat value (elements as described above) or None
    where nothing is known; `keys[0]` identifies the data input for InputDim."""
    slots = shape_inputs(op_cls)
    if not slots:
        return p
    bound = None
    for index, key in slots.items():
        if index >= len(shapes) or shapes[index] is None:
            continue
        shape, dtype = tuple(shapes[index]), dtypes[index]
        if dtype not in SHAPE_TYPES:
            raise NetworkError(f"layer '{name}': input {index} ({key}) has type {dtype.name}; a shape input must be "
                               "an INT32 or INT64 tensor")
        if len(shape) != 1 or shape[0] < 0:
            raise NetworkError(f"layer '{name}': input {index} ({key}) has shape {shape}; a shape input must be a "
                               "1-D tensor whose length is known at build time")
        value = values[index] if values is not None and index < len(values) else None
        if value is None:
            value = (None,) * shape[0]
        data_key = keys[0] if keys else None
        bound = dict(p) if bound is None else bound
        bound[key] = tuple(InputDim(d.axis) if isinstance(d, Sym) and data_key is not None and d.key == data_key
                           else (int(d) if known(d) else None) for d in value)
    return p if bound is None else bound


def bind_run(op_cls, p: dict, inputs) -> dict:
    """`p` with each shape input's run-time value (the input tensors hold them)."""
    slots = shape_inputs(op_cls)
    if not slots:
        return p
    bound = dict(p)
    for index, key in slots.items():
        if index < len(inputs) and inputs[index] is not None:
            bound[key] = tuple(int(v) for v in inputs[index].reshape(-1).tolist())
    return bound


def reads(op_cls, index: int) -> bool:
    """Whether input `index` of a layer of this class is a shape input."""
    return index in shape_inputs(op_cls)


def needed(layers, outputs=()) -> set:
    """The keys of the tensors whose values some shape input (or shape output: `outputs`) needs. `layers`: (op
    class, input keys, output keys) in topological order; a layer whose outputs are needed needs its inputs'
    values, except where it reads only their shapes (`_READS_ONLY_SHAPES`, add_shape)."""
    layers = list(layers)
    need = set(outputs)
    for cls, ins, _ in layers:
        need.update(k for i, k in enumerate(ins) if k is not None and reads(cls, i))
    for cls, ins, outs in reversed(layers):
        if not getattr(cls, "_READS_ONLY_SHAPES", False) and any(k in need for k in outs):
            need.update(k for k in ins if k is not None)
    return need


def _static_small(shape) -> bool:
    return shape is not None and all(d >= 0 for d in shape) and math.prod(shape) <= MAX_VOLUME


def _torch_weights(w) -> dict:
    out = {}
    for k, v in dict(w).items():
        if v is None or isinstance(v, torch.Tensor):
            out[k] = v
        else:  # Weights (network build) or plan metadata without values
            arr = getattr(v, "numpy", None)
            out[k] = torch.from_numpy(np.array(arr())) if arr is not None else None
    return out


#: data-movement layers: (the inputs whose elements move to the output); a partly known value moves with them
_MOVES = {LayerType.GATHER: (0,), LayerType.CONCATENATION: None, LayerType.SLICE: (0,), LayerType.SHUFFLE: (0,),
          LayerType.IDENTITY: (0,), LayerType.SQUEEZE: (0,), LayerType.UNSQUEEZE: (0,), LayerType.CAST: (0,)}
_NUMBER = {DataType.FLOAT: float, DataType.HALF: float, DataType.BF16: float, DataType.INT32: int,
           DataType.INT64: int, DataType.INT8: int, DataType.UINT8: int, DataType.BOOL: bool}


def output_values(op, p, w, shapes, dtypes, values, keys, out_shapes, out_dtypes, name: str = ""):
    """The flat values of a layer's outputs (None for each one not known at all): from its params and input
    shapes (add_shape), by running it where every input value is known, or by moving partly known elements
    through data-movement layers and elementwise arithmetic. `p` is already bound."""
    from .execute import TORCH_DTYPE, run_layer

    if not all(_static_small(s) for s in out_shapes):
        return [None] * len(out_shapes)
    own = getattr(op.cls, "_output_values", None)
    if own is not None:
        return own(p, shapes, keys)
    if not getattr(op.cls, "_folds", lambda p: True)(p):
        return [None] * len(out_shapes)
    ins = list(values) + [None] * (len(shapes) - len(values))
    present = [i for i, s in enumerate(shapes) if s is not None]
    if any(not _static_small(shapes[i]) for i in present):
        return [None] * len(out_shapes)

    def tensor(i, fill=None):
        v = ins[i]
        vals = [fill if not known(e) else e for e in v]
        return torch.tensor(vals, dtype=TORCH_DTYPE[dtypes[i]]).reshape(tuple(shapes[i]))

    full = [i for i in present if ins[i] is not None and all(known(e) for e in ins[i])]
    if op.type == LayerType.ELEMENTWISE:
        _no_division_by_zero(p, dtypes, ins, name)
    try:
        if len(full) == len(present):
            inputs = [tensor(i) if i in present else None for i in range(len(shapes))]
            outs = run_layer(op.type, p, _torch_weights(w), inputs, list(out_dtypes))
            return [tuple(o.reshape(-1).tolist()) for o in outs]
        if op.type in _MOVES:
            return _moved(op, p, w, shapes, dtypes, ins, present, out_dtypes, tensor)
        if op.type == LayerType.ELEMENTWISE and all(ins[i] is not None for i in present):
            return _elementwise(op, p, shapes, dtypes, ins, out_dtypes, tensor)
    except Exception:  # noqa: BLE001 - a value that cannot be computed at build time is unknown, not an error
        return [None] * len(out_shapes)
    return [None] * len(out_shapes)


def _no_division_by_zero(p, dtypes, ins, name: str) -> None:
    """TensorRT-RTX 1.7 refuses an integer shape computation that divides by a known 0 ("Shape Error (divide by
    zero)"), where the reference would otherwise fold it to some value."""
    if ElementWiseOperation(p["op"]) not in (ElementWiseOperation.DIV, ElementWiseOperation.FLOOR_DIV):
        return
    if dtypes[1] in (DataType.INT32, DataType.INT64) and ins[1] is not None and any(
            known(e) and e == 0 for e in ins[1]):
        what = ElementWiseOperation(p["op"]).name
        raise NetworkError(f"layer '{name}': a shape computation divides by zero (a {what} whose divisor holds 0)")


def _moved(op, p, w, shapes, dtypes, ins, present, out_dtypes, tensor):
    movers = _MOVES[op.type] or tuple(present)
    pool: list = []
    inputs = []
    for i in range(len(shapes)):
        if i not in present:
            inputs.append(None)
        elif i in movers:
            v = ins[i] if ins[i] is not None else (None,) * math.prod(shapes[i])
            inputs.append(torch.arange(len(pool), len(pool) + len(v), dtype=torch.int64).reshape(tuple(shapes[i])))
            pool.extend(v)
        elif ins[i] is None or not all(known(e) for e in ins[i]):
            return [None] * len(out_dtypes)
        else:
            inputs.append(tensor(i))
    outs = op.run(p, w, inputs, None)
    convert = _NUMBER.get(out_dtypes[0], int)
    result = []
    for o in outs:
        elems = [pool[j] for j in o.reshape(-1).tolist()]
        result.append(tuple(convert(e) if known(e) else (e if convert is int else None) for e in elems))
    return result


def _elementwise(op, p, shapes, dtypes, ins, out_dtypes, tensor):
    from .execute import run_layer

    a, b = tensor(0, 1), tensor(1, 1)
    ka = torch.tensor([known(e) for e in ins[0]]).reshape(tuple(shapes[0]))
    kb = torch.tensor([known(e) for e in ins[1]]).reshape(tuple(shapes[1]))
    out = run_layer(op.type, p, {}, [a, b], list(out_dtypes))[0]
    mask = torch.broadcast_to(ka & kb, tuple(out.shape))
    values = [v if k else None for v, k in zip(out.reshape(-1).tolist(), mask.reshape(-1).tolist())]
    # x + 0, x - 0, x * 1, x // 1, 0 + x, 1 * x keep an unknown dim's identity (TensorRT's symbolic shapes do)
    ia, ib = (torch.broadcast_to(torch.arange(len(ins[i])).reshape(tuple(shapes[i])), tuple(out.shape)).reshape(-1)
              for i in (0, 1))
    keep = _IDENTITY.get(ElementWiseOperation(p["op"]))
    for j, (x, y) in enumerate(zip(ia.tolist(), ib.tolist())):
        u, v = ins[0][x], ins[1][y]
        if keep is not None and isinstance(u, Sym) and v == keep[1]:
            values[j] = u
        elif keep is not None and keep[0] and isinstance(v, Sym) and u == keep[1]:
            values[j] = v
    return [tuple(values)]


#: ElementWiseOperation value -> (commutative, the constant that leaves the other operand unchanged)
_IDENTITY = {ElementWiseOperation.SUM: (True, 0), ElementWiseOperation.PROD: (True, 1),
             ElementWiseOperation.SUB: (False, 0), ElementWiseOperation.DIV: (False, 1),
             ElementWiseOperation.FLOOR_DIV: (False, 1)}


def record(op, p, w, shapes, dtypes, in_keys, out_keys, out_shapes, out_dtypes, values: dict, need: set, name: str):
    """Store in `values` the values of a layer's outputs that `need` holds (one step of a pass of shape
    inference over a network or a plan, which keeps `values` by tensor key)."""
    if not any(k in need for k in out_keys):
        return
    ins = [None if k is None else values.get(k) for k in in_keys]
    bound = bind(op.cls, p, shapes, dtypes, ins, in_keys, name)
    only_shapes = getattr(op.cls, "_READS_ONLY_SHAPES", False)
    outs = output_values(op, bound, w, shapes, dtypes, [None] * len(ins) if only_shapes else ins, in_keys,
                         out_shapes, out_dtypes, name)
    for k, v in zip(out_keys, outs):
        values[k] = v


def shape_input_names(network) -> set[str]:
    """The names of the network inputs that a layer reads as shapes (through other shape tensor layers)."""
    from .plan import _topological

    layers = _topological(network)
    need = needed(((type(layer), [None if t is None else id(t) for t in layer._inputs], [id(t) for t in layer._outputs])
                   for layer in layers), network._shape_outputs)
    return {t.name for t in network._inputs if id(t) in need}


def roles(network) -> tuple[set, set]:
    """(ids of shape tensors, ids of execution tensors), as ITensor.is_shape_tensor and is_execution_tensor
    report them, over the layers that lead to a network output: a shape tensor is read by a shape input (or
    through layers that compute one), or is an add_shape output such a layer reads; an execution tensor is a
    network output or read as data by a layer that computes one."""
    from .plan import _topological

    layers = _topological(network)
    shape = needed(((type(layer), [None if t is None else id(t) for t in layer._inputs],
                     [id(t) for t in layer._outputs]) for layer in layers), network._shape_outputs)
    for layer in layers:
        for t in layer._inputs:
            if t is not None and t._producer is not None and getattr(t._producer, "_READS_ONLY_SHAPES", False):
                shape.add(id(t))
    execution = {id(t) for t in network._outputs if id(t) not in network._shape_outputs}
    for layer in reversed(layers):
        if any(id(t) in execution for t in layer._outputs) and not getattr(layer, "_READS_ONLY_SHAPES", False):
            execution.update(id(t) for i, t in enumerate(layer._inputs) if t is not None and not reads(type(layer), i))
    return shape, execution

"""ISqueezeLayer: unit dimensions removed, on the axes of a constant INT32/INT64 1-D tensor (input 1), or
every statically unit dimension when no axes are given.

TensorRT: "Axes must be resolvable to a constant Int32 or Int64 1D shape tensor." The reference resolves
them when the layer is inferred, from the IConstantLayer that produces input 1, and keeps them in the
layer's params (so a plan infers without the constant's values); it has no shape tensors computed by
other layers.
"""

from __future__ import annotations

from ..core import ITensor, NetworkError
from ..enums import DataType, LayerType
from .base import ILayer
from .common import fail, no_uint8
from .registry import register


def constant_axes(layer, index: int = 1, rank: int = 1, what: str = "axes") -> list[int] | None:
    """The values of the axes tensor at input `index` of `layer` (None where that input is unset); a
    NetworkError where it is not an INT32/INT64 constant of rank `rank` (1, or 0 for a cumulative's axis)."""
    t = layer._inputs[index] if len(layer._inputs) > index else None
    if t is None:
        return None
    prod = getattr(t, "_producer", None)
    if t.dtype not in (DataType.INT32, DataType.INT64):
        raise NetworkError(f"layer '{layer.name}': the {what} tensor has type {t.dtype.name}; TensorRT needs a "
                           f"constant INT32 or INT64 {rank}-D shape tensor")
    if prod is None or prod._TYPE != LayerType.CONSTANT or len(t.shape) != rank:
        raise NetworkError(f"layer '{layer.name}': the {what} tensor '{t.name}' must be a {rank}-D constant (the "
                           f"output of add_constant); TensorRT needs a build-time constant INT32 or INT64 {rank}-D "
                           "shape tensor and the reference resolves only constants")
    return [int(v) for v in prod._weights["weights"]._array.reshape(-1)]


def copy_constant_input(layer, index: int, key: str, rank: int = 1, what: str = "axes") -> None:
    """Copy the constant at input `index` into params[key] (its values, or its one value where `rank` is 0), so
    that a plan is inferred and run without the constant tensor; the cached inference is dropped if it changed."""
    values = constant_axes(layer, index, rank, what)
    value = values[0] if values is not None and rank == 0 else values
    if layer._params.get(key, 0) != value:
        layer._params[key] = value
        layer._cache = None


class AxesInput(ILayer):
    """A layer whose input 1 holds constant axes, copied into params["axes"] before inference."""

    _MAX_INPUTS = 2

    def _infer(self):
        copy_constant_input(self, 1, "axes")
        return super()._infer()


class ISqueezeLayer(AxesInput):
    _TYPE = LayerType.SQUEEZE
    _OPTIONAL_INPUTS = True


def normalized_axes(name, axes, rank, what):
    out = []
    for a in axes:
        if not -rank <= a < rank:
            fail(name, f"{what} axis {a} is out of range [{-rank}, {rank - 1}] for an output of rank {rank}"
                 if what == "unsqueeze" else f"{what} axis {a} is out of range [{-rank}, {rank - 1}] for a "
                 f"rank-{rank} input")
        out.append(a % rank)
    if len(set(out)) != len(out):
        fail(name, f"{what} axes {list(axes)} repeat an axis; TensorRT needs unique axes")
    return out


def infer(p, w, shapes, dtypes, name, plugin):
    x = tuple(shapes[0])
    no_uint8(name, dtypes[:1])
    axes = p.get("axes")
    if axes is None:  # every statically unit dimension
        return [tuple(d for d in x if d != 1)], [dtypes[0]]
    axes = normalized_axes(name, axes, len(x), "squeeze")
    for a in axes:  # a dynamic (-1) dim is accepted, as TensorRT-RTX does, and checked when the run gives its size
        if x[a] not in (1, -1):
            fail(name, f"squeeze axis {a} has size {x[a]} in input shape {x}; only unit dimensions can be removed")
    return [tuple(d for i, d in enumerate(x) if i not in axes)], [dtypes[0]]


def run(p, w, inputs, plugin):
    x = inputs[0]
    axes = p.get("axes")
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in {a % x.dim() for a in axes}])]


def add_squeeze(self, input: ITensor, axes: ITensor | None = None) -> ISqueezeLayer:
    """TensorRT 11.4: without axes, every statically unit dimension is removed."""
    return self._add(ISqueezeLayer, [input] + ([] if axes is None else [axes]), {"axes": None})


register(ISqueezeLayer, infer, run, adds=(add_squeeze,))

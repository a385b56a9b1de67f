"""IFillLayer: a tensor generated from its indices (LINSPACE) or drawn at random (RANDOM_UNIFORM,
RANDOM_NORMAL), of the dims given by `shape` or by a shape tensor on input 0.

TensorRT's Fill operator: LINSPACE gives output[a_0, ..., a_n] = alpha + beta . (a_0, ..., a_n), alpha a scalar
and beta one delta per output dim; RANDOM_UNIFORM draws from [alpha, beta] (min, max) and RANDOM_NORMAL
from N(alpha, beta) (mean, std). alpha and beta are attributes (a Python int makes them int64:
`is_alpha_beta_int64`) or tensors on inputs 1 and 2, both or neither (TensorRT-RTX 1.7: "input 1 and input 2
both null or both non-null"). Static alpha and beta give LINSPACE one delta, so only a 1-D LINSPACE may use
them (TensorRT's kernel: "Alpha and beta tensor should be set when output an ND tensor"); the reference
refuses an N-D one at build time, where TensorRT-RTX 1.7 builds it.

Types (TensorRT's IFillLayer table, as TensorRT-RTX 1.7 checks it): LINSPACE INT32, INT64 or FLOAT;
the random fills FLOAT or HALF. TensorRT documents the random distributions, not their bits, and has no
seed: the reference draws from torch's generator. LINSPACE computes in int64 for an INT64 output and in
float64 otherwise, then converts (a float alpha or beta with an integer output truncates toward zero, as
C++'s conversion does).
"""

from __future__ import annotations

import numpy as np
import torch

from ..core import Dims, NetworkError
from ..enums import DataType, FillOperation, LayerType
from ..shape_values import InputDim
from .base import ILayer, param
from .common import fail
from .registry import register

_TYPES = {FillOperation.LINSPACE: (DataType.INT32, DataType.INT64, DataType.FLOAT),
          FillOperation.RANDOM_UNIFORM: (DataType.FLOAT, DataType.HALF),
          FillOperation.RANDOM_NORMAL: (DataType.FLOAT, DataType.HALF)}
_ALPHA_BETA_TYPES = (DataType.FLOAT, DataType.HALF, DataType.INT32, DataType.INT64)
_ROLES = {FillOperation.LINSPACE: ("start", "delta"), FillOperation.RANDOM_UNIFORM: ("minimum", "maximum"),
          FillOperation.RANDOM_NORMAL: ("mean", "standard deviation")}


def _dims_check(value):
    return "every dim must be >= 0" if any(d < 0 for d in value) else None


def _integer(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, float)


class IFillLayer(ILayer):
    _TYPE = LayerType.FILL
    _MAX_INPUTS = 3
    _OPTIONAL_INPUTS = True
    _FIRST_INPUT_OPTIONAL = True
    #: input 0: the output dims as a 1-D shape tensor (replacing `shape`)
    _SHAPE_INPUTS = {0: "dimensions"}
    shape = param("dimensions", "dims", _dims_check, shape_input=0)
    operation = param("operation", FillOperation)
    to_type = param("to_type", DataType)

    @staticmethod
    def _folds(p) -> bool:
        """Only LINSPACE has a value known at build time (a random fill is drawn at each run)."""
        return p["operation"] == FillOperation.LINSPACE

    @property
    def alpha(self):
        """-1.0 while alpha is a tensor (input 1), as TensorRT-RTX 1.7 reads it."""
        return -1.0 if self.get_input(1) is not None else self._params["alpha"]

    @alpha.setter
    def alpha(self, value) -> None:
        """A Python (or numpy) integer makes alpha and beta int64, a float makes them double (TensorRT-RTX 1.7);
        beta is converted to the new kind."""
        self._set_alpha_beta("alpha", value, switch=True)

    @property
    def beta(self):
        return -1.0 if self.get_input(2) is not None else self._params["beta"]

    @beta.setter
    def beta(self, value) -> None:
        self._set_alpha_beta("beta", value, switch=False)

    def _set_alpha_beta(self, key: str, value, switch: bool) -> None:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"layer '{self.name}': {key} = {value!r}: incompatible function arguments: a number is "
                            f"needed, got {type(value).__name__}")
        as_int = _integer(value)
        if not switch and as_int != self._params["alpha_beta_int64"]:
            raise TypeError(f"layer '{self.name}': {key} = {value!r}: alpha and beta are "
                            f"{'int64' if self._params['alpha_beta_int64'] else 'double'}; set alpha first to change "
                            "their kind (TensorRT-RTX 1.7 refuses the mix: \"std::get: wrong index for variant\")")
        if switch and as_int != self._params["alpha_beta_int64"]:
            self._params["alpha_beta_int64"] = as_int
            self._params["beta"] = int(self._params["beta"]) if as_int else float(self._params["beta"])
        self._params[key] = int(value) if as_int else float(value)
        self._network._touch()

    def is_alpha_beta_int64(self) -> bool:
        return bool(self._params["alpha_beta_int64"])


def _output_dims(p, shapes):
    dims = p["dimensions"]
    return tuple(-1 if d is None or isinstance(d, InputDim) else d for d in dims)


def infer(p, w, shapes, dtypes, name, plugin):
    op, to = FillOperation(p["operation"]), DataType(p["to_type"])
    if to not in _TYPES[op]:
        fail(name, f"FillOperation.{op.name} gives {' / '.join(t.name for t in _TYPES[op])} outputs, not {to.name}")
    out = _output_dims(p, shapes)
    if any(d < -1 for d in out):
        fail(name, f"output dims {out}: every dim must be >= 0")
    have = [len(shapes) > i and shapes[i] is not None for i in (1, 2)]
    if have[0] != have[1]:
        fail(name, "alpha (input 1) and beta (input 2) must both be tensors or both attributes; one of them is set")
    roles = _ROLES[op]
    if have[0]:
        for i, role in ((1, roles[0]), (2, roles[1])):
            want = (len(out),) if (i == 2 and op == FillOperation.LINSPACE) else ()
            if tuple(shapes[i]) != want:
                fail(name, f"input {i} (the {role}) has shape {tuple(shapes[i])}; it must have shape {want}"
                           + (" (one delta per output dim)" if want else " (a scalar)"))
            if dtypes[i] not in _ALPHA_BETA_TYPES:  # TensorRT-RTX 1.7 takes any of these, whatever the output type
                fail(name, f"input {i} (the {role}) has type {dtypes[i].name}; alpha and beta tensors are FLOAT, HALF, "
                           "INT32 or INT64")
    elif op == FillOperation.RANDOM_UNIFORM and not p["alpha"] < p["beta"]:
        fail(name, f"RANDOM_UNIFORM from alpha {p['alpha']} to beta {p['beta']}: the minimum must be below the maximum")
    elif op == FillOperation.RANDOM_NORMAL and not p["beta"] > 0:
        fail(name, f"RANDOM_NORMAL with beta {p['beta']}: the standard deviation must be > 0")
    elif op == FillOperation.LINSPACE and len(out) != 1:
        fail(name, f"a LINSPACE of rank {len(out)} with alpha and beta as attributes (one delta); TensorRT's kernel "
                   "needs alpha and beta tensors for an N-D output (set_input(1, start), set_input(2, deltas))")
    return [out], [to]


def run(p, w, inputs, plugin):
    op, to = FillOperation(p["operation"]), DataType(p["to_type"])
    dims = tuple(p["dimensions"])
    dev = next((t.device for t in inputs if t is not None), torch.device("cpu"))
    tensors = len(inputs) > 2 and inputs[1] is not None
    alpha = inputs[1].reshape(()) if tensors else torch.tensor(p["alpha"])
    beta = inputs[2] if tensors else torch.tensor([p["beta"]])
    if op == FillOperation.LINSPACE:
        exact = to == DataType.INT64 and not alpha.is_floating_point() and not beta.is_floating_point()
        kind = torch.int64 if exact else torch.float64
        grids = torch.meshgrid(*[torch.arange(d, dtype=kind, device=dev) for d in dims], indexing="ij")
        y = torch.full(dims, 0, dtype=kind, device=dev) + alpha.to(dev, kind)
        for k, g in enumerate(grids):
            y = y + g * beta.reshape(-1)[k].to(dev, kind)
        return [y.trunc() if y.is_floating_point() and to != DataType.FLOAT else y]
    lo, hi = float(alpha), float(beta.reshape(-1)[0])
    if op == FillOperation.RANDOM_UNIFORM:
        return [torch.rand(dims, dtype=torch.float32, device=dev) * (hi - lo) + lo]
    return [torch.randn(dims, dtype=torch.float32, device=dev) * hi + lo]


def add_fill(self, shape: Dims, op: FillOperation, output_type: DataType = DataType.FLOAT) -> IFillLayer:
    dims = tuple(Dims(shape))
    if any(d < 0 for d in dims):
        raise NetworkError(f"add_fill: shape {dims}: every dim must be >= 0 (a shape known only at run time comes "
                           "from a shape tensor: set_input(0, dims))")
    return self._add(IFillLayer, [], {"dimensions": dims, "operation": int(FillOperation(op)), "alpha": 0.0,
                                      "beta": 1.0, "alpha_beta_int64": False,
                                      "to_type": int(DataType(output_type))}, eager=False)


register(IFillLayer, infer, run, adds=(add_fill,))

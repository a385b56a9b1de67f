"""IAssertionLayer: a BOOL condition (0-D or 1-D) that must hold; the layer has no outputs.

TensorRT: "The input must be a boolean shape tensor. If any element of it is False, a build-time or run-time
error occurs." A shape tensor is computed from constants and tensor shapes, never from a network input's values
(TensorRT-RTX makes such an input a shape input, which must be INT32/INT64 and have profile values). The
reference, which has no shape inputs, refuses a condition that reads a network input's values. A condition that
depends on no network input is evaluated when the network is built: false, and the build fails with the
message; otherwise it is evaluated when the engine runs: false, and execute_async_v3 logs the message and
returns False (runtime.py). Either way the error is one sentence naming the layer, the false element and the
message. The layer is kept in the plan although nothing consumes it (plan.py)."""

from __future__ import annotations

import torch

from ..core import ITensor, NetworkError, RunFailure
from ..enums import DataType, LayerType
from .base import ILayer
from .common import fail
from .registry import register


class IAssertionLayer(ILayer):
    _TYPE = LayerType.ASSERTION

    @property
    def message(self) -> str:
        return self._params["message"]

    @message.setter
    def message(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"layer '{self.name}': message = {value!r}: incompatible function arguments: a str is "
                            f"needed, got {type(value).__name__}")
        self._params["message"] = value
        self._network._touch()

    def _infer(self):
        _refuse_input_values(self)
        return super()._infer()

    def _check_in_network(self) -> None:
        """At build time: a condition that depends on no network input must hold."""
        value = constant_value(self._inputs[0])
        why = failure(self._params["message"], value, "when the network is built") if value is not None else None
        if why:
            raise NetworkError(f"layer '{self.name}': {why}")


def _refuse_input_values(layer) -> None:
    """A NetworkError where the condition reads the values of a network input (see the module docstring)."""
    seen, todo = set(), [layer._inputs[0]]
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        prod = t._producer
        if prod is None:
            raise NetworkError(f"layer '{layer.name}': the condition depends on the values of network input "
                               f"'{t.name}'; an assertion needs a shape tensor (computed from constants and tensor "
                               "shapes), and the reference has no shape inputs")
        if prod._TYPE != LayerType.SHAPE:  # a shape layer reads its input's shape, not its values
            todo.extend(prod._inputs)


def constant_value(t: ITensor) -> torch.Tensor | None:
    """The value of `t` where it depends on no network input (constants and layers of them), else None."""
    if t is None or t._producer is None:
        return None
    layer = t._producer
    if layer._TYPE == LayerType.SHAPE:
        return None  # left to run time
    inputs = [constant_value(i) if i is not None else None for i in layer._inputs]
    if any(v is None for v, i in zip(inputs, layer._inputs) if i is not None):
        return None
    from ..execute import run_layer

    _, dtypes = layer._infer()
    outs = run_layer(layer._TYPE, layer._params, {k: _weight(w) for k, w in layer._weights.items()}, inputs, dtypes,
                     getattr(layer, "_plugin", None))
    return outs[t._index]


def _weight(w):
    from ..graph import _weight_tensor  # a plan's weights become tensors the same way

    return _weight_tensor(w._array, w.dtype) if w is not None and w.size else None


def failure(message: str, value: torch.Tensor, when: str = "when the engine runs") -> str | None:
    """Why the assertion fails (the first false element and the message), or None where `value` holds."""
    false = (~value.reshape(-1).bool()).nonzero()
    if not len(false):
        return None
    where = f"condition[{int(false[0])}]" if value.dim() else "the condition"
    return f"the assertion failed {when} ({where} is false): {message}"


def infer(p, w, shapes, dtypes, name, plugin):
    if dtypes[0] != DataType.BOOL:
        fail(name, f"the condition has type {dtypes[0].name}; an assertion needs a BOOL condition")
    if len(shapes[0]) > 1:
        fail(name, f"the condition has shape {tuple(shapes[0])}; an assertion needs a 0-D or 1-D condition")
    return [], []


def run(p, w, inputs, plugin):
    """Raises RunFailure; the graph adds the layer's name (graph.py)."""
    why = failure(p["message"], inputs[0])
    if why:
        raise RunFailure(why)
    return []


def add_assertion(self, condition: ITensor, message: str | None) -> IAssertionLayer | None:
    if message is None:  # TensorRT's binding passes a null pointer: logged, and no layer
        self._api_usage_error("INetworkDefinition::addAssertion: Error Code 3: API Usage Error (Parameter check "
                              "failed, condition: (message) != nullptr.)")
        return None
    if not isinstance(message, str):
        raise TypeError(f"add_assertion: incompatible function arguments: message must be a str, got "
                        f"{type(message).__name__}")
    return self._add(IAssertionLayer, [condition], {"message": message}, num_outputs=0)


register(IAssertionLayer, infer, run, adds=(add_assertion,))

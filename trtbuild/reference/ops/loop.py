"""ILoop: a recurrent sub-graph (TensorRT's "Working with Loops"), and its boundary layers.

ITripLimitLayer bounds the iterations: COUNT (a 0-D INT32/INT64 tensor computed before the loop) and/or
WHILE (a 0-D BOOL tensor, usually computed from recurrences, checked before each iteration); a loop needs
at least one and has at most one of each. IRecurrenceLayer carries a value: input 0 is its initial value,
input 1 (set_input) the value of the next iteration, a back edge. IIteratorLayer gives slice i of a tensor
along `axis` (M-1-i with `reverse`, M the COUNT trip count). ILoopOutputLayer is the only way out: LAST_VALUE
of a recurrence (its value after the last iteration; TensorRT-RTX requires a recurrence of the same loop),
or each iteration's value stacked along a new `axis` (CONCATENATE, REVERSE in reverse order) whose length
is input 1, a 0-D constant here (TensorRT: a shape tensor; the reference has no shape tensors computed
by other layers). The body is what lies between these layers (ops/_control.py).
"""

from __future__ import annotations

import torch

from ..argtypes import api_types
from ..core import ITensor, NetworkError
from ..enums import DataType, LayerType, LoopOutput, TripLimit
from ._control import Boundary, Region, check_construct, execute
from .base import ILayer, param
from .common import fail
from .registry import register
from .squeeze import copy_constant_input

INTEGERS = (DataType.INT32, DataType.INT64)


@api_types
class ILoop:
    """The boundary layers of one loop; its name is used in error messages."""

    def __init__(self, network):
        self._network = network
        self._number = len(network._constructs)  # one count for conditionals and loops, as TensorRT-RTX names them
        network._constructs.append(self)
        self._name = f"(Unnamed Loop* {self._number})"
        self._layers: list = []

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        from ..network_names import _name_argument

        value = _name_argument(self._network, value, "ILoop::setName")
        if value is not None:
            self._name = value
            for layer in self._layers:
                layer._params["loop_name"] = value

    def _check(self) -> None:
        """At build: a loop needs a trip limit even where none of its outputs is used (TensorRT-RTX)."""
        if not any(isinstance(la, ITripLimitLayer) for la in self._layers):
            raise NetworkError(f"loop '{self._name}' has no trip limit: call ILoop.add_trip_limit")

    def _add(self, cls, inputs: list, params: dict, eager: bool = True) -> ILayer:
        layer = self._network._add(cls, inputs, {"loop": self._number, "loop_name": self._name, **params}, eager=eager)
        layer._loop = self
        self._layers.append(layer)
        return layer

    def add_trip_limit(self, tensor: ITensor, kind: TripLimit) -> ITripLimitLayer:
        # checked at build, as TensorRT-RTX checks it (the layer has no outputs whose shape could be read)
        return self._add(ITripLimitLayer, [tensor], {"kind": int(TripLimit(kind))}, eager=False)

    def add_recurrence(self, initial_value: ITensor) -> IRecurrenceLayer:
        return self._add(IRecurrenceLayer, [initial_value], {})

    def add_iterator(self, tensor: ITensor, axis: int = 0, reverse: bool = False) -> IIteratorLayer:
        if axis < 0:
            raise NetworkError(f"{self._name}: add_iterator axis {axis} is refused; TensorRT needs axis >= 0")
        return self._add(IIteratorLayer, [tensor], {"axis": int(axis), "reverse": bool(reverse)})

    def add_loop_output(self, tensor: ITensor, kind: LoopOutput, axis: int = 0) -> ILoopOutputLayer:
        if axis < 0:
            raise NetworkError(f"{self._name}: add_loop_output axis {axis} is refused; TensorRT needs axis >= 0")
        # checked when a shape is read or at build: a CONCATENATE or REVERSE output's length is set afterwards
        return self._add(ILoopOutputLayer, [tensor], {"kind": int(LoopOutput(kind)), "axis": int(axis),
                                                      "length": None}, eager=False)


class ILoopBoundaryLayer(Boundary, ILayer):
    """A boundary layer of a loop; `loop` is its ILoop."""

    _CONSTRUCT = "loop"

    @property
    def loop(self) -> ILoop:
        return self._loop

    def _companions(self) -> list:
        """The trip limits (no outputs) and recurrences (their next value) are built with any boundary layer."""
        return [la for la in self._loop._layers if isinstance(la, (ITripLimitLayer, IRecurrenceLayer))]

    @classmethod
    def _type_label(cls) -> str:
        return cls.__name__[1:].removesuffix("Layer")


class ITripLimitLayer(ILoopBoundaryLayer):
    _TYPE = LayerType.TRIP_LIMIT

    def __init__(self, network, inputs, params, weights=None):
        super().__init__(network, inputs, params, weights, num_outputs=0)

    @property
    def kind(self) -> TripLimit:
        return TripLimit(self._params["kind"])


class IRecurrenceLayer(ILoopBoundaryLayer):
    """Input 1 (the next value) is computed from the layer's own output: inference reads input 0 only,
    then compares input 1 with it."""

    _TYPE = LayerType.RECURRENCE
    _MAX_INPUTS = 2
    _OPTIONAL_INPUTS = True
    _OUTSIDE_INPUTS = (0,)
    _BACK_EDGES = (1,)

    def _infer(self):
        from ..core import Dims
        from ..infer import infer_layer

        stamp = self._network._version
        if self._cache is None or self._cache[0] != stamp:
            t = self._inputs[0]
            shapes, dtypes = infer_layer(self._TYPE, self._params, self._weights, [t.shape, None], [t.dtype, None],
                                         self.name)
            self._cache = (stamp, [Dims(s) for s in shapes], list(dtypes))
            nxt = self._inputs[1] if len(self._inputs) > 1 else None
            if nxt is not None:
                check_next(self.name, tuple(t.shape), t.dtype, tuple(nxt.shape), nxt.dtype)
        return self._cache[1], self._cache[2]


class IIteratorLayer(ILoopBoundaryLayer):
    _TYPE = LayerType.ITERATOR
    _OUTSIDE_INPUTS = (0,)
    axis = param("axis", "int", lambda v: "TensorRT needs axis >= 0" if v < 0 else None)
    reverse = param("reverse", "bool")


class ILoopOutputLayer(ILoopBoundaryLayer):
    _TYPE = LayerType.LOOP_OUTPUT
    _MAX_INPUTS = 2
    _OPTIONAL_INPUTS = True
    _EXIT = True
    axis = param("axis", "int", lambda v: "TensorRT needs axis >= 0" if v < 0 else None)

    @property
    def kind(self) -> LoopOutput:
        return LoopOutput(self._params["kind"])

    def _infer(self):
        if self.kind != LoopOutput.LAST_VALUE:
            copy_constant_input(self, 1, "length", rank=0, what="concatenation length")
        return super()._infer()


def check_next(name, shape, dtype, next_shape, next_dtype):
    """A dim that is -1 on either side is checked when the loop runs (TensorRT-RTX accepts it at build)."""
    if dtype != next_dtype or len(shape) != len(next_shape) or any(
            a != b and a >= 0 and b >= 0 for a, b in zip(shape, next_shape)):
        fail(name, f"the next value (input 1) has shape {next_shape} and type {next_dtype.name} but the initial value "
                   f"{shape} and {dtype.name}; an IRecurrenceLayer needs inputs of the same shape and type")


def infer_trip_limit(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "loop", name)
    kind = TripLimit(p["kind"])
    want = INTEGERS if kind == TripLimit.COUNT else (DataType.BOOL,)
    if dtypes[0] not in want:
        fail(name, f"a {kind.name} trip limit takes a 0-D {' or '.join(d.name for d in want)} tensor, got "
                   f"{dtypes[0].name}")
    if len(shapes[0]):
        fail(name, f"a {kind.name} trip limit takes a 0-D tensor (a scalar), got shape {tuple(shapes[0])}")
    return [], []


def infer_recurrence(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "loop", name)
    if len(shapes) > 1 and shapes[1] is not None:
        check_next(name, tuple(shapes[0]), dtypes[0], tuple(shapes[1]), dtypes[1])
    return [tuple(shapes[0])], [dtypes[0]]


def infer_iterator(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "loop", name)
    x, axis = tuple(shapes[0]), p["axis"]
    if not 0 <= axis < len(x):
        fail(name, f"axis {axis} is out of range for a rank-{len(x)} input; an IIteratorLayer needs 0 <= axis < rank")
    return [x[:axis] + x[axis + 1:]], [dtypes[0]]


def infer_output(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "loop", name)
    x, kind, axis = tuple(shapes[0]), LoopOutput(p["kind"]), p["axis"]
    if kind == LoopOutput.LAST_VALUE:
        return [x], [dtypes[0]]
    if p["length"] is None:
        fail(name, f"a {kind.name} loop output needs its length: set_input(1, a 0-D INT32/INT64 constant)")
    if not 0 <= axis <= len(x):
        fail(name, f"axis {axis} is out of range for a rank-{len(x)} input; a {kind.name} loop output needs "
                   "0 <= axis <= rank")
    if p["length"] < 0:
        fail(name, f"the concatenation length is {p['length']}; it must be >= 0")
    return [x[:axis] + (p["length"],) + x[axis:]], [dtypes[0]]


def run_none(p, w, inputs, plugin):
    return []


def run_first(p, w, inputs, plugin):
    """The loop gives a recurrence its current value and an output layer its final value as input 0."""
    return [inputs[0]]


def run_iterator(p, w, inputs, plugin):
    """inputs: the tensor and the index of the slice (the loop computes it from the iteration)."""
    x, i = inputs
    return [x.select(p["axis"], i)]


class LoopRegion(Region):
    """Runs the body once per iteration: recurrences take their values, a WHILE condition is computed
    (from the layers it reads) and checked, iterators slice, the rest of the body runs, and each
    recurrence's next value is kept. After the last iteration the output layers get their values."""

    def __init__(self, s, c, order, nodes_of, steps):
        super().__init__(s, c, order, nodes_of, steps)
        by_cls = {cls: [k for k, n in self.nodes.items() if n.cls is cls]
                  for cls in (ITripLimitLayer, IRecurrenceLayer, IIteratorLayer, ILoopOutputLayer)}
        limits = {TripLimit(self.nodes[k].params["kind"]): k for k in by_cls[ITripLimitLayer]}
        for kind in TripLimit:
            if sum(TripLimit(self.nodes[k].params["kind"]) == kind for k in by_cls[ITripLimitLayer]) > 1:
                raise NetworkError(f"{self.what} has more than one {kind.name} trip limit")
        if not limits:
            raise NetworkError(f"{self.what} has no trip limit: call ILoop.add_trip_limit")
        self.count = self.nodes[limits[TripLimit.COUNT]].inputs[0] if TripLimit.COUNT in limits else None
        if self.count is not None and s.producer.get(self.count) in s.inside[c]:
            raise NetworkError(f"{self.what}: the COUNT trip limit is computed inside the loop; it must be "
                               "available before the loop starts")
        self.recurrences = by_cls[IRecurrenceLayer]
        for k in self.recurrences:
            if len(self.nodes[k].inputs) < 2 or self.nodes[k].inputs[1] is None:
                raise NetworkError(f"layer '{self.nodes[k].name}': the recurrence of {self.what} has no next value: "
                                   "call set_input(1, tensor)")
        self.iterators, self.outputs = by_cls[IIteratorLayer], by_cls[ILoopOutputLayer]
        if self.count is None and any(self.nodes[k].params["reverse"] for k in self.iterators):
            raise NetworkError(f"{self.what}: a reverse iterator counts from the COUNT trip limit, which the loop "
                               "lacks")
        rec_of = {self.nodes[k].outputs[0]: k for k in self.recurrences}
        for k in self.outputs:
            n = self.nodes[k]
            if n.params["kind"] == LoopOutput.LAST_VALUE and n.inputs[0] not in rec_of:
                raise NetworkError(f"layer '{n.name}': a LAST_VALUE loop output takes the output of an "
                                   f"IRecurrenceLayer of {self.what}")
        self.last_of = {k: rec_of.get(self.nodes[k].inputs[0]) for k in self.outputs}
        self.while_ = self.nodes[limits[TripLimit.WHILE]].inputs[0] if TripLimit.WHILE in limits else None
        body = [(u, step) for u, step in self.units if u not in self.nodes]
        unit_of = {i: u for u, _ in body for i in nodes_of[u]}
        need, todo = set(), [self.while_] if self.while_ is not None else []
        while todo:  # the layers the WHILE condition reads, run before the rest of an iteration
            u = unit_of.get(s.producer.get(todo.pop()))
            if u is not None and u not in need:
                need.add(u)
                todo += [t for i in nodes_of[u] for t in s.nodes[i].inputs if t is not None]
        self.condition_steps = [step for u, step in body if u in need]
        self.condition_nodes = [i for u in need for i in nodes_of[u]]
        self.body_steps = [step for u, step in body if u not in need]

    def run(self, values: dict, run_node) -> None:
        nodes = self.nodes
        count = int(values[self.count]) if self.count is not None else None
        state = {k: values[nodes[k].inputs[0]] for k in self.recurrences}
        scans: dict = {k: [] for k in self.outputs if nodes[k].params["kind"] != LoopOutput.LAST_VALUE}
        i = 0
        while count is None or i < count:
            for k in self.recurrences:
                run_node(k, values, [state[k], None])
            if self.while_ is not None:
                execute(self.condition_steps, values, run_node)
                if not bool(values[self.while_]):
                    break
            for k in self.iterators:
                x, p = values[nodes[k].inputs[0]], nodes[k].params
                index = count - 1 - i if p["reverse"] else i
                if not 0 <= index < x.shape[p["axis"]]:
                    raise NetworkError(f"layer '{nodes[k].name}': iteration {i} reads slice {index} of an axis of "
                                       f"length {x.shape[p['axis']]}")
                run_node(k, values, [x, index])
            execute(self.body_steps, values, run_node)
            for k, seen in scans.items():
                seen.append(values[nodes[k].inputs[0]])
            for k in self.recurrences:
                nxt, first = values[nodes[k].inputs[1]], values[nodes[k].inputs[0]]
                if nxt.shape != first.shape:
                    raise NetworkError(f"layer '{nodes[k].name}': the next value has shape {tuple(nxt.shape)} but "
                                       f"the initial value {tuple(first.shape)}; a recurrence keeps its shape")
                state[k] = nxt
            i += 1
        for k in self.outputs:
            p = nodes[k].params
            if k not in scans:
                run_node(k, values, [state[self.last_of[k]]])
                continue
            if len(scans[k]) != p["length"]:
                raise NetworkError(f"layer '{nodes[k].name}': {self.what} ran {len(scans[k])} iterations but the "
                                   f"output's concatenation length is {p['length']}")
            if not scans[k]:
                raise NetworkError(f"layer '{nodes[k].name}': {self.what} ran no iteration, so its "
                                   f"{LoopOutput(p['kind']).name} output has no values")
            seen = scans[k][::-1] if p["kind"] == LoopOutput.REVERSE else scans[k]
            run_node(k, values, [torch.stack(seen, p["axis"])])


for _cls in (ITripLimitLayer, IRecurrenceLayer, IIteratorLayer, ILoopOutputLayer):
    _cls._REGION = LoopRegion


def add_loop(self) -> ILoop:
    return ILoop(self)


API = ("ILoop", "ILoopBoundaryLayer")
register(ITripLimitLayer, infer_trip_limit, run_none, adds=(add_loop,))
register(IRecurrenceLayer, infer_recurrence, run_first)
register(IIteratorLayer, infer_iterator, run_iterator)
register(ILoopOutputLayer, infer_output, run_first)

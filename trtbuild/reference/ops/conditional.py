"""IIfConditional: an if-then-else of two sub-graphs, chosen at run time by a 0-D BOOL tensor.

A conditional is three kinds of boundary layer (TensorRT's "Working with Conditionals"): one
IConditionLayer (the predicate; no outputs), IIfConditionalInputLayers (a tensor entering the branches)
and IIfConditionalOutputLayers (input 0 from the true branch, input 1 from the false branch). The branches
are the layers between them (ops/_control.py places each layer); a layer of the body belongs to the branch
whose output it feeds, and to one branch only. Only the chosen branch runs (lazy evaluation).

Shapes: TensorRT-RTX gives an output -1 where the branches' static dims differ; TensorRT documents that "the
type and shape of each output tensor from the true/false subgraphs are the same, except that the shapes are
allowed to differ if the condition is a build-time constant", and the reference, whose shapes never depend on
values, requires the same static dims (a dim that is -1 in either branch is -1).
"""

from __future__ import annotations


from ..argtypes import api_types
from ..core import ITensor, NetworkError
from ..enums import DataType, LayerType
from ._control import Boundary, Region, check_construct, execute
from .base import ILayer
from .common import fail
from .registry import register


@api_types
class IIfConditional:
    """The boundary layers of one if-then-else; its name is used in error messages."""

    def __init__(self, network):
        self._network = network
        self._number = len(network._constructs)  # one count for conditionals and loops, as TensorRT-RTX names them
        network._constructs.append(self)
        self._name = f"(Unnamed IfConditional* {self._number})"
        self._layers: list = []
        self._condition: IConditionLayer | None = None

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        from ..network_names import _name_argument

        value = _name_argument(self._network, value, "IIfConditional::setName")
        if value is not None:
            self._name = value
            for layer in self._layers:
                layer._params["conditional_name"] = value

    def _check(self) -> None:
        """At build: a conditional needs its condition even where none of its outputs is used (TensorRT-RTX)."""
        if self._condition is None:
            raise NetworkError(f"conditional '{self._name}' has no condition: call IIfConditional.set_condition")

    def _add(self, cls, inputs: list, eager: bool = True) -> ILayer:
        layer = self._network._add(cls, inputs, {"conditional": self._number, "conditional_name": self._name},
                                   eager=eager)
        layer._conditional = self
        self._layers.append(layer)
        return layer

    def set_condition(self, condition: ITensor) -> IConditionLayer:
        """A second call replaces the condition tensor and returns the same layer, as TensorRT-RTX does."""
        if self._condition is not None:
            self._condition.set_input(0, condition)
            return self._condition
        # checked at build, as TensorRT-RTX checks it (the layer has no outputs whose shape could be read)
        self._condition = self._add(IConditionLayer, [condition], eager=False)
        return self._condition

    def add_input(self, input: ITensor) -> IIfConditionalInputLayer:
        return self._add(IIfConditionalInputLayer, [input])

    def add_output(self, true_subgraph_output: ITensor, false_subgraph_output: ITensor) -> IIfConditionalOutputLayer:
        return self._add(IIfConditionalOutputLayer, [true_subgraph_output, false_subgraph_output])


class IIfConditionalBoundaryLayer(Boundary, ILayer):
    """A boundary layer of an if-conditional; `conditional` is its IIfConditional."""

    _CONSTRUCT = "conditional"

    @property
    def conditional(self) -> IIfConditional:
        return self._conditional

    def _companions(self) -> list:
        """Every boundary layer of the conditional is built with any of them (the condition has no outputs)."""
        return list(self._conditional._layers)


class IConditionLayer(IIfConditionalBoundaryLayer):
    _TYPE = LayerType.CONDITION
    _OUTSIDE_INPUTS = (0,)

    def __init__(self, network, inputs, params, weights=None):
        super().__init__(network, inputs, params, weights, num_outputs=0)

    @classmethod
    def _type_label(cls) -> str:
        return "IfCondition"


class IIfConditionalInputLayer(IIfConditionalBoundaryLayer):
    _TYPE = LayerType.CONDITIONAL_INPUT
    _OUTSIDE_INPUTS = (0,)

    @classmethod
    def _type_label(cls) -> str:
        return "Input"


class IIfConditionalOutputLayer(IIfConditionalBoundaryLayer):
    _TYPE = LayerType.CONDITIONAL_OUTPUT
    _MAX_INPUTS = 2
    _EXIT = True

    @classmethod
    def _type_label(cls) -> str:
        return "Output"


def infer_condition(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "conditional", name)
    if dtypes[0] != DataType.BOOL:
        fail(name, f"the condition has type {dtypes[0].name}; an IConditionLayer takes a 0-D BOOL tensor")
    if len(shapes[0]) != 0:
        fail(name, f"the condition has shape {tuple(shapes[0])}; an IConditionLayer takes a 0-D BOOL tensor (a scalar)")
    return [], []


def run_condition(p, w, inputs, plugin):
    return []


def infer_input(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "conditional", name)
    return [tuple(shapes[0])], [dtypes[0]]


def run_input(p, w, inputs, plugin):
    return [inputs[0]]


def infer_output(p, w, shapes, dtypes, name, plugin):
    check_construct(p, "conditional", name)
    (a, b), (ta, tb) = shapes, dtypes
    if ta != tb:
        fail(name, f"the true branch gives {ta.name} and the false branch {tb.name}; an IIfConditionalOutputLayer "
                   "needs inputs of the same type")
    if len(a) != len(b):
        fail(name, f"the true branch gives shape {tuple(a)} and the false branch {tuple(b)}; the branches' outputs "
                   "need equal ranks")
    if any(x != y and x >= 0 and y >= 0 for x, y in zip(a, b)):
        fail(name, f"the true branch gives shape {tuple(a)} and the false branch {tuple(b)}; TensorRT requires the "
                   "same shape in both branches (unless the condition is a build-time constant)")
    return [tuple(x if x == y else -1 for x, y in zip(a, b))], [ta]


def run_output(p, w, inputs, plugin):
    """The conditional gives only the taken branch's input; the other is None."""
    return [inputs[0] if inputs[0] is not None else inputs[1]]


class ConditionalRegion(Region):
    """Runs the boundary inputs, then the taken branch's layers, then the output layers with that branch's
    values. A unit of the body belongs to the branch whose output layer input it feeds; one fed to both is
    refused (TensorRT-RTX: "exists in multiple control-flow scopes")."""

    def __init__(self, s, c, order, nodes_of, steps):
        super().__init__(s, c, order, nodes_of, steps)
        cond = [n for n in self.nodes.values() if n.cls is IConditionLayer]
        if not cond:
            raise NetworkError(f"{self.what} has no condition: call IIfConditional.set_condition")
        self.condition = cond[0].inputs[0]
        self.exits = {i: n for i, n in self.nodes.items() if n.cls is IIfConditionalOutputLayer}
        if not self.exits:
            raise NetworkError(f"{self.what} has no output: call IIfConditional.add_output")
        unit_of = {i: u for u in order for i in nodes_of[u]}
        self.branch: dict = {}
        for taken in (0, 1):
            seen, todo = set(), [n.inputs[taken] for n in self.exits.values()]
            while todo:
                u = unit_of.get(s.producer.get(todo.pop()))
                if u is None or u in seen or u in self.nodes:
                    continue
                seen.add(u)
                if self.branch.get(u, taken) != taken:
                    t = s.nodes[nodes_of[u][0]]
                    raise NetworkError(f"layer '{t.name}' feeds both branches of {self.what}; a layer of the body "
                                       "belongs to one branch (use IIfConditional.add_input for a shared value)")
                self.branch[u] = taken
                todo += [t for i in nodes_of[u] for t in s.nodes[i].inputs if t is not None]

    def run(self, values: dict, run_node) -> None:
        taken = 0 if bool(values[self.condition]) else 1
        for unit, step in self.units:
            if unit in self.exits:
                inputs = [values[t] if k == taken else None for k, t in enumerate(self.exits[unit].inputs)]
                run_node(unit, values, inputs)
            elif unit in self.nodes or self.branch.get(unit) == taken:
                execute([step], values, run_node)


for _cls in (IConditionLayer, IIfConditionalInputLayer, IIfConditionalOutputLayer):
    _cls._REGION = ConditionalRegion


def add_if_conditional(self) -> IIfConditional:
    return IIfConditional(self)


API = ("IIfConditional", "IIfConditionalBoundaryLayer")
register(IConditionLayer, infer_condition, run_condition, adds=(add_if_conditional,))
register(IIfConditionalInputLayer, infer_input, run_input)
register(IIfConditionalOutputLayer, infer_output, run_output)

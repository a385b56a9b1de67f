"""Control-flow scopes: which layers an if-conditional or a loop holds, and how the reference runs them.

TensorRT has no sub-network object: a construct (IIfConditional, ILoop) is its boundary layers, and its
body is what lies between them. A layer is inside construct C when it reads a tensor computed inside C
that did not leave through one of C's exit layers (IIfConditionalOutputLayer, ILoopOutputLayer); a
construct whose boundary layers read such a tensor is nested in C as a whole. Layers that read nothing
of C stay outside, even where only C uses them: they compute the same values once, as TensorRT may hoist
them.

The boundary layer classes describe themselves with class attributes (`Boundary` below), so this module
and the executor never branch on a layer type. The same analysis runs on a network being built
(`network_steps`, whose errors are TensorRT's build-time refusals) and on a deserialized plan
(`plan_steps`): its result is a tree of steps, a step being a layer index or a `Region` (a construct,
which runs its own steps through the same `execute`).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from ..core import NetworkError


class Boundary:
    """Mixin of the boundary layer classes of a construct.

    _CONSTRUCT: the params key holding the construct's number in its network ("conditional", "loop");
    the construct's name is under `<key>_name`. _EXIT: the layer's outputs are outside the construct.
    _OUTSIDE_INPUTS: input indices that must be computed outside the construct. _BACK_EDGES: input
    indices that carry a value to the next iteration (not ordered before the layer). _REGION: the Region
    class that runs the construct."""

    _CONSTRUCT = ""
    _EXIT = False
    _OUTSIDE_INPUTS: tuple[int, ...] = ()
    _BACK_EDGES: tuple[int, ...] = ()
    _REGION: type = None


def check_construct(p: dict, key: str, name: str) -> None:
    """A boundary layer's params name its construct: `key` its number in the network, `<key>_name` its name (a
    deserialized plan's params are checked here, before the plan's layers are grouped by construct)."""
    number = p.get(key)
    if not isinstance(number, int) or isinstance(number, bool) or not isinstance(p.get(f"{key}_name"), str):
        raise NetworkError(f"layer '{name}': the params of a {key}'s boundary layer need '{key}' (its number) and "
                           f"'{key}_name', got {sorted(p)}")


@dataclass
class Node:
    """A layer as the analysis sees it: its class, params, name and tensor ids (None: an unset input)."""

    index: int
    cls: type
    params: dict
    name: str
    inputs: list
    outputs: list

    @property
    def construct(self):
        key = getattr(self.cls, "_CONSTRUCT", "")
        return (key, self.params[key]) if key else None

    @property
    def back_edges(self) -> tuple:
        return getattr(self.cls, "_BACK_EDGES", ())


def describe(nodes_of_construct: list[Node]) -> str:
    """'conditional <name>' / 'loop <name>' of a construct, from one of its boundary layers."""
    key = nodes_of_construct[0].cls._CONSTRUCT
    return f"{key} '{nodes_of_construct[0].params.get(key + '_name', nodes_of_construct[0].params[key])}'"


@dataclass
class Scopes:
    """The result of the analysis: for each construct, its boundary layers and every layer inside it."""

    nodes: list[Node]
    producer: dict
    members: dict = field(default_factory=lambda: defaultdict(list))
    inside: dict = field(default_factory=dict)
    parent: dict = field(default_factory=dict)
    home: dict = field(default_factory=dict)

    def is_exit_of(self, index: int, c) -> bool:
        node = self.nodes[index]
        return node.construct == c and getattr(node.cls, "_EXIT", False)

    def scope_of_tensor(self, tid):
        """The innermost construct a tensor is computed in (None: the network itself)."""
        p = self.producer.get(tid)
        if p is None:
            return None
        node = self.nodes[p]
        if getattr(node.cls, "_EXIT", False):
            return self.parent[node.construct]
        return self.home[p]

    def what(self, c) -> str:
        return describe([self.nodes[i] for i in self.members[c]])


def _fail(msg: str):
    raise NetworkError(msg)


def analyse(nodes: list[Node], outputs: set) -> Scopes:
    """Place every layer in its innermost construct and check TensorRT's scope rules."""
    s = Scopes(nodes, {t: n.index for n in nodes for t in n.outputs})
    for n in nodes:
        if n.construct is not None:
            s.members[n.construct].append(n.index)
    s.inside = {c: set(m) for c, m in s.members.items()}
    changed = True
    while changed:  # a fixpoint: a nested construct joins as a whole, then what reads its tensors
        changed = False
        for c, ins in s.inside.items():
            for n in nodes:
                if n.index in ins:
                    continue
                if any(t is not None and s.producer.get(t) in ins and not s.is_exit_of(s.producer[t], c)
                       for t in n.inputs):
                    ins.add(n.index)
                    ins.update(s.members.get(n.construct, ()))
                    changed = True
    for c in s.inside:
        outer = [o for o in s.inside if o != c and s.members[c][0] in s.inside[o]]
        for o in outer:
            if c != o and s.members[o][0] in s.inside[c]:
                _fail(f"{s.what(c)} and {s.what(o)} each read the other's tensors; constructs must nest")
        s.parent[c] = min(outer, key=lambda o: len(s.inside[o]), default=None)
    for n in nodes:
        holders = sorted((c for c, ins in s.inside.items() if n.index in ins), key=lambda c: len(s.inside[c]))
        for a, b in zip(holders, holders[1:]):
            if not s.inside[a] <= s.inside[b]:
                _fail(f"layer '{n.name}' reads tensors of {s.what(a)} and of {s.what(b)}, which do not nest")
        s.home[n.index] = holders[0] if holders else None
    for n in nodes:
        for i in getattr(n.cls, "_OUTSIDE_INPUTS", ()):
            t = n.inputs[i] if i < len(n.inputs) else None
            p = s.producer.get(t)
            if p is not None and p in s.inside[n.construct] and not s.is_exit_of(p, n.construct):
                _fail(f"layer '{n.name}': input {i} is computed inside {s.what(n.construct)}; it must come from "
                      "outside the construct")
        for t in n.outputs:
            c = s.scope_of_tensor(t)
            if t in outputs and c is not None:
                _fail(f"layer '{n.name}': its output is computed inside {s.what(c)} and marked as a network "
                      "output; a value leaves a construct only through its output layers")
    return s


def _units(s: Scopes, c) -> tuple[list, dict]:
    """The steps directly inside construct `c` (None: the network), topologically ordered (back edges
    ignored), and {step: node indices it runs} (a nested construct: every layer inside it)."""
    nodes_of: dict = {}
    for n in s.nodes:
        if s.home[n.index] == c:
            nodes_of[n.index] = [n.index]
    for child, parent in s.parent.items():
        if parent == c:
            nodes_of[child] = sorted(s.inside[child])
    unit_of = {}
    for u, idx in nodes_of.items():
        for i in idx:
            unit_of.setdefault(i, u)
    deps = {}
    for u, idx in nodes_of.items():
        d = set()
        for i in idx:
            n = s.nodes[i]
            for k, t in enumerate(n.inputs):
                p = s.producer.get(t)
                if p is None or k in n.back_edges or p in idx:
                    continue
                if p in unit_of and unit_of[p] != u:
                    d.add(unit_of[p])
        deps[u] = d
    first = {u: min(idx) for u, idx in nodes_of.items()}  # ties keep the layers' order
    users = defaultdict(list)
    for u, d in deps.items():
        for v in d:
            users[v].append(u)
    waiting = {u: len(d) for u, d in deps.items()}
    ready = [(first[u], i, u) for i, u in enumerate(nodes_of) if not waiting[u]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, u = heapq.heappop(ready)
        order.append(u)
        for v in users[u]:
            waiting[v] -= 1
            if not waiting[v]:
                heapq.heappush(ready, (first[v], len(order) + len(nodes_of), v))
    if len(order) < len(nodes_of):
        stuck = next(u for u in nodes_of if waiting[u])
        _fail(f"{s.what(stuck) if stuck in s.members else 'a construct'} reads a value computed from its own output")
    return order, nodes_of


def _steps(s: Scopes, c) -> list:
    order, nodes_of = _units(s, c)
    out = []
    for u in order:
        if isinstance(u, int):
            out.append(u)
        else:
            cls = s.nodes[s.members[u][0]].cls
            out.append(cls._REGION(s, u, *_units(s, u), _steps(s, u)))
    return out


def build_steps(nodes: list[Node], outputs: set) -> list:
    """The step tree of a network: layer indices and Regions, in an order that runs."""
    if not any(n.construct is not None for n in nodes):
        return [n.index for n in nodes]
    s = analyse(nodes, outputs)
    return _steps(s, None)


def _nodes(layers) -> list[Node]:
    return [Node(k, type(layer), layer._params, layer.name, [None if t is None else id(t) for t in layer._inputs],
                 [id(t) for t in layer._outputs]) for k, layer in enumerate(layers)]


def network_steps(network, layers) -> list:
    """build_steps for `layers` (a network's needed layers, in order); raises NetworkError."""
    return build_steps(_nodes(layers), {id(t) for t in network._outputs})


def tensors_inside(layers) -> set:
    """The ids of the tensors of `layers` computed inside an if-conditional or a loop (for an ONNX export of every
    layer output, which can show only the others as graph outputs)."""
    nodes = _nodes(layers)
    s = analyse(nodes, set())
    return {t for n in nodes for t in n.outputs if s.scope_of_tensor(t) is not None}


class Region:
    """A construct as a step. `s`: the analysis; `c`: the construct; `order`/`nodes_of`: its direct
    units (as _units gives them); `steps`: the same units as runnable steps (Regions for nested
    constructs). Subclasses check the construct's rules in __init__ and run it in `run`."""

    def __init__(self, s: Scopes, c, order: list, nodes_of: dict, steps: list):
        self.construct, self.steps = c, steps
        self.nodes = {i: s.nodes[i] for i in s.members[c]}
        self.what = s.what(c)
        self.units = list(zip(order, steps))
        self.nodes_of = nodes_of

    def run(self, values: dict, run_node) -> None:  # pragma: no cover - every construct defines it
        raise NotImplementedError


def execute(steps: list, values: dict, run_node) -> None:
    """Run steps in order: run_node(index, values) for a layer, Region.run for a construct."""
    for step in steps:
        if isinstance(step, int):
            run_node(step, values)
        else:
            step.run(values, run_node)

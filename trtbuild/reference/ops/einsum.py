"""IEinsumLayer: a sum of products over the inputs' dimensions, written in the Einstein summation convention
(ONNX Einsum, torch.einsum).

TensorRT's rules: one subscript (an ASCII lower-case letter) per input dimension, the terms separated by commas,
one term per input; "->" and the output subscripts give the output (explicit mode), otherwise the subscripts that
appear once in the equation, in alphabetical order (implicit mode); a subscript repeated in one term takes the
diagonal; a subscript missing from the output is summed; spaces (0x20) may stand anywhere; "..." stands for the
dimensions not named (broadcast). Dimensions with one subscript in different inputs must match or be 1
(broadcast); within one input they must match. Every input has one type, FLOAT, HALF or BF16; the output has it.

The 11.4 docstring also says "Note that TensorRT does not support ellipsis or diagonal operations", yet lists
"...ii->...i" as an example, and TensorRT-RTX 1.7 builds both, and any number of inputs: the reference takes
them too. As in TensorRT-RTX, every term with an ellipsis covers the same number of dimensions, in implicit mode
the ellipsis dimensions lead the output, and with one or two inputs the output may name an ellipsis only where an
input has one (with more, TensorRT-RTX takes it as no dimensions); a subscript repeated in one input (a diagonal)
has the size it has in the first input that names it (no broadcasting from 1 there).
A subscript repeated over a dynamic and a static dimension is refused (TensorRT-RTX checks it against the
optimization profile; TensorRT's operator page: "The dimensions labeled with the same subscript must match").
The equation is checked when it is set (TensorRT-RTX refuses it there: characters, arrow, terms per input) and
against the input shapes when the layer is used. Values are computed in float32 and rounded at the output.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core import ITensor, NetworkError
from ..enums import LayerType
from .base import ILayer
from .common import FLOATS, f32, fail, same_types
from .registry import register

ELLIPSIS = "..."


@dataclass(frozen=True)
class Equation:
    """A parsed equation: each input's subscripts ("..." one item), and the output's (implicit ones filled in)."""

    terms: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    explicit: bool


def _term(text: str, where: str) -> tuple[str, ...]:
    items, i = [], 0
    while i < len(text):
        if text.startswith(ELLIPSIS, i):
            items.append(ELLIPSIS)
            i += 3
        elif text[i] in string.ascii_lowercase:
            items.append(text[i])
            i += 1
        else:
            raise ValueError(f"character {text[i]!r} in the {where}: subscripts must be ASCII lower-case letters "
                             "(with ',', '->', '...' and spaces)")
    if items.count(ELLIPSIS) > 1:
        raise ValueError(f"the {where} has more than one ellipsis")
    return tuple(items)


def parse(equation: str, num_inputs: int) -> Equation:
    """The equation's terms; ValueError (one sentence) where TensorRT refuses its syntax or term count."""
    text = equation.replace(" ", "")
    if text.count("->") > 1:
        raise ValueError("the equation has more than one '->'")
    lhs, arrow, rhs = text.partition("->")
    terms = tuple(_term(t, f"input term {k}") for k, t in enumerate(lhs.split(",")))
    if len(terms) != num_inputs:
        raise ValueError(f"the equation has {len(terms)} input terms but the layer has {num_inputs} inputs")
    letters = [s for t in terms for s in t if s != ELLIPSIS]
    has_ellipsis = any(ELLIPSIS in t for t in terms)
    if not arrow:
        once = sorted(s for s in set(letters) if letters.count(s) == 1)
        return Equation(terms, ((ELLIPSIS,) if has_ellipsis else ()) + tuple(once), False)
    out = _term(rhs, "output term")
    for s in out:
        if s != ELLIPSIS and s not in letters:
            raise ValueError(f"the output subscript {s} appears in no input term")
        if s != ELLIPSIS and out.count(s) > 1:
            raise ValueError(f"the output subscript {s} is repeated")
    if ELLIPSIS in out and not has_ellipsis and num_inputs <= 2:  # with more, TensorRT-RTX takes it (no dimensions)
        raise ValueError("the output has an ellipsis but no input term has one (TensorRT-RTX refuses that for one or "
                         "two inputs)")
    return Equation(terms, out, True)


def stored(equation: str, num_inputs: int) -> str:
    """The equation as the layer keeps it: TensorRT-RTX drops an output ellipsis that no input has (it takes one
    with three or more inputs, as no dimensions), and reads the equation back without it."""
    eq = parse(equation, num_inputs)
    if not eq.explicit or ELLIPSIS not in eq.output or any(ELLIPSIS in t for t in eq.terms):
        return equation
    lhs, _, rhs = equation.partition("->")
    return f"{lhs}->{rhs.replace(ELLIPSIS, '')}"


def _merge(a: int, b: int) -> int | None:
    """The broadcast size of two dimensions (-1: dynamic), or None where they do not broadcast."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    if a < 0 or b < 0:
        return max(a, b)
    return None


def _sizes(name, eq: Equation, shapes) -> tuple[dict[str, int], list[int], list[dict[str, int]]]:
    """{subscript: size} and the ellipsis dimensions' sizes, broadcast over the inputs, and each input's own
    {subscript: size} (the ellipsis dimensions as subscripts "...0", "...1", ...)."""
    sizes: dict[str, int] = {}
    ell: list[int] | None = None
    own: list[dict[str, int]] = []
    first: dict[str, int] = {}  # each subscript's size in the first input that has it
    for k, (term, shape) in enumerate(zip(eq.terms, shapes)):
        named = [s for s in term if s != ELLIPSIS]
        n_ell = len(shape) - len(named)
        if (ELLIPSIS in term and n_ell < 0) or (ELLIPSIS not in term and n_ell != 0):
            fail(name, f"input {k} {tuple(shape)} has rank {len(shape)} but its term '{''.join(term)}' names "
                       f"{len(named)} dimensions")
        dims = list(shape)
        seen: dict[str, int] = {}
        if ELLIPSIS in term:
            at = term.index(ELLIPSIS)
            e = dims[at:at + n_ell]
            if ell is not None and len(ell) != len(e):
                fail(name, f"the ellipsis of input {k} covers {len(e)} dimensions but an earlier one covers "
                           f"{len(ell)}; every ellipsis must cover the same number")
            merged = e if ell is None else [_merge(a, b) for a, b in zip(ell, e)]
            if None in merged:
                fail(name, f"the ellipsis dimensions {tuple(e)} of input {k} do not broadcast with {tuple(ell)}")
            ell = merged
            dims = dims[:at] + dims[at + n_ell:]
            seen.update((f"{ELLIPSIS}{j}", d) for j, d in enumerate(e))
        for s, d in zip(named, dims):
            if s in seen and seen[s] != d and min(seen[s], d) < 0:
                fail(name, f"subscript {s} repeats in input {k} {tuple(shape)} over a dynamic and a static dimension; "
                           "the reference needs a diagonal's sizes equal at build time (TensorRT: \"The dimensions "
                           "labeled with the same subscript must match.\")")
            if s in seen and seen[s] != d:
                fail(name, f"subscript {s} repeats in input {k} {tuple(shape)} over dimensions of sizes {seen[s]} and "
                           f"{d}; a diagonal needs equal sizes")
            if s in seen and s in first and first[s] != d and min(first[s], d) >= 0:
                fail(name, f"subscript {s} repeats in input {k} over size {d} but has size {first[s]} where it first "
                           "appears; TensorRT-RTX does not broadcast a diagonal's subscript")
            seen[s] = d
            m = _merge(sizes.get(s, d), d)
            if m is None:
                fail(name, f"subscript {s} has size {d} in input {k} but {sizes[s]} in an earlier input; they must "
                           "match or be 1")
            sizes[s] = m
        own.append(seen)
        first.update((s, d) for s, d in seen.items() if s not in first and not s.startswith(ELLIPSIS))
    return sizes, ell or [], own


def _pairwise(name, eq: Equation, sizes: dict[str, int], own: list[dict[str, int]]) -> None:
    """TensorRT-RTX 1.7 contracts three or more inputs pairwise from the left, and its build fails where an
    intermediate result keeps a subscript (one in the output or a later input) that the inputs so far have only
    at size 1 while a later input broadcasts it ('i,i,i->i' with sizes 1, 1, 3): refused here, as there."""
    for m in range(1, len(own) - 1):
        kept = {s for d in own[m + 1:] for s in d} | {s for s in eq.output if s != ELLIPSIS}
        if ELLIPSIS in eq.output:
            kept |= {s for d in own for s in d if s.startswith(ELLIPSIS)}
        so_far: dict[str, int] = {}
        for d in own[:m + 1]:
            for s, n in d.items():
                so_far[s] = max(so_far.get(s, n), n)
        for s in sorted(kept & set(so_far)):
            full = sizes.get(s, so_far[s]) if not s.startswith(ELLIPSIS) else max(d.get(s, 1) for d in own)
            if so_far[s] == 1 and full > 1:
                what = f"ellipsis dimension {s[3:]}" if s.startswith(ELLIPSIS) else f"subscript {s}"
                fail(name, f"{what} has size 1 in inputs 0..{m} and is broadcast to {full} by a later input; "
                           "TensorRT-RTX contracts the inputs pairwise from the left and cannot build that")


class IEinsumLayer(ILayer):
    _TYPE = LayerType.EINSUM
    _MAX_INPUTS = 1 << 20  # any number of inputs, one term each

    @property
    def equation(self) -> str:
        return self._params["equation"]

    @equation.setter
    def equation(self, value) -> None:
        if not isinstance(value, str):
            raise TypeError(f"layer '{self.name}': equation = {value!r}: incompatible function arguments: a str is "
                            f"needed, got {type(value).__name__}")
        try:
            parse(value, self.num_inputs)
        except ValueError as e:
            raise NetworkError(f"layer '{self.name}': equation = {value!r} is refused: {e}") from None
        self._params["equation"] = stored(value, self.num_inputs)
        self._network._touch()

    @classmethod
    def _type_label(cls) -> str:
        return "Einsum"


def infer(p, w, shapes, dtypes, name, plugin):
    for k, dt in enumerate(dtypes):
        if dt not in FLOATS:
            fail(name, f"input {k} has type {dt.name}; an einsum takes FLOAT, HALF or BF16")
    same_types(name, dtypes)
    try:
        eq = parse(p["equation"], len(shapes))
    except ValueError as e:
        fail(name, f"equation {p['equation']!r}: {e}")
    sizes, ell, own = _sizes(name, eq, shapes)
    _pairwise(name, eq, sizes, own)
    out = []
    for s in eq.output:
        out += ell if s == ELLIPSIS else [sizes[s]]
    return [tuple(out)], [dtypes[0]]


def run(p, w, inputs, plugin):
    """torch.einsum with the ellipsis spelled out as upper-case subscripts and size-1 dimensions expanded where
    another input broadcasts them."""
    eq = parse(p["equation"], len(inputs))
    sizes, ell, _ = _sizes("", eq, [tuple(x.shape) for x in inputs])
    ell_letters = tuple(string.ascii_uppercase[:len(ell)])
    sizes.update(zip(ell_letters, ell))

    def spell(term):
        return "".join("".join(ell_letters) if s == ELLIPSIS else s for s in term)

    operands = []
    for term, x in zip(eq.terms, inputs):
        subs = spell(term)
        operands.append(f32(x).expand([sizes[s] for s in subs]))
    spec = ",".join(spell(t) for t in eq.terms) + "->" + spell(eq.output)
    return [torch.einsum(spec, *operands)]


def add_einsum(self, inputs: Sequence[ITensor], equation: str | None) -> IEinsumLayer | None:
    """TensorRT refuses an equation whose syntax or number of terms is wrong when the layer is added (and refuses a
    layer without inputs)."""
    inputs = list(inputs)
    if not inputs:
        raise NetworkError("add_einsum: an einsum needs at least one input")
    if equation is None:  # TensorRT's binding passes a null pointer: logged, and no layer
        self._api_usage_error("INetworkDefinition::addEinsum: Error Code 3: API Usage Error (Parameter check failed, "
                              "condition: (equation) != nullptr.)")
        return None
    if not isinstance(equation, str):
        raise TypeError(f"add_einsum: incompatible function arguments: equation must be a str, got "
                        f"{type(equation).__name__}")
    try:
        parse(equation, len(inputs))
    except ValueError as e:
        raise NetworkError(f"add_einsum: equation {equation!r} is refused: {e}") from None
    return self._add(IEinsumLayer, inputs, {"equation": stored(equation, len(inputs))})


register(IEinsumLayer, infer, run, adds=(add_einsum,))

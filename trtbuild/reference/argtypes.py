"""Arguments of the reference's API methods, taken as TensorRT's pybind11 bindings take them.

`@api_types` on a class wraps each public method whose parameters are annotated with TensorRT's types
(the annotations are the table: `def add_activation(self, input: ITensor, type: ActivationType)`).
Before the method body runs, each argument given is checked, and converted as pybind11's casters
convert it (checked against TensorRT-RTX 1.7.1.116, tests/reference/test_argtypes.py):

- an enum (ActivationType, DataType, ...) takes only a member of that enum: `1` is refused;
- `int` takes an integer (bool, numpy integers, objects with __index__ or __int__), never a Python
  float (numpy float64 is one) or None; `float` takes any real number (what has __float__ or
  __index__), not None or a str; `bool` takes None (False) and what has a truth value as a number
  (not a str, tuple or list);
- `str` takes a str or bytes (decoded); `Dims` takes Dims or a sequence of integers (not a bare
  integer, a str or bytes, floats refused); `ITensor` (and any other API class) an instance of the
  reference's class; `Sequence[ITensor]` a list or tuple of them; `Sequence[int]` a sequence of what `int`
  takes; `Weights` Weights or a numpy array;
  `Buffer` anything with the buffer protocol;
- `X | None` also takes None (TensorRT's null pointer, which the method then handles).

Anything else raises TypeError("<Class>.<method>(): incompatible function arguments: <param> must be
<type>, got <type name>"), as the bindings raise a TypeError. Unannotated parameters are not checked
(tests/reference/test_argtypes.py requires an annotation wherever TensorRT-RTX has the method). The check costs a
few microseconds per call.
"""

from __future__ import annotations

import enum
import functools
import inspect

import numpy as np

_BAD = object()  # a converter's answer for a value of the wrong kind


def _number(v, to, accepts):
    """`v` as `to` (int or float) where pybind11's caster takes it (`accepts(v)`), else _BAD."""
    if type(v) is to:
        return v
    if not accepts(v):
        return _BAD
    try:
        return to(v)
    except (TypeError, ValueError, OverflowError):
        return _BAD


def _int(v):  # an integer, or what has __index__/__int__ (np.float32 truncates); never a Python float
    return _number(v, int, lambda v: not isinstance(v, float) and (hasattr(type(v), "__index__")
                                                                   or hasattr(type(v), "__int__")))


def _float(v):  # any real number
    return _number(v, float, lambda v: hasattr(type(v), "__float__") or hasattr(type(v), "__index__"))


def _bool(v):
    if v is True or v is False:
        return v
    if v is None:
        return False
    # pybind11's enums have no truth value
    if not hasattr(type(v), "__bool__") or isinstance(v, (str, bytes, enum.Enum)):
        return _BAD
    try:
        return bool(v)
    except (TypeError, ValueError):
        return _BAD


def _str(v):
    if type(v) is str:
        return v
    if isinstance(v, str):
        return str(v)
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return _BAD
    return _BAD


def is_sequence(v) -> bool:
    """pybind11's sequence caster: a sequence that is no str, bytes or mapping (a 1-D array is one)."""
    if isinstance(v, (tuple, list)):
        return True
    t = type(v)
    return (hasattr(t, "__getitem__") and hasattr(t, "__len__") and not isinstance(v, (str, bytes, dict))
            and not (isinstance(v, np.ndarray) and v.ndim != 1))


def is_index(d) -> bool:
    """An integer as pybind11 takes one in a Dims argument: no float (numpy's included), anything with __index__."""
    return type(d) is int or (not isinstance(d, (float, np.floating)) and hasattr(type(d), "__index__"))


def _dims(v):
    from .core import Dims

    if type(v) is Dims:
        return v
    if not is_sequence(v) or not all(is_index(d) for d in v):  # an argument's dims take no np.float32 (Dims() does)
        return _BAD
    try:
        return Dims(v)
    except TypeError:
        return _BAD


def _buffer(v):
    try:
        memoryview(v)
    except TypeError:
        return _BAD
    return v


def _weights(v):
    from .core import Weights

    return v if isinstance(v, (Weights, np.ndarray)) else _BAD


def _ints(v):
    """A sequence of integers (`Sequence[int]`: set_shape_input's values), each taken as `int` takes it."""
    if not is_sequence(v):
        return _BAD
    items = [_int(d) for d in v]
    return _BAD if any(d is _BAD for d in items) else items


def _instance(cls):
    def convert(v):
        return v if isinstance(v, cls) else _BAD
    return convert


def _tensors(v):
    from .core import ITensor

    if not is_sequence(v) or isinstance(v, np.ndarray):
        return _BAD
    items = list(v)
    return items if all(t is None or isinstance(t, ITensor) for t in items) else _BAD


#: converters of layer attributes' kinds (layers._setter_value), the same casters
CONVERTERS = {"int": _int, "float": _float, "bool": _bool, "dims": _dims}
BAD = _BAD

_KINDS = {"int": _int, "float": _float, "bool": _bool, "str": _str, "Dims": _dims, "Buffer": _buffer,
          "Weights": _weights, "Sequence[ITensor]": _tensors, "Sequence[int]": _ints}


def _resolve(annotation: str):
    """The converter of an annotation ("int", "ActivationType", "Weights | None", ...)."""
    text = annotation.strip()
    optional = text.endswith("| None")
    if optional:
        text = text[: -len("| None")].strip()
    convert = _KINDS.get(text)
    if convert is None:
        import trtbuild.reference as reference

        cls = reference
        for part in text.split("."):
            cls = getattr(cls, part, None)
        if not isinstance(cls, type):
            raise TypeError(f"api_types: unknown parameter type {annotation!r}")
        convert = _instance(cls)
    if optional:
        inner = convert

        def convert(v):
            return None if v is None else inner(v)
    return text, convert


def annotated_parameters(fn) -> dict[str, str]:
    """{parameter: annotation text} of a method (without self), in order; unannotated ones omitted."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    return {p.name: p.annotation.strip("'\"") for p in params if p.annotation is not inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _wrap(owner: str, fn):
    params = [p for p in list(inspect.signature(fn).parameters.values())[1:]]
    names = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    annotations = annotated_parameters(fn)
    where = owner if fn.__name__ == "__init__" else f"{owner}.{fn.__name__}"
    what = "constructor" if fn.__name__ == "__init__" else "function"
    state: list = []

    def spec():
        if not state:
            resolved = {name: _resolve(text) for name, text in annotations.items()}
            state.append(([resolved.get(n) for n in names], resolved))
        return state[0]

    def refuse(name, text, value):
        return TypeError(f"{where}(): incompatible {what} arguments: {name} must be {text}, got {type(value).__name__}")

    @functools.wraps(fn)
    def checked(self, *args, **kwargs):
        positional, by_name = state[0] if state else spec()
        if len(args) <= len(positional):
            args = list(args)
            for i, value in enumerate(args):
                kind = positional[i]
                if kind is not None:
                    got = kind[1](value)
                    if got is _BAD:
                        raise refuse(names[i], kind[0], value)
                    args[i] = got
        if kwargs:
            for name, value in kwargs.items():
                kind = by_name.get(name)
                if kind is not None:
                    got = kind[1](value)
                    if got is _BAD:
                        raise refuse(name, kind[0], value)
                    kwargs[name] = got
        return fn(self, *args, **kwargs)

    checked.__api_types__ = annotations
    return checked


def api_types(cls=None, *, constructor: bool = False):
    """Class decorator: check the annotated arguments of every public method (inherited ones too) as
    TensorRT's bindings do; see the module docstring. `@api_types(constructor=True)` checks __init__ too."""
    if cls is None:
        return lambda c: api_types(c, constructor=constructor)
    seen = set()
    for klass in cls.__mro__[:-1]:
        for name, fn in vars(klass).items():
            wanted = not name.startswith("_") or (constructor and name == "__init__")
            if name in seen or not wanted or not inspect.isfunction(fn):
                continue
            seen.add(name)
            if getattr(fn, "__api_types__", None) is not None:
                fn = fn.__wrapped__
            if annotated_parameters(fn):
                setattr(cls, name, _wrap(cls.__name__, fn))
    return cls

"""Dump the API of NVIDIA's TensorRT Python bindings as JSON (run in a subprocess).

Usage: python dump_api.py  (with the bindings importable as `tensorrt_bindings`; see
trt_bindings.py). Prints one JSON object:

    {"version": "11.4.0.106",
     "classes": {"INetworkDefinition": {"kind": "class", "members": {
                     "add_scale": {"kind": "method", "overloads": [[["input", false], ["mode", false], ...]]},
                     "name": {"kind": "property"}, ...}},
                 "ScaleMode": {"kind": "enum", "enum": {"UNIFORM": 0, ...}, "members": {...}},
                 "ILogger.Severity": {...}},
     "functions": {"nptype": [[["trt_type", false]]], ...},
     "values": {"float32": {"type": "DataType", "int": 0}, ...}}

Each overload is a list of [parameter name, has default] pairs, without `self`. pybind11's
signatures are parsed from the first line of __doc__ (`name(self: T, a: T, b: T = d) -> R`) or,
for "Overloaded function." docs, from every numbered `N. name(...)` line. The parser needs no
TensorRT, so the test suite also unit-tests it.
"""

from __future__ import annotations

import inspect
import json
import re
import sys

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets and quotes (defaults such as <DataType.FLOAT: 0>, types
    such as Dict[str, int] and strings such as ', ' stay whole)."""
    parts, depth, quote, cur = [], [], None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth.append(_OPEN[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif ch == sep and not depth:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _param_list(line: str, name: str) -> str | None:
    """The text between the parentheses of `name(...)` at the start of `line`."""
    m = re.match(rf"\s*(?:\d+\.\s*)?{re.escape(name)}\(", line)
    if not m:
        return None
    depth, start = 1, m.end()
    quote = None
    for i in range(start, len(line)):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return line[start:i]
    return None


def parse_params(params_text: str) -> list[list]:
    """[[name, has_default], ...] of one pybind11 parameter list, without `self`."""
    out = []
    for part in _split_top_level(params_text):
        name = re.split(r"[:=]", part, maxsplit=1)[0].strip()
        if name == "self":
            continue
        rest = part[len(name):]
        # a default is a top-level '=' after the annotation
        has_default = any(seg for seg in _split_top_level(rest, "=")[1:]) or rest.lstrip().startswith("=")
        out.append([name, bool(has_default)])
    return out


def parse_pybind_doc(name: str, doc: str | None) -> list[list[list]] | None:
    """Every overload of `name` documented in a pybind11 docstring, or None if the docstring
    holds no signature for it."""
    if not doc:
        return None
    lines = doc.splitlines()
    if len(lines) > 1 and lines[1].strip() == "Overloaded function.":
        overloads = []
        for line in lines[2:]:
            if re.match(rf"\s*\d+\.\s*{re.escape(name)}\(", line):
                text = _param_list(line, name)
                if text is not None:
                    overloads.append(parse_params(text))
        return overloads or None
    text = _param_list(lines[0], name)
    return None if text is None else [parse_params(text)]


def _python_signature(fn) -> list[list[list]] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = [p for p in sig.parameters.values() if p.name != "self"]
    return [[[("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "") + p.name,
              p.default is not p.empty] for p in params]]


def _is_enum(cls) -> bool:
    return isinstance(getattr(cls, "__members__", None), dict) and all(
        isinstance(v, cls) for v in cls.__members__.values())


def _member(cls, attr: str):
    try:
        raw = inspect.getattr_static(cls, attr)
    except AttributeError:
        raw = getattr(cls, attr, None)
    if isinstance(raw, (property,)) or type(raw).__name__ == "pybind11_static_property":
        return {"kind": "property"}
    value = getattr(cls, attr, None)
    if isinstance(value, type):
        return {"kind": "class"}
    if _is_enum(cls) and attr in cls.__members__:
        return {"kind": "enum_member", "value": int(cls.__members__[attr])}
    if callable(value):
        doc = getattr(value, "__doc__", None)
        overloads = parse_pybind_doc(attr, doc) if type(value).__name__ in (
            "instancemethod", "builtin_function_or_method") else _python_signature(value)
        return {"kind": "method", "overloads": overloads}
    entry = {"kind": "value"}
    if isinstance(value, int):
        entry["int"] = int(value)
    return entry


def _dump_class(cls) -> dict:
    members = {}
    for attr in dir(cls):
        if attr.startswith("_"):
            continue
        members[attr] = _member(cls, attr)
    init_doc = getattr(cls.__init__, "__doc__", None)
    entry = {"kind": "enum" if _is_enum(cls) else "class", "members": members,
             "init": parse_pybind_doc("__init__", init_doc), "bases": [b.__name__ for b in cls.__mro__[1:]]}
    if entry["kind"] == "enum":
        entry["enum"] = {k: int(v) for k, v in cls.__members__.items()}
    return entry


def dump(module) -> dict:
    """The JSON-friendly API description of a TensorRT bindings module."""
    classes, functions, values = {}, {}, {}
    pending = [(n, getattr(module, n)) for n in dir(module) if not n.startswith("_")]
    while pending:
        name, obj = pending.pop()
        if isinstance(obj, type):
            if name in classes:
                continue
            classes[name] = _dump_class(obj)
            for attr in dir(obj):
                nested = getattr(obj, attr, None)
                if not attr.startswith("_") and isinstance(nested, type) and nested.__qualname__.endswith(attr):
                    pending.append((f"{name}.{attr}", nested))
        elif callable(obj):
            sig = parse_pybind_doc(name, obj.__doc__) if type(obj).__name__ == "builtin_function_or_method" \
                else _python_signature(obj)
            functions[name] = sig
        else:
            entry = {"type": type(obj).__name__}
            try:
                entry["int"] = int(obj)
            except (TypeError, ValueError):
                pass
            values[name] = entry
    return {"version": getattr(module, "__version__", "?"), "classes": classes, "functions": functions,
            "values": values}


if __name__ == "__main__":
    import tensorrt_bindings

    json.dump(dump(tensorrt_bindings), sys.stdout, sort_keys=True)

"""The differences between two EngineReports (`trtbuild inspect A B`): what changed between two builds.

Layers and I/O tensors are matched by name, weights by name and, where a weight's name changed, by the layer and
role holding it (a rename). The sidecar is compared field by field, except its build time ("created"), which
differs between any two builds, so that an engine rebuilt from the same network and weights compares equal.

Sidecar values are compared down to their leaves, so that a changed refit record reads as the one field that
changed rather than two whole records of hundreds of weights. A difference's item is the path to the value:
dict keys joined by dots (``refit.mode``; a key that is not a plain identifier, such as a state_dict key, in
brackets: ``refit.built[conv1.weight]``), entries of a list of dicts that all have a distinct "name" by that name
(``refit.weights[fc.weight].keys``: entries are matched by name, so an added weight is one difference, not a
shifted list), entries of other lists of the same length holding dicts or lists by index (``profiles[1].input.max``).
Lists longer than LONG_LIST items read as "[N items] -> [M items], first difference at index I".

JSON (``trtbuild inspect A B --json``): {"a": path, "b": path, "equal": bool, "differences": [{"section",
"item", "a", "b", "change"}]}, one object per Difference; "a" and "b" are the whole values at the item's path (null
where the value is only in the other engine), whatever the text shortens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .inspect import EngineReport

#: sidecar fields that differ between two builds of the same thing
VOLATILE_SIDECAR_FIELDS = frozenset({"created"})
#: lists and dicts longer than this are shown by their length, not their items
LONG_LIST = 8
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Difference:
    """One difference: the section ("engine", "io", "profile", "layer", "weight", "sidecar"), what differs
    (a tensor, layer or weight name and the field; in the sidecar, the path to the value), the values in A and B
    and the change: "changed", "removed" (only in A) or "added" (only in B)."""

    section: str
    item: str
    a: object
    b: object
    change: str = "changed"

    def text(self) -> str:
        if self.change == "added":
            return f"{self.section} {self.item}: only in B ({_show(self.b)})"
        if self.change == "removed":
            return f"{self.section} {self.item}: only in A ({_show(self.a)})"
        if _is_list(self.a) and _is_list(self.b) and max(len(self.a), len(self.b)) > LONG_LIST:
            first = next((i for i, (x, y) in enumerate(zip(self.a, self.b)) if x != y), min(len(self.a), len(self.b)))
            return (f"{self.section} {self.item}: [{len(self.a)} items] -> [{len(self.b)} items], "
                    f"first difference at index {first}")
        return f"{self.section} {self.item}: {_show(self.a)} -> {_show(self.b)}"


def _only(section: str, item: str, in_a: bool, value) -> Difference:
    return Difference(section, item, value if in_a else None, None if in_a else value,
                      "removed" if in_a else "added")


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple))


def _show(value) -> str:
    if _is_list(value):
        return f"[{len(value)} items]" if len(value) > LONG_LIST else "[" + ",".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        if len(value) > LONG_LIST:
            return f"{{{len(value)} entries}}"
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def _fields(out: list, section: str, name: str, a: dict, b: dict) -> None:
    for key in a:
        if a[key] != b[key]:
            out.append(Difference(section, f"{name} {key}", a[key], b[key]))


def _io(a: EngineReport, b: EngineReport, out: list) -> None:
    ta, tb = {t.name: t for t in a.io}, {t.name: t for t in b.io}
    for name in [*ta, *(n for n in tb if n not in ta)]:
        if name not in tb or name not in ta:
            t = ta.get(name) or tb[name]
            shown = f"{t.mode} {_show(t.shape)} {t.dtype}"
            out.append(_only("io", name, name in ta, shown))
            continue
        x, y = ta[name], tb[name]
        _fields(out, "io", name, {"mode": x.mode, "shape": x.shape, "dtype": x.dtype},
                {"mode": y.mode, "shape": y.shape, "dtype": y.dtype})
        px = [(p.min, p.opt, p.max) for p in x.profiles]
        py = [(p.min, p.opt, p.max) for p in y.profiles]
        if px != py:
            out.append(Difference("profile", name, [" / ".join(map(_show, p)) for p in px] or "static",
                                  [" / ".join(map(_show, p)) for p in py] or "static"))


def _layers(a: EngineReport, b: EngineReport, out: list) -> None:
    if a.layers is None or b.layers is None:
        if (a.layers is None) != (b.layers is None):
            out.append(Difference("layer", "list", "known" if a.layers is not None else "unknown (not loaded)",
                                  "known" if b.layers is not None else "unknown (not loaded)"))
        return
    la, lb = {x.name: x for x in a.layers}, {x.name: x for x in b.layers}
    for name in la:
        if name not in lb:
            out.append(_only("layer", name, True, la[name].type or "layer"))
    for name in lb:
        if name not in la:
            out.append(_only("layer", name, False, lb[name].type or "layer"))
    for name in (n for n in la if n in lb):
        x, y = la[name], lb[name]
        _fields(out, "layer", name, {"type": x.type, "precision": x.precision},
                {"type": y.type, "precision": y.precision})


def _weights(a: EngineReport, b: EngineReport, out: list) -> None:
    if not (a.loaded and b.loaded):  # an engine not loaded here has no weights to compare ("layer list" says so)
        return
    wa = {w.name: w for w in a.weights if w.name}
    wb = {w.name: w for w in b.weights if w.name}
    slot_b = {(w.layer, w.key): w for w in b.weights if w.layer}
    renamed_in_b = set()
    for name, w in wa.items():
        if name in wb:
            _fields(out, "weight", name, {"refittable": w.refittable, "stripped": w.stripped},
                    {"refittable": wb[name].refittable, "stripped": wb[name].stripped})
            continue
        other = slot_b.get((w.layer, w.key)) if w.layer else None
        if other is not None and other.name and other.name not in wa:
            out.append(Difference("weight", f"{w.layer} {w.key} renamed", name, other.name))
            renamed_in_b.add(other.name)
        else:
            out.append(_only("weight", name, True, w.layer or "weight"))
    for name, w in wb.items():
        if name not in wa and name not in renamed_in_b:
            out.append(_only("weight", name, False, w.layer or "weight"))


def _sidecar(a: EngineReport, b: EngineReport, out: list) -> None:
    sa, sb = a.sidecar or {}, b.sidecar or {}
    if (a.sidecar is None) != (b.sidecar is None):
        out.append(_only("sidecar", "file", a.sidecar is not None, "present"))
        return
    _values(out, "", {k: v for k, v in sa.items() if k not in VOLATILE_SIDECAR_FIELDS},
            {k: v for k, v in sb.items() if k not in VOLATILE_SIDECAR_FIELDS})


def _key(path: str, key) -> str:
    key = str(key)
    if _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def _named(items) -> bool:
    """Whether `items` is a list of dicts that each have a distinct string "name" (matched by it)."""
    names = [x.get("name") if isinstance(x, dict) else None for x in items]
    return all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _values(out: list, path: str, a, b) -> None:
    """The sidecar differences between values `a` and `b` at `path`, down to the leaves that differ."""
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if key not in a or key not in b:
                out.append(_only("sidecar", _key(path, key), key in a, a.get(key, b.get(key))))
            else:
                _values(out, _key(path, key), a[key], b[key])
    elif _is_list(a) and _is_list(b) and (a or b) and _named(a) and _named(b):
        na, nb = {x["name"]: x for x in a}, {x["name"]: x for x in b}
        for name in [*na, *(n for n in nb if n not in na)]:
            if name not in na or name not in nb:
                out.append(_only("sidecar", f"{path}[{name}]", name in na, na.get(name, nb.get(name))))
            else:
                _values(out, f"{path}[{name}]", na[name], nb[name])
        order_a, order_b = [n for n in na if n in nb], [n for n in nb if n in na]
        if order_a != order_b:
            out.append(Difference("sidecar", f"{path} order", order_a, order_b))
    elif (_is_list(a) and _is_list(b) and len(a) == len(b) <= LONG_LIST
          and all(isinstance(x, (dict, list, tuple)) for x in (*a, *b))):
        for i, (x, y) in enumerate(zip(a, b)):
            _values(out, f"{path}[{i}]", x, y)
    else:
        out.append(Difference("sidecar", path, a, b))


def diff_reports(a: EngineReport, b: EngineReport) -> list[Difference]:
    """Every difference between engines A and B, section by section (empty: they are equal as far as the
    reports tell)."""
    out: list[Difference] = []

    def engine_fields(r: EngineReport) -> dict:
        unknown = "unknown (not loaded)"
        return {"backend": r.backend, "version": r.version, "targets": r.targets, "plan_bytes": r.plan_bytes,
                "refittable": unknown if r.refittable is None else r.refittable,
                "stripped": unknown if r.stripped is None else r.stripped,
                "layers": unknown if r.num_layers is None else r.num_layers,
                "version_compatible": "not recorded" if r.version_compatible is None else r.version_compatible,
                "lean_runtime": "not recorded" if r.lean_runtime is None else r.lean_runtime,
                "hardware_compat": r.hardware_compat or "not recorded"}

    _fields(out, "engine", "", engine_fields(a), engine_fields(b))
    out[:] = [Difference(d.section, d.item.strip(), d.a, d.b, d.change) for d in out]
    _io(a, b, out)
    _layers(a, b, out)
    _weights(a, b, out)
    _sidecar(a, b, out)
    return out

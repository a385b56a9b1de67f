"""Compare the reference surface (reference_surface.py) with a real dump (dump_api.py).

Every function returns a list of problems (strings); empty means conformant.
"""

from __future__ import annotations

import re

_POSITIONAL_ONLY = re.compile(r"arg\d+$")  # pybind11's name for an unnamed (positional-only) parameter

#: Reference kind -> real kinds it may stand for.
_COMPATIBLE = {
    "method": {"method"},
    "property": {"property", "value", "enum_member"},
    "instance attribute": {"property", "value"},
    "value": {"property", "value", "enum_member"},
    "class": {"class"},
}


def names_match(ref_params: list, overload: list) -> bool:
    """The reference's parameter names equal the overload's, except that the reference may omit
    trailing parameters that have defaults in the overload. pybind11's `argN` (positional-only)
    matches any name; *args/**kwargs only match themselves."""
    if len(ref_params) > len(overload):
        return False
    for (ref_name, _), (real_name, _) in zip(ref_params, overload):
        if ref_name != real_name and not (_POSITIONAL_ONLY.match(real_name) and not ref_name.startswith("*")):
            return False
    return all(has_default for _, has_default in overload[len(ref_params):])


def default_problems(ref_params: list, overloads: list) -> list[str]:
    """Parameters the reference lets callers omit although no real overload can be called
    without them: for each defaulted reference parameter k, the call with only the first k
    arguments must fit some overload."""
    return [name for k, (name, has_default) in enumerate(ref_params)
            if has_default and not any(names_match(ref_params[:k], ov) for ov in overloads)]


def _fmt(params) -> str:
    return "(" + ", ".join(n + ("=..." if d else "") for n, d in params) + ")"


def member_problems(cls: str, member: str, info: dict, real_class: dict | None, version: str,
                    allow_default=frozenset()) -> list[str]:
    """Problems of one reference member against the real class of one version; `allow_default`
    names parameters the reference may default although TensorRT requires them."""
    where = f"TensorRT {version}: {cls}.{member}"
    if real_class is None:
        return [f"TensorRT {version} has no class {cls}"]
    real = real_class["members"].get(member)
    if real is None:
        return [f"{where} ({info['kind']} defined by the reference in {info.get('owner', cls)}) does not exist"]
    if real["kind"] not in _COMPATIBLE[info["kind"]]:
        return [f"{where} is a {real['kind']} in TensorRT but a {info['kind']} in the reference"]
    if info["kind"] == "method":
        return signature_problems(where, info["params"], real.get("overloads"), allow_default)
    return []


def signature_problems(where: str, ref_params: list, overloads: list | None, allow_default=frozenset()) -> list[str]:
    """Parameter names must match one overload; a reference default must not hide a required parameter."""
    if overloads is None:
        return [f"{where}: no signature could be read from the real docstring"]
    matching = [ov for ov in overloads if names_match(ref_params, ov)]
    if not matching:
        return [f"{where}: reference parameters {_fmt(ref_params)} match no real overload: "
                + " | ".join(_fmt(ov) for ov in overloads)]
    relaxed = [[[n, d or n in allow_default] for n, d in ov] for ov in overloads]
    bad = default_problems(ref_params, relaxed)
    if bad:
        return [f"{where}: the reference gives {bad} a default but TensorRT requires them: "
                + " | ".join(_fmt(ov) for ov in overloads)]
    return []


def enum_problems(cls: str, ref_enum: dict[str, int], real_class: dict | None, version: str,
                  exempt: dict[tuple[str, str], dict[str, int]]) -> list[str]:
    """Every reference member exists in the real enum with the same value (or is in `exempt`)."""
    if real_class is None or "enum" not in real_class:
        return [f"TensorRT {version}: {cls} is not an enum"]
    out = []
    for name, value in ref_enum.items():
        real = real_class["enum"].get(name)
        if (cls, name) in exempt:
            continue
        if real is None:
            out.append(f"TensorRT {version}: {cls}.{name} does not exist")
        elif real != value:
            out.append(f"TensorRT {version}: {cls}.{name} is {real}, the reference says {value}")
    return out

"""Models that installed packages register through the entry-point group ``trtbuild.models``.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."trtbuild.models"]
    mynet = "mypkg.trt:SPEC"          # a ModelSpec, or a callable returning one or a list of them

The registry loads them after the built-in models, the first time it is read. A broken entry point
(import error, wrong kind of object, a name already taken) becomes one line in
``registry.LOAD_ERRORS`` (printed by ``trtbuild models``) and does not hide the others.
"""

from __future__ import annotations

from importlib import metadata

from .registry import LOAD_ERRORS, ModelSpec, ORIGINS, register, unregister

GROUP = "trtbuild.models"
ORIGIN_PREFIX = "entry point "


def _dist_name(ep) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "unknown distribution"


def _specs_of(obj, where: str) -> list[ModelSpec]:
    if callable(obj) and not isinstance(obj, ModelSpec):
        obj = obj()
    specs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    wrong = [type(s).__name__ for s in specs if not isinstance(s, ModelSpec)]
    if wrong or not specs:
        raise TypeError(f"{where} gave {', '.join(wrong) or 'an empty list'}, not a ModelSpec "
                        "(or a callable returning one or a list of them)")
    return specs


def discover(group: str = GROUP) -> tuple[list[tuple[ModelSpec, str]], list[str]]:
    """([(spec, origin)], [error line]) for every entry point of `group`, loaded now."""
    found, errors = [], []
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: (_dist_name(e), e.name)):
        dist = _dist_name(ep)
        where = f"entry point '{ep.name} = {ep.value}' of {dist}"
        try:
            specs = _specs_of(ep.load(), where)
        except Exception as e:  # noqa: BLE001 - any failure of a third-party package is one line
            detail = str(e).splitlines()[0] if str(e) else ""
            errors.append(e.args[0] if isinstance(e, TypeError) and str(e).startswith(where) else
                          f"{where} failed to load: {type(e).__name__}" + (f": {detail}" if detail else ""))
            continue
        found += [(spec, ORIGIN_PREFIX + dist) for spec in specs]
    return found, errors


def register_entry_points(group: str = GROUP) -> list[str]:
    """Register every entry-point model (after removing those registered before, so a changed
    environment is picked up); refresh and return registry.LOAD_ERRORS."""
    for name in [n for n, o in ORIGINS.items() if o.startswith(ORIGIN_PREFIX)]:
        unregister(name)
    found, errors = discover(group)
    for spec, origin in found:
        try:
            register(spec, origin)
        except ValueError as e:
            errors.append(f"{origin}: model '{spec.name}' not registered: {e}")
    LOAD_ERRORS[:] = errors
    return errors

"""``trtbuild inspect ENGINE [ENGINE2]``: what the builder did (I/O, profiles, precision per layer, weights and
refit names, sidecar, version and targets), or the differences between two engines. Reads only; writes nothing."""

from __future__ import annotations

import argparse
import json
import sys

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_BAD_INPUT = 0, 1, 2

#: sidecar fields the report shows in its own sections
_SHOWN_ELSEWHERE = {"inputs", "outputs", "profile", "targets", "tensorrt_version", "backend", "engine_bytes",
                    "build_phases"}


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``inspect``."""
    p = subparsers.add_parser(
        "inspect", help="show what an engine holds, or diff two engines",
        description="Show an engine's I/O tensors, optimization profiles, layers with their precision (output "
                    "types), weights and refit names, sidecar, version and targets; with two engines, print their "
                    "differences. Reference plans are read on any machine; TensorRT and TensorRT-RTX engines are "
                    "deserialized where their backend and GPU are present and otherwise described from their "
                    "sidecar. Exit status: 0 (shown, or the two engines are equal), 1 (the two engines differ), "
                    "2 (a file is missing, not an engine, or truncated). Nothing is written.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("engine", metavar="ENGINE", help="engine file (its sidecar ENGINE.json is read if present)")
    p.add_argument("engine2", metavar="ENGINE2", nargs="?", default=None,
                   help="a second engine: print what differs from ENGINE (exit 1 if anything does)")
    p.add_argument("--json", action="store_true", help="print the report (or the differences) as JSON")
    p.add_argument("--layers", action="store_true", help="also list every layer: type, precision, inputs, "
                                                         "outputs and weight names")
    p.set_defaults(func=run)
    return p


def _shape(shape) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _refit_value(v) -> str:
    """The sidecar's refit record in a line (its per-weight entries are in --json)."""
    if not isinstance(v, dict) or "weights" not in v:
        return _value(v)
    return (f"{v.get('mode')}{', weights stripped' if v.get('stripped') else ''}; {len(v['weights'])} named weights, "
            f"{len(v.get('baked') or {})} state_dict keys baked in")


def _value(v) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def render_report(report, layers: bool = False) -> str:
    """The readable form of an EngineReport."""
    r = report
    where = "any device" if r.targets == ("any",) else ("compute capability " + ", ".join(r.targets)
                                                          if r.targets else "not recorded")
    product = {"reference": "reference backend (trtbuild", "tensorrt": "TensorRT", "tensorrt-rtx": "TensorRT-RTX"}
    version = f"{product[r.backend]} {r.version}" + (")" if r.backend == "reference" else "")
    lines = [f"engine    {r.path} ({r.plan_bytes:,} bytes)", f"built by  {version}", f"runs on   {where}"]
    if not r.loaded:
        lines.append(f"not loaded: {r.note}; shown: what its sidecar records")
    refit = ("unknown" if r.refittable is None else "not refittable" if not r.refittable else
             "refittable, weights stripped (a refit must supply them)" if r.stripped else "refittable")
    lines.append(f"refit     {refit}")
    if r.version_compatible is not None:
        version = ("not version-compatible" if not r.version_compatible else
                   "version-compatible, lean runtime embedded (host code: loads only where trusted)" if r.lean_runtime
                   else "version-compatible, lean runtime excluded")
        lines.append(f"compat    {version}; hardware compatibility {r.hardware_compat or 'not recorded'}")
    if r.num_layers is not None:
        source = {"plan": "read from the plan", "inspector": "from the engine inspector"}.get(r.layer_source, "")
        lines.append(f"layers    {r.num_layers} ({source}; profiling verbosity {r.profiling_verbosity})")
    if r.device_memory_bytes is not None:
        lines.append(f"memory    {r.device_memory_bytes:,} bytes of device memory per execution context")
    counts = r.precision_counts()
    if counts:
        lines.append("precision " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items(), key=lambda kv: -kv[1]))
                     + " (layers by output type)")
    lines += ["", "I/O tensors"]
    rows = [["mode", "name", "shape", "dtype", "profiles (min / opt / max)"]]
    for t in r.io:
        ranges = "; ".join(" / ".join(map(_shape, (p.min, p.opt, p.max))) for p in t.profiles) or "-"
        rows.append([t.mode, t.name, _shape(t.shape), str(t.dtype), ranges])
    lines += _table(rows)
    named = [w for w in r.weights if w.name]
    if r.weights:
        lines += ["", f"weights   {len(r.weights)} ({len(named)} named, "
                      f"{sum(w.refittable for w in r.weights)} refittable, {sum(w.stripped for w in r.weights)} "
                      "stripped)"]
        rows = [["name", "layer", "role", "refit"]]
        rows += [[w.name, w.layer or "-", w.key or "-", "stripped" if w.stripped else "yes" if w.refittable else "no"]
                 for w in named]
        if len(rows) > 1:
            lines += _table(rows)
    if layers and r.layers:
        lines += ["", "layers"]
        rows = [["#", "name", "type", "precision", "inputs -> outputs", "weights"]]
        for k, x in enumerate(r.layers):
            rows.append([str(k), x.name, x.type or "-", ",".join(x.precision) or "-",
                         f"{','.join(x.inputs)} -> {','.join(x.outputs)}",
                         ",".join(w.name or w.key for w in x.weights) or "-"])
        lines += _table(rows)
    if r.sidecar is not None:
        lines += ["", "sidecar"]
        lines += _table([[k, _refit_value(v) if k == "refit" else _value(v)] for k, v in r.sidecar.items()
                         if k not in _SHOWN_ELSEWHERE])
    else:
        lines += ["", "sidecar   none"]
    return "\n".join(lines)


def run(args) -> int:
    """Print the report of ENGINE, or the differences between ENGINE and ENGINE2."""
    from trtbuild.engine.errors import EngineFileError
    from trtbuild.engine.inspect import inspect_engine
    from trtbuild.engine.inspect_diff import diff_reports
    from trtbuild.engine.inspect_json import InspectorJSONError

    try:
        a = inspect_engine(args.engine)
        b = inspect_engine(args.engine2) if args.engine2 is not None else None
    except (EngineFileError, InspectorJSONError) as e:
        print(f"trtbuild: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if b is None:
        print(json.dumps(a.to_json(), indent=2) if args.json else render_report(a, args.layers))
        return EXIT_EQUAL
    diffs = diff_reports(a, b)
    if args.json:
        print(json.dumps({"a": args.engine, "b": args.engine2, "equal": not diffs,
                          "differences": [vars(d) for d in diffs]}, indent=2, default=str))
    elif not diffs:
        print(f"{args.engine} and {args.engine2}: no differences")
    else:
        print(f"A = {args.engine}\nB = {args.engine2}\n{len(diffs)} difference{'s' if len(diffs) != 1 else ''}:")
        print("\n".join("  " + d.text() for d in diffs))
    return EXIT_DIFFERENT if diffs else EXIT_EQUAL

"""``trtbuild models``: list the models of trtbuild.models.registry with their origin: built-in, or
"entry point <distribution>" (a package's ``trtbuild.models`` entry point). A broken entry point is
reported in one line after the table."""

from __future__ import annotations

import argparse

from .options import add_backend_options


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``models``."""
    p = subparsers.add_parser("models", help="list the models trtbuild can build",
                              description="List the registered models with their input shapes and outputs.")
    p.add_argument("--verbose-notes", action="store_true", help="also print each model's notes")
    add_backend_options(p)
    p.set_defaults(func=run)
    return p


def models_table(verbose_notes: bool = False) -> str:
    """The registry as aligned text: name, input (full / small), outputs, layerwise layers, plugins."""
    from trtbuild.models import registry as reg

    header = ["model", "origin", "input (full)", "input (--small)", "outputs", "layers", "plugins",
              "options (--option)", "description"]
    rows = []
    for name in reg.names():
        spec = reg.get(name)
        layers = str(len(spec.layer_map)) if spec.layer_map else "auto"  # automatic map from the layer names
        rows.append([name, reg.origin(name), "x".join(map(str, spec.input_shape(False))),
                     "x".join(map(str, spec.input_shape(True))), ",".join(spec.output_names), layers,
                     "yes" if spec.uses_plugins else "no",
                     " ".join(f"{k}={'|'.join(v)}" for k, v in spec.options.items()) or "-", spec.description])
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
             for r in [header, ["-" * w for w in widths]] + rows]
    if verbose_notes:
        lines += [""] + [f"{n}: {reg.get(n).notes}" for n in reg.names() if reg.get(n).notes]
    return "\n".join(lines)


def run(args) -> int:
    """Print which backend would build the models, then the models table."""
    from trtbuild.engine.model import select_backend
    from trtbuild.models import registry

    _, line = select_backend(args.backend)
    print(line)
    print(f"{len(registry.names())} models (layers = tensors compared by `trtbuild parity --layerwise`)")
    print(models_table(args.verbose_notes))
    for line in registry.LOAD_ERRORS:
        print(f"error: {line}")
    return 0

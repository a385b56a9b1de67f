#!/usr/bin/env python3
"""Run `trtbuild demo` in this process and print the memory of each step (Linux only).

Before each step the peak resident set size is reset (``/proc/self/clear_refs``), so the peak
printed is that step's own: RSS before, peak during, RSS after, in MiB. Steps nest (the build
shows its TensorRT-RTX and reference serializations). Run it in an empty directory with the tree to
measure first on PYTHONPATH (scripts/bench_demo_memory.py --steps does both):

    cd $(mktemp -d) && PYTHONPATH=/path/to/trtbuild python /path/to/demo_memory_steps.py [demo args]
"""

from __future__ import annotations

import functools
import sys
import time

_depth = [0]


def _status() -> dict[str, int]:
    with open("/proc/self/status") as f:
        return {k: int(v.split()[0]) // 1024 for k, v in (line.split(":", 1) for line in f) if k in ("VmHWM", "VmRSS")}


def _wrap(owner, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def step(*args, **kwargs):
        before = _status()["VmRSS"]
        if _depth[0] == 0:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
        _depth[0] += 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _depth[0] -= 1
            now = _status()
            print(f"STEP {'  ' * _depth[0]}{label:<34} before {before:5d}  peak {now['VmHWM']:5d}  after "
                  f"{now['VmRSS']:5d} MiB  [{time.perf_counter() - start:.1f} s]", file=sys.stderr, flush=True)

    setattr(owner, name, step)


def main() -> int:
    import trtbuild.engine as engine
    import trtbuild.engine.build as build
    import trtbuild.engine.cross_check as cross_check
    import trtbuild.engine.model as model
    import trtbuild.parity as parity
    import trtbuild.weights.weightmap as weightmap
    from trtbuild.models import registry

    _wrap(engine, "ensure_weights", "weights: export (or reuse)")
    _wrap(model, "export_seeded_weights", "export the seeded model")
    _wrap(weightmap, "read_weights", "read the weight file")
    _wrap(model, "build_model", "build (with the cross-check)")
    _wrap(cross_check, "_build", "define + build one backend")
    _wrap(build, "serialize_network", "serialize")
    cross_check.serialize_network = build.serialize_network
    model.ensure_weights = engine.ensure_weights
    _wrap(engine, "save_engine", "save an engine")
    _wrap(engine, "load_engine", "load the engine")
    _wrap(registry, "get_torch_model", "PyTorch model")
    _wrap(parity, "load_weights_into", "weights into the PyTorch model")
    _wrap(parity, "check_model_parity", "parity")
    from trtbuild.cli import main as cli

    return cli(["demo", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())

"""``trtbuild demo``: the whole pipeline on one seeded model, ending in a parity report.

    trtbuild demo                      # AlexNet (full size, 224x224)
    trtbuild demo --model resnet18 --small --precision fp16 --layerwise

Steps: write the seeded PyTorch model's weights to weights/<model>[-small].wts (reused if
present), build the engine on the default backend, save it atomically with its sidecar under
engines/, load it back (sidecar and checksum checked), run it, and compare it with PyTorch using
the same weights and inputs. Exit code 1 if parity fails.

Wherever NVIDIA's TensorRT-RTX imports (the `test` extra installs it), the build is cross-checked:
the same network is also built by TensorRT-RTX for its portable targets (no GPU needed), the
reference must agree with it on every tensor's shape and dtype, and the real TensorRT-RTX engine is
saved next to the other as engines/<model>[-small]-<precision>-rtx.engine. With --backend
tensorrt-rtx and no GPU that runs its engines, the numbers come from the reference build of the same
network, and the output says so.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

from .build import backend_and_model, human_bytes
from .options import (ENGINE_OUT_HELP, add_backend_options, add_model_options, add_output_files,
                      add_precision_options)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``demo``."""
    p = subparsers.add_parser("demo", help="export weights, build, save, load and check parity of a demo model",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    model = add_model_options(p, seed_help="seed of the model weights and of the inputs (default 0)")
    model.add_argument("--model", default="alexnet", help="model name (default alexnet; see `trtbuild models`)")
    add_precision_options(p)
    add_backend_options(p)
    add_output_files(p, out=ENGINE_OUT_HELP, html="also write an HTML parity report")
    p.add_argument("--layerwise", action="store_true",
                   help="add a layerwise comparison (builds a second engine in memory)")
    p.add_argument("--no-cross-check", action="store_true",
                   help="do not build the network with TensorRT-RTX too (default: cross-check wherever tensorrt_rtx "
                        "imports)")
    p.set_defaults(func=run)
    return p


class _Clock:
    def __init__(self):
        self.start = time.perf_counter()
        self.last = self.start

    def lap(self) -> str:
        now = time.perf_counter()
        text = f"{now - self.last:.1f} s"
        self.last = now
        return text


def refuse_foreign_file(path: Path) -> None:
    """Raise EngineWriteError if `path` exists and is not a TensorRT-RTX engine that trtbuild wrote
    (a sidecar saying so): the demo replaces its own engines, never a file of the user's."""
    from trtbuild.engine import EngineFileError, EngineWriteError, read_sidecar

    if not path.exists():
        return
    try:
        side = read_sidecar(path)
    except EngineFileError:
        side = None
    if not path.is_file() or side is None or side.backend != "tensorrt-rtx":
        raise EngineWriteError(f"{path} exists and is not a TensorRT-RTX engine written by trtbuild, so the demo will "
                               "not overwrite it; move it, pass --out, or use --no-cross-check")


def check_demo_paths(args, spec, out: Path, rtx_out: Path | None) -> None:
    """Refuse an --out, TensorRT-RTX engine or --html path that names the weights, another output
    or an existing file of another kind, before anything is exported or built."""
    from trtbuild.engine import default_weights_path
    from trtbuild.files.outputs import HTML

    from ._outputs import check_paths, engine_outputs

    check_paths(args, [*engine_outputs("--out", out), *engine_outputs("the TensorRT-RTX engine", rtx_out),
                       ("--html", args.html, HTML)],
                [("--weights", args.weights or default_weights_path(spec.name, args.small))])


def run(args) -> int:
    """Run the demo; print each step with its time, then the parity table."""
    from trtbuild.engine import (EngineWriteError, default_engine_path, ensure_weights, load_engine, make_sidecar,
                                 save_engine)
    from trtbuild.engine.model import build_model
    from trtbuild.engine.options import BuildOptions
    from trtbuild.models import registry
    from trtbuild.files.atomic import ensure_parent_dir
    from trtbuild.parity import check_model_parity, load_weights_into
    from trtbuild.weights import WeightMap

    from trtbuild.backend import BackendError, backend_kind, is_rtx, load_trt
    from trtbuild.engine.cross_check import CrossCheckResult
    from trtbuild.engine.rtx import can_run_here

    trt, spec = backend_and_model(args)
    cross_check = not args.no_cross_check
    if cross_check:
        try:
            load_trt("tensorrt-rtx")
        except BackendError as e:
            cross_check = False
            print(f"no cross-check: {str(e).split('; ')[0]}", flush=True)
    clock = _Clock()
    precision = args.precision or "fp32"
    label = f"{spec.name}{' (small)' if args.small else ''}"
    out = Path(args.out or default_engine_path(spec.name, precision, args.small, backend=backend_kind(trt)))
    rtx_out = out.with_name(out.stem + "-rtx" + out.suffix) if cross_check and not is_rtx(trt) else None
    if rtx_out is not None:
        refuse_foreign_file(rtx_out)
    check_demo_paths(args, spec, out, rtx_out)
    weights_path, exported = ensure_weights(spec.name, args.weights, args.seed, args.small)
    wm = WeightMap.load(weights_path)
    print(f"[1/4] weights: {weights_path} "
          f"({'exported from the seeded PyTorch model' if exported else 'existing file'}, "
          f"{len(wm)} tensors) [{clock.lap()}]", flush=True)

    options = BuildOptions(precision=precision, small=args.small, progress=None, cross_check=cross_check)
    plan = build_model(spec, wm, trt, options=options)
    out = ensure_parent_dir(out, EngineWriteError)
    save_engine(out, plan, make_sidecar(trt, plan, weights_path=weights_path))
    print(f"[2/4] built {label} [{precision}] and saved {out} ({human_bytes(len(plan))}) + {out}.json "
          f"[{clock.lap()}]", flush=True)
    if cross_check:
        rtx_plan = getattr(plan, "rtx_plan", None)
        if rtx_plan is not None:
            save_engine(rtx_out, rtx_plan, make_sidecar(load_trt("tensorrt-rtx"), rtx_plan, weights_path=weights_path))
            print(f"      TensorRT-RTX engine: {rtx_out} ({human_bytes(len(rtx_plan))}) + {rtx_out}.json", flush=True)
            del rtx_plan  # saved: no engine stays in memory from here on
        print(f"      {CrossCheckResult(**plan.info.cross_check).summary()}", flush=True)
    del plan

    # the PyTorch model first: when the saved engine runs and no layerwise build follows, the weights
    # are not needed afterwards and are freed before the engine loads (one copy of the model less)
    module = load_weights_into(registry.get_torch_model(spec.name, seed=args.seed, small=args.small), wm)
    runs_saved_engine = not (is_rtx(trt) and not can_run_here(trt)[0])
    if runs_saved_engine and not args.layerwise:
        wm = None
        gc.collect()  # the built networks' reference cycles hold the last references to the weights
    if not runs_saved_engine:
        why = can_run_here(trt)[1]
        print(f"[3/4] {out} cannot run here ({why}): the NUMBERS BELOW COME FROM THE REFERENCE BACKEND's build of the "
              f"same network (cross-checked above) [{clock.lap()}]", flush=True)
        trt = load_trt("reference")
        engine = None
    else:
        engine = load_engine(out)
        print(f"[3/4] loaded {out} on {engine.backend} (sidecar and sha256 checked) [{clock.lap()}]", flush=True)

    report = check_model_parity(spec, trt, engine=engine, weights=None if engine is not None else wm,
                                precision=precision, small=args.small, seed=args.seed, module=module)
    report.meta["engine"] = str(out) if engine is not None else f"{out} (built by TensorRT-RTX, not run)"
    if engine is None:
        report.meta["backend"] = "reference (standing in for the TensorRT-RTX engine, which was built but not run)"
    if args.layerwise:  # a saved engine has only the model outputs: layers come from an in-memory build
        layer_report = check_model_parity(spec, trt, weights=wm, precision=precision, small=args.small,
                                          seed=args.seed, module=module, layerwise=True)
        report.layers, report.first_jump, report.first_failure = (layer_report.layers, layer_report.first_jump,
                                                                  layer_report.first_failure)
        report.meta["jump_factor"] = layer_report.meta.get("jump_factor")
    print("[4/4] parity against PyTorch (same weights, seeded "
          f"inputs{'; layers from an in-memory engine' if args.layerwise else ''}) "
          f"[{clock.lap()}]\n", flush=True)
    print(report.to_table())
    if args.html:
        report.to_html(args.html)
        print(f"wrote {args.html}")
    rtx_note = f"; TensorRT-RTX engine {rtx_out} (built by TensorRT-RTX, not run)" if rtx_out else ""
    if engine is None:
        rtx_note = (f" (numbers from the reference stand-in); TensorRT-RTX engine {out} (built by TensorRT-RTX, "
                    "not run)")
    print(f"\ndemo finished in {time.perf_counter() - clock.start:.1f} s: parity {'PASS' if report.passed else 'FAIL'}"
          f"{rtx_note}")
    return 0 if report.passed else 1

"""A TensorRT-RTX engine for RTX GPUs, built on a machine without a GPU.

NVIDIA's TensorRT-RTX builder compiles "ahead of time" once the target compute capabilities are
set, so a CPU-only machine writes a deployable engine for Ampere (sm86), Ada (sm89) and Blackwell
(sm120) RTX GPUs. The engine is saved with its sidecar (backend, TensorRT-RTX version, targets,
sha256). Built here, not run: running it needs one of those GPUs. The network is also cross-checked
against the reference backend: both must agree on every tensor's shape and type.

    python examples/06_tensorrt_rtx/tensorrt_rtx_engine.py [--model resnet18] [--targets sm86,sm89,sm120] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trtbuild.backend import BackendError, load_trt
from trtbuild.engine import EngineError, build_and_save, export_seeded_weights, load_engine, read_sidecar, sidecar_path
from trtbuild.files.outputs import ENGINE, SIDECAR, WTS, check_outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", help="a zoo model (`trtbuild models` lists them)")
    parser.add_argument("--precision", default="fp16", choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--targets", default="sm86,sm89,sm120", help="RTX compute capabilities to build for")
    parser.add_argument("--out", type=Path, default=Path("out/examples/06_tensorrt_rtx"), help="folder to write into")
    args = parser.parse_args(argv)
    weights = args.out / f"{args.model}-small.wts"
    engine_path = args.out / f"{args.model}-small-{args.precision}-rtx.engine"
    check_outputs([("weights", weights, WTS), ("engine", engine_path, ENGINE),
                   ("sidecar", sidecar_path(engine_path), SIDECAR)])

    try:
        rtx = load_trt("tensorrt-rtx")
    except BackendError as e:  # tensorrt_rtx is not installed (pip install "trtbuild[test]" installs it)
        print(f"FAIL: {e}")
        return 1
    print(f"backend: tensorrt-rtx (TensorRT-RTX {rtx.__version__}), targets {args.targets}")
    export_seeded_weights(args.model, weights, seed=0, small=True)
    build_and_save(args.model, weights, engine_path, rtx, args.precision, small=True, targets=args.targets,
                   cross_check=True, progress=False)
    sidecar = read_sidecar(engine_path)
    size = engine_path.stat().st_size
    print(f"engine: {engine_path} ({size / 2**20:.1f} MiB) + {sidecar_path(engine_path).name}")
    print(f"sidecar: backend {sidecar.get('backend')}, TensorRT-RTX {sidecar.get('tensorrt_version')}, "
          f"targets {', '.join(sidecar.get('targets', []))}, precision {sidecar.get('precision')}")
    checked = sidecar.get("cross_check", {})
    print(f"cross-check: TensorRT-RTX and the reference agree on {checked.get('tensors_compared', 0)} tensors' "
          "shapes and types")
    try:  # an RTX GPU of one of the targets runs it; anywhere else loading is refused before TensorRT-RTX is called
        load_engine(engine_path, rtx)
        print("loaded on this machine's GPU")
    except EngineError as e:
        print(f"built by TensorRT-RTX, not run; loading it here is refused: {e}")
    built = size > 0 and sidecar.get("backend") == "tensorrt-rtx" and bool(checked)
    print(f"TensorRT-RTX engine for {args.targets}: {'PASS' if built else 'FAIL'}")
    return 0 if built else 1


if __name__ == "__main__":
    sys.exit(main())

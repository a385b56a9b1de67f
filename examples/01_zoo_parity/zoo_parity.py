"""Build a zoo model (its small test variant) in fp32 and fp16, save each engine with its sidecar,
load it back and check parity against the PyTorch model it was built from.

    python examples/01_zoo_parity/zoo_parity.py [--model resnet18] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trtbuild.engine import build_and_save, export_seeded_weights, load_engine, select_backend, sidecar_path
from trtbuild.parity import check_model_parity
from trtbuild.files.outputs import ENGINE, SIDECAR, WTS, check_outputs

PRECISIONS = ("fp32", "fp16")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", help="a zoo model (`trtbuild models` lists them)")
    parser.add_argument("--out", type=Path, default=Path("out/examples/01_zoo_parity"), help="folder to write into")
    args = parser.parse_args(argv)

    weights = args.out / f"{args.model}-small.wts"
    engines = {p: args.out / f"{args.model}-small-{p}.engine" for p in PRECISIONS}
    # refuse, before any work, to replace a file of another kind that happens to sit there
    check_outputs([("weights", weights, WTS)] + [(f"{p} engine", e, ENGINE) for p, e in engines.items()]
                  + [(f"{p} sidecar", sidecar_path(e), SIDECAR) for p, e in engines.items()])

    trt, backend_line = select_backend()  # TensorRT where it runs, else the reference backend
    print(backend_line)
    export_seeded_weights(args.model, weights, seed=0, small=True)
    print(f"weights: {weights}")

    passed = True
    for precision, path in engines.items():
        build_and_save(args.model, weights, path, trt, precision, small=True, progress=False)
        engine = load_engine(path, trt)  # the sidecar and the engine's sha256 are checked first
        report = check_model_parity(args.model, trt, weights=weights, engine=engine, small=True)
        print(f"\n{precision}: {path} + {sidecar_path(path).name}")
        print(report.to_table())
        passed = passed and report.passed
    print(f"\n{args.model} (small) fp32 and fp16 against PyTorch: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

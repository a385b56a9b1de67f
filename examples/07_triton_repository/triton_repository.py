"""A Triton Inference Server model repository for a trtbuild engine.

Builds a zoo model's small variant with a dynamic batch profile (1..8), saves the engine with its
sidecar, and writes it into a Triton model repository: `config.pbtxt` (tensor types and dims from
the sidecar, max_batch_size from the profile, dynamic batching), the version folder `1/` with the
engine, and `trtbuild.json` (what trtbuild wrote there). With real TensorRT the engine goes to
Triton's TensorRT backend (`1/model.plan`); other engines (the reference backend here) go to
Triton's Python backend (`1/model.py` runs the engine with trtbuild). Serving it is a separate step:

    python examples/07_triton_repository/triton_repository.py [--out DIR]
    python -m trtbuild.serving.tritonserver DIR/models     # needs pip install "trtbuild[serve]"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trtbuild.engine import build_and_save, export_seeded_weights, select_backend, sidecar_path
from trtbuild.serving.repository import export_model
from trtbuild.files.outputs import ENGINE, SIDECAR, WTS, check_outputs

BATCH = (1, 4, 8)  # min, opt, max of the engine's batch profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", help="a zoo model (`trtbuild models` lists them)")
    parser.add_argument("--out", type=Path, default=Path("out/examples/07_triton_repository"),
                        help="folder to write into (the repository is DIR/models)")
    args = parser.parse_args(argv)
    weights = args.out / f"{args.model}-small.wts"
    engine_path = args.out / f"{args.model}-small-fp32.engine"
    repo = args.out / "models"
    check_outputs([("weights", weights, WTS), ("engine", engine_path, ENGINE),
                   ("sidecar", sidecar_path(engine_path), SIDECAR)])

    trt, backend_line = select_backend()
    print(backend_line)
    export_seeded_weights(args.model, weights, seed=0, small=True)
    _, sidecar = build_and_save(args.model, weights, engine_path, trt, "fp32", small=True, batch=BATCH,
                                progress=False)
    print(f"engine: {engine_path} (batch {BATCH[0]}..{BATCH[2]}) + {sidecar_path(engine_path).name}")

    # Triton's TensorRT backend loads TensorRT 10/11 engines only; anything else runs in its Python backend
    kind = "tensorrt" if sidecar.get("backend") == "tensorrt" else "python"
    result = export_model(engine_path, repo, args.model, kind, model=args.model)
    print(f"repository {repo} (Triton's {kind} backend): {args.model}/ holds {', '.join(sorted(result.files))}")
    print(result.config.rstrip())
    expected = ["config.pbtxt", "1/model.plan"] if kind == "tensorrt" else ["config.pbtxt", "1/model.py",
                                                                            "1/model.engine"]
    complete = all((result.path / p).is_file() for p in expected)
    print(f"serve it: python -m trtbuild.serving.tritonserver {repo}")
    print(f"Triton repository for {args.model}: {'PASS' if complete else 'FAIL'}")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())

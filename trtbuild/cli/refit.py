"""``trtbuild refit ENGINE --weights NEW -o OUT``: refit a refittable or weight-stripped engine (built with
``trtbuild build --refit`` / ``--strip-weights``) from a state_dict file, and write the refit engine with its
sidecar. Every weight the build named is recomputed from the new state_dict keys, Conv+BN folds and RepVGG fusions
included (trtbuild.engine.refit); the input engine is never overwritten."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import add_output_files


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``refit``."""
    p = subparsers.add_parser(
        "refit", help="refit an engine built with --refit or --strip-weights from new weights",
        description=__doc__.split("\n\n")[0].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("engine", metavar="ENGINE", help="the engine built with --refit or --strip-weights (and its "
                                                    "sidecar ENGINE.json, which says how its weights are computed)")
    g = p.add_argument_group("model")
    g.add_argument("--weights", required=True, metavar="FILE",
                   help="the new weights: a PyTorch state_dict as .safetensors, .pt/.pth or .wts")
    add_output_files(p, out="the refit engine (written with OUT.json atomically; not ENGINE itself)",
                     out_required=True)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from trtbuild.engine import load_engine
    from trtbuild.engine.refit import refit_record, save_refit_engine
    from trtbuild.engine.serialize import sidecar_path
    from trtbuild.files.outputs import same_file

    from ._outputs import check_paths, engine_inputs, engine_outputs

    engine_path, out = Path(args.engine), Path(args.out)
    if same_file(engine_path, out) or same_file(sidecar_path(engine_path), out):
        raise ValueError(f"-o {out} is the engine being refit (or its sidecar); write the refit engine to another "
                         "file so that the original stays as it is")
    weights = Path(args.weights)
    if not weights.is_file():
        raise ValueError(f"--weights {weights}: no such file")
    # before any work: OUT.json must not be ENGINE or --weights, OUT must not be --weights (nor a file of another kind)
    check_paths(args, engine_outputs("-o", out), [*engine_inputs("ENGINE", engine_path), ("--weights", weights)])
    engine = load_engine(engine_path)
    record = refit_record(engine)
    print(f"engine: {engine_path} (refit {record.mode}{', weights stripped' if record.stripped else ''}; "
          f"{len(record.weights)} named weights)", flush=True)
    engine.refit(weights)
    written = save_refit_engine(engine, out, weights_path=weights)
    print(f"refit {len(record.weights)} weights from {weights}: {written} + sidecar {sidecar_path(written)}")
    return 0

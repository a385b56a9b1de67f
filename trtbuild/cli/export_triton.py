"""``trtbuild export-triton``: write an engine into a Triton Inference Server model repository.

    trtbuild export-triton resnet18 --engine engines/resnet18-fp16.engine --repo models
    trtbuild export-triton resnet18 --small --engine engines/resnet18-small-fp32.engine --repo models --kind python
    trtbuild export-triton resnet18 --small --engine engines/r18-new.engine --repo models --kind python --version 2
    trtbuild export-triton net.py:tinynet --engine engines/tinynet-fp32.engine --repo models --kind python

Writes DIR/<name>/config.pbtxt and DIR/<name>/1/model.plan (--kind tensorrt, for Triton's TensorRT
backend: TensorRT 10/11 engines only) or DIR/<name>/1/model.py + the engine (--kind python: Triton's
Python backend runs it with trtbuild's Engine, on any trtbuild backend). The configuration comes
from the engine's sidecar: tensor names, Triton data types, dims without the batch dimension and
max_batch_size from a --batch profile (0 for a static batch, or where an output does not start with
the batch, as NMS detections do), dynamic batching preferring the profile's opt and max. Plugin
libraries are copied beside the model. MODEL, --small and --input must match the engine's sidecar.
In an existing model directory (only one trtbuild wrote) only what trtbuild writes is replaced:
config.pbtxt, the --version directory, the plugin libraries; other versions and your own files are
kept, and a failure leaves the old model as it was.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

NAME = "export-triton"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``export-triton``."""
    from trtbuild.serving.config import BATCHING, KINDS

    from .options import MODEL_HELP, add_model_argument, add_model_options, add_user_model_options, non_negative_int

    p = subparsers.add_parser(NAME, help="write an engine into a Triton Inference Server model repository",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_argument(p, MODEL_HELP + "; must be the model the engine's sidecar names")
    add_model_options(p, weights_help=None, small_help="the engine is of the small variant (must match its sidecar)",
                      option_help=None)
    add_user_model_options(p)
    p.add_argument("--engine", required=True,
                   help="engine file built by `trtbuild build` (its .json sidecar beside it)")
    p.add_argument("--repo", required=True, metavar="DIR", help="Triton model repository (created if missing)")
    p.add_argument("--kind", choices=KINDS, default="tensorrt",
                   help="tensorrt: Triton's TensorRT backend (model.plan; TensorRT 10/11 engines); python: Triton's "
                        "Python backend running trtbuild's Engine (any backend, CPU included); default tensorrt")
    p.add_argument("--name", default=None, help="model name in the repository (default: the model's name)")
    p.add_argument("--version", type=int, default=1, metavar="N",
                   help="version directory DIR/<name>/N written (default 1); other versions there are kept, and "
                        "--version-policy decides which Triton serves")
    p.add_argument("--max-batch", type=int, default=None, metavar="N",
                   help="max_batch_size (default: the profile's max batch; 0 for a static-batch engine)")
    p.add_argument("--version-policy", default=None, metavar="POLICY",
                   help="latest:N, all or specific:V1,V2 (default: Triton's, the latest version)")
    p.add_argument("--instances", type=int, default=1, metavar="N",
                   help="model instances per GPU (or CPU), Triton's instance_group count (default 1)")
    p.add_argument("--warmup", action="store_true", help="add a model_warmup sample (random inputs, batch 1)")
    p.add_argument("--batching", choices=BATCHING, default=None,
                   help="--kind python: run a batch of requests as one engine run (concatenate) or one run per "
                        "request (per-request: responses bit-identical to a direct Engine run); default "
                        "per-request for reference plans, concatenate otherwise")
    p.add_argument("--threads", type=non_negative_int, default=None, metavar="N",
                   help="--kind python: PyTorch threads of each model instance (config.pbtxt parameter "
                        "trtbuild_threads; default 1, so instances x threads stay within the cores; 0: PyTorch's "
                        "default, one per core in every instance)")
    p.add_argument("--reject-nonfinite", action="store_true",
                   help="--kind python: refuse a request whose inputs hold NaN or Inf, in one sentence to its client "
                        "(config.pbtxt parameter trtbuild_reject_nonfinite; default: off, the engine runs them)")
    p.add_argument("--plugin-library", action="append", default=[], metavar="LIB.so",
                   help="plugin library to copy beside the model (default: the one the sidecar records)")
    p.set_defaults(func=run)
    return p


def _input_from_sidecar(engine) -> str | None:
    """--input NAME:SHAPE for a network function, taken from the engine's sidecar (batch >= 1)."""
    from trtbuild.engine import read_sidecar

    try:
        sidecar = read_sidecar(engine)
    except ValueError:
        return None
    inputs = (sidecar.build.inputs if sidecar is not None else None) or []
    if len(inputs) != 1:
        return None
    shape = [max(int(d), 1) for d in inputs[0].shape]
    return f"{inputs[0].name}:{'x'.join(map(str, shape))}"


class _SidecarInputs:
    """The inputs an engine's sidecar lists, shaped like an Engine for check_engine_input_fits."""

    def __init__(self, sidecar):
        self.tensors = {t.name: SimpleNamespace(shape=tuple(t.shape)) for t in sidecar.build.inputs or []}
        self.input_names = list(self.tensors)


def check_engine_fits(engine_path, spec, small: bool) -> None:
    """ValueError if the engine's sidecar was built for another --small variant, or its input does
    not take the shape (batch aside) the model expects (the checks serve makes on a loaded engine)."""
    from trtbuild.engine import read_sidecar
    from trtbuild.parity.check import check_engine_input_fits

    sidecar = read_sidecar(engine_path)
    if sidecar is None or sidecar.build.model not in (None, spec.name):
        return  # export_model refuses an engine without a sidecar, or of another model, in its own words
    built = sidecar.build.small
    if built is not None and bool(built) != bool(small):
        raise ValueError(f"--engine {engine_path} was built with small {bool(built)!r} but --small asks for "
                         f"{bool(small)!r}; {'add' if built else 'drop'} --small or pass another --engine")
    check_engine_input_fits(_SidecarInputs(sidecar), spec, small, engine_path)


def _serve_hint(kind: str, repo) -> str:
    if kind == "python":
        return f"serve it: python -m trtbuild.serving.tritonserver {repo}"
    return (f"serve it on a GPU server with NVIDIA's Triton container (Triton's TensorRT backend needs a GPU): "
            f"docker run --gpus all -v $PWD/{repo}:/models nvcr.io/nvidia/tritonserver:<yy.mm>-py3 "
            "tritonserver --model-repository=/models")


def _options(args):
    """The --kind python model options given (None: none given, the defaults)."""
    from trtbuild.serving.model_options import DEFAULT_THREADS, ModelOptions

    if args.threads is None and not args.reject_nonfinite:
        return None
    return ModelOptions(threads=DEFAULT_THREADS if args.threads is None else args.threads,
                        reject_nonfinite=args.reject_nonfinite)


def run(args) -> int:
    from trtbuild.models.user import is_user_reference
    from trtbuild.serving.repository import export_model

    from ._outputs import model_file_input
    from .build import resolve_cli_model

    if args.input is None and is_user_reference(args.model):
        args.input = _input_from_sidecar(args.engine)
    try:
        spec = resolve_cli_model(args)
    except ValueError as e:
        if args.input is None:
            raise
        raise ValueError(f"{e} (--input was taken from the sidecar of {args.engine}: {args.input})") from None
    check_engine_fits(args.engine, spec, args.small)
    result = export_model(args.engine, args.repo, args.name or spec.name, args.kind, max_batch=args.max_batch,
                          version_policy=args.version_policy, warmup=args.warmup, batching=args.batching,
                          instances=args.instances, plugin_library=args.plugin_library, model=spec.name,
                          inputs=[path for _, path in model_file_input(args)], version=args.version,
                          options=_options(args))
    print(f"{'replaced' if result.replaced else 'wrote'} Triton model {result.path}, version {result.version} "
          f"(--kind {result.kind}): " + ", ".join(result.files))
    if result.kept:
        print(f"kept in {result.path}: " + ", ".join(result.kept))
    for lib in result.plugin_libraries:
        print(f"plugin library: {lib}; start Triton with --backend-config=tensorrt,plugins={lib} "
              f"(or LD_PRELOAD={lib})")
    print(_serve_hint(result.kind, result.path.parent))
    return 0

"""``trtbuild calibrate``: compute INT8/FP8 ranges in PyTorch and write a calibration file.

    trtbuild calibrate resnet18 --data calib_images/ --method percentile --out calib.json
    trtbuild calibrate resnet18 --small --data random --batches 4 --batch-size 8 --out calib.json
    trtbuild calibrate net.py:tinynet --input input:1x3x32x32 --torch net.py:make_model --data mypkg.data:calib --method mse -o c.json

Runs the PyTorch model (with --weights loaded, else the seeded model's own weights, seed 0: the
weights `trtbuild parity` uses without --weights) on the calibration data and records the amax of
every tensor a Q/DQ build quantizes: the input of every Conv/Linear and every input of a residual
add (per tensor), and every Conv/Linear weight per output channel. --data is a folder of .npy/.pt
tensors (each a sample CxHxW or a batch NxCxHxW, sorted by file name), package.module:NAME or
file.py:NAME naming an iterable (or a function returning one) of tensors or (tensor, label)
pairs, or `random` (seeded uniform inputs in the model's value range; labelled RANDOM in the file
and the output: ranges from random data are not ranges of real data).

Methods: max (running max of |x|), percentile (--percentile of |x|, default 99.99), mse (amax
minimising INT8 fake-quant error), entropy (TensorRT's KL-divergence calibration); all but max work
on a 2048-bin histogram of |x|, as NVIDIA's calibrators. FP8 uses the same amax (scale amax/448).
"""  # noqa: E501 - --help prints this verbatim (RawDescriptionHelpFormatter): one example command a line

from __future__ import annotations

import argparse

from .build import resolve_cli_model
from .options import (add_model_argument, add_model_options, add_output_files, add_precision_options,
                      add_progress_option, add_user_model_options, number_type, positive_int)

DEFAULT_RANDOM_BATCHES = 8
DEFAULT_RANDOM_BATCH_SIZE = 4


_percentile = number_type(float, lambda v: 0 < v <= 100, "must be in (0, 100]")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``calibrate``."""
    from trtbuild.quant.histogram import METHODS

    p = subparsers.add_parser("calibrate", help="compute INT8/FP8 ranges in PyTorch and write a calibration file",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_argument(p)
    add_model_options(p, weights_help="weight file loaded into the PyTorch model (default: the seeded model's own "
                                      "weights, seed 0)", small_help="the small variant of the model", option_help=None)
    add_precision_options(p, ("int8", "fp8"), help="record the precision the ranges are for (a build with another "
                                                   "one then refuses the file)")
    add_user_model_options(p)
    add_output_files(p, out="calibration file to write (JSON)", out_required=True)
    p.add_argument("--data", required=True, metavar="FOLDER|MODULE:NAME|random",
                   help="calibration data: a folder of .npy/.pt tensors, an iterable package.module:NAME or "
                        "file.py:NAME, or 'random' (seeded uniform inputs; not real data)")
    p.add_argument("--method", choices=METHODS, default="max", help="how amax is computed (default max)")
    p.add_argument("--percentile", type=_percentile, default=99.99,
                   help="--method percentile: the percentile of |x| taken as amax (default 99.99)")
    p.add_argument("--batches", type=positive_int, default=None,
                   help=f"use at most N batches (default: all the data; {DEFAULT_RANDOM_BATCHES} with --data random)")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="regroup the samples into batches of B (default: each file or item is one batch; "
                        f"{DEFAULT_RANDOM_BATCH_SIZE} with --data random)")
    p.add_argument("--seed", type=int, default=0, help="seed of --data random (default 0)")
    add_progress_option(p, "no progress bar")
    p.set_defaults(func=run)
    return p


def _data_source(args, spec, sample_shape):
    from trtbuild.models.user import is_user_reference
    from trtbuild.quant import folder_source, iterable_source, random_source

    if args.data == "random":
        return random_source(sample_shape, args.batches or DEFAULT_RANDOM_BATCHES,
                             args.batch_size or DEFAULT_RANDOM_BATCH_SIZE, spec.value_range, args.seed)
    import os

    if os.path.isdir(args.data) or not is_user_reference(args.data):
        return folder_source(args.data, sample_shape)
    return iterable_source(args.data, sample_shape)


def _data_inputs(source) -> list[tuple]:
    """The files a folder source reads, for the output-path guard."""
    return [("--data", path) for path in source.files]


def _torch_model(args, spec):
    """(module, description of its weights)."""
    module = spec.torch_factory(0, args.small)
    if args.weights is None:
        return module, "seeded PyTorch model (seed 0)"
    from trtbuild.engine.serialize import sha256_file
    from trtbuild.parity.check import load_weights_into
    from trtbuild.weights import WeightMap

    load_weights_into(module, WeightMap.load(args.weights))
    return module, f"{args.weights} (sha256 {sha256_file(args.weights)})"


def _progress(args, total):
    if args.no_progress:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="calibration batches", unit="batch", leave=False)
    return bar, lambda batch: bar.update(1)


def run(args) -> int:
    """Calibrate and write the file; print what was used and written."""
    from trtbuild.quant import calibrate_data, write_calibration
    from trtbuild.quant.data import shape_text
    from trtbuild.files.outputs import CALIBRATION

    from ._outputs import check_paths

    spec = resolve_cli_model(args)
    sample_shape = tuple(spec.input_shape(args.small))[1:]
    source = _data_source(args, spec, sample_shape)
    check_paths(args, [("--out", args.out, CALIBRATION)], [("--weights", args.weights), *_data_inputs(source)])
    print(f"calibrating {spec.name}{' (small)' if args.small else ''} in PyTorch (no TensorRT backend is used)",
          flush=True)
    module, weights_note = _torch_model(args, spec)
    print(f"weights: {weights_note}")
    print(f"data: {source.description}" + (" (ranges from random data are not ranges of real data)"
                                           if source.kind == "random" else ""), flush=True)
    batch_size = None if source.kind == "random" else args.batch_size
    limit = None if source.kind == "random" else args.batches
    bar, progress = _progress(args, source.expected_batches(batch_size, limit))
    try:
        calib = calibrate_data(module, source, args.method, percentile=args.percentile, batch_size=batch_size,
                               limit=limit, model_name=spec.name, small=bool(args.small), precision=args.precision,
                               progress=progress)
    finally:
        if bar is not None:
            bar.close()
    calib.weights_source = weights_note
    write_calibration(calib, args.out)
    method = args.method + (f" {args.percentile:g}" if args.method == "percentile" else "")
    inputs = sum(k.endswith(".input") for k in calib.activations)
    attention = sum(k.rpartition(".")[0].rpartition(".")[2].startswith("sdpa") for k in calib.activations)
    data = calib.data
    print(f"data: {data['samples']} samples of {shape_text(sample_shape)} in {data['batches']} batches, "
          f"sha256 {data['sha256'][:16]}...")
    print(f"method: {method}; {len(calib.activations)} activation ranges ({inputs} Conv/Linear inputs, "
          f"{len(calib.activations) - inputs - attention} residual-add inputs, {len(calib.adds)} adds"
          + (f", {attention} attention operands" if attention else "") + "), "
          f"{len(calib.weights)} weights per output channel")
    if calib.all_zero:
        print(f"all-zero tensors (amax set to 1.0): {', '.join(calib.all_zero)}")
    print(f"wrote {args.out}")
    return 0

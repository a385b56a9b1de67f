"""``trtbuild export-onnx``: build a zoo model on the reference backend and write it as ONNX.

    trtbuild export-onnx resnet50 --out resnet50.onnx [--weights resnet50.wts] [--precision fp16]
                         [--opset 17] [--small]

The network is the one the TensorRT builders record (same layers, names and weights); the file
passes onnx.checker (full_check) and strict shape inference and is written atomically. Without
--weights the weights are weights/<model>[-small].wts where it exists (as in `trtbuild build`), else those
of the registry's PyTorch model (seed 0), which build would export there. `trtexec --onnx=FILE`
builds it with TensorRT (plugin layers need their plugin library loaded: --staticPlugins/--dynamicPlugins).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

NAME = "export-onnx"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``export-onnx`` sub-command."""
    from trtbuild.onnx_export.export import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET

    p = subparsers.add_parser(NAME, help="export a zoo model's network to ONNX (checked; atomic write)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from .options import (add_model_argument, add_model_options, add_output_files, add_precision_options,
                          add_user_model_options)

    add_model_argument(p)
    add_model_options(p, weights_help="weight file (.wts, .safetensors, .pt); default weights/<model>[-small].wts "
                                      "where it exists (as in build), else the registry's PyTorch model, seed 0",
                      weights_type=Path, small_help="the model's small test configuration",
                      option_help=None)
    add_precision_options(p, ("fp32", "fp16", "int8", "fp8"), default="fp32",
                          help="network input type: fp16 makes every layer and weight FLOAT16 (default fp32); "
                               "int8/fp8: QuantizeLinear/DequantizeLinear from --calibration, other layers FLOAT",
                          calibration_help="calibration file (`trtbuild calibrate`), required for --precision "
                                           "int8/fp8",
                          keep_help="repeatable: PyTorch modules (globs) kept out of quantization or fp16, as in build")
    add_user_model_options(p)
    add_output_files(p, out="ONNX file to write", out_type=Path, out_required=True)
    p.add_argument("--opset", type=int, default=None,
                   help=f"ONNX opset, {MIN_OPSET}..{MAX_OPSET} (default {DEFAULT_OPSET}, 19 where FP8 needs it; "
                        "see docs/onnx.md)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Build, export, check and write; print a summary. 0 on success, 1 on errors."""
    print("backend: reference (the ONNX export lowers the network recorded on trtbuild's reference backend; "
          "TensorRT is not needed)")
    from trtbuild.onnx_export import OnnxExportError, export_onnx
    from trtbuild.onnx_export.reference_network import build_reference_network
    from trtbuild.weights import WeightsError

    from .build import resolve_cli_model

    try:
        spec = resolve_cli_model(args)
    except ValueError as e:
        return _fail(str(e))
    try:
        from trtbuild.files.outputs import ONNX

        from ._outputs import check_paths

        weights = _weights(args, spec)
        check_paths(args, [("--out", args.out, ONNX)],
                    [("--weights", weights), ("--calibration", args.calibration)])
        from trtbuild.engine.model import quant_plan

        print(f"weights: {weights}" if weights is not None
              else f"weights: the seeded PyTorch model's (seed 0; no {_default_weights(args, spec)})", flush=True)
        quant = quant_plan(spec, args.precision, args.calibration, args.keep, small=args.small,
                           weights=weights if weights is not None else 0)
        network, _ = build_reference_network(spec, weights, precision=args.precision, small=args.small, seed=0,
                                             quant=quant)
        model = export_onnx(network, args.out, opset=args.opset)
    except (OnnxExportError, WeightsError, ValueError, OSError, RuntimeError) as e:
        return _fail(str(e))
    ops = Counter(n.op_type for n in model.graph.node)
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1e6:.1f} MB): model '{spec.name}' {args.precision}, "
          f"opset {model.opset_import[0].version}, "
          f"{network.num_layers} layers -> {len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers")
    print("inputs:  " + ", ".join(f"{i.name} {_shape(i)}" for i in model.graph.input))
    print("outputs: " + ", ".join(f"{o.name} {_shape(o)}" for o in model.graph.output))
    print("operators: " + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items())))
    custom = sorted({f"{n.domain}::{n.op_type}" for n in model.graph.node if n.domain})
    if custom:
        print("plugin nodes (TensorRT's parser maps them to registered plugins; onnxruntime cannot run them): "
              + ", ".join(custom))
    print("checked: onnx.checker full_check and strict shape inference passed")
    return 0


def _default_weights(args, spec) -> Path:
    from trtbuild.engine import default_weights_path

    return default_weights_path(spec.name, args.small)


def _weights(args, spec) -> Path | None:
    """The weight file to read: --weights, else build's default weights/<model>[-small].wts where it
    exists (so the export has the weights `trtbuild build` uses), else None: the seeded PyTorch model
    (seed 0), the very weights build would export there; nothing is written but --out."""
    if args.weights is not None:
        return args.weights
    default = _default_weights(args, spec)
    return default if default.is_file() else None


def _shape(v) -> str:
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in v.type.tensor_type.shape.dim]
    return "[" + ", ".join(dims) + "]"


def _fail(message: str) -> int:
    print(f"trtbuild {NAME}: error: {message}", file=sys.stderr)
    return 1

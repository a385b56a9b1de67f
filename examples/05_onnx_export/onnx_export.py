"""Export a zoo model's network (its small variant) to ONNX and check the file in onnxruntime
against the PyTorch model with the same weights.

    python examples/05_onnx_export/onnx_export.py [--model resnet18] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from trtbuild.models import registry
from trtbuild.onnx_export import export_onnx, run_onnxruntime
from trtbuild.onnx_export.reference_network import build_reference_network
from trtbuild.weights import WeightMap
from trtbuild.files.outputs import ONNX, check_outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", help="a zoo model (`trtbuild models` lists them)")
    parser.add_argument("--out", type=Path, default=Path("out/examples/05_onnx_export"), help="folder to write into")
    args = parser.parse_args(argv)
    onnx_path = args.out / f"{args.model}-small.onnx"
    check_outputs([("ONNX file", onnx_path, ONNX)])

    spec = registry.get(args.model)
    module = registry.get_torch_model(args.model, seed=0, small=True)
    # the network the TensorRT builders record, on the reference backend, with the module's weights
    network, _ = build_reference_network(spec, WeightMap.from_module(module), small=True)
    args.out.mkdir(parents=True, exist_ok=True)  # export_onnx writes into an existing folder only
    model = export_onnx(network, onnx_path)  # checked with onnx.checker and strict shape inference
    ops = Counter(node.op_type for node in model.graph.node)
    print(f"wrote {onnx_path}: opset {model.opset_import[0].version}, {len(model.graph.node)} nodes "
          f"({', '.join(f'{op} {n}' for op, n in ops.most_common(6))}, ...)")

    x = torch.rand(spec.input_shape(True), generator=torch.Generator().manual_seed(0)) * 2 - 1
    got = run_onnxruntime(str(onnx_path), {spec.input_name: x.numpy()})
    with torch.no_grad():
        expected = module(x)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    passed = True
    for name, want in zip(spec.output_names, expected):
        want = want.numpy()
        err = float(np.abs(got[name] - want).max())
        limit = 1e-5 + 1e-4 * float(np.abs(want).max())
        passed = passed and err <= limit
        print(f"{name} {list(want.shape)}: max |onnxruntime - PyTorch| {err:.3g} (limit {limit:.3g})")
    print(f"onnxruntime on {onnx_path.name} against PyTorch: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""Every ONNX export the ONNX tests make is also read by NVIDIA TensorRT-RTX's ONNX parser into a
STRONGLY_TYPED network and built for sm86 without a GPU (the `trtexec --onnx` step), and the parsed
outputs must match the export's declared outputs and the reference network's marked outputs
(name, shape, type), and every parsed tensor named like an ONNX value must have the shape and type
that value_info records (the reference network's inference).

A test module opts in by importing the autouse fixture:

    from helpers.onnx_rtx import rtx_parses_every_export  # noqa: F401  (autouse)

The fixture registers an observer on trtbuild.onnx_export's export_onnx (observe_exports): each
model it returns is checked there and then, so a model TensorRT-RTX rejects fails the test that
exported it, at the export call. Identical models (same bytes) are checked once per session.
Models with custom-domain (plugin) nodes must be *rejected* by the parser: TensorRT-RTX has no
plugins. Without TensorRT-RTX the test fails or is skipped, never passes unchecked (helpers.refnet.import_rtx).
"""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from helpers.refnet import import_rtx
from trtbuild.onnx_export.export import observe_exports
from trtbuild.onnx_export.rtx_parse import custom_nodes, output_differences, parse_with_tensorrt_rtx, value_differences

#: ONNX operators TensorRT documents as supported ("ONNX Operator Support") that TensorRT-RTX 1.7's parser has no
#: importer for: it looks for a plugin of that name and fails ("NonZero plugin creator version 1 was not found").
#: An export holding one must be refused that way; the reference exports it for TensorRT and onnxruntime.
RTX_PARSER_LACKS = ("NonZero",)
#: sha256 of each model checked this session -> outcome ("built", "plugin rejected")
CHECKED: dict[str, str] = {}
#: how many exports each outcome covered, repeats included ("repeat": an identical model seen before)
STATS: Counter = Counter()


class RtxRejected(AssertionError):
    """TensorRT-RTX's parser or builder rejected an export it should accept (or the reverse)."""


def check_export(rtx, network, model) -> str:
    """Parse and build `model` with TensorRT-RTX; raise RtxRejected where it must not fail (or,
    for plugin nodes, where it must). Returns the outcome."""
    data = model.SerializeToString()
    key = hashlib.sha256(data).hexdigest()
    if key in CHECKED:
        STATS["repeat"] += 1
        return CHECKED[key]
    plugins = custom_nodes(model)
    lacking = sorted({n.op_type for n in model.graph.node if n.op_type in RTX_PARSER_LACKS})
    result = parse_with_tensorrt_rtx(data, rtx, build=not plugins and not lacking)
    if lacking and not plugins:
        text = " ".join(result.parse_errors)
        if result.parsed or not all(f"{op} plugin creator" in text for op in lacking):
            raise RtxRejected(f"expected TensorRT-RTX's parser to lack an importer for {lacking}, got: "
                              f"{'parsed' if result.parsed else text}")
        CHECKED[key] = outcome = "no RTX importer"
        STATS[outcome] += 1
        return outcome
    if plugins:
        ops = sorted({f"{n.domain}::{n.op_type}" for n in plugins})
        if result.parsed:
            raise RtxRejected(f"TensorRT-RTX has no plugins, yet its parser accepted plugin node(s) {ops}")
        text = " ".join(result.parse_errors)
        # the parser falls back to a plugin lookup for ops it has no importer for, and that fails
        if "Plugin not found" not in text or not any(f"({n.op_type})" in text for n in plugins):
            raise RtxRejected(f"expected TensorRT-RTX's parser to name the plugin op {ops}, got: {text}")
        outcome = "plugin rejected"
    else:
        from helpers.twin import no_rtx_kernel

        # a layer type TensorRT-RTX 1.7 parses but has no kernel for (NonZero, NMS): its outputs are still compared
        no_kernel = result.parsed and result.built is False and not no_rtx_kernel([result.build_errors])
        if not result.ok and not no_kernel:
            raise RtxRejected(f"network '{network.name}': {result.reason()}")
        diffs = output_differences(result, model, network) + value_differences(result, model)
        if diffs:
            raise RtxRejected(f"network '{network.name}': TensorRT-RTX's parsed outputs differ: " + "; ".join(diffs))
        outcome = "parsed, no RTX kernel" if no_kernel else "built"
    CHECKED[key] = outcome
    STATS[outcome] += 1
    return outcome


# a test reads the outcomes as `rtx_export_outcomes`: a parameter named like the imported function would shadow it
@pytest.fixture(autouse=True, name="rtx_export_outcomes")
def rtx_parses_every_export():
    """Autouse in the modules that import it: every export_onnx result is parsed and built by
    TensorRT-RTX (see the module docstring). Yields the list of outcomes of this test's exports
    (the fixture `rtx_export_outcomes`)."""
    rtx = import_rtx()
    outcomes: list[str] = []
    with observe_exports(lambda network, model: outcomes.append(check_export(rtx, network, model))):
        yield outcomes

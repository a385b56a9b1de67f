"""Read an exported ONNX model with NVIDIA TensorRT-RTX's ONNX parser and build it: the
`trtexec --onnx` step, without a GPU (TensorRT-RTX builds ahead of time once targets are set).

    from trtbuild.onnx_export.rtx_parse import parse_with_tensorrt_rtx, output_differences
    result = parse_with_tensorrt_rtx(model)                 # parse into a STRONGLY_TYPED network, build for sm86
    assert result.ok, result.reason()
    assert not output_differences(result, model, network)   # names, shapes, dtypes of the outputs

TensorRT-RTX has no plugins, so a model with custom-domain nodes (trtbuild's Involution) fails to
parse; `custom_nodes(model)` lists them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import ModuleType

import onnx
from onnx import TensorProto

#: ONNX element type -> TensorRT DataType member name.
TRT_TYPE_NAME = {
    TensorProto.FLOAT: "FLOAT", TensorProto.FLOAT16: "HALF", TensorProto.BFLOAT16: "BF16",
    TensorProto.INT32: "INT32", TensorProto.INT64: "INT64", TensorProto.BOOL: "BOOL",
    TensorProto.INT8: "INT8", TensorProto.UINT8: "UINT8",
}
#: The optimization profile given to each dynamic input dimension: (min, opt, max).
DYNAMIC_RANGE = (1, 2, 4)

Signature = tuple[str, tuple[int, ...], str]  # (name, shape with -1 for dynamic dims, DataType name)


@dataclass
class RtxParseResult:
    """What TensorRT-RTX's parser and builder made of one ONNX model."""

    version: str
    parsed: bool
    parse_errors: list[str] = field(default_factory=list)
    inputs: list[Signature] = field(default_factory=list)
    outputs: list[Signature] = field(default_factory=list)
    num_layers: int = 0
    #: every layer output of the parsed network: {tensor name: (shape, DataType name)}
    tensors: dict = field(default_factory=dict)
    built: bool | None = None  # None: not attempted (parse failed, or build=False)
    build_errors: str = ""
    engine_bytes: int = 0
    parse_s: float = 0.0
    build_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.parsed and self.built is not False

    def reason(self) -> str:
        """Why it failed, in one line ("" when it did not)."""
        if not self.parsed:
            return f"TensorRT-RTX {self.version}'s ONNX parser rejected the model: " + " | ".join(self.parse_errors)
        if self.built is False:
            return f"TensorRT-RTX {self.version} parsed the model but did not build it: {self.build_errors}"
        return ""


def _rtx_module(rtx: ModuleType | None) -> ModuleType:
    if rtx is not None:
        return rtx
    from trtbuild.backend import load_trt

    return load_trt("tensorrt-rtx")


def _signature(tensor) -> Signature:
    return str(tensor.name), tuple(int(d) for d in tensor.shape), tensor.dtype.name


def _error_text(err) -> str:
    """One parser error as "node 'conv1' (Conv): <description>"."""
    where = ""
    try:
        if err.node_operator() or err.node_name():
            where = f"node '{err.node_name()}' ({err.node_operator()}): "
    except Exception:  # noqa: BLE001 - older bindings without node_name/node_operator
        pass
    return where + str(err.desc())


def parse_with_tensorrt_rtx(model, rtx: ModuleType | None = None, *, build: bool = True,
                            targets=("8.6",)) -> RtxParseResult:
    """Parse `model` (ModelProto, bytes or path) with `rtx.OnnxParser` into a STRONGLY_TYPED
    network and, if it parses and `build`, build it for `targets` (no GPU needed). Dynamic input
    dimensions get the profile DYNAMIC_RANGE. Never raises for a model TensorRT-RTX rejects: the
    result says why (`ok`, `reason()`)."""
    from trtbuild.engine.build import BuildError, new_network, serialize_network

    rtx = _rtx_module(rtx)
    if isinstance(model, onnx.ModelProto):
        data = model.SerializeToString()
    elif isinstance(model, (bytes, bytearray)):
        data = bytes(model)
    else:
        with open(model, "rb") as f:
            data = f.read()
    builder, network, logger = new_network(rtx)
    logger.clear()
    t0 = time.perf_counter()
    parser = rtx.OnnxParser(network, logger)
    parsed = bool(parser.parse(data))
    result = RtxParseResult(version=rtx.__version__, parsed=parsed, parse_s=time.perf_counter() - t0)
    result.parse_errors = [_error_text(parser.get_error(i)) for i in range(parser.num_errors)]
    if not parsed:
        if not result.parse_errors:
            result.parse_errors = [logger.error_text()]
        return result
    result.inputs = [_signature(network.get_input(i)) for i in range(network.num_inputs)]
    result.outputs = [_signature(network.get_output(i)) for i in range(network.num_outputs)]
    result.num_layers = network.num_layers
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for j in range(layer.num_outputs):
            name, shape, dt = _signature(layer.get_output(j))
            result.tensors[name] = (shape, dt)
    if not build:
        return result
    profile = None
    if any(d < 0 for _, shape, _ in result.inputs for d in shape):
        profile = {name: tuple(tuple(d if d >= 0 else r for d in shape) for r in DYNAMIC_RANGE)
                   for name, shape, _ in result.inputs}
    t1 = time.perf_counter()
    try:
        plan = serialize_network(rtx, builder, network, logger, profile_shapes=profile, targets=targets, progress=False)
        result.built, result.engine_bytes = True, len(plan)
    except BuildError as e:
        result.built, result.build_errors = False, str(e)
    result.build_s = time.perf_counter() - t1
    return result


def declared_outputs(model: onnx.ModelProto) -> list[Signature]:
    """The model's graph outputs as (name, shape with -1 for symbolic dims, TensorRT DataType name)."""
    sigs = []
    for vi in model.graph.output:
        tt = vi.type.tensor_type
        shape = tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim)
        sigs.append((vi.name, shape, TRT_TYPE_NAME.get(tt.elem_type, f"onnx:{tt.elem_type}")))
    return sigs


def network_outputs(network, all_outputs: bool = False) -> list[Signature]:
    """A (reference) network's marked outputs as signatures, in export order; with `all_outputs`
    followed by every other layer output (as export_onnx(all_outputs=True) orders them)."""
    tensors = list(network._outputs)
    if all_outputs:
        marked = {id(t) for t in tensors}
        tensors += [t for layer in network._layers for t in layer._outputs if id(t) not in marked]
    return [(t.name, tuple(int(d) for d in t.shape), t.dtype.name) for t in tensors]


def custom_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Nodes of a custom (non-ONNX) domain: TensorRT plugins, which TensorRT-RTX does not have."""
    return [n for n in model.graph.node if n.domain not in ("", "ai.onnx")]


def value_differences(result: RtxParseResult, model: onnx.ModelProto) -> list[str]:
    """Where a tensor of the parsed network differs in shape or type from the model's value_info of
    the same name (the reference network's inferred shape and type, which the export records for
    every intermediate value). Values the parser did not keep under their name are skipped."""
    diffs = []
    for vi in model.graph.value_info:
        if vi.name not in result.tensors:
            continue
        tt = vi.type.tensor_type
        shape = tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim)
        dt = TRT_TYPE_NAME.get(tt.elem_type, f"onnx:{tt.elem_type}")
        if result.tensors[vi.name] != (shape, dt):
            got = result.tensors[vi.name]
            diffs.append(f"value '{vi.name}': TensorRT-RTX {got[0]} {got[1]} vs ONNX value_info {shape} {dt}")
    return diffs


def output_differences(result: RtxParseResult, model: onnx.ModelProto, network=None) -> list[str]:
    """Where the parsed network's outputs differ from the model's declared outputs and, if given,
    from the reference network's marked outputs (same order; names only against the model, since
    the export may suffix a name the network repeats). Empty when they agree."""
    diffs = []
    parsed = result.outputs
    declared = declared_outputs(model)
    if [s[0] for s in parsed] != [s[0] for s in declared]:
        diffs.append(f"output names: TensorRT-RTX {[s[0] for s in parsed]} vs ONNX {[s[0] for s in declared]}")
    for (name, shape, dt), (_, dshape, ddt) in zip(parsed, declared):
        if (shape, dt) != (dshape, ddt):
            diffs.append(f"output '{name}': TensorRT-RTX {shape} {dt} vs ONNX {dshape} {ddt}")
    if network is not None:
        ref = network_outputs(network, all_outputs=len(declared) > len(network._outputs))
        if len(ref) != len(parsed):
            diffs.append(f"{len(parsed)} outputs parsed, the reference network marks {len(ref)}")
        for (name, shape, dt), (rname, rshape, rdt) in zip(parsed, ref):
            if (shape, dt) != (rshape, rdt):
                diffs.append(f"output '{name}': TensorRT-RTX {shape} {dt} vs reference '{rname}' {rshape} {rdt}")
    return diffs


__all__ = ["RtxParseResult", "parse_with_tensorrt_rtx", "declared_outputs", "network_outputs", "custom_nodes",
           "output_differences", "value_differences", "DYNAMIC_RANGE"]

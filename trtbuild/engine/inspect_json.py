"""Read what an engine inspector prints (`IEngineInspector.get_engine_information(LayerInformationFormat.JSON)`).

TensorRT changed this JSON in 11.x, and a tool that reads engines of both must read both shapes:

- TensorRT 10.x: {"Layers": [...], "Bindings": ["input_0", "output_0"]}: the I/O tensors by name only;
- TensorRT 11.x: {"Layers": [...], "I/O Tensors": [{"Name", "IOMode", "DataType", "Dimensions", "Location",
  "IsShapeInferenceIO", "ProfileInfo": [{"MinShape", "OptShape", "MaxShape", "Format"}]}]} (NVIDIA's migration
  guide "Migrating IEngineInspector Usage from TensorRT 10.x to 11.x").

"Layers" holds strings (the layer names) when the engine was built with ProfilingVerbosity.LAYER_NAMES_ONLY
(TensorRT's default) and objects ("Name", "LayerType", "Inputs"/"Outputs" with "Format/Datatype", weights as
{"Type", "Count"}) under DETAILED. A layer's precision is read from its outputs' "Format/Datatype", which TensorRT
writes either as a type ("Half") or as a format description ("Channel major FP16 format where channel % 8 == 0").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: tokens of a "Format/Datatype" or "DataType" text -> TensorRT DataType name
_TYPE_TOKENS = {"fp32": "FLOAT", "float": "FLOAT", "fp16": "HALF", "half": "HALF", "bf16": "BF16",
                "bfloat16": "BF16", "fp8": "FP8", "int8": "INT8", "uint8": "UINT8", "int32": "INT32",
                "int64": "INT64", "bool": "BOOL", "int4": "INT4", "fp4": "FP4", "e8m0": "E8M0"}


class InspectorJSONError(ValueError):
    """The text is not an engine inspector's JSON of either TensorRT schema."""


@dataclass(frozen=True)
class ProfileRange:
    """One optimization profile's shapes of an input (its values, for a shape-tensor input)."""

    min: tuple
    opt: tuple
    max: tuple


@dataclass(frozen=True)
class IOTensor:
    """An engine input or output: `dtype` a TensorRT DataType name ("FLOAT"); `shape` -1 where dynamic;
    `profiles` one range per optimization profile (inputs only); `format` TensorRT's description, where known."""

    name: str
    mode: str  # "input" or "output"
    shape: tuple | None = None
    dtype: str | None = None
    format: str | None = None
    profiles: tuple[ProfileRange, ...] = ()
    shape_tensor: bool = False


@dataclass(frozen=True)
class LayerWeight:
    """A weight of a layer as the inspector names its role ("Weights", "Bias", "Shift"...): storage type, count
    and, where the network named it (set_weights_name) and the inspector prints it, its name."""

    key: str
    type: str | None
    count: int | None
    name: str | None = None


@dataclass(frozen=True)
class LayerInfo:
    """One engine layer. `precision`: the DataType names of its outputs (what it computes in, for a computing
    layer); empty, like `type`, where the engine records names only."""

    name: str
    type: str | None = None
    precision: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    weights: tuple[LayerWeight, ...] = ()


@dataclass(frozen=True)
class InspectorInfo:
    """What an engine inspector's JSON says: its layers and its I/O tensors (names only before 11.x)."""

    schema: str  # "10.x" ("Bindings") or "11.x" ("I/O Tensors")
    layers: tuple[LayerInfo, ...]
    io: tuple[IOTensor, ...]


def dtype_name(text: str | None) -> str | None:
    """The TensorRT DataType name a "Format/Datatype" or "DataType" text names; None if it names none."""
    for token in re.split(r"[^0-9A-Za-z]+", text or ""):
        if token.lower() in _TYPE_TOKENS:
            return _TYPE_TOKENS[token.lower()]
    return None


def _tuple(value) -> tuple:
    return tuple(int(d) for d in value) if isinstance(value, list) else ()


def _layer(value, index: int) -> LayerInfo:
    if isinstance(value, str):  # ProfilingVerbosity.LAYER_NAMES_ONLY
        return LayerInfo(value)
    if not isinstance(value, dict) or not isinstance(value.get("Name"), str):
        raise InspectorJSONError(f"layer {index} of the inspector's JSON is neither a name nor an object with a "
                                 f"\"Name\" (it is {json.dumps(value)[:60]})")
    outputs = [t for t in value.get("Outputs") or [] if isinstance(t, dict)]
    inputs = [t for t in value.get("Inputs") or [] if isinstance(t, dict)]
    weights = tuple(LayerWeight(key, dtype_name(w.get("Type")) or w.get("Type"), w.get("Count"), w.get("Name"))
                    for key, w in value.items() if isinstance(w, dict) and "Count" in w and "Type" in w)
    precision = tuple(dtype_name(t.get("Format/Datatype")) or str(t.get("Format/Datatype")) for t in outputs)
    return LayerInfo(value["Name"], value.get("LayerType"), precision, tuple(str(t.get("Name")) for t in inputs),
                     tuple(str(t.get("Name")) for t in outputs), weights)


def _io_tensor(value, index: int) -> IOTensor:
    if not isinstance(value, dict) or not isinstance(value.get("Name"), str):
        raise InspectorJSONError(f"entry {index} of the inspector's \"I/O Tensors\" has no \"Name\"")
    profiles = tuple(ProfileRange(_tuple(p.get("MinShape")), _tuple(p.get("OptShape")), _tuple(p.get("MaxShape")))
                     for p in value.get("ProfileInfo") or [] if isinstance(p, dict))
    formats = [p.get("Format") for p in value.get("ProfileInfo") or [] if isinstance(p, dict) and p.get("Format")]
    return IOTensor(value["Name"], str(value.get("IOMode", "")).lower(), _tuple(value.get("Dimensions")) or None,
                    dtype_name(value.get("DataType")), formats[0] if formats else None, profiles,
                    bool(value.get("IsShapeInferenceIO", False)))


def parse_engine_information(text: str) -> InspectorInfo:
    """Parse `get_engine_information(LayerInformationFormat.JSON)` of TensorRT 10.x or 11.x (or the reference,
    which writes 11.x's shape). Raises InspectorJSONError saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InspectorJSONError(f"the engine inspector's output is not JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("Layers", []), list):
        raise InspectorJSONError("the engine inspector's JSON has no \"Layers\" list")
    layers = tuple(_layer(v, i) for i, v in enumerate(data.get("Layers", [])))
    if "I/O Tensors" in data:
        io = tuple(_io_tensor(v, i) for i, v in enumerate(data["I/O Tensors"] or []))
        return InspectorInfo("11.x", layers, io)
    if "Bindings" in data:  # names only: which are inputs is not said
        return InspectorInfo("10.x", layers, tuple(IOTensor(str(n), "") for n in data["Bindings"] or []))
    raise InspectorJSONError("the engine inspector's JSON has neither \"I/O Tensors\" (TensorRT 11.x) nor "
                             "\"Bindings\" (TensorRT 10.x)")

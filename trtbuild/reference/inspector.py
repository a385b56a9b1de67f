"""EngineInspector of the reference backend: what each layer of an engine is, as TensorRT's inspector prints it.

How much it prints follows the engine's ProfilingVerbosity (the builder config's), as in TensorRT: NONE prints
no layer information, LAYER_NAMES_ONLY the names, DETAILED the layer's type, its input and output tensors (name,
location, dimensions, type) and its parameters and weights. The JSON keys are the ones TensorRT's documentation
shows ("Name", "LayerType", "Inputs", "Outputs", "Location", "Dimensions", "Format/Datatype", "ParameterType",
"Weights"/"Bias" with "Type" and "Count"; the engine's "Layers" and TensorRT 11's "I/O Tensors"). Where TensorRT
writes a fused kernel's name (LayerType "CaskConvolution"), the reference, which fuses nothing, writes the
TensorRT LayerType's name; a named weight also gets its "Name" (the set_weights_name name, which a refit uses).
With an execution context set, the dimensions are the context's (its input shapes), else the engine's.
"""

from __future__ import annotations

import json

from .argtypes import api_types
from .core import ILogger
from .enums import DataType, LayerInformationFormat, PaddingMode, ProfilingVerbosity

#: TensorRT's spelling of data types in the inspector's output
_TYPE_NAMES = {DataType.FLOAT: "Float", DataType.HALF: "Half", DataType.BF16: "BFloat16", DataType.INT8: "Int8",
               DataType.INT32: "Int32", DataType.INT64: "Int64", DataType.BOOL: "Bool", DataType.UINT8: "UInt8",
               DataType.FP8: "FP8", DataType.INT4: "Int4", DataType.FP4: "FP4"}
#: a layer's weight keys as TensorRT's inspector names them
_WEIGHT_KEYS = {"kernel": "Weights", "bias": "Bias", "shift": "Shift", "scale": "Scale", "power": "Power",
                "weights": "Weights"}
#: parameter keys whose inspector spelling is not the camel case of the reference's key
_PARAM_KEYS = {"kernel_size_nd": "Kernel", "stride_nd": "Stride", "dilation_nd": "Dilation",
               "pre_padding": "PrePadding", "post_padding": "PostPadding", "num_output_maps": "OutMaps",
               "num_groups": "Groups"}


def _type_name(dtype) -> str:
    dtype = DataType(dtype)
    return _TYPE_NAMES.get(dtype, dtype.name)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@api_types
class EngineInspector:
    def __init__(self, engine):
        self._engine = engine
        self.execution_context = None
        self.error_recorder = None

    def _shapes(self) -> dict[int, tuple]:
        """Tensor id -> dimensions: the execution context's where one is set and its input shapes are known."""
        header = self._engine._header
        shapes = {t["id"]: tuple(t["shape"]) for t in header["inputs"]}
        for entry in header["layers"]:
            shapes.update((o["id"], tuple(o["shape"])) for o in entry["outputs"])
        context = self.execution_context
        if context is not None and context.all_binding_shapes_specified and not context._shape_inputs():
            shapes.update(self._engine._graph.infer_shapes(context._shapes))
        return shapes

    def _layer(self, index: int, shapes: dict, tensors: dict):
        """One layer's information as a JSON value (None under ProfilingVerbosity.NONE)."""
        entry = self._engine._header["layers"][index]
        verbosity = self._engine.profiling_verbosity
        if verbosity == ProfilingVerbosity.NONE:
            return None
        if verbosity == ProfilingVerbosity.LAYER_NAMES_ONLY:
            return entry["name"]

        def tensor(tid: int) -> dict:
            name, dtype = tensors[tid]
            return {"Name": name, "Location": "Device", "Dimensions": list(shapes[tid]),
                    "Format/Datatype": _type_name(dtype)}

        info = {"Name": entry["name"], "LayerType": entry["type"],
                "Inputs": [tensor(i) for i in entry["inputs"] if i != -1],
                "Outputs": [tensor(o["id"]) for o in entry["outputs"]],
                "ParameterType": _camel(entry["type"])}
        for key, value in entry["params"].items():
            if key == "padding_mode":
                value = f"k{PaddingMode(value).name}"
            info[_PARAM_KEYS.get(key, _camel(key))] = value
        arrays, names = self._engine._arrays, entry.get("weight_names", {})
        for key, ref in entry["weights"].items():
            w = {"Type": _type_name(entry.get("weight_types", {}).get(key, DataType.FLOAT)),
                 "Count": int(arrays[ref].size)}
            if key in names:
                w["Name"] = names[key]
            info[_WEIGHT_KEYS.get(key, _camel(key))] = w
        return info

    def _tensors(self) -> dict[int, tuple[str, int]]:
        header = self._engine._header
        tensors = {t["id"]: (t["name"], t["dtype"]) for t in header["inputs"]}
        for entry in header["layers"]:
            tensors.update((o["id"], (o["name"], o["dtype"])) for o in entry["outputs"])
        return tensors

    def get_layer_information(self, layer_index: int, format: LayerInformationFormat) -> str:
        if not 0 <= layer_index < self._engine.num_layers:
            self._engine._logger.log(ILogger.ERROR, f"IEngineInspector::getLayerInformation: layer index "
                                     f"{layer_index} is outside [0, {self._engine.num_layers}) (the engine has "
                                     f"{self._engine.num_layers} layers)")
            return ""
        info = self._layer(layer_index, self._shapes(), self._tensors())
        return "" if info is None else _render(info, LayerInformationFormat(format))

    def get_engine_information(self, format: LayerInformationFormat) -> str:
        shapes, tensors = self._shapes(), self._tensors()
        layers = [self._layer(k, shapes, tensors) for k in range(self._engine.num_layers)]
        layers = [info for info in layers if info is not None]
        if LayerInformationFormat(format) == LayerInformationFormat.ONELINE:
            return "".join(_render(info, LayerInformationFormat.ONELINE) + "\n" for info in layers)
        return json.dumps({"Layers": layers, "I/O Tensors": self._io(shapes)}, indent=2)

    def _io(self, shapes: dict) -> list[dict]:
        engine, out = self._engine, []
        for where, mode in (("inputs", "Input"), ("outputs", "Output")):
            for t in engine._header[where]:
                item = {"Name": t["name"], "IOMode": mode, "DataType": _type_name(t["dtype"]),
                        "Dimensions": list(shapes.get(t["id"], t["shape"])), "Location": "Device",
                        "IsShapeInferenceIO": bool(t.get("shape_tensor"))}
                if where == "inputs":
                    mn, opt, mx = engine.get_tensor_profile_shape(t["name"], 0)
                    item["ProfileInfo"] = [{"MinShape": list(mn), "OptShape": list(opt), "MaxShape": list(mx)}]
                out.append(item)
        return out


def _render(info, format: LayerInformationFormat) -> str:
    """JSON, or TensorRT's one-line form: `Key: value` pairs separated by commas, without quotes."""
    if format == LayerInformationFormat.JSON:
        return json.dumps(info, indent=2)
    return _oneline(info)[2:-2] if isinstance(info, dict) else _oneline(info)


def _oneline(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k}: {_oneline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float)) for v in value):
            return "[" + ",".join(str(v) for v in value) + "]"
        return "[ " + ", ".join(_oneline(v) for v in value) + " ]"
    return str(value)

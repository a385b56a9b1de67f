"""ONNX export of networks built on the reference backend, checked with onnxruntime.

    import trtbuild.reference as trt
    from trtbuild.onnx_export import export_onnx, run_onnxruntime
    model = export_onnx(network, "model.onnx")                 # opset 17, checked
    out = run_onnxruntime(model, {"input": x})                 # {output name: numpy array}
    rows = layerwise_against_onnxruntime("resnet18", small=True)  # per-layer errors
    result = parse_with_tensorrt_rtx(model)                    # NVIDIA's ONNX parser + builder (TensorRT-RTX)

See docs/onnx.md for the layer -> ONNX operator table and the choices made.
"""

from .export import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, check_model, export_onnx, observe_exports, save_model
from .graph import OnnxExportError
from .layerwise import compare_arrays, format_rows, layerwise_against_onnxruntime
from .ort import OnnxRuntimeError, run_onnxruntime
from .rtx_parse import RtxParseResult, parse_with_tensorrt_rtx
from .verify import as_numpy, export_and_run, random_feeds, run_reference

__all__ = ["export_onnx", "check_model", "save_model", "observe_exports", "run_onnxruntime",
           "layerwise_against_onnxruntime", "parse_with_tensorrt_rtx", "RtxParseResult", "run_reference",
           "export_and_run", "random_feeds", "as_numpy", "compare_arrays", "format_rows", "OnnxExportError",
           "OnnxRuntimeError", "DEFAULT_OPSET", "MIN_OPSET", "MAX_OPSET"]

"""Parity of engines against PyTorch, Polygraphy-style, with a layerwise mode.

    from trtbuild.parity import compare, check_parity, check_model_parity, make_inputs
    report = check_model_parity("alexnet", trt, precision="fp16", layerwise=True)
    report = check_model_parity("alexnet", trt, options=BuildOptions(precision="fp16"),
                                parity=ParityOptions(layerwise=True))      # the same, typed
    print(report.to_table()); report.to_json("parity.json"); report.to_html("parity.html")

An element fails only if |actual - expected| > atol AND > rtol * |expected|.
"""

from .check import (DISTRIBUTIONS, check_engine_matches, check_model_parity, check_parity, describe_inputs,
                    engine_input_shapes, load_weights_into, make_inputs)
from .compare import DEFAULT_TOLERANCES, Report, TensorStats, compare, compare_tensor, default_tolerances
from .layerwise import capture_module_outputs, find_jump, layerwise_rows
from .options import ParityOptions
from .profiles import check_model_parity_profiles, profile_input_shapes

__all__ = [
    "DISTRIBUTIONS", "check_engine_matches", "engine_input_shapes", "check_model_parity", "check_parity",
    "describe_inputs", "load_weights_into", "make_inputs",
    "DEFAULT_TOLERANCES", "Report", "TensorStats", "compare", "compare_tensor", "default_tolerances",
    "capture_module_outputs", "find_jump", "layerwise_rows",
    "check_model_parity_profiles", "profile_input_shapes", "ParityOptions",
]

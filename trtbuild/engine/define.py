"""Define a network for a build: the input and its cast, the model (a ModelSpec with its weights,
or a network function), the outputs named, cast and marked, extra outputs and debug tensors, on
any backend module, so that the same definition can be replayed on another backend (the cross-check).

    on = define_spec(spec, weights, options)      # or define_network(f, options)
    defined = on(trt)                             # a DefinedNetwork: builder, network, logger, ...
"""

from __future__ import annotations

import inspect
import re
from types import ModuleType
from typing import Callable, Mapping

from trtbuild.backend import backend_name
from trtbuild.layers.common import out
from trtbuild.layers.weight_names import definition_journal, name_tracked_weights

from .debug_marks import mark_debug_tensors
from .errors import BuildError
from .interrupts import calling_tensorrt
from .logging_bridge import exclusive
from .network import dtype_name, new_network, tensors_by_name
from .refit_verify import verify_names
from .options import PRECISIONS, QUANTIZED, BuildOptions, check_profile, envelope, profile_input_shape

#: what TensorRT-RTX logs as an error on a machine without a CUDA driver, on the way to reporting a
#: real error; its ahead-of-time builds need no GPU, so it says nothing about the network
_NO_GPU_NOISE = re.compile(r"cudaError 35|CUDA driver version is insufficient")


def check_quant(precision: str, quant, spec=None, fp32_io: bool = True) -> None:
    """Refuse (ValueError, one sentence) a quantization plan that does not fit the build: int8/fp8
    models (`spec`) need one made for that precision and a builder taking ``quant``; a plain
    definition (no `spec`) places its own Q/DQ (trtbuild.layers.quantize / planned) and takes none;
    native I/O makes no sense for int8/fp8 (their float type is already fp32)."""
    if precision in QUANTIZED and quant is None and spec is not None:
        raise ValueError(f"--precision {precision} needs a calibration (--calibration calib.json, written by "
                         "`trtbuild calibrate`; in Python: quant=QuantPlan.build(...))")
    if precision in QUANTIZED and not fp32_io:
        raise ValueError(f"--native-io does not apply to --precision {precision}: its non-quantized layers and its "
                         "I/O are float32 already (Q/DQ layers quantize inside the network)")
    if quant is None:
        return
    if quant.precision != precision:
        raise ValueError(f"the quantization plan is for {quant.precision}, not --precision {precision}")
    if spec is None:
        raise ValueError("a quantization plan (quant=) applies to registry models (a ModelSpec); a plain network "
                         "definition quantizes with trtbuild.layers.quantize or trtbuild.layers.planned itself")
    if "quant" not in inspect.signature(spec.build_network).parameters:
        raise ValueError(f"model '{spec.name}': its build_network takes no quant= parameter, so it cannot be built "
                         f"in {precision} or with --keep")



def quant_info(quant, network=None) -> dict:
    """What the sidecar records of a quantization plan: precision, kept modules (``fp32:layer4.*``),
    the calibration's model, method and data hash (its file's path and sha256 are added by
    whoever read the file, trtbuild.engine.model.quant_plan), and, from `network`, the layers whose
    inputs were quantized (``quantized_layers``: convolutions/matmuls, ``quantized_adds``: residual adds)."""
    info = {"precision": quant.precision, "keep": [f"{p}:{pattern}" for pattern, p in quant.keep]}
    if network is not None:
        names = [network.get_layer(i).name for i in range(network.num_layers)]
        info["quantized_layers"] = [n[: -len("/input_q/quantize")] for n in names if n.endswith("/input_q/quantize")]
        info["quantized_adds"] = [n[: -len("/residual_q/quantize")] for n in names
                                  if n.endswith("/residual_q/quantize")]
    calib = quant.calibration
    if calib is not None:
        info["calibration"] = {"model": calib.model, "method": dict(calib.method),
                               "data_sha256": (calib.data or {}).get("sha256"),
                               **getattr(quant, "calibration_file", {})}
    return info



def _takes_input(define: Callable) -> bool:
    try:
        params = [p for p in inspect.signature(define).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        return True
    return len(params) >= 2



def _add_model(trt, network, define, input_name, input_shape, precision, fp32_io, batch, profile=None):
    """Add the input, the casts and the model; return ({output name: tensor}, input tensor)."""
    compute = getattr(trt.DataType, PRECISIONS[precision])
    shape = tuple(int(d) for d in input_shape)
    if batch is not None:
        shape = (-1,) + shape[1:]
    if profile is not None:
        shape = profile_input_shape(profile)
    x = network.add_input(input_name, trt.DataType.FLOAT if fp32_io else compute, shape)
    if x is None:
        raise BuildError(f"TensorRT rejected input '{input_name}' with shape {shape}")
    h = x
    if x.dtype != compute:
        h = out(network.add_cast(x, compute), f"{input_name}/to_{precision}")
    outputs = define(network, h)
    if not isinstance(outputs, Mapping):
        outputs = {"output": outputs}
    return dict(outputs), x


def _finish_outputs(trt, network, outputs: dict, fp32_io: bool, extra: dict):
    """Name, cast (fp32 I/O) and mark the model outputs and the extra (layerwise) outputs."""
    marked = []
    for name, t in outputs.items():
        if t is None:
            raise BuildError(f"the network definition returned None for output '{name}'")
        if fp32_io and t.dtype in (trt.DataType.HALF, trt.DataType.BF16):
            t.name = f"{name}/{dtype_name(t.dtype).lower()}"
            t = out(network.add_cast(t, trt.DataType.FLOAT), f"{name}/to_fp32")
        t.name = name
        network.mark_output(t)
        marked.append(t)
    for t in extra.values():
        if not any(t is m for m in marked):  # an extra output that is a model output: TensorRT refuses marking twice
            network.mark_output(t)
            marked.append(t)



def check_spec_outputs(spec, outputs: Mapping) -> dict:
    """{name: tensor} of `spec.output_names`, in that order, from what `spec.build_network` returned;
    raises BuildError naming the model and the outputs it did not return."""
    order = list(spec.output_names)
    missing = [n for n in order if n not in outputs]
    if missing:
        raise BuildError(f"model '{spec.name}': build_network returned no tensor for outputs {missing}")
    return {n: outputs[n] for n in order}



class DefinedNetwork:
    """A network defined by build_plan's definition step, not built yet: builder, network, logger
    (keep it alive with the builder), the model name, the extra (layerwise) outputs, the names of
    the model's own outputs and the WeightMap the model read (None for a plain definition)."""

    def __init__(self, builder, network, logger, model_name, extra, model_outputs=(), weights=None, debug=None):
        self.builder, self.network, self.logger = builder, network, logger
        self.model_name, self.extra = model_name, extra
        self.model_outputs, self.weights = list(model_outputs), weights
        self.debug = dict(debug or {})  # requested name -> the tensor marked with mark_debug



def _named_tensors(network, by_name: dict, names, what: str) -> dict:
    """{name: tensor} of the named network tensors, in network order; BuildError for unknown names."""
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise BuildError(f"{what} {unknown} are not tensors of network '{network.name}' "
                         f"(it has {len(by_name)} tensors, e.g. {list(by_name)[:8]})")
    names.sort(key=lambda n: by_name[n][0])  # network order
    return {n: by_name[n][1] for n in names}




def define_spec(spec, weights, options: BuildOptions) -> Callable[[ModuleType], DefinedNetwork]:
    """`f(trt) -> DefinedNetwork` of a ModelSpec built from `weights` (a WeightMap or a weight file
    path): its input (name and shape from the spec, options.small) and its build_network with
    options.quant. options.input_name / input_shape do not apply (the spec says them)."""
    from trtbuild.weights import WeightMap

    quant = options.quant
    check_quant(options.precision, quant, spec, options.fp32_io)
    wm = weights if isinstance(weights, WeightMap) else WeightMap.load(weights) if weights is not None else None
    if wm is None:
        raise ValueError(f"model '{spec.name}': build_plan needs weights (a WeightMap or a weight file path)")
    input_shape = spec.input_shape(options.small)
    for profile in options.shape_profiles:
        check_profile(profile.as_tuple(), input_shape)
    quant_kw = {"quant": quant} if quant is not None else {}

    def model(network, x):
        outputs = check_spec_outputs(spec, spec.build_network(network, wm, x, **quant_kw))
        if quant is not None:
            quant.check_keep_reached(spec.name)  # a --keep that reached no layer must not be recorded
        return outputs

    return _definition(model, options, spec.input_name, input_shape, model_name=spec.name, weights=wm)


def define_network(define: Callable, options: BuildOptions) -> Callable[[ModuleType], DefinedNetwork]:
    """`f(trt) -> DefinedNetwork` of a network function: `define(network, x)` when options.input_shape
    is set (the input, named options.input_name or "input", and its cast are added for it), else
    `define(network)`, which adds its own inputs and handles their types itself."""
    check_quant(options.precision, options.quant, None, options.fp32_io)
    if options.input_shape is None and _takes_input(define):
        raise ValueError("build_plan: a definition f(network, x) needs input_shape (NCHW with batch 1)")
    if options.shape_profile is not None and options.input_shape is None:
        raise ValueError("build_plan: profile applies to a ModelSpec or a definition f(network, x) with input_shape; "
                         "a definition f(network) adds its own inputs (use serialize_network's profile_shapes)")
    return _definition(define, options, options.input_name or "input", options.input_shape)


def _definition(define, options: BuildOptions, input_name, input_shape, model_name=None, weights=None):
    profile = envelope(options.shape_profiles)  # the input is declared once, for every profile

    def once(trt: ModuleType) -> DefinedNetwork:
        builder, network, logger = new_network(trt)
        # TensorRT calls the logger back while it is defined; the journal notes the weights its definition reads
        with exclusive(logger), calling_tensorrt(trt), definition_journal(network):
            return _define(trt, builder, network, logger)

    def on(trt: ModuleType) -> DefinedNetwork:
        defined = once(trt)
        if options.refit != "off":  # a refit must never be accepted and then compute with stale weights
            verify_names(defined.network, lambda: once(trt))
        return defined

    def _define(trt, builder, network, logger) -> DefinedNetwork:
        logger.clear()
        network.name = options.network_name or model_name or "trtbuild"
        if input_shape is not None:
            outputs, _ = _add_model(trt, network, define, input_name, input_shape, options.precision,
                                    options.fp32_io, options.batch, profile)
        else:
            outputs = define(network) or {}
        by_name = tensors_by_name(network)
        extra = _named_tensors(network, by_name, options.extra_outputs, "extra outputs")
        debug = _named_tensors(network, by_name, options.debug_tensors, "debug tensors")
        _finish_outputs(trt, network, dict(outputs), options.fp32_io and input_shape is not None, extra)
        mark_debug_tensors(trt, network, debug, options.debug_unfused)
        name_tracked_weights(network)  # every weight holding a state_dict key's values, named after the key
        errors = [e for e in logger.errors if not _NO_GPU_NOISE.search(e)]
        if errors:  # TensorRT logs many API misuses (a duplicate tensor name...) and carries on
            raise BuildError(f"{backend_name(trt)} reported errors while network '{network.name}' was defined: "
                             f"{'; '.join(errors)}")
        return DefinedNetwork(builder, network, logger, model_name, extra, outputs, weights, debug)

    return on


def definition_step(define, *, weights=None, **options):
    """`f(trt) -> DefinedNetwork`: build_plan's definition step for a ModelSpec (with `weights`) or a
    network function, with build_plan's keyword arguments (see define_spec / define_network)."""
    opts = BuildOptions.from_kwargs(**options)
    return define_spec(define, weights, opts) if hasattr(define, "build_network") else define_network(define, opts)

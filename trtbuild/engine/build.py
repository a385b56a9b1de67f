"""Build a serialized engine (plan) from a network definition, on real TensorRT or the reference.

    plan = build_plan(trt, define, input_name="input", input_shape=(1, 3, 224, 224),
                      precision="fp16", batch=(1, 4, 8), timing_cache="trt.cache")
    plan = build_spec_plan(spec, weights, trt, BuildOptions(precision="fp16", profiles=(BatchProfile(1, 4, 8),)))

Precision is chosen the strongly typed way: the network computes in the type of the tensor the
model builder receives (fp32 / fp16 / bf16); the FP16 builder flag is never used (TensorRT 11 removed
it). By default (`fp32_io=True`) the engine keeps float32 I/O: the float32 input is cast to the
compute type first thing, and every non-float32 output is cast back to float32 at the end, which
is what most callers want. With `fp32_io=False` the input itself is HALF/BF16 and the outputs have
whatever type the model produces.

The steps live in their own modules: options (BuildOptions), define (the network definition),
network (serialize_network), records (BuildInfo); their names stay importable from here.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Callable

from trtbuild.backend import capabilities

from .define import (DefinedNetwork, check_quant, check_spec_outputs, define_network, define_spec,  # noqa: F401
                     definition_step, quant_info)
from .errors import BuildError  # noqa: F401
from .logging_bridge import make_logger  # noqa: F401
from .network import (Plan, batch_profile_shapes, describe_tensor, dtype_name, new_network,  # noqa: F401
                      serialize_network, tensors_by_name)
from .options import (PRECISIONS, QUANTIZED, BatchProfile, BuildOptions, ShapeProfile, check_batch,  # noqa: F401
                      check_precision, check_profile, profile_input_shape)
from .options import REFIT_FLAGS
from .records import BuildInfo
from .refit_record import RefitRecord
from .rtx import targets_for_precision

log = logging.getLogger("trtbuild.engine")


def build_plan(trt: ModuleType, define, options: BuildOptions | None = None, **kwargs) -> Plan:
    """Build and serialize a strongly typed network; return the plan bytes (a `Plan` with `.info`, a BuildInfo).

    options: a BuildOptions; or, as a shorthand, its fields as keyword arguments (`batch=(min, opt, max)`
    for a BatchProfile, `profile=(min, opt, max shapes)` for a ShapeProfile), not both. `weights` is a
    keyword argument either way. build_plan hands a ModelSpec to build_spec_plan and anything else to
    build_network_plan.

    define: one of
      * a ModelSpec (from trtbuild.models.registry) together with `weights` (WeightMap or path);
      * `f(network, x) -> {name: ITensor}` with `input_shape` (NCHW, batch 1): build_plan adds the
        input (and its cast), and names, casts and marks the returned outputs;
      * `f(network) -> {name: ITensor} | None`: f adds inputs and handles types itself; returned
        tensors are marked (f may also mark outputs itself).
    precision: "fp32" | "fp16" | "bf16", the type the model computes in; "int8" | "fp8": explicit
        quantization by `quant` (its other layers in fp32). fp32_io: see module doc.
    quant: a trtbuild.quant.QuantPlan for a ModelSpec whose build_network takes ``quant`` (required
        for int8/fp8; for fp16/bf16 it only keeps modules in fp32). Described in
        `plan.info.quantization`. A plain definition built as int8/fp8 places its own Q/DQ
        (trtbuild.layers.quantize or planned) in a FLOAT network and takes no `quant`.
    batch: (min, opt, max) for a dynamic batch dimension (input declared with -1), or None.
    profile: ``(min shape, opt shape, max shape)`` of the model input, batch first, for any dynamic dims
        (e.g. H and W of a fully convolutional model): dims whose min and max differ are declared -1,
        the others static; instead of `batch`. The model's builder must accept those dynamic dims.
    profiles: several optimization profiles (a tuple of BatchProfile, or of ShapeProfile), added in
        order; instead of batch and profile. The input is declared dynamic in every dim any of them varies.
    workspace: memory-pool limit for MemoryPoolType.WORKSPACE in bytes.
    timing_cache: file loaded if present and rewritten atomically after a successful build; an
        existing file that is not a timing cache raises TimingCacheError (it is never overwritten).
        TensorRT-RTX has no timing cache (deprecated and unused there): a warning says so and the
        file is left alone.
    progress: True draws tqdm bars, None only on a terminal, False none.
    extra_outputs: names of intermediate tensors to mark as outputs too (layerwise parity).
    debug_tensors: names of tensors to mark as debug tensors (mark_debug; layerwise parity without
        extra outputs): the engine keeps only the model's outputs, and an IDebugListener gets them.
    debug_unfused: mark with mark_unfused_tensors_as_debug_tensors() instead of mark_debug (which
        blocks fusions on TensorRT); debug_tensors are then only named, and those fused away are not reported.
    tf32: allow TF32 for float32 math on real TensorRT (cleared by default for exact fp32).
    targets: TensorRT-RTX target compute capabilities (default 8.6, 8.9, 12.0; for fp8 8.9, 12.0, as
        TensorRT-RTX compiles FP8 for sm89 and newer only); other backends refuse them.
    version_compatible, exclude_lean_runtime, hardware_compat: version- and hardware-compatible builds
        (trtbuild.engine.compat: what each backend does with them); recorded in plan.info.
    cross_check: also define and build the same network on the reference backend and with
        TensorRT-RTX, and raise CrossCheckError (naming the first differing tensor and its layer)
        unless both accept it and every output and shared tensor has the same name, shape and
        dtype. The result is in `plan.info.cross_check`.
    `plan.info.model_outputs` names the model's outputs, `.extra_outputs` maps each extra output
    to the name it was marked under, `.debug_tensors` (when given) each debug tensor to its name. For a ModelSpec,
    `plan.info.weight_tensors` counts the weights and `.unused_weights` lists
    those the builder never read (BatchNorm num_batches_tracked counters left out).
    Raises BuildError quoting TensorRT's errors if the build fails; nothing is written then.
    """
    weights = kwargs.pop("weights", None)
    if options is not None and kwargs:
        raise ValueError(f"build_plan: pass either options=BuildOptions(...) or keyword arguments "
                         f"({', '.join(sorted(kwargs))}), not both")
    options = options if options is not None else BuildOptions.from_kwargs(**kwargs)
    if hasattr(define, "build_network"):  # a ModelSpec (registry or user model)
        return build_spec_plan(define, weights, trt, options)
    return build_network_plan(define, trt, options)


def build_spec_plan(spec, weights, trt: ModuleType, options: BuildOptions | None = None, *,
                    defined: DefinedNetwork | None = None) -> Plan:
    """Build the ModelSpec `spec` with `weights` (a WeightMap or a weight file path); see build_plan.
    plan.info records the model, its bound options, small, and the weights it read.

    defined: the network already defined on `trt` by define_spec(spec, weights, options), e.g. to
    hash it for the engine cache first: it is built as it is instead of being defined again (a
    cross-check still defines it on its other backends)."""
    options = options if options is not None else BuildOptions()
    return _build(trt, define_spec(spec, weights, options), options, spec.input_name, spec, defined)


def build_network_plan(define: Callable, trt: ModuleType, options: BuildOptions | None = None) -> Plan:
    """Build the network function `define`: `define(network, x)` with options.input_shape (the input and
    its cast are added), else `define(network)` (it adds its own inputs); see build_plan."""
    options = options if options is not None else BuildOptions()
    return _build(trt, define_network(define, options), options, options.input_name or "input")


def _reusing(defined: DefinedNetwork, trt: ModuleType, on):
    """`on`, except that on `trt` it gives `defined` (already defined there) instead of defining again."""
    def reuse(backend: ModuleType) -> DefinedNetwork:
        return defined if backend is trt else on(backend)
    return reuse


def _build(trt: ModuleType, on, options: BuildOptions, input_name: str, spec=None,
           defined: DefinedNetwork | None = None) -> Plan:
    """Serialize what `on` defines (cross-checked if asked) and describe it in plan.info; `defined`,
    if given, is what `on(trt)` defined already, used as it is."""
    if defined is not None:
        on = _reusing(defined, trt, on)
    targets = options.targets
    if capabilities(trt).needs_targets or options.cross_check:  # fp8: sm89 and newer (none for sm86)
        targets = targets_for_precision(options.precision, targets)
    shapes = [{input_name: p.as_tuple()} for p in options.shape_profiles]
    batches = list(options.batches)
    serialize = dict(batch=batches[0] if len(batches) == 1 else batches or None,
                     profile_shapes=shapes[0] if len(shapes) == 1 else shapes or None,
                     workspace=options.workspace, timing_cache=options.timing_cache, progress=options.progress,
                     tf32=options.tf32, targets=targets,
                     refit=REFIT_FLAGS[options.refit], strip_weights=options.strip_weights,
                     compat=options.compat if options.compat.requested else None)
    if options.cross_check:
        from .cross_check import cross_check_build

        plan, defined, result = cross_check_build(trt, on, serialize)
    else:
        defined, result = on(trt), None
        plan = serialize_network(trt, defined.builder, defined.network, defined.logger, **serialize)
    quant = options.quant
    plan.info = BuildInfo.assemble(
        options, plan.info, defined, spec=spec, cross_check=result,
        weights_usage=defined.weights.usage() if defined.weights is not None else None,  # what the builder left unread
        quantization=quant_info(quant, defined.network) if quant is not None else None,
        refit=RefitRecord.of_build(options, defined.network, defined.weights))
    if result is not None and result.rtx_plan is not plan:  # keep the TensorRT-RTX engine, described alike
        result.rtx_plan.info = plan.info.with_network(result.rtx_plan.info)
        plan.rtx_plan = result.rtx_plan
    return plan

"""Build a serialized engine (plan) from a network definition, on real TensorRT or the reference.

    plan = build_plan(trt, define, input_name="input", input_shape=(1, 3, 224, 224),
                      precision="fp16", batch=(1, 4, 8), timing_cache="trt.cache")

Precision is chosen the strongly typed way: the network computes in the type of the tensor the
model builder receives (fp32 / fp16 / bf16); the FP16 builder flag is never used (TensorRT 11 removed
it). By default (`fp32_io=True`) the engine keeps float32 I/O: the float32 input is cast to the
compute type first thing, and every non-float32 output is cast back to float32 at the end, which
is what most callers want. With `fp32_io=False` the input itself is HALF/BF16 and the outputs have
whatever type the model produces.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable, Mapping

from trtbuild.backend import backend_name, capabilities, product_name
from trtbuild.layers.common import out
from trtbuild.reference.host_memory import IHostMemory, host_memory_of

from .debug_marks import mark_debug_tensors
from .errors import BuildError
from .logging_bridge import exclusive, make_logger
from .interrupts import calling_tensorrt
from .plugins import plugins_used
from .progress import make_progress_monitor
from .timing_cache import load_timing_cache
from .rtx import set_targets, target_list, targets_for_precision
from .serialize import atomic_write_bytes

log = logging.getLogger("trtbuild.engine")

#: precision -> the float type the network computes in. int8/fp8: explicit quantization (Q/DQ from a
#: trtbuild.quant.QuantPlan around convolutions, matmuls and residual adds); every other layer stays FLOAT
PRECISIONS = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16", "int8": "FLOAT", "fp8": "FLOAT"}
QUANTIZED = ("int8", "fp8")
#: what TensorRT-RTX logs as an error on a machine without a CUDA driver, on the way to reporting a
#: real error; its ahead-of-time builds need no GPU, so it says nothing about the network
_NO_GPU_NOISE = re.compile(r"cudaError 35|CUDA driver version is insufficient")


class Plan(IHostMemory):
    """Serialized engine bytes with `.info`, a JSON-able description of the build
    (precision, inputs, outputs, profile, extra outputs) that becomes part of the sidecar.
    A buffer in memory of its own, like TensorRT's IHostMemory (``bytes(plan)`` copies it out,
    ``memoryview(plan)`` does not). build_plan returns a Plan, or the reference's IHostMemory with
    `.info` set (the plan was written there once; nothing is copied). After a cross-check of another
    backend, `.rtx_plan` is the TensorRT-RTX engine (bytes-like with `.info` too: a
    cross_check.SpilledPlan, memory-mapped from a temporary file)."""

    info: dict

    @classmethod
    def copy_of(cls, data, info: dict) -> "Plan":
        plan = host_memory_of(data, cls)
        plan.info = info
        return plan


def check_precision(precision: str) -> str:
    """Return the precision if it is one of fp32/fp16/bf16/int8/fp8, else raise ValueError."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not supported; choose one of {', '.join(PRECISIONS)}")
    return precision


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


def check_batch(batch) -> tuple[int, int, int] | None:
    """Validate a (min, opt, max) batch profile; None means a static batch."""
    if batch is None:
        return None
    try:
        mn, opt, mx = (int(b) for b in batch)
    except (TypeError, ValueError):
        raise ValueError(f"batch must be (min, opt, max) integers, got {batch!r}") from None
    if not 1 <= mn <= opt <= mx:
        raise ValueError(f"batch profile needs 1 <= min <= opt <= max, got min={mn}, opt={opt}, max={mx}")
    return mn, opt, mx


def check_profile(profile, input_shape=None, batch=None) -> tuple[tuple, tuple, tuple] | None:
    """Validate an input profile ``(min shape, opt shape, max shape)`` (each batch first, e.g. (1, 3, 64, 64)),
    None for a static input: one rank, every dim >= 1 and min <= opt <= max; it excludes `batch` (say the
    batch range in the shapes) and, given `input_shape`, must have its rank. Raises ValueError in one sentence."""
    if profile is None:
        return None
    try:
        mn, opt, mx = (tuple(int(d) for d in shape) for shape in profile)
    except (TypeError, ValueError):
        raise ValueError(f"profile must be (min, opt, max) shapes of integers, got {profile!r}") from None
    if batch is not None:
        raise ValueError("pass either batch or profile, not both (a profile's shapes give the batch range too)")
    rank = len(input_shape) if input_shape is not None else len(mn)
    if not len(mn) == len(opt) == len(mx) == rank:
        raise ValueError(f"profile shapes {mn}, {opt}, {mx} must all have the input's rank {rank}")
    if not all(1 <= a <= b <= c for a, b, c in zip(mn, opt, mx)):
        raise ValueError(f"profile needs 1 <= min <= opt <= max in every dim, got min {mn}, opt {opt}, max {mx}")
    return mn, opt, mx


def profile_input_shape(profile) -> tuple:
    """The input shape a profile declares: -1 where min and max differ, the common size elsewhere."""
    mn, _, mx = profile
    return tuple(a if a == c else -1 for a, c in zip(mn, mx))


def dtype_name(dt) -> str:
    """TensorRT DataType name (FLOAT, HALF, BF16, ...) of a real or reference DataType."""
    return getattr(dt, "name", str(dt).split(".")[-1])


def describe_tensor(t) -> dict:
    return {"name": t.name, "shape": [int(d) for d in t.shape], "dtype": dtype_name(t.dtype)}


def tensors_by_name(network) -> dict[str, tuple[int, object]]:
    """{tensor name: (producing layer index or -1 for inputs, tensor)} for every tensor of the network."""
    found: dict[str, tuple[int, object]] = {}
    for i in range(network.num_inputs):
        t = network.get_input(i)
        found[t.name] = (-1, t)
    for li in range(network.num_layers):
        layer = network.get_layer(li)
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            found.setdefault(t.name, (li, t))
    return found


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


def new_network(trt: ModuleType, logger=None):
    """(builder, network, logger): an empty strongly typed network of `trt` (real or reference).

    `logger` defaults to `make_logger(trt)`, which captures TensorRT's errors; keep it alive as
    long as the builder (TensorRT holds a pointer to it)."""
    logger = logger if logger is not None else make_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    return builder, network, logger


def check_spec_outputs(spec, outputs: Mapping) -> dict:
    """{name: tensor} of `spec.output_names`, in that order, from what `spec.build_network` returned;
    raises BuildError naming the model and the outputs it did not return."""
    order = list(spec.output_names)
    missing = [n for n in order if n not in outputs]
    if missing:
        raise BuildError(f"model '{spec.name}': build_network returned no tensor for outputs {missing}")
    return {n: outputs[n] for n in order}


def batch_profile_shapes(network, batch) -> dict[str, tuple] | None:
    """{input name: (min, opt, max) shapes} for a (min, opt, max) dynamic batch, or None for a
    fully static network and batch None. Raises ValueError for dynamic inputs without a batch, a
    batch with static inputs, or dynamic dimensions other than the batch."""
    batch = check_batch(batch)
    if batch is None and not any(d < 0 for i in range(network.num_inputs) for d in network.get_input(i).shape):
        return None
    if batch is None:
        raise ValueError("the network has dynamic input dimensions; pass batch=(min, opt, max)")
    shapes = {}
    for i in range(network.num_inputs):
        t = network.get_input(i)
        dims = list(t.shape)
        if dims[0] >= 0:
            raise ValueError(f"input '{t.name}' {tuple(dims)} has a static batch dimension; declare it as -1 "
                             "to build with a batch profile")
        if any(d < 0 for d in dims[1:]):
            raise ValueError(f"input '{t.name}' {tuple(dims)}: only the batch dimension may be dynamic")
        shapes[t.name] = tuple(tuple([b] + dims[1:]) for b in batch)
    return shapes


def _add_profile(builder, config, shapes: Mapping[str, tuple]) -> dict:
    """Add one optimization profile with {input: (min, opt, max)}; return its JSON-able description."""
    profile = builder.create_optimization_profile()
    info = {}
    for name, (mn, opt, mx) in shapes.items():
        profile.set_shape(name, tuple(mn), tuple(opt), tuple(mx))
        info[name] = {"min": list(mn), "opt": list(opt), "max": list(mx)}
    config.add_optimization_profile(profile)
    return info


def _input_of(define, input_name) -> str:
    """The name build_plan gives the model input (a ModelSpec's, else `input_name` or "input")."""
    return define.input_name if hasattr(define, "build_network") else input_name or "input"


def _as_plan(serialized, info: dict):
    """`serialized` with `.info`: the reference's IHostMemory itself, or a Plan copied from
    TensorRT's IHostMemory (which the caller then frees)."""
    if isinstance(serialized, IHostMemory):
        serialized.info = info  # the reference's IHostMemory: no copy of a large plan
        return serialized
    return Plan.copy_of(memoryview(serialized), info)


def serialize_network(trt: ModuleType, builder, network, logger, *, batch=None, profile_shapes=None,
                      workspace: int | None = None, timing_cache: str | os.PathLike | None = None,
                      progress: bool | None = True, tf32: bool = False, targets=None) -> bytes:
    """Build an already defined network (outputs marked) with `builder`; return a `Plan` whose
    `.info` holds network, inputs, outputs, profile, workspace, tf32, build_phases and, on
    TensorRT-RTX, targets (the compute capabilities the engine was built for).

    Dynamic inputs need either `batch=(min, opt, max)` (only the batch dimension dynamic, see
    batch_profile_shapes) or `profile_shapes={input name: (min, opt, max)}` (any dimensions).
    workspace, timing_cache, progress, tf32: as in build_plan. `logger` is the builder's logger
    (from make_logger / new_network); its errors are quoted in the BuildError raised on failure.
    targets: TensorRT-RTX only: target compute capabilities ("sm86,sm89" or ("8.6", "8.9"); default
    NVIDIA's portable set 8.6, 8.9, 12.0); its builder needs them to build without a GPU.
    """
    if targets is not None and not capabilities(trt).needs_targets:
        raise ValueError(f"target compute capabilities apply to TensorRT-RTX only; {product_name(trt)} builds for "
                         "the GPU it runs on")
    if network.num_outputs == 0:
        raise BuildError(f"network '{network.name}' has no outputs: return them from the definition or mark them")
    if batch is not None and profile_shapes is not None:
        raise ValueError("pass either batch or profile_shapes, not both")
    config = builder.create_builder_config()
    shapes = batch_profile_shapes(network, batch) if profile_shapes is None else dict(profile_shapes)
    profile_info = _add_profile(builder, config, shapes) if shapes else None
    if workspace is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace))
    if not tf32:
        config.clear_flag(trt.BuilderFlag.TF32)
    built_targets = set_targets(trt, config, targets) if capabilities(trt).needs_targets else None
    cache_path = Path(timing_cache) if timing_cache is not None else None
    if load_timing_cache(trt, config, cache_path, logger) is None:
        cache_path = None
    monitor = make_progress_monitor(trt, progress)
    config.progress_monitor = monitor

    with exclusive(logger):  # this build's errors only, even with builds in other threads
        logger.clear()
        try:
            with calling_tensorrt(trt):  # Ctrl-C cancels the build and is raised after it, never in a callback
                serialized = builder.build_serialized_network(network, config)
        finally:
            monitor.close()
        errors = logger.error_text()
    if serialized is None:
        where = f" for {target_list(built_targets)}" if built_targets else ""
        raise BuildError(f"{backend_name(trt)} failed to build network '{network.name}'{where}: {errors}")
    if cache_path is not None:
        cache = config.get_timing_cache()
        if cache is not None:
            atomic_write_bytes(cache_path, cache.serialize())
    return _as_plan(serialized, {
        "network": network.name,
        "inputs": [describe_tensor(network.get_input(i)) for i in range(network.num_inputs)],
        "outputs": [describe_tensor(network.get_output(i)) for i in range(network.num_outputs)],
        "profile": profile_info, "workspace": workspace, "tf32": bool(tf32), "build_phases": list(monitor.phases),
        "plugins": plugins_used(trt, network),
        **({"targets": list(built_targets)} if built_targets else {}),
    })


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


def definition_step(define, *, weights=None, input_name=None, input_shape=None, precision="fp32",
                    fp32_io=True, batch=None, extra_outputs=(), small=False, network_name=None, debug_tensors=(),
                    debug_unfused=False, quant=None, profile=None):
    """`f(trt) -> DefinedNetwork`: build_plan's definition step (input, casts, the model, named and
    marked outputs) for any backend module, so the same definition can be replayed on another
    backend (the cross-check). Arguments as in build_plan."""
    check_precision(precision)
    batch = check_batch(batch)
    spec = define if hasattr(define, "build_network") else None
    check_quant(precision, quant, spec, fp32_io)
    quant_kw = {"quant": quant} if quant is not None else {}
    model_name = None
    if spec is not None:
        from trtbuild.weights import WeightMap

        wm = weights if isinstance(weights, WeightMap) else WeightMap.load(weights) if weights is not None else None
        if wm is None:
            raise ValueError(f"model '{spec.name}': build_plan needs weights (a WeightMap or a weight file path)")
        model_name, input_name = spec.name, spec.input_name
        input_shape = spec.input_shape(small)

        def define(network, x, _spec=spec, _wm=wm):  # the spec becomes a plain definition
            outputs = check_spec_outputs(_spec, _spec.build_network(network, _wm, x, **quant_kw))
            if quant is not None:
                quant.check_keep_reached(_spec.name)  # a --keep that reached no layer must not be recorded
            return outputs
    elif input_shape is None and _takes_input(define):
        raise ValueError("build_plan: a definition f(network, x) needs input_shape (NCHW with batch 1)")
    profile = check_profile(profile, input_shape, batch)
    if profile is not None and input_shape is None:
        raise ValueError("build_plan: profile applies to a ModelSpec or a definition f(network, x) with input_shape; "
                         "a definition f(network) adds its own inputs (use serialize_network's profile_shapes)")

    weights_map = wm if spec is not None else None

    def on(trt: ModuleType) -> DefinedNetwork:
        builder, network, logger = new_network(trt)
        with exclusive(logger), calling_tensorrt(trt):  # TensorRT calls the logger back while it is defined
            return _define(trt, builder, network, logger)

    def _define(trt, builder, network, logger) -> DefinedNetwork:
        logger.clear()
        network.name = network_name or model_name or "trtbuild"
        if input_shape is not None:
            outputs, _ = _add_model(trt, network, define, input_name or "input", input_shape, precision, fp32_io, batch,
                                    profile)
        else:
            outputs = define(network) or {}
        by_name = tensors_by_name(network)
        extra = _named_tensors(network, by_name, extra_outputs, "extra outputs")
        debug = _named_tensors(network, by_name, debug_tensors, "debug tensors")
        _finish_outputs(trt, network, dict(outputs), fp32_io and input_shape is not None, extra)
        mark_debug_tensors(trt, network, debug, debug_unfused)
        errors = [e for e in logger.errors if not _NO_GPU_NOISE.search(e)]
        if errors:  # TensorRT logs many API misuses (a duplicate tensor name...) and carries on
            raise BuildError(f"{backend_name(trt)} reported errors while network '{network.name}' was defined: "
                             f"{'; '.join(errors)}")
        return DefinedNetwork(builder, network, logger, model_name, extra, outputs, weights_map, debug)

    return on


def build_plan(trt: ModuleType, define, *, weights=None, input_name: str | None = None, input_shape=None,
               precision: str = "fp32", fp32_io: bool = True, batch=None, workspace: int | None = None,
               timing_cache: str | os.PathLike | None = None, progress: bool | None = True,
               extra_outputs: Iterable[str] = (), tf32: bool = False, small: bool = False,
               network_name: str | None = None, targets=None, cross_check: bool = False,
               debug_tensors: Iterable[str] = (), debug_unfused: bool = False, quant=None, profile=None) -> bytes:
    """Build and serialize a strongly typed network; return the plan bytes (a `Plan` with `.info`).

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
        `plan.info["quantization"]`. A plain definition built as int8/fp8 places its own Q/DQ
        (trtbuild.layers.quantize or planned) in a FLOAT network and takes no `quant`.
    batch: (min, opt, max) for a dynamic batch dimension (input declared with -1), or None.
    profile: ``(min shape, opt shape, max shape)`` of the model input, batch first, for any dynamic dims
        (e.g. H and W of a fully convolutional model): dims whose min and max differ are declared -1,
        the others static; instead of `batch`. The model's builder must accept those dynamic dims.
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
    cross_check: also define and build the same network on the reference backend and with
        TensorRT-RTX, and raise CrossCheckError (naming the first differing tensor and its layer)
        unless both accept it and every output and shared tensor has the same name, shape and
        dtype. The result is in `plan.info["cross_check"]`.
    `plan.info["model_outputs"]` names the model's outputs, `["extra_outputs"]` maps each extra output
    to the name it was marked under, `["debug_tensors"]` (when given) each debug tensor to its name. For a ModelSpec,
    `plan.info["weight_tensors"]` counts the weights and `["unused_weights"]` lists
    those the builder never read (BatchNorm num_batches_tracked counters left out).
    Raises BuildError quoting TensorRT's errors if the build fails; nothing is written then.
    """
    on = definition_step(define, weights=weights, input_name=input_name, input_shape=input_shape,
                         precision=precision, fp32_io=fp32_io, batch=batch, extra_outputs=extra_outputs,
                         small=small, network_name=network_name, debug_tensors=debug_tensors,
                         debug_unfused=debug_unfused, quant=quant, profile=profile)
    profile = check_profile(profile, None, batch)
    if capabilities(trt).needs_targets or cross_check:  # fp8: sm89 and newer (TensorRT-RTX cannot compile FP8 for sm86)
        targets = targets_for_precision(precision, targets)
    shapes = None if profile is None else {_input_of(define, input_name): profile}
    serialize = dict(batch=check_batch(batch), profile_shapes=shapes, workspace=workspace, timing_cache=timing_cache,
                     progress=progress, tf32=tf32, targets=targets)
    if cross_check:
        from .cross_check import cross_check_build

        plan, defined, result = cross_check_build(trt, on, serialize)
    else:
        defined, result = on(trt), None
        plan = serialize_network(trt, defined.builder, defined.network, defined.logger, **serialize)
    built = plan.info
    usage = defined.weights.usage() if defined.weights is not None else None  # what the builder left unread
    plan.info = {
        "model": defined.model_name, "network": built["network"],
        **({"options": dict(define.chosen)} if getattr(define, "chosen", None) else {}),
        "precision": precision, "fp32_io": bool(fp32_io),
        "small": bool(small) if hasattr(define, "build_network") else None,
        "inputs": built["inputs"], "outputs": built["outputs"], "profile": built["profile"],
        "plugins": built["plugins"], "workspace": workspace, "tf32": bool(tf32),
        "model_outputs": defined.model_outputs,
        "extra_outputs": {n: t.name for n, t in defined.extra.items()}, "build_phases": built["build_phases"],
        **({"debug_tensors": {n: t.name for n, t in defined.debug.items()}} if defined.debug else {}),
        **({"debug_unfused": True} if debug_unfused else {}),
        **({"targets": built["targets"]} if "targets" in built else {}),
        **({"cross_check": result.to_dict()} if result is not None else {}),
        **({"weight_tensors": usage[0], "unused_weights": usage[1]} if usage is not None else {}),
        **({"quantization": quant_info(quant, defined.network)} if quant is not None else {}),
    }
    if result is not None and result.rtx_plan is not plan:  # keep the TensorRT-RTX engine, described alike
        rtx_info = result.rtx_plan.info
        result.rtx_plan.info = {**plan.info, **{k: rtx_info[k] for k in ("inputs", "outputs", "plugins", "build_phases",
                                                                    "targets")}}
        plan.rtx_plan = result.rtx_plan
    return plan

"""Build an already defined network into a plan: the builder config (profile, workspace, tf32,
TensorRT-RTX targets, timing cache, progress), the build itself with TensorRT's errors captured,
and the NetworkInfo that describes what was built.

    builder, network, logger = new_network(trt)
    ...                                              # add layers, mark outputs
    plan = serialize_network(trt, builder, network, logger, batch=(1, 2, 4))
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Mapping

from trtbuild.backend import backend_name, capabilities, product_name
from trtbuild.reference.host_memory import IHostMemory, host_memory_of

from .errors import BuildError
from .interrupts import calling_tensorrt
from .logging_bridge import exclusive, make_logger
from .options import check_batch
from .plugins import plugins_used
from .progress import make_progress_monitor
from .records import BuildInfo, NetworkInfo
from .rtx import set_targets, target_list
from .serialize import atomic_write_bytes
from .timing_cache import load_timing_cache


class Plan(IHostMemory):
    """Serialized engine bytes with `.info`, the description of the build that becomes part of the
    sidecar: a BuildInfo from build_plan (precision, inputs, outputs, profile, extra outputs...), a
    NetworkInfo from serialize_network; both read like dicts too.
    A buffer in memory of its own, like TensorRT's IHostMemory (``bytes(plan)`` copies it out,
    ``memoryview(plan)`` does not). build_plan returns a Plan, or the reference's IHostMemory with
    `.info` set (the plan was written there once; nothing is copied). After a cross-check of another
    backend, `.rtx_plan` is the TensorRT-RTX engine (bytes-like with `.info` too: a
    cross_check.SpilledPlan, memory-mapped from a temporary file)."""

    info: BuildInfo | NetworkInfo

    @classmethod
    def copy_of(cls, data, info) -> "Plan":
        plan = host_memory_of(data, cls)
        plan.info = info
        return plan



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



def new_network(trt: ModuleType, logger=None):
    """(builder, network, logger): an empty strongly typed network of `trt` (real or reference).

    `logger` defaults to `make_logger(trt)`, which captures TensorRT's errors; keep it alive as
    long as the builder (TensorRT holds a pointer to it)."""
    logger = logger if logger is not None else make_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    return builder, network, logger



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


def _profile_list(network, batch, profile_shapes) -> list[dict]:
    """[{input name: (min, opt, max)}] of every profile to add: `batch` is one (min, opt, max) or a
    list of them, `profile_shapes` one {input: (min, opt, max)} or a list of them; [] when static."""
    if profile_shapes is not None:
        several = isinstance(profile_shapes, (list, tuple))
        return [dict(p) for p in profile_shapes] if several else [dict(profile_shapes)]
    if batch is not None and len(batch) and isinstance(batch[0], (list, tuple)):
        return [batch_profile_shapes(network, b) for b in batch]
    shapes = batch_profile_shapes(network, batch)
    return [shapes] if shapes else []


def _add_profile(builder, config, shapes: Mapping[str, tuple]) -> dict:
    """Add one optimization profile with {input: (min, opt, max)}; return its JSON-able description."""
    profile = builder.create_optimization_profile()
    info = {}
    for name, (mn, opt, mx) in shapes.items():
        profile.set_shape(name, tuple(mn), tuple(opt), tuple(mx))
        info[name] = {"min": list(mn), "opt": list(opt), "max": list(mx)}
    config.add_optimization_profile(profile)
    return info



def _as_plan(serialized, info):
    """`serialized` with `.info`: the reference's IHostMemory itself, or a Plan copied from
    TensorRT's IHostMemory (which the caller then frees)."""
    if isinstance(serialized, IHostMemory):
        serialized.info = info  # the reference's IHostMemory: no copy of a large plan
        return serialized
    return Plan.copy_of(memoryview(serialized), info)



def serialize_network(trt: ModuleType, builder, network, logger, *, batch=None, profile_shapes=None,
                      workspace: int | None = None, timing_cache: str | os.PathLike | None = None,
                      progress: bool | None = True, tf32: bool = False, targets=None, refit: str | None = None,
                      strip_weights: bool = False, compat=None) -> bytes:
    """Build an already defined network (outputs marked) with `builder`; return a `Plan` whose
    `.info` is a NetworkInfo: network, inputs, outputs, profile, workspace, tf32, build_phases and, on
    TensorRT-RTX, targets (the compute capabilities the engine was built for).

    Dynamic inputs need either `batch=(min, opt, max)` (only the batch dimension dynamic, see
    batch_profile_shapes) or `profile_shapes={input name: (min, opt, max)}` (any dimensions); a
    list of either adds several optimization profiles, in order (`.info.profiles` lists them all).
    workspace, timing_cache, progress, tf32: as in build_plan. `logger` is the builder's logger
    (from make_logger / new_network); its errors are quoted in the BuildError raised on failure.
    targets: TensorRT-RTX only: target compute capabilities ("sm86,sm89" or ("8.6", "8.9"); default
    NVIDIA's portable set 8.6, 8.9, 12.0); its builder needs them to build without a GPU.
    refit: the name of a refit BuilderFlag (REFIT_IDENTICAL, REFIT) to set, or None; strip_weights sets
    STRIP_PLAN (a plan without its refittable weights, which must be refit before it runs).
    compat: a trtbuild.engine.compat.Compatibility (version / hardware compatibility) or None; refused
    (CompatibilityError, one sentence) before the build where the backend cannot honour it.
    """
    if targets is not None and not capabilities(trt).needs_targets:
        raise ValueError(f"target compute capabilities apply to TensorRT-RTX only; {product_name(trt)} builds for "
                         "the GPU it runs on")
    if network.num_outputs == 0:
        raise BuildError(f"network '{network.name}' has no outputs: return them from the definition or mark them")
    if batch is not None and profile_shapes is not None:
        raise ValueError("pass either batch or profile_shapes, not both")
    if compat is not None:
        compat.check_backend(trt)
    config = builder.create_builder_config()
    profiles_info = [_add_profile(builder, config, shapes) for shapes in _profile_list(network, batch, profile_shapes)]
    profile_info = profiles_info[0] if profiles_info else None
    if workspace is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace))
    if not tf32:
        config.clear_flag(trt.BuilderFlag.TF32)
    if refit is not None:
        config.set_flag(getattr(trt.BuilderFlag, refit))
    if strip_weights:
        config.set_flag(trt.BuilderFlag.STRIP_PLAN)
    if compat is not None:
        compat.apply(trt, config)
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
    return _as_plan(serialized, NetworkInfo(
        network=network.name,
        inputs=[describe_tensor(network.get_input(i)) for i in range(network.num_inputs)],
        outputs=[describe_tensor(network.get_output(i)) for i in range(network.num_outputs)],
        profile=profile_info, profiles=profiles_info if len(profiles_info) > 1 else None, workspace=workspace,
        tf32=bool(tf32), build_phases=list(monitor.phases),
        plugins=plugins_used(trt, network), targets=list(built_targets) if built_targets else None))

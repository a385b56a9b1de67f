"""Run a serialized engine with torch tensors, on real TensorRT (CUDA) or the reference backend.

    engine = load_engine("engines/alexnet.engine")
    out = engine(input=torch.rand(1, 3, 224, 224, device=engine.device))   # {"prob": tensor}

Real TensorRT: outputs are allocated with torch on the GPU, and the engine runs with
set_input_shape + set_tensor_address + execute_async_v3 on torch's current CUDA stream. The
reference runs the same calls; its buffers live on trtbuild.reference.runtime.device().
An Engine (its execution context) must not be used by two threads at once.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Mapping

import numpy as np
import torch

from trtbuild.backend import BackendError, backend_name, is_reference, load_trt

from .compat import lean_runtime_embedded
from .errors import EngineCompatibilityError, EngineError, EngineFileError, EngineInputError
from .profile_select import ProfileSwitch, check_pinned, check_sidecar_profiles, profile_ranges
from .interrupts import calling_tensorrt
from .logging_bridge import make_logger
from .options import format_range
from .sidecar import Sidecar
from .serialize import (check_sidecar_matches_plan, looks_like_reference_plan, looks_like_rtx_engine, read_engine_file,
                        read_sidecar, sidecar_backend)

TORCH_DTYPES = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT32": torch.int32,
                "INT64": torch.int64, "INT8": torch.int8, "UINT8": torch.uint8, "BOOL": torch.bool,
                "FP8": torch.float8_e4m3fn}


@dataclass(frozen=True)
class TensorInfo:
    """An engine I/O tensor: its name, shape (-1 = dynamic), torch dtype and (inputs) profile range."""

    name: str
    shape: tuple
    dtype: torch.dtype
    is_input: bool
    min_shape: tuple | None = None
    max_shape: tuple | None = None
    trt_dtype: str = "FLOAT"


def torch_dtype(trt_dtype) -> torch.dtype:
    """The torch dtype of a TensorRT DataType (real or reference)."""
    name = getattr(trt_dtype, "name", str(trt_dtype).split(".")[-1])
    if name not in TORCH_DTYPES:
        raise EngineError(f"TensorRT data type {name} has no torch equivalent supported by trtbuild")
    return TORCH_DTYPES[name]


def io_tensors(engine, trt: ModuleType) -> dict[str, TensorInfo]:
    """{name: TensorInfo} of an ICudaEngine's I/O tensors, in engine order (profile 0 ranges)."""
    tensors = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        shape = tuple(int(d) for d in engine.get_tensor_shape(name))
        mn = mx = None
        if is_input:
            mn = mx = shape
            if any(d < 0 for d in shape):
                mn, _, mx = (tuple(int(d) for d in s) for s in engine.get_tensor_profile_shape(name, 0))
        dt = engine.get_tensor_dtype(name)
        tensors[name] = TensorInfo(name, shape, torch_dtype(dt), is_input, mn, mx,
                                   getattr(dt, "name", str(dt).split(".")[-1]))
    return tensors


def check_input_shape(info: TensorInfo, shape: tuple, ranges: bool = True) -> None:
    """Raise EngineInputError naming the input if `shape` does not fit the engine (rank, static
    dimensions and, with `ranges`, profile 0's range; an engine of several profiles checks
    ranges with choose_profile)."""
    name = info.name
    if len(shape) != len(info.shape):
        raise EngineInputError(f"input '{name}' has shape {shape} (rank {len(shape)}) but the engine expects "
                               f"rank {len(info.shape)}: {info.shape}")
    for i, (d, want, lo, hi) in enumerate(zip(shape, info.shape, info.min_shape, info.max_shape)):
        if want >= 0 and d != want:
            raise EngineInputError(f"input '{name}' has shape {shape} but the engine expects {info.shape} "
                                   f"(dimension {i} must be {want})")
        if ranges and not lo <= d <= hi:
            raise EngineInputError(f"input '{name}' has shape {shape}: dimension {i} is {d}, outside the "
                                   f"optimization profile range [{lo}, {hi}] the engine was built for")


def check_input_names(inputs, tensors: dict[str, TensorInfo], engine_name: str) -> None:
    """Raise EngineInputError for unknown or missing input names."""
    input_names = [n for n, t in tensors.items() if t.is_input]
    unknown = [n for n in inputs if n not in input_names]
    if unknown:
        raise EngineInputError(f"engine {engine_name} has no input named {', '.join(map(repr, unknown))}; "
                               f"its inputs are {input_names}")
    missing = [n for n in input_names if n not in inputs]
    if missing:
        raise EngineInputError(f"input {', '.join(map(repr, missing))} is missing; engine {engine_name} "
                               f"needs {input_names}")


def open_engine(trt: ModuleType, plan, name: str, host_code_allowed: bool = False):
    """(logger, runtime, engine, context): deserialize `plan` with a capturing logger and create its
    execution context. The runtime must outlive the engine. Raises EngineFileError (plan not
    loadable) or EngineError (no context), quoting TensorRT's log.

    host_code_allowed sets runtime.engine_host_code_allowed: pass True only for a plan whose own sidecar
    says it embeds the lean runtime (compat.lean_runtime_embedded), since the runtime then runs code
    from the plan in this process; TensorRT refuses such a plan otherwise, and trusts no other by default."""
    backend = backend_name(trt)
    logger = make_logger(trt)
    runtime = trt.Runtime(logger)
    if host_code_allowed:
        runtime.engine_host_code_allowed = True
    with calling_tensorrt(trt):  # a Ctrl-C while TensorRT logs is raised after it returns
        engine = runtime.deserialize_cuda_engine(plan if isinstance(plan, (bytes, mmap.mmap)) else bytes(plan))
    if engine is None:
        raise EngineFileError(f"{name} could not be loaded by {backend}: {logger.error_text()}")
    context = engine.create_execution_context()
    if context is None:
        raise EngineError(f"{name}: {backend} could not create an execution context: {logger.error_text()}")
    return logger, runtime, engine, context


class EngineIO:
    """`input_names` / `output_names` of an engine wrapper from its `tensors` ({name: TensorInfo},
    engine order); shared by Engine (torch) and PycudaEngine (numpy)."""

    tensors: dict[str, TensorInfo]

    @property
    def input_names(self) -> list[str]:
        return [n for n, t in self.tensors.items() if t.is_input]

    @property
    def output_names(self) -> list[str]:
        return [n for n, t in self.tensors.items() if not t.is_input]


def _backend_device(trt: ModuleType) -> torch.device:
    if is_reference(trt):
        from trtbuild.reference.runtime import device

        dev = device()
    else:
        if not torch.cuda.is_available():
            raise EngineError("running a TensorRT engine with torch tensors needs torch with CUDA; "
                              "use trtbuild.engine.pycuda_runner.PycudaEngine on machines without it")
        dev = torch.device("cuda")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


class Engine(ProfileSwitch, EngineIO):
    """A deserialized engine plus one execution context, taking and returning torch tensors.
    `sidecar`: the engine's Sidecar (load_engine), by default the plan's `info` (a BuildInfo, from
    build_plan); both read like dicts too, and a dict passed in is kept as it is."""

    def __init__(self, plan, trt: ModuleType | None = None, *, sidecar=None, name: str = "engine",
                 profile: int | None = None):
        if trt is None:
            trt = _trt_for_plan(plan, sidecar, name)
        self.trt = trt
        self.name = name
        self.sidecar = sidecar if sidecar is not None else getattr(plan, "info", None)  # plan info of a build_plan plan
        self.backend = backend_name(trt)
        self.logger, self.runtime, self._engine, self.context = open_engine(
            trt, plan, name, host_code_allowed=lean_runtime_embedded(self.sidecar))
        self.device = _backend_device(trt)
        self.tensors: dict[str, TensorInfo] = io_tensors(self._engine, trt)
        #: [{dynamic input: (min, max)}] of every optimization profile, in index order
        self.profiles: list[dict[str, tuple[tuple, tuple]]] = profile_ranges(self._engine, self.tensors)
        self._in_flight: tuple = ()
        self.profile = check_pinned(profile, self.profiles, name)  # pinned: run() refuses shapes outside it

    # -- description ---------------------------------------------------------------------
    def describe(self) -> str:
        """One line per I/O tensor: name, shape (profile range for dynamic inputs), dtype."""
        lines = []
        for t in self.tensors.values():
            rng = f" (profile {format_range(t.min_shape, t.max_shape)})" if t.is_input and t.min_shape != t.max_shape \
                else ""
            lines.append(f"{'input ' if t.is_input else 'output'} {t.name}: {t.shape}{rng} {t.dtype}")
        if len(self.profiles) > 1:  # the lines above give profile 0's ranges
            for k, ranges in enumerate(self.profiles):
                lines.append(f"profile {k}: " + ", ".join(f"{n} {format_range(*r)}" for n, r in ranges.items()))
        return "\n".join(lines)

    # -- running ---------------------------------------------------------------------------
    def _check_input(self, name: str, value) -> torch.Tensor:
        info = self.tensors[name]
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if not isinstance(value, torch.Tensor):
            raise EngineInputError(f"input '{name}' must be a torch.Tensor (or numpy array), "
                                   f"got {type(value).__name__}")
        if value.dtype != info.dtype:
            raise EngineInputError(f"input '{name}' has dtype {value.dtype} but the engine expects {info.dtype}; "
                                   f"convert it with .to({info.dtype})")
        if value.device != self.device:
            raise EngineInputError(f"input '{name}' is on device {value.device} but this {self.backend} engine runs on "
                                   f"{self.device}; move it with .to('{self.device}')")
        check_input_shape(info, tuple(value.shape), ranges=self._single_profile)
        return value.contiguous()

    def _feeds(self, inputs: Mapping) -> dict[str, torch.Tensor]:
        check_input_names(inputs, self.tensors, self.name)
        return {n: self._check_input(n, inputs[n]) for n in self.input_names}

    def _stream_handle(self, stream) -> int:
        if self.device.type != "cuda":
            return 0
        if stream is None:
            stream = torch.cuda.current_stream(self.device)
        return int(stream.cuda_stream) if hasattr(stream, "cuda_stream") else int(stream)

    def run(self, inputs: Mapping | None = None, *, stream=None, synchronize: bool = False,
            **named) -> dict[str, torch.Tensor]:
        """Run the engine on {input name: tensor}; return {output name: tensor} in engine order.

        Inputs must have the engine's dtype, live on `engine.device` and fit an optimization
        profile (EngineInputError otherwise): with several, the first whose ranges contain every
        input shape is switched to, unless Engine(profile=k) pinned one. Work is queued on `stream`
        (default: torch's current stream); pass synchronize=True to wait for it. An output whose
        shape depends on the data (-1 until the run: a non-zero or NMS count) gets its memory
        through an IOutputAllocator (output_allocator.py) and comes back with its real shape.
        """
        feeds = self._feeds({**(inputs or {}), **named})
        ctx = self.context
        self.logger.clear()
        handle = self._stream_handle(stream)
        self._select_profile({n: tuple(t.shape) for n, t in feeds.items()}, handle)
        for n, t in feeds.items():
            if ctx.set_input_shape(n, tuple(t.shape)) is False:
                raise EngineInputError(f"{self.backend} rejected shape {tuple(t.shape)} for input '{n}': "
                                       f"{self.logger.error_text()}")
        outputs, later = {}, {}
        for n in self.output_names:
            shape = tuple(int(d) for d in ctx.get_tensor_shape(n))
            if any(d < 0 for d in shape):  # data-dependent: its memory is asked for during the run
                later[n] = self.tensors[n].dtype
            else:
                outputs[n] = torch.empty(shape, dtype=self.tensors[n].dtype, device=self.device)
        allocator = None
        if later:
            from .output_allocator import torch_output_allocator

            allocator = torch_output_allocator(self.trt, self.device, later)
            for n in later:
                ctx.set_output_allocator(n, allocator)
        for n, t in {**feeds, **outputs}.items():
            ctx.set_tensor_address(n, t.data_ptr())
        if not ctx.execute_async_v3(handle):
            raise EngineError(f"{self.backend} failed to execute {self.name}: {self.logger.error_text()}")
        if allocator is not None:  # the shapes are known once execute_async_v3 returns (notify_shape)
            outputs.update((n, allocator.tensor(n)) for n in later)
            outputs = {n: outputs[n] for n in self.output_names}
        self._in_flight = (feeds, outputs, allocator)  # keep buffers alive while the stream works on them
        if synchronize and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return outputs

    def refit(self, weights) -> "Engine":
        """Refit this engine in place from `weights` (a state_dict, a WeightMap or a weight file path): every weight
        the build named is recomputed from its state_dict keys, folds included (trtbuild.engine.refit). Returns
        the engine; raises RefitError in one sentence (missing key, wrong shape, baked-in weight changed)."""
        from .refit import refit_engine

        refit_engine(self, weights)
        return self

    def __call__(self, *args, **named) -> dict[str, torch.Tensor]:
        """engine(x) for a single-input engine, or engine(name=tensor, ...)."""
        if args:
            if len(args) != 1 or len(self.input_names) != 1 or named:
                raise EngineInputError(f"pass inputs by name ({self.input_names}); a positional tensor only works "
                                       "for a single-input engine")
            named = {self.input_names[0]: args[0]}
        return self.run(named)


def _trt_for_plan(plan, sidecar, name: str) -> ModuleType:
    """The backend that can load `plan`: from the sidecar if any, else from the plan's first bytes."""
    if sidecar is not None:
        backend = sidecar_backend(sidecar)
    else:
        backend = ("reference" if looks_like_reference_plan(plan) else
                   "tensorrt-rtx" if looks_like_rtx_engine(plan) else "tensorrt")
    if backend == "reference":
        return load_trt("reference")
    if backend not in ("tensorrt", "tensorrt-rtx"):
        raise EngineCompatibilityError(f"{name}: its sidecar names an unknown backend {backend!r}")
    try:
        return load_trt(backend)
    except BackendError as e:
        product = "TensorRT-RTX" if backend == "tensorrt-rtx" else "TensorRT"
        from .rtx import target_list

        side = Sidecar.of(sidecar) if sidecar is not None else None
        where = target_list(side.build.targets) if side is not None and side.build.targets else \
            side.gpu if side is not None else None
        built = (f"was built with {product} {side.tensorrt_version} for {where}"
                 if side is not None else f"is not a trtbuild reference plan, so it needs real {product}")
        raise EngineCompatibilityError(f"{name} {built}, but {product} cannot be used here: {e}") from None


def load_engine(path: str | os.PathLike, trt: ModuleType | None = None, *, profile: int | None = None) -> Engine:
    """Load an engine file: check its sidecar (format, TensorRT version, GPU architecture, sha256) before
    TensorRT sees it, then deserialize and check that the sidecar's I/O tensors and precision fit the
    plan. trt=None picks the backend named by the sidecar; profile: as Engine's (pin one optimization profile)."""
    path = Path(path)
    if trt is None:
        sidecar = read_sidecar(path) if path.is_file() else None
        if sidecar is not None:
            trt = _trt_for_plan(b"", sidecar, str(path))
        elif path.is_file():
            with open(path, "rb") as f:
                trt = _trt_for_plan(f.read(16), None, str(path))
    plan, sidecar = read_engine_file(path, trt)
    engine = Engine(plan, trt, sidecar=sidecar, name=str(path), profile=profile)
    if sidecar is not None:
        from .options import PRECISIONS

        io = {n: (list(t.shape), t.trt_dtype, t.is_input) for n, t in engine.tensors.items()}
        precision = sidecar.build.precision
        if precision is not None and precision not in PRECISIONS:
            raise EngineFileError(f"the sidecar of {path} names an unknown precision {precision!r} "
                                  f"(known: {', '.join(PRECISIONS)}); rebuild the engine")
        check_sidecar_matches_plan(sidecar, io, PRECISIONS.get(precision), path, plan=plan)
        check_sidecar_profiles(sidecar.build.all_profiles, engine.profiles, path)
    return engine

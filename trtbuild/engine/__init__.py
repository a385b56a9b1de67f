"""Build, serialize, load and run engines on real TensorRT (10.x/11.x) or the reference backend.

    from trtbuild.engine import build_plan, save_engine, make_sidecar, load_engine
    plan = build_plan(trt, define, input_shape=(1, 3, 32, 32), precision="fp16", batch=(1, 2, 4))
    # the same, typed: build_network_plan(define, trt, BuildOptions(input_shape=(1, 3, 32, 32),
    #                                     precision="fp16", profiles=(BatchProfile(1, 2, 4),)))
    save_engine("net.engine", plan, make_sidecar(trt, plan))      # atomic, writes net.engine.json too
    engine = load_engine("net.engine")                              # checks version / GPU / sha256 first
    outputs = engine(input=torch.rand(2, 3, 32, 32, device=engine.device))

Precision: the network is strongly typed; fp16/bf16 come from the input type plus casts, never
from the weakly typed FP16 builder flag. By default engines keep float32 inputs and outputs (fp32_io=True).
"""

from .build import (PRECISIONS, Plan, batch_profile_shapes, build_network_plan, build_plan, build_spec_plan,
                    check_batch, check_precision, check_spec_outputs, new_network, serialize_network)
from .device import device_info, gpu_info
from .errors import (BuildError, CrossCheckError, EngineCompatibilityError, EngineError, EngineFileError,
                     EngineInputError, EngineWriteError, TimingCacheError)
from .logging_bridge import make_logger
from .model import (build_and_save, build_model, default_engine_path, default_weights_path, ensure_weights,
                    export_seeded_weights, get_spec, quant_plan, select_backend)
from .options import BatchProfile, BuildOptions, ShapeProfile
from .progress import make_progress_monitor
from .records import BuildInfo, NetworkInfo
from .runner import Engine, TensorInfo, load_engine, torch_dtype
from .serialize import (atomic_write_bytes, check_compatible, make_sidecar, read_engine_file, read_sidecar,
                        save_engine, sha256_bytes, sha256_file, sidecar_path)
from .sidecar import Sidecar

__all__ = [
    "PRECISIONS", "Plan", "batch_profile_shapes", "build_plan", "build_spec_plan", "build_network_plan",
    "BuildOptions", "BatchProfile", "ShapeProfile", "BuildInfo", "NetworkInfo", "Sidecar", "check_batch",
    "check_precision",
    "check_spec_outputs", "new_network", "serialize_network", "device_info", "gpu_info",
    "BuildError", "CrossCheckError", "EngineCompatibilityError", "EngineError", "EngineFileError", "EngineInputError",
    "EngineWriteError", "TimingCacheError",
    "make_logger", "make_progress_monitor", "build_and_save", "build_model", "default_engine_path",
    "default_weights_path", "ensure_weights", "export_seeded_weights", "get_spec", "quant_plan", "select_backend",
    "Engine", "TensorInfo", "load_engine", "torch_dtype", "atomic_write_bytes", "check_compatible",
    "make_sidecar", "read_engine_file", "read_sidecar", "save_engine", "sha256_bytes", "sha256_file",
    "sidecar_path",
]

"""gpu_check.sh's steps that need PyTorch: env (versions, GPU properties, copy bandwidth), probe (what the
script needs to know first) and extension (build and check the involution torch extension)."""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import time

from . import ROOT, key


def cmd_env(args) -> int:
    import torch

    key(f"python {platform.python_version()} ({sys.executable})")
    key(f"torch {torch.__version__}, built for CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    if not torch.cuda.is_available():
        key("torch.cuda.is_available() is False: no GPU visible to PyTorch")
        return 1
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    key(f"GPU {props.name}, compute capability {props.major}.{props.minor}, {props.multi_processor_count} SMs, "
        f"{props.total_memory / 2**30:.1f} GiB, driver CUDA {_driver_version()}")
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_involution import peak_bandwidth

    peak, source = peak_bandwidth(dev)
    key(f"peak memory bandwidth {peak / 1e12:.2f} TB/s ({source})" if peak else f"peak memory bandwidth {source}")
    # What a plain device-to-device copy reaches: the practical ceiling for a bandwidth-bound kernel.
    n = 1 << 28  # 1 GiB of fp32
    src, dst = torch.empty(n, device=dev), torch.empty(n, device=dev)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    ms = sorted(times)[len(times) // 2]
    moved = 2 * n * 4
    key(f"device-to-device copy: {moved / ms / 1e9:.0f} GB/s (1 GiB read + 1 GiB written, median of 10: {ms:.3f} ms)"
        + (f", {100 * moved / ms * 1e3 / peak:.0f}% of peak" if peak else ""))
    key(f"TF32 in PyTorch by default here: matmul {torch.backends.cuda.matmul.allow_tf32}, "
        f"cuDNN {torch.backends.cudnn.allow_tf32}; NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE')}")
    return 0


def _driver_version() -> str:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        pass
    return "unknown"


def cmd_probe(args) -> int:
    """What gpu_check.sh needs to know first, as "field: value" lines: python, torch, cuda (torch's
    CUDA build), gpu (True/False), sm (the GPU's SM number, e.g. 90, for nvcc and TORCH_CUDA_ARCH_LIST),
    pytest, and models (the zoo's model names); torch-error, pytest-error or models-error say what did
    not import. Exit 1 when torch does not import."""
    print(f"python: {platform.python_version()}")
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - the probe reports any failure as its answer
        print(f"torch-error: {type(e).__name__}: {e}")
        return 1
    print(f"torch: {torch.__version__}")
    print(f"cuda: {torch.version.cuda}")
    gpu = torch.cuda.is_available()
    print(f"gpu: {gpu}")
    if gpu:
        major, minor = torch.cuda.get_device_capability()
        print(f"sm: {major}{minor}")
    try:
        import pytest

        print(f"pytest: {pytest.__version__}")
    except ImportError as e:
        print(f"pytest-error: {e}")
    sys.path.insert(0, str(ROOT))
    try:
        from trtbuild.models import registry

        print(f"models: {' '.join(registry.names())}")
    except Exception as e:  # noqa: BLE001 - the probe reports any failure as its answer
        print(f"models-error: {type(e).__name__}: {e}")
    return 0


def cmd_extension(args) -> int:
    """Build the involution extension (torch.utils.cpp_extension), then run it once against the unfold op."""
    import torch

    sys.path.insert(0, str(ROOT))
    from torch.utils.cpp_extension import CUDA_HOME

    from trtbuild.ops import _involution_ext
    from trtbuild.ops.involution import InvolutionFunction, involution_reference

    key(f"CUDA_HOME {CUDA_HOME}; TORCH_EXTENSIONS_DIR {os.environ.get('TORCH_EXTENSIONS_DIR', '(torch default)')}; "
        f"TORCH_CUDA_ARCH_LIST {os.environ.get('TORCH_CUDA_ARCH_LIST', '(torch default)')}")
    start = time.perf_counter()
    try:
        module = _involution_ext.load_extension()
    except RuntimeError as e:
        key(f"extension build FAILED after {time.perf_counter() - start:.1f} s: {e}")
        return 1
    key(f"extension {module.__name__} built and loaded in {time.perf_counter() - start:.1f} s ({module.__file__})")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 64, 28, 28, generator=gen).cuda()
    w = torch.randn(2, 4, 49, 28, 28, generator=gen).cuda()
    params = (7, 1, 3, 1, 4)
    err = (InvolutionFunction.apply(x, w, *params).double() - involution_reference(x.double(), w.double(), *params))
    worst = err.abs().max().item()
    key(f"forward 2x64x28x28 K7 g4 fp32: max |kernel - unfold reference (fp64)| = {worst:.2e}")
    return 0 if worst < 1e-4 else 1

#!/usr/bin/env python3
"""The Python steps of scripts/gpu_check.sh, one subcommand each, and its pytest plugin.

Every subcommand prints what it found; lines starting with ``key: `` are the figures that
gpu_check.sh copies into its report. Exit code 0 means the step passed.

    python scripts/gpu_check_steps.py env                # versions, GPU properties, copy bandwidth
    python scripts/gpu_check_steps.py probe              # Python, torch, GPU, SM number, the zoo's models
    python scripts/gpu_check_steps.py extension          # build and smoke-test the involution torch extension
    python scripts/gpu_check_steps.py rtx-install --wheels DIR --target SITE
    python scripts/gpu_check_steps.py rtx-current        # a tiny TensorRT-RTX engine for ComputeCapability.CURRENT
    python scripts/gpu_check_steps.py pack-rtx WHEEL... --out .whl/tensorrt_rtx_site.tar.xz

As a pytest plugin (``-p gpu_check_steps`` with scripts/ on PYTHONPATH) it turns TF32 off in
PyTorch before every test (matmul and cuDNN) and prints the settings in the session header;
gpu_check.sh also sets NVIDIA_TF32_OVERRIDE=0, which turns it off in cuBLAS and cuDNN themselves.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import os
import platform
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: pack-rtx's largest xz dictionary: the size of libtensorrt_rtx.so.1 (234 MB) rounded up
PACK_DICT_MAX = 256 << 20
#: the device tool's limit on what travels with a call (working tree and carried paths together)
CARRY_LIMIT = 64 << 20


def key(text: str) -> None:
    print(f"key: {text}", flush=True)


# ---------------------------------------------------------------- pytest plugin (-p gpu_check_steps)

def _tf32_off() -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def pytest_configure(config) -> None:
    _tf32_off()


def pytest_runtest_setup(item) -> None:
    _tf32_off()  # again before each test, in case an earlier one turned it back on


def pytest_report_header(config) -> str:
    import torch

    return (f"TF32 off: torch.backends.cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
            f"torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
            f"float32_matmul_precision={torch.get_float32_matmul_precision()}, "
            f"NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE', '(unset)')}")


# ---------------------------------------------------------------- subcommands

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


def cmd_rtx_install(args) -> int:
    """Install the TensorRT-RTX wheels (or a pack-rtx archive) from a local folder into a --target folder."""
    wheels = Path(args.wheels)
    target = Path(args.target)
    whl = sorted(wheels.glob("tensorrt_rtx*.whl"))
    packs = sorted(wheels.glob("tensorrt_rtx*.tar.xz"))
    split = {}
    for part in wheels.glob("tensorrt_rtx*.tar.xz.part*"):
        name, _, number = part.name.rpartition(".part")
        if number.isdigit():
            split.setdefault(name, []).append((int(number), part))
    if not whl and not packs and not split:
        key(f"no TensorRT-RTX wheels (tensorrt_rtx*.whl) or pack-rtx archive (tensorrt_rtx*.tar.xz[.partN]) "
            f"in {wheels}")
        return 1
    target.mkdir(parents=True, exist_ok=True)
    for name, parts in sorted(split.items()):
        numbers = sorted(n for n, _ in parts)
        if numbers != list(range(len(numbers))):
            key(f"the parts of {name} are incomplete: found part numbers {numbers}")
            return 1
        joined = target / name
        with open(joined, "wb") as out:
            for _, part in sorted(parts):
                out.write(part.read_bytes())
        key(f"joined {len(parts)} parts into {name}")
        packs.append(joined)
    for pack in packs:
        with tarfile.open(pack) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and security backports)
                tar.extractall(target, filter="data")
            else:
                tar.extractall(target)
        key(f"unpacked {pack.name} ({pack.stat().st_size / 2**20:.1f} MiB)")
        if pack.parent == target:
            pack.unlink()
    if whl:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
               "--disable-pip-version-check", "--target", str(target), *map(str, whl)]
        print("+ " + " ".join(cmd), flush=True)
        if subprocess.run(cmd).returncode != 0:
            key(f"pip could not install {', '.join(p.name for p in whl)}")
            return 1
        key(f"installed {', '.join(p.name for p in whl)}")
    # The tensorrt_rtx package itself is a two-line re-export of tensorrt_rtx_bindings, shipped as an sdist
    # (tensorrt_rtx_cu13-*.tar.gz) that cannot be built offline: write the same two lines where it is missing.
    if (target / "tensorrt_rtx_bindings").is_dir() and not (target / "tensorrt_rtx" / "__init__.py").is_file():
        (target / "tensorrt_rtx").mkdir(exist_ok=True)
        (target / "tensorrt_rtx" / "__init__.py").write_text(
            "from tensorrt_rtx_bindings import *  # noqa: F401,F403\nfrom tensorrt_rtx_bindings import __version__\n")
        key("wrote tensorrt_rtx/__init__.py (the tensorrt_rtx_cu13 sdist's re-export of tensorrt_rtx_bindings)")
    probe = subprocess.run([sys.executable, "-c", "import tensorrt_rtx; print(tensorrt_rtx.__version__)"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(target)})
    if probe.returncode != 0:
        key(f"`import tensorrt_rtx` fails after the install: {probe.stderr.strip().splitlines()[-1:]}")
        return 1
    key(f"import tensorrt_rtx: version {probe.stdout.strip()}")
    return 0


def cmd_rtx_current(args) -> int:
    """Build a tiny conv+ReLU network with TensorRT-RTX for ComputeCapability.CURRENT and run it.

    Uses tensorrt_rtx directly (no trtbuild code) so that the answer is TensorRT-RTX's own."""
    import numpy as np
    import torch

    try:
        import tensorrt_rtx as trt
    except Exception as e:  # noqa: BLE001 - ImportError or OSError from its libraries: recorded as the answer
        key(f"ANSWER: `import tensorrt_rtx` failed: {type(e).__name__}: {e}")
        return 1
    key(f"tensorrt_rtx {trt.__version__} from {Path(trt.__file__).parent}")
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        key(f"GPU {torch.cuda.get_device_name()}, compute capability {major}.{minor}")

    class Logger(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.messages = []

        def log(self, severity, msg):
            self.messages.append((severity, msg))
            if severity != trt.ILogger.VERBOSE:
                print(f"[TensorRT-RTX {getattr(severity, 'name', severity)}] {msg}", flush=True)

        def errors(self):
            return [m for s, m in self.messages if s in (trt.ILogger.ERROR, trt.ILogger.INTERNAL_ERROR)]

    logger = Logger()
    stage = "create the builder"
    try:
        builder = trt.Builder(logger)
        network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
        rng = np.random.default_rng(0)
        weight = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
        bias = rng.standard_normal(8).astype(np.float32)
        x = network.add_input("x", trt.float32, (1, 4, 8, 8))
        conv = network.add_convolution_nd(x, 8, (3, 3), trt.Weights(weight), trt.Weights(bias))
        conv.padding_nd = (1, 1)
        relu = network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
        relu.get_output(0).name = "y"
        network.mark_output(relu.get_output(0))
        config = builder.create_builder_config()
        stage = "set ComputeCapability.CURRENT"
        config.num_compute_capabilities = 1
        accepted = config.set_compute_capability(trt.ComputeCapability.CURRENT, 0)
        key(f"config.set_compute_capability(ComputeCapability.CURRENT, 0) returned {accepted}")
        stage = "build_serialized_network"
        start = time.perf_counter()
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            key(f"ANSWER: build_serialized_network returned None after {time.perf_counter() - start:.1f} s; "
                f"errors: {logger.errors() or '(none logged)'}")
            return 1
        key(f"built a {plan.nbytes} B engine for CURRENT in {time.perf_counter() - start:.1f} s")
        stage = "deserialize_cuda_engine"
        runtime = trt.Runtime(logger)
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            refused = [m for m in logger.errors() if "does not support this compute capability" in m]
            if refused:  # TensorRT-RTX's documented answer on a GPU it has no kernels for (Hopper, sm90)
                key("ANSWER: TensorRT-RTX built for CURRENT but refuses to run engines on this GPU's compute "
                    f"capability, as documented (no Hopper target): {refused[0]}")
                return 0
            key(f"ANSWER: deserialize_cuda_engine returned None; errors: {logger.errors() or '(none logged)'}")
            return 1
        stage = "create_execution_context"
        context = engine.create_execution_context()
        if context is None:
            key(f"ANSWER: create_execution_context returned None; errors: {logger.errors() or '(none logged)'}")
            return 1
        stage = "execute_async_v3"
        xt = torch.from_numpy(rng.standard_normal((1, 4, 8, 8)).astype(np.float32)).cuda()
        yt = torch.empty(1, 8, 8, 8, device="cuda")
        context.set_tensor_address("x", xt.data_ptr())
        context.set_tensor_address("y", yt.data_ptr())
        stream = torch.cuda.current_stream()
        ok = context.execute_async_v3(stream.cuda_stream)
        stream.synchronize()
        if not ok:
            key(f"ANSWER: execute_async_v3 returned False; errors: {logger.errors() or '(none logged)'}")
            return 1
        expected = torch.relu(torch.nn.functional.conv2d(xt.double(), torch.from_numpy(weight).double().cuda(),
                                                         torch.from_numpy(bias).double().cuda(), padding=1))
        worst = (yt.double() - expected).abs().max().item()
        key(f"ANSWER: the CURRENT engine ran on this GPU; max |engine - fp64 PyTorch| = {worst:.2e}")
        return 0 if worst < 1e-3 else 1
    except Exception as e:  # noqa: BLE001 - whatever TensorRT-RTX raises is the answer recorded
        key(f"ANSWER: {stage} raised {type(e).__name__}: {e}; errors logged: {logger.errors() or '(none)'}")
        return 1


def cmd_pack_rtx(args) -> int:
    """Repack the TensorRT-RTX wheels into one xz archive small enough to carry to a device machine.

    The libs wheel (libtensorrt_rtx.so.1, 234 MB unpacked) is 95 MB, over the 64 MiB a device call
    carries; xz with the x86 filter and a dictionary as large as the library brings both wheels to
    about 61 MiB. Every file is kept: the bindings load the ONNX parser library too. With --split-mib
    the archive is cut into parts (NAME.part0, NAME.part1, ...) to carry in separate calls."""
    import lzma

    out = Path(args.out)
    members = []
    for wheel in map(Path, args.wheels):
        with zipfile.ZipFile(wheel) as zf:
            members += [(info.filename, zf.read(info)) for info in zf.infolist() if not info.is_dir()]
        print(f"read {wheel.name}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A dictionary as large as the input lets xz find repeats across the whole library.
    total = sum(len(data) for _, data in members)
    filters = [{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME,
                                          "dict_size": max(1 << 20, min(PACK_DICT_MAX, total))}]
    start = time.perf_counter()
    with lzma.open(out, "wb", format=lzma.FORMAT_XZ, filters=filters) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if ".so" in name else 0o644
            tar.addfile(info, io.BytesIO(data))
    size = out.stat().st_size
    tree = _working_tree_bytes(exclude=out)
    print(f"wrote {out}: {size / 2**20:.1f} MiB in {time.perf_counter() - start:.0f} s")
    if tree is not None:
        fits = size + tree <= CARRY_LIMIT
        print(f"with the working tree ({tree / 2**20:.1f} MiB) a call would carry {(size + tree) / 2**20:.1f} MiB: "
              + ("fits the 64 MiB limit" if fits else "over the 64 MiB limit: use --split-mib and two calls"))
    if args.split_mib:
        parts = []
        with open(out, "rb") as whole:
            while chunk := whole.read(args.split_mib << 20):
                parts.append(out.with_name(f"{out.name}.part{len(parts)}"))
                parts[-1].write_bytes(chunk)
        out.unlink()
        print("parts: " + ", ".join(f"{part} ({part.stat().st_size / 2**20:.1f} MiB)" for part in parts))
    return 0


def _working_tree_bytes(exclude: Path) -> int | None:
    """Bytes of what a device call sends of this repository (tracked and untracked-not-ignored files),
    or None where git cannot tell."""
    try:
        listing = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"],
                                 capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    paths = (ROOT / name for name in listing.split("\0") if name)
    return sum(p.stat().st_size for p in paths if p.is_file() and p.resolve() != exclude.resolve())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="versions, GPU properties and a measured device-to-device copy bandwidth")
    sub.add_parser("probe", help="Python, torch, GPU, SM number and the zoo's models, as field: value lines")
    sub.add_parser("extension", help="build the involution torch extension and check it once")
    p = sub.add_parser("rtx-install", help="install TensorRT-RTX from local wheels or a pack-rtx archive")
    p.add_argument("--wheels", required=True,
                   help="folder holding tensorrt_rtx*.whl and/or tensorrt_rtx*.tar.xz (or its .partN files)")
    p.add_argument("--target", required=True, help="folder to install into (put it on PYTHONPATH)")
    sub.add_parser("rtx-current", help="build and run a tiny TensorRT-RTX engine for ComputeCapability.CURRENT")
    p = sub.add_parser("pack-rtx", help="repack TensorRT-RTX wheels into one xz archive for a device call")
    p.add_argument("wheels", nargs="+", help="the tensorrt_rtx_cu13_bindings and tensorrt_rtx_cu13_libs wheels")
    p.add_argument("--out", required=True, help="archive to write, e.g. .whl/tensorrt_rtx_site.tar.xz")
    p.add_argument("--split-mib", type=int, default=0, help="cut the archive into parts of this many MiB")
    args = parser.parse_args(argv)
    commands = {"env": cmd_env, "probe": cmd_probe, "extension": cmd_extension, "rtx-install": cmd_rtx_install,
                "rtx-current": cmd_rtx_current, "pack-rtx": cmd_pack_rtx}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

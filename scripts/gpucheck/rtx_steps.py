"""gpu_check.sh's TensorRT-RTX steps: rtx-install (from local wheels or a pack-rtx archive), rtx-current (a tiny
engine for ComputeCapability.CURRENT, built and run with TensorRT-RTX's own API) and pack-rtx (the wheels
repacked small enough to carry to a device machine)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

from . import ROOT, key

#: pack-rtx's largest xz dictionary: the size of libtensorrt_rtx.so.1 (234 MB) rounded up
PACK_DICT_MAX = 256 << 20
#: the device tool's limit on what travels with a call (working tree and carried paths together)
CARRY_LIMIT = 64 << 20


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

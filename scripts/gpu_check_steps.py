#!/usr/bin/env python3
"""The Python steps of scripts/gpu_check.sh, one subcommand each, and its pytest plugin.

Every subcommand prints what it found; lines starting with ``key: `` are the figures that
gpu_check.sh copies into its report. Exit code 0 means the step passed.

    python scripts/gpu_check_steps.py env                # versions, GPU properties, copy bandwidth
    python scripts/gpu_check_steps.py probe              # Python, torch, GPU, SM number, the zoo's models
    python scripts/gpu_check_steps.py extension          # build and smoke-test the involution torch extension
    python scripts/gpu_check_steps.py rtx-install --wheels DIR --target SITE
    python scripts/gpu_check_steps.py rtx-current        # a tiny TensorRT-RTX engine for ComputeCapability.CURRENT
    python scripts/gpu_check_steps.py rtx-strip --work DIR --json FILE   # refit/stripped TensorRT-RTX builds, sm86
    python scripts/gpu_check_steps.py pack-rtx WHEEL... --out .whl/tensorrt_rtx_site.tar.xz

As a pytest plugin (``-p gpu_check_steps`` with scripts/ on PYTHONPATH) it turns TF32 off in
PyTorch before every test (matmul and cuDNN) and prints the settings in the session header;
gpu_check.sh also sets NVIDIA_TF32_OVERRIDE=0, which turns it off in cuBLAS and cuDNN themselves.

The steps themselves live in scripts/gpucheck/ (torch_steps.py, rtx_steps.py); this file is their command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by path (tests) or as a pytest plugin
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpucheck.rtx_steps import cmd_pack_rtx, cmd_rtx_current, cmd_rtx_install
from gpucheck.rtx_strip import DEFAULT_MODELS, VARIANTS, cmd_rtx_strip
from gpucheck.torch_steps import cmd_env, cmd_extension, cmd_probe


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
    p = sub.add_parser("rtx-strip", help="trtbuild build with TensorRT-RTX: plain, --refit, --refit any and "
                       "--refit --strip-weights, as a table")
    p.add_argument("--work", required=True, help="folder for the weights and engines (the builds run there)")
    p.add_argument("--json", help="also write the table's rows to this JSON file")
    p.add_argument("--target", default="sm86", help="--target of the builds (default sm86)")
    p.add_argument("--models", type=_names, default=list(DEFAULT_MODELS),
                   help=f"comma-separated zoo models (default {','.join(DEFAULT_MODELS)})")
    p.add_argument("--variants", type=_names, default=list(VARIANTS),
                   help=f"comma-separated, among {','.join(VARIANTS)} (default all)")
    p.add_argument("--small", action="store_true", help="the small models (tests); default full size")
    p.add_argument("--timeout", type=float, default=150, help="seconds allowed to each build (default 150)")
    p = sub.add_parser("pack-rtx", help="repack TensorRT-RTX wheels into one xz archive for a device call")
    p.add_argument("wheels", nargs="+", help="the tensorrt_rtx_cu13_bindings and tensorrt_rtx_cu13_libs wheels")
    p.add_argument("--out", required=True, help="archive to write, e.g. .whl/tensorrt_rtx_site.tar.xz")
    p.add_argument("--split-mib", type=int, default=0, help="cut the archive into parts of this many MiB")
    args = parser.parse_args(argv)
    commands = {"env": cmd_env, "probe": cmd_probe, "extension": cmd_extension, "rtx-install": cmd_rtx_install,
                "rtx-current": cmd_rtx_current, "rtx-strip": cmd_rtx_strip, "pack-rtx": cmd_pack_rtx}
    if args.command == "rtx-strip" and set(args.variants) - set(VARIANTS):
        parser.error(f"--variants: {','.join(sorted(set(args.variants) - set(VARIANTS)))} is not among "
                     f"{','.join(VARIANTS)}")
    return commands[args.command](args)


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


if __name__ == "__main__":
    sys.exit(main())

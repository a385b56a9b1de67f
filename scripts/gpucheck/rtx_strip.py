"""gpu_check.sh's rtx_strip step: which refittable and weight-stripped TensorRT-RTX builds NVIDIA's builder
makes where a CUDA driver is present.

Without a driver TensorRT-RTX 1.7 builds plain engines but fails refittable and weight-stripped ones inside
Myelin ("graph_jit.cpp:278: CHECK(status == CUDA_SUCCESS)"), so only a GPU machine can say whether they build at
all. Every build goes through `trtbuild build ... --backend tensorrt-rtx --target ...` in a child process, so
the step checks the product, not a side script; each row records the build's outcome (or the CLI's exact error
line), the plan's size, the build time, how many weight names the sidecar's refit record holds and, for a
refittable plan on a GPU, whether TensorRT-RTX deserializes it and creates a `Refitter` for it (a Hopper GPU
refuses engines built for sm86: that refusal is the answer recorded)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import ROOT, key

#: variant name -> the `trtbuild build` flags that make it
VARIANTS = {"plain": [], "refit": ["--refit"], "refit-any": ["--refit", "any"],
            "refit-strip": ["--refit", "--strip-weights"]}
DEFAULT_MODELS = ("resnet18", "repvgg_a0")
#: the CLI's line after a build: "built resnet18 [fp32] in 12.3 s: out.engine (...)"
_BUILT = re.compile(r"^built .* in ([0-9.]+) s: ", re.M)

#: run in a child process (a crash inside TensorRT-RTX must not lose the table): deserialize the plan and create
#: a Refitter; prints one JSON line {"refitter": answer, "names": count or null}
_REFITTER_CHECK = r"""
import json, sys
import tensorrt_rtx as trt

class Logger(trt.ILogger):
    def __init__(self):
        trt.ILogger.__init__(self)
        self.errors = []
    def log(self, severity, msg):
        if severity in (trt.ILogger.ERROR, trt.ILogger.INTERNAL_ERROR):
            self.errors.append(msg)

logger = Logger()
plan = open(sys.argv[1], "rb").read()
engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
if engine is None:
    out = {"refitter": "not created: the engine does not deserialize here: "
           + ("; ".join(logger.errors) or "(no error logged)"), "names": None}
else:
    try:
        refitter = trt.Refitter(engine, logger)
        out = {"refitter": "created", "names": len(refitter.get_all_weights())}
    except Exception as e:
        out = {"refitter": f"refused: {type(e).__name__}: {e}; " + ("; ".join(logger.errors) or "(no error logged)"),
               "names": None}
print(json.dumps(out))
"""


@dataclass
class Row:
    """One build: model and variant, its outcome ("built" or the error), plan bytes, build seconds (the CLI's
    own figure, else the child process's wall time), the sidecar refit record's weight names and the Refitter
    check's answer (with TensorRT-RTX's own count of refittable weights where one was created)."""

    model: str
    variant: str
    flags: str
    result: str
    plan_bytes: int | None = None
    build_s: float | None = None
    refit_names: int | None = None
    refitter: str = "-"
    refitter_names: int | None = None


def build(model: str, variant: str, work: Path, target: str, small: bool, timeout: float) -> Row:
    """`trtbuild build MODEL` for `variant` into `work`: its Row (Refitter not yet checked)."""
    engine = work / f"{model}-{variant}.engine"
    flags = ["--backend", "tensorrt-rtx", "--target", target, *VARIANTS[variant]] + (["--small"] if small else [])
    row = Row(model, variant, " ".join(VARIANTS[variant]) or "(none)", "")
    cmd = [sys.executable, "-m", "trtbuild", "build", model, *flags, "--no-progress", "-o", str(engine)]
    print("+ " + " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row.result = f"timed out after {timeout:.0f} s"
        return row
    wall = time.perf_counter() - start
    sys.stdout.write(done.stdout + done.stderr)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("trtbuild: error: ")]
        row.result = (errors or lines or [f"exit {done.returncode} with no message"])[-1]
        return row
    row.result = "built"
    seconds = _BUILT.search(done.stdout)
    row.build_s = round(float(seconds.group(1)) if seconds else wall, 1)
    row.plan_bytes = engine.stat().st_size if engine.is_file() else None
    sidecar = Path(f"{engine}.json")
    if sidecar.is_file():
        refit = json.loads(sidecar.read_text()).get("refit")
        row.refit_names = len(refit["weights"]) if isinstance(refit, dict) else 0
    return row


def check_refitter(engine: Path, timeout: float) -> tuple[str, int | None]:
    """Whether TensorRT-RTX deserializes `engine` here and creates a Refitter for it: (answer, its weight count)."""
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu:
        return "not tried: no CUDA GPU is visible", None
    try:
        done = subprocess.run([sys.executable, "-c", _REFITTER_CHECK, str(engine)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"not known: the check timed out after {timeout:.0f} s", None
    last = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        answer = json.loads(last[0])
        return answer["refitter"], answer["names"]
    except (ValueError, KeyError, TypeError):
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"not known: the check failed ({tail})", None


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table; a failed build's error, quoted whole, follows as a numbered note
    (one note per distinct error)."""
    notes: list[str] = []

    def result(r: Row) -> str:
        if r.result == "built":
            return "built"
        if r.result not in notes:
            notes.append(r.result)
        return f"failed [{notes.index(r.result) + 1}]"

    head = ["model", "variant", "flags", "result", "plan bytes", "build s", "refit names", "Refitter"]
    body = [[r.model, r.variant, r.flags, result(r), _n(r.plan_bytes), _n(r.build_s), _n(r.refit_names),
             r.refitter + (f" ({r.refitter_names} weights)" if r.refitter_names is not None else "")]
            for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head, *body]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:],
                      *(f"[{i}] {note}" for i, note in enumerate(notes, 1))])


def _n(value) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def cmd_rtx_strip(args) -> int:
    """Build every model in every variant with TensorRT-RTX for args.target; print the table, write the JSON.

    Exit 0 when every build gave an answer (built, or the builder's error: both are findings); 1 when a build
    timed out or a built plan's sidecar lacks the refit record its flags ask for."""
    try:
        import tensorrt_rtx as trt
    except Exception as e:  # noqa: BLE001 - ImportError or OSError from its libraries: the reason to skip
        key(f"skipped: `import tensorrt_rtx` failed ({type(e).__name__}: {e}); nothing was built")
        return 0
    key(f"tensorrt_rtx {trt.__version__}; target {args.target}; models {', '.join(args.models)}"
        + (" (--small)" if args.small else " (full size)"))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models:
        for variant in args.variants:
            row = build(model, variant, work, args.target, args.small, args.timeout)
            if row.result == "built" and variant != "plain":
                row.refitter, row.refitter_names = check_refitter(work / f"{model}-{variant}.engine", args.timeout)
            rows.append(row)
            key(f"{model} {variant}: {row.result}"
                + (f"; {row.plan_bytes:,} B in {row.build_s} s; refit record {row.refit_names} names; "
                   f"Refitter: {row.refitter}" if row.result == "built" else ""))
            if args.json:
                _write_json(Path(args.json), rows, args)
    print("\n" + table(rows))
    bad = [r for r in rows if r.result.startswith("timed out")
           or (r.result == "built" and r.variant != "plain" and not r.refit_names)]
    return 1 if bad else 0


def _write_json(path: Path, rows: list[Row], args) -> None:
    """The rows so far, written atomically (a crash later leaves the rows before it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"target": args.target, "small": args.small, "rows": [asdict(r) for r in rows]},
                              indent=2) + "\n")
    tmp.replace(path)

"""Write what a benchmark or table script prints as a Markdown fragment under docs/benchmarks/.

The docs site includes these fragments (pymdownx.snippets), so every figure on it comes from a file
a script wrote, together with the command that produced it, the date and the machine. A script
adds the option to its parser with :func:`add_fragment_option` and runs its ``main`` through
:func:`run_writing_fragment`:

    add_fragment_option(parser, "bench_reparam")                   # in main(), so --help lists it
    ...
    if __name__ == "__main__":
        sys.exit(run_writing_fragment(main, "bench_reparam"))   # what main() prints lands in the fragment

Nothing is written unless ``--fragment`` is given (tests run these scripts at toy sizes and must
not overwrite the published figures).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import shlex
import sys
from pathlib import Path

from trtbuild.files.atomic import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[1]
FRAGMENTS = ROOT / "docs" / "benchmarks"


def add_fragment_option(parser, name: str) -> None:
    """``--fragment [PATH]``: also write the output to PATH (default docs/benchmarks/NAME.md)."""
    parser.add_argument("--fragment", nargs="?", const=FRAGMENTS / f"{name}.md", default=None, type=Path,
                        metavar="PATH", help=f"also write the figures as a Markdown fragment for the docs site "
                                             f"(default path: docs/benchmarks/{name}.md)")


def machine() -> str:
    """CPU model, core count and GPU (if torch sees one): what the figures depend on."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpu = "no GPU"
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            gpu = f"GPU {torch.cuda.get_device_name(0)}"
    return f"{cpu}, {os.cpu_count()} cores visible, {gpu}, {platform.system()} {platform.machine()}"


def render(command: str, output: str, notes: str, date: str, where: str, markdown: bool) -> str:
    """The fragment: the command, date and machine, then the script's output verbatim (Markdown as is,
    plain text in a code block), then what it printed on stderr, if kept, in a code block."""
    body = output.strip() if markdown else f"```text\n{output.strip()}\n```"
    text = (f"<!-- written by `{command}`; rerun it to refresh this file -->\n\n"
            f"Command: `{command}`  \nDate: {date}  \nMachine: {where}\n\n{body}\n")
    if notes.strip():
        text += f"\nPrinted on stderr:\n\n```text\n{notes.strip()}\n```\n"
    return text


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def not_a_fragment(path: Path) -> str | None:
    """Why `path` may not be replaced by a fragment (None where it may): only a fragment, which starts with
    an HTML comment naming its command, is replaced; any other existing file, or a directory, is the user's."""
    if path.is_dir():
        return "is a directory"
    if path.exists():
        with open(path, "rb") as f:
            if not f.read(4) == b"<!--":
                return "exists and is not a benchmark fragment, so it is not overwritten"
    return None


def run_writing_fragment(main, name: str, markdown: bool = False, with_stderr: bool = False) -> int:
    """Call ``main()``; with ``--fragment [PATH]`` on the command line, also write what it printed to
    PATH (default docs/benchmarks/NAME.md) once it returns 0. `main`'s own parser must accept
    ``--fragment`` (:func:`add_fragment_option`) so that ``--help`` lists it."""
    pre = argparse.ArgumentParser(add_help=False)
    add_fragment_option(pre, name)
    path = pre.parse_known_args()[0].fragment
    if path is None:
        return main()
    refusal = not_a_fragment(path)
    if refusal:  # before the run: a long benchmark must not end in a refusal
        print(f"{Path(sys.argv[0]).name}: error: --fragment {path}: {refusal}", file=sys.stderr)
        return 2
    out, err = io.StringIO(), io.StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout = _Tee(real_out, out)
    if with_stderr:
        sys.stderr = _Tee(real_err, err)
    try:
        code = main()
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    if code:
        return code
    command = shlex.join(["python", os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
    text = render(command, out.getvalue(), err.getvalue(), datetime.date.today().isoformat(), machine(), markdown)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode())
    print(f"wrote {path}")
    return 0

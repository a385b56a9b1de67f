"""README: "Every command's first output line names the backend it runs on (... excepted)". The
commands run here print the backend first unless the README lists them as exceptions, and each
exception listed really prints something else first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trtbuild.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _exceptions() -> set[str]:
    text = " ".join(README.read_text().split())
    found = re.search(r"Every command's first output line names the backend it runs on \(([^)]*) excepted\)", text)
    assert found, "the README sentence about the first output line is gone"
    names = found.group(1).split(", which")[0]  # "export-weights, calibrate and ..., which build nothing"
    return set(re.findall(r"[a-z]+(?:-[a-z]+)?", names)) & {
        "build", "calibrate", "debug", "demo", "export-onnx", "export-triton", "export-weights", "models", "parity",
        "serve"}


def _small_if_taken(command: str) -> list[str]:
    """["--small"] where the command takes it (export-triton checks it against the engine's sidecar)."""
    import argparse

    from trtbuild.cli import make_parser

    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return ["--small"] if "--small" in sub.choices[command]._option_string_actions else []


@pytest.fixture(scope="module")
def first_lines(tmp_path_factory):
    """{command: its first output line} for the commands that run fast on the reference backend."""
    import contextlib
    import io
    import os

    root = tmp_path_factory.mktemp("first-line")
    cwd = os.getcwd()
    os.chdir(root)
    ref = ["--backend", "reference"]
    runs = {"export-weights": ["export-weights", "--model", "alexnet", "--small", "--out", "a.wts"],
            "models": ["models", *ref],
            "build": ["build", "alexnet", "--small", "--weights", "a.wts", "--out", "a.engine", "--no-progress", *ref],
            "calibrate": ["calibrate", "alexnet", "--small", "--weights", "a.wts", "--data", "random", "--batches",
                          "1", "--out", "c.json"],
            "parity": ["parity", "alexnet", "--small", "--engine", "a.engine", *ref],
            "export-triton": ["export-triton", "alexnet", *_small_if_taken("export-triton"), "--engine", "a.engine",
                              "--repo", "repo", "--kind", "python"]}
    lines = {}
    try:
        for command, argv in runs.items():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert main(argv) == 0, argv
            lines[command] = out.getvalue().splitlines()[0]
    finally:
        os.chdir(cwd)
    return lines


def test_first_output_line_is_the_backend_unless_the_readme_says_otherwise(first_lines):
    excepted = _exceptions()
    for command, line in first_lines.items():
        if command in excepted:
            assert not line.startswith("backend: "), (command, line)
        else:
            assert line.startswith("backend: "), (command, line)

"""Running the trtbuild CLI in-process from a test: the exit code and what it printed."""

from __future__ import annotations

from trtbuild.cli import main

REF = ["--backend", "reference"]


def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


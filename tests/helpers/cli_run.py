"""Running the trtbuild CLI in-process from a test: the exit code and what it printed."""

from __future__ import annotations

import os

from trtbuild.cli import main

REF = ["--backend", "reference"]


def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err



def main_in(root, *argvs) -> None:
    """Run the CLI on each of `argvs` in turn with `root` as the working directory (the old one restored after),
    asserting that each exits 0."""
    old = os.getcwd()
    os.chdir(root)
    try:
        for argv in argvs:
            assert main(argv) == 0, argv
    finally:
        os.chdir(old)

"""Running the trtbuild CLI in-process from a test: the exit code and what it printed, in a fresh
working directory."""

from __future__ import annotations

import pytest

from trtbuild.cli import main

REF = ["--backend", "reference"]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


"""The code blocks of the docs' "Your own model" page: the files it says to save, its Python blocks and its
`trtbuild` commands, read the way a user copies them, so that tests can run the page as written."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "your-own-model.md"
HEADING = "## A network function, built and checked"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
SAVE_AS = re.compile(r"Save as `([^`]+)`:\s*$")


def section_blocks():
    """(files {name: text}, python blocks [text], commands [line]) of the page's section, in order."""
    text = PAGE.read_text()
    start = text.index(f"\n{HEADING}\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    files, python, commands = {}, [], []
    for m in FENCE.finditer(section):
        lang, body = m.group(1), m.group(2)
        before = section[:m.start()].rstrip("\n").splitlines()[-1]
        saved = SAVE_AS.search(before)
        if saved:
            files[saved.group(1)] = body
        elif lang == "python":
            python.append(body)
        elif lang in ("sh", "bash", "console"):
            commands += [line.strip() for line in body.splitlines() if line.strip().startswith("trtbuild ")]
    return files, python, commands

"""mkdocs hook: the CLI reference page is rendered from trtbuild's own argparse parsers at build time.

docs/cli.md holds a marker line; this hook replaces it with one section per command (nested ones such
as ``debug precision`` included): the usage line, the description, and a table of every option and
positional argument with its help text, default and choices. The page therefore lists exactly what
``trtbuild COMMAND --help`` accepts and cannot drift from the code; tests/test_docs_site.py compares
the built page with the parser.
"""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MARKER = "<!-- cli-reference: generated from trtbuild.cli.make_parser by docs/hooks/cli_reference.py -->"


def subcommands(parser: argparse.ArgumentParser, prefix: str = "trtbuild"):
    """(full command name, parser) for every subcommand, depth first, in the order argparse lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}"
                yield full, sub
                yield from subcommands(sub, full)


def _cell(text: str) -> str:
    """Table-cell-safe text: HTML-escaped, pipes escaped, on one line."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _argument_row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or (action.dest.upper() if not action.choices else None)
            names += f" `{metavar}`" if metavar else ""
    else:
        names = f"`{action.metavar or action.dest}`"
    names = names.replace("|", "\\|")  # a metavar such as fp32|fp16:MODULES must not split the table row
    details = []
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        details.append("choices: " + ", ".join(f"`{c}`" for c in action.choices))
    if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        details.append(f"default: `{action.default}`")
    help_text = parser._get_formatter()._expand_help(action) if action.help else ""  # %(default)s and the like
    return f"| {names} | {_cell(help_text)} | {_cell('; '.join(details))} |"


def _section(full: str, parser: argparse.ArgumentParser) -> str:
    level = "#" * (2 + max(0, full.count(" ") - 1))  # trtbuild and its commands: h2; nested commands: h3
    lines = [f"{level} `{full}`", "", "```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        lines += [parser.description.strip(), ""]
    rows = [_argument_row(parser, a) for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if rows:
        lines += ["| argument | what | values |", "|---|---|---|", *rows, ""]
    commands = [n for a in parser._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
    if commands:
        lines += ["Commands: " + ", ".join(f"`{full} {n}`" for n in commands), ""]
    return "\n".join(lines)


def render() -> str:
    """The whole generated reference, top-level options first."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the checkout the docs are built from, not another installed trtbuild
    from trtbuild.cli import make_parser

    parser = make_parser()
    parser.prog = "trtbuild"
    parts = [_section("trtbuild", parser)]
    parts += [_section(full, sub) for full, sub in subcommands(parser)]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files):  # mkdocs hook signature
    if MARKER in markdown:
        return markdown.replace(MARKER, render())
    return markdown

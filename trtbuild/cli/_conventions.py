"""Command-line conventions every subcommand follows, applied in one place by make_parser:

* ``-o`` is the short form of ``--out``;
* ``-v``/``--verbose`` is accepted after the subcommand too (``trtbuild build alexnet -v``);
* an empty value (``--out ""``, ``--weights ""``, an empty MODEL...) is refused by argparse in one
  sentence naming the option, before anything runs (an empty path names no file).
"""

from __future__ import annotations

import argparse

__all__ = ["apply_conventions"]


def _non_empty(convert):
    def check(text: str):
        if not text.strip():
            raise argparse.ArgumentTypeError("empty value: give a file name or value, or leave the option out")
        return convert(text) if convert is not None else text
    check.__name__ = getattr(convert, "__name__", "str")  # argparse names the type in its messages
    return check


def _alias(parser: argparse.ArgumentParser, long: str, short: str) -> None:
    action = parser._option_string_actions.get(long)
    if action is not None and short not in parser._option_string_actions:
        action.option_strings.insert(0, short)
        parser._option_string_actions[short] = action


def apply_conventions(subparsers) -> None:
    """Apply the conventions above to every parser of an argparse subparsers action."""
    for parser in subparsers.choices.values():
        _alias(parser, "--out", "-o")
        if "-v" not in parser._option_string_actions and "--verbose" not in parser._option_string_actions:
            parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                help="log INFO messages (TensorRT's included); also accepted before the command")
        for action in parser._actions:
            takes_text = isinstance(action, (argparse._StoreAction, argparse._AppendAction)) and action.nargs in (None, "?")
            if takes_text and action.choices is None:
                action.type = _non_empty(action.type)

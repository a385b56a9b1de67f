"""trtbuild.cli.options: every command takes its shared options from one module, in named argument
groups, with one flag, type and default each; the old homes of the helpers still work and warn."""

from __future__ import annotations

import argparse
import sys
import warnings

import pytest

from trtbuild.cli import make_parser, options

COMMANDS = ["build", "calibrate", "debug precision", "demo", "export-onnx", "export-triton", "export-weights", "models",
            "parity", "refit", "serve"]

#: shared option -> the group it belongs to
GROUP_OF = {"--weights": "model", "--small": "model", "--option": "model",
            "--precision": "precision", "--calibration": "precision", "--keep": "precision",
            "--input": "network function", "--torch": "network function", "--output": "network function",
            "--backend": "backend", "--target": "backend", "--cross-check": "backend",
            "--range": "inputs", "--distribution": "inputs", "--scale": "inputs",
            "--atol": "tolerances", "--rtol": "tolerances",
            "--out": "output files", "--json": "output files", "--html": "output files", "--png": "output files"}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    found = {}

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix} {name}".strip()] = sub
                    walk(sub, f"{prefix} {name}")

    walk(make_parser(), "")
    return found


@pytest.fixture(scope="module")
def parsers():
    return _parsers()


def _group_of(parser, flag: str) -> str | None:
    for group in parser._action_groups:
        if any(flag in a.option_strings for a in group._group_actions):
            return group.title
    return None


#: commands that share none of the options above: `inspect --json` and `cache ls --json` print JSON and write no file
OTHER_COMMANDS = ["inspect", "cache"]


def test_the_commands_are_the_modules_with_add_parser(parsers):
    assert sorted(parsers) == sorted(COMMANDS + OTHER_COMMANDS + ["debug"])  # options.py is no command


@pytest.mark.parametrize("command", OTHER_COMMANDS)
def test_other_commands_take_no_shared_option_but_their_own_json_flag(parsers, command):
    parser = parsers[command]
    assert [flag for flag in GROUP_OF if flag in parser._option_string_actions] == ["--json"]
    action = parser._option_string_actions["--json"]
    assert isinstance(action, argparse._StoreTrueAction) and _group_of(parser, "--json") != "output files"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_shared_option_is_in_its_group(parsers, command):
    parser = parsers[command]
    shared = [flag for flag in GROUP_OF if flag in parser._option_string_actions]
    assert shared, command
    assert {flag: _group_of(parser, flag) for flag in shared} == {flag: GROUP_OF[flag] for flag in shared}


def test_a_shared_option_has_one_flag_type_and_default_everywhere(parsers):
    seen: dict[str, set] = {}
    for command in COMMANDS:
        parser = parsers[command]
        for flag in ("--backend", "--small", "--option", "--keep", "--calibration", "--input", "--torch", "--output",
                     "--target", "--cross-check", "--range", "--distribution", "--scale", "--atol", "--rtol",
                     "--json", "--html", "--png"):
            action = parser._option_string_actions.get(flag)
            if action is not None:
                seen.setdefault(flag, set()).add((tuple(action.option_strings), repr(action.default),
                                                  getattr(action.type, "__name__", None), repr(action.choices),
                                                  type(action).__name__, action.metavar))
    assert {flag: len(kinds) for flag, kinds in seen.items() if len(kinds) != 1} == {}
    assert len(seen) == 18
    outs = {c: parsers[c]._option_string_actions["--out"].option_strings for c in COMMANDS
            if "--out" in parsers[c]._option_string_actions}
    assert outs and all(strings == ["-o", "--out"] for strings in outs.values())


def test_build_has_the_compatibility_group(parsers):
    build = parsers["build"]
    flags = ("--version-compatible", "--exclude-lean-runtime", "--hardware-compat")
    assert {flag: _group_of(build, flag) for flag in flags} == dict.fromkeys(flags, "compatibility")
    assert build._option_string_actions["--hardware-compat"].choices == ("none", "ampere+", "same-cc")
    assert [c for c in COMMANDS if c != "build" and "--version-compatible" in parsers[c]._option_string_actions] == []


def test_parsing_is_unchanged_for_options_in_groups():
    args = make_parser().parse_args(["parity", "alexnet", "--range=-1,1", "--scale", "5", "--atol", "0.1", "--json",
                                     "r.json", "--backend", "reference", "--keep", "fp32:fc", "--keep", "fp16:a",
                                     "--small", "-v"])
    assert (args.range, args.scale, args.atol, args.json, args.backend, args.keep, args.small, args.verbose) == (
        (-1.0, 1.0), 5.0, 0.1, "r.json", "reference", ["fp32:fc", "fp16:a"], True, True)
    with pytest.raises(SystemExit):
        make_parser().parse_args(["build", "alexnet", "--out", ""])  # the empty-value convention still applies


@pytest.mark.parametrize("module, name", [("trtbuild.cli.build", "MODEL_HELP"),
                                          ("trtbuild.cli.build", "add_user_model_options"),
                                          ("trtbuild.cli.build", "parse_range"),
                                          ("trtbuild.cli.parity", "tolerance"),
                                          ("trtbuild.cli.parity", "range_type"),
                                          ("trtbuild.cli.parity", "number_type")])
def test_moved_names_still_import_from_their_old_module_with_a_warning(module, name):
    old = __import__(module, fromlist=[name])
    with pytest.warns(DeprecationWarning, match=f"^{module}.{name} has moved to trtbuild.cli.options.{name}"):
        value = getattr(old, name)
    assert value is getattr(options, name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        _ = old.nothing_here


def test_old_conventions_module_and_backend_helper_still_work(monkeypatch):
    import trtbuild.cli

    monkeypatch.delitem(sys.modules, "trtbuild.cli._conventions", raising=False)
    monkeypatch.delattr(trtbuild.cli, "_conventions", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from trtbuild.cli import _conventions
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        "trtbuild.cli._conventions has moved to trtbuild.cli.options; import it from there"]
    assert _conventions.apply_conventions is options.apply_conventions
    from trtbuild.cli import add_backend_option

    parser = argparse.ArgumentParser()
    with pytest.warns(DeprecationWarning, match="add_backend_options"):
        add_backend_option(parser)
    assert parser.parse_args(["--backend", "reference"]).backend == "reference"

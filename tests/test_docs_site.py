"""The docs site builds strictly, its CLI reference is the real parser's, and the README's links, Python
block and commands work.

The site is built once with ``mkdocs build --strict`` (a broken link, a missing anchor or an
unresolvable API reference fails it). mkdocs comes with the `test` extra, so under CI (CI=true) a
missing mkdocs fails these tests instead of skipping them.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site's directory."""
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
        import material  # noqa: F401
    except ImportError as e:
        if _in_ci():
            pytest.fail(f"CI must build the docs site (the test extra installs mkdocs), but the import failed: {e}")
        pytest.skip(f"mkdocs is not installed ({e}); pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def page_of(site: Path, doc: Path) -> Path:
    """The built HTML page of docs/<doc>.md (use_directory_urls: docs/x.md -> x/index.html)."""
    rel = doc.relative_to(DOCS).with_suffix("")
    return site / (rel.parent if rel.name == "index" else rel) / "index.html"


def anchors_of(page: Path) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', page.read_text()))


# ------------------------------------------------------------------------------------- CLI reference


def _commands():
    """(full name, parser) of `trtbuild` and every subcommand, nested ones included."""
    from trtbuild.cli import make_parser

    def walk(parser, prefix):
        yield prefix, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{prefix} {name}")

    return list(walk(make_parser(), "trtbuild"))


def _sections(page_html: str) -> dict[str, str]:
    """{heading text: the HTML up to the next heading} of the CLI page's command headings."""
    parts = re.split(r"(<h[23] id=\"[^\"]*\"[^>]*>.*?</h[23]>)", page_html, flags=re.S)
    sections = {}
    for heading, body in zip(parts[1::2], parts[2::2]):
        text = html.unescape(re.sub(r"<[^>]+>", "", heading)).replace("¶", "").strip()
        sections[text] = body
    return sections


def test_cli_reference_lists_every_command_and_option_of_the_parser(site):
    sections = _sections((site / "cli" / "index.html").read_text())
    commands = _commands()
    assert len(commands) > 10  # trtbuild, its commands and `debug precision`
    for full, parser in commands:
        assert full in sections, f"the CLI reference has no section for `{full}`"
        text = html.unescape(sections[full])
        plain = " ".join(html.unescape(re.sub(r"<[^>]+>", "", sections[full])).split())
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                for name in action.choices:
                    assert f"<code>{full} {name}</code>" in text, (full, name)
                continue
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                assert f"<code>{name}</code>" in text, f"`{full}`: {name} is missing from the CLI reference"
            if action.help:
                # the help's first words, as rendered (Markdown turns `code` into <code>, stripped above)
                first_words = " ".join(parser._get_formatter()._expand_help(action).replace("`", "").split()[:4])
                assert first_words in plain, (full, names, first_words)


def test_cli_reference_has_no_section_the_parser_lacks(site):
    sections = _sections((site / "cli" / "index.html").read_text())
    listed = {name for name in sections if name.startswith("trtbuild")}
    assert listed == {full for full, _ in _commands()}


# -------------------------------------------------------------------------------------------- README


def _github_slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_readme_resolves(site):
    text = README.read_text()
    own = {_github_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = [link for link in LINK.findall(text) if not re.match(r"[a-z]+:", link)]
    assert len(links) >= 15  # the README points into the docs for every topic
    for link in links:
        path, _, anchor = link.partition("#")
        if not path:
            assert anchor in own, f"README links to #{anchor}, which none of its headings is"
            continue
        target = (README.parent / path).resolve()
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor:
            assert target.suffix == ".md" and DOCS in target.parents, f"README anchor into a non-docs file: {link}"
            assert anchor in anchors_of(page_of(site, target)), f"README links to {link}: no such anchor on the page"


def test_the_readme_links_every_page_of_the_user_guide():
    text = README.read_text()
    guide = {p.relative_to(ROOT).as_posix() for p in DOCS.glob("*.md") if p.name != "index.md"}
    guide.add("docs/benchmarks/index.md")  # the site's home page (docs/index.md) is the README's counterpart
    missing = guide - {link.partition("#")[0] for link in LINK.findall(text)}
    assert not missing, f"README does not link these docs pages: {sorted(missing)}"


def test_the_readme_commands_parse_with_the_real_parser():
    from trtbuild.cli import make_parser

    blocks = [body for lang, body in FENCE.findall(README.read_text()) if lang in ("sh", "bash")]
    commands = [shlex.split(line, comments=True) for body in blocks for line in body.splitlines()]
    commands = [c for c in commands if c and c[0] == "trtbuild"]
    assert len(commands) >= 5
    for command in commands:
        make_parser().parse_args(command[1:])  # argparse exits (SystemExit) on an unknown option or value


def test_the_readme_python_block_runs(tmp_path, monkeypatch, capsys):
    blocks = [body for lang, body in FENCE.findall(README.read_text()) if lang == "python"]
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRTBUILD_BACKEND", "reference")
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "result: PASS" in out and (tmp_path / "engines" / "resnet18-small-fp16.engine").is_file()


# ---------------------------------------------------------------------------------- benchmark fragments


def test_every_script_fragment_exists_and_a_page_includes_it():
    scripts = [p for p in (ROOT / "scripts").glob("*.py") if "run_writing_fragment(main" in p.read_text()]
    assert len(scripts) >= 8
    included = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    for script in scripts:
        name = re.search(r'run_writing_fragment\(main, "([\w]+)"', script.read_text()).group(1)
        assert (DOCS / "benchmarks" / f"{name}.md").is_file(), f"{script.name}: no docs/benchmarks/{name}.md"
        assert f'--8<-- "{name}.md"' in included, f"no docs page includes docs/benchmarks/{name}.md"


def test_fragment_records_command_date_machine_and_output(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import docs_fragment
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path / "bench_x.md"
    monkeypatch.setattr(sys, "argv", [str(ROOT / "scripts" / "bench_x.py"), "--runs", "3", "--fragment", str(out)])

    def main():
        print("ratio unfused/fused: 1.234")
        return 0

    assert docs_fragment.run_writing_fragment(main, "bench_x") == 0
    text = out.read_text()
    assert f"Command: `python scripts/bench_x.py --runs 3 --fragment {out}`" in text
    assert re.search(r"^Date: \d{4}-\d\d-\d\d", text, re.M) and "Machine: " in text
    assert "```text\nratio unfused/fused: 1.234\n```" in text
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--fragment", str(tmp_path / "failed.md")])
    assert docs_fragment.run_writing_fragment(lambda: 1, "bench_x") == 1 and not (tmp_path / "failed.md").exists()
    monkeypatch.setattr(sys, "argv", ["bench_x.py"])
    assert docs_fragment.run_writing_fragment(main, "bench_x") == 0 and list(tmp_path.iterdir()) == [out]
    mine = tmp_path / "notes.md"
    mine.write_text("# my notes\n")
    ran = []
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--fragment", str(mine)])
    assert docs_fragment.run_writing_fragment(lambda: ran.append(1) or 0, "bench_x") == 2
    assert mine.read_text() == "# my notes\n" and not ran  # refused before the benchmark ran
    assert "--fragment " + str(mine) + ": exists and is not a benchmark fragment" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--fragment", str(out)])
    assert docs_fragment.run_writing_fragment(main, "bench_x") == 0  # a fragment is replaced


# ------------------------------------------------------------------------------------- layer-type table


def _layer_rows(site: Path) -> dict[str, list[str]]:
    """{layer type: [cells]} of the built layer-type table."""
    text = (site / "layer-types" / "index.html").read_text()
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", text, re.S):
        cells = [" ".join(html.unescape(re.sub(r"<[^>]+>", "", c)).split()) for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                                                 row, re.S)]
        if cells:
            rows[cells[0]] = cells
    return rows


def test_layer_table_has_a_true_row_for_every_tensorrt_layer_type(site):
    import trtbuild.onnx_export.lower  # noqa: F401 - registers the lowerings
    import trtbuild.reference as trt
    from trtbuild.reference.ops import op_for

    rows = _layer_rows(site)
    assert set(rows) == {t.name for t in trt.LayerType}
    assert len(rows) == 57  # TensorRT 10.16 and 11.4 both have 57 layer types
    for ltype in trt.LayerType:
        op = op_for(ltype)
        _, added_by, reference, onnx, rtx, _builders = rows[ltype.name]
        assert reference == ("✓" if op else "—"), ltype.name
        assert onnx == ("✓" if op is not None and op.lower is not None else "—"), ltype.name
        method = added_by.split(".")[-1]
        if "." not in added_by:  # a network method: the reference has it exactly where it registers the type
            assert hasattr(trt.INetworkDefinition, method) == (op is not None), added_by
    # spot checks a reader would make against the code
    assert rows["RESIZE"][5] == "resize.interpolate"
    assert "lrn.lrn" in rows["LRN"][5]
    assert rows["PLUGIN"][2:5] == ["—", "—", "—"]  # the legacy plugin API: no backend of trtbuild's builds it

"""Render a parity Report as aligned text, JSON, self-contained HTML (inline SVG) or PNG (matplotlib)."""

from __future__ import annotations

import html
import json
import math

from trtbuild.files.atomic import AtomicWriteError, atomic_write, atomic_write_bytes, ensure_parent_dir

from .charts import svg_depth_chart, svg_histogram
from .compare import Report, TensorStats

#: what --png / render_png needs, and how to install it (the `report` extra of pyproject.toml)
PNG_REQUIREMENT = '--png needs matplotlib, which is not installed (pip install "trtbuild[report]")'


def fmt(v) -> str:
    """A compact number: 3 significant digits in e-notation, 'inf', 'nan', or '0'."""
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return str(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        return f"{v:.4g}"
    return f"{v:.2e}"


def fmt_cosine(v: float) -> str:
    """Cosine similarity with 6 decimals; "n/a" when it could not be computed (no finite pair)."""
    return "n/a" if v is None or math.isnan(v) else f"{v:.6f}"


def _aligned(header: list[str], rows: list[list[str]], right_from: int = 1) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < right_from else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _meta_line(report: Report) -> str:
    m = report.meta
    parts = [f"{k}={m[k]}" for k in ("model", "backend", "precision", "batch", "profile", "seed", "inputs", "against",
                                     "engine") if m.get(k) is not None]
    atol = f"atol={fmt(report.atol)}" + ("*max|expected|" if report.atol_relative else "")
    parts += [atol, f"rtol={fmt(report.rtol)}"]
    return "parity: " + " ".join(parts)


def output_rows(stats: list[TensorStats]) -> tuple[list[str], list[list[str]]]:
    header = ["output", "shape", "max|exp|", "max_abs", "mean_abs", "p99_abs", "max_rel", "mean_rel", "p99_rel",
              "cosine", "nan a/e", "inf a/e", "atol", "min_atol", "min_rtol", "failed", "result"]
    rows = [[s.name, "x".join(map(str, s.shape)), fmt(s.expected_max_abs), fmt(s.max_abs), fmt(s.mean_abs),
             fmt(s.p99_abs), fmt(s.max_rel), fmt(s.mean_rel), fmt(s.p99_rel), fmt_cosine(s.cosine),
             f"{s.nan_actual}/{s.nan_expected}", f"{s.inf_actual}/{s.inf_expected}", fmt(s.atol), fmt(s.min_atol),
             fmt(s.min_rtol), f"{s.failed}/{s.count}", "PASS" if s.passed else "FAIL"] for s in stats]
    return header, rows


def layer_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    header = ["#", "layer (network order)", "torch module", "shape", "max_abs", "p99_rel", "rel_l2", "cosine",
              "failed", "flag"]
    rows = []
    for i, s in enumerate(report.layers or []):
        flags = [f for f, hit in (("JUMP", s.name == report.first_jump), ("FIRST FAIL", s.name == report.first_failure))
                 if hit]
        if not s.passed and s.name != report.first_failure:
            flags.append("fail")
        rows.append([str(i), s.name, s.module, "x".join(map(str, s.shape)), fmt(s.max_abs), fmt(s.p99_rel),
                     fmt(s.rel_l2), fmt_cosine(s.cosine), f"{s.failed}/{s.count}", " ".join(flags)])
    return header, rows


def render_table(report: Report) -> str:
    """Plain aligned text (no extra dependency)."""
    lines = [_meta_line(report), ""]
    header, rows = output_rows(report.outputs)
    lines += _aligned(header, rows, right_from=2)
    notes = [f"  note: {s.name}: {s.note}" for s in report.outputs if s.note]
    lines += notes
    if report.layers is not None:
        lines += ["", f"layerwise ({len(report.layers)} layers; JUMP = relative L2 error grew more than "
                      f"{report.meta.get('jump_factor', 10)}x over the previous layer)"]
        header, rows = layer_rows(report)
        lines += _aligned(header, rows, right_from=4)
        lines += [f"  note: {s.name}: {s.note}" for s in report.layers if s.note]
        suspect = report.suspect_layer
        lines.append(f"first layer where the error jumps or fails: {suspect}" if suspect else
                     "no layer shows an error jump or a failure")
        if report.meta.get("layerwise_via"):
            lines.append(f"layer tensors read through: {report.meta['layerwise_via']}")
        if report.meta.get("fused_away"):
            lines.append(f"fused away ({len(report.meta['fused_away'])}, marked as debug tensors but never reported "
                         f"by the engine; not compared): {', '.join(report.meta['fused_away'])}")
        if report.meta.get("unmapped_layers") is not None:  # an automatic layer map
            lines.append(f"unmapped layers ({len(report.meta['unmapped_layers'])}, no torch module found by name "
                         f"and shape): {', '.join(report.meta['unmapped_layers']) or 'none'}")
    verdict = "PASS" if report.passed else "FAIL"
    failing = [s.name for s in report.outputs if not s.passed]
    lines += ["", f"result: {verdict}" + (f" (failing outputs: {', '.join(failing)})" if failing else
                                           f" (every element of {len(report.outputs)} output(s) within atol or rtol)")]
    return "\n".join(lines)


def _write(path, text: str) -> None:
    """Write a report file atomically, creating missing parent directories; an OSError becomes
    AtomicWriteError (a ValueError and OSError) naming `path`."""
    target = ensure_parent_dir(path, AtomicWriteError)
    atomic_write_bytes(target, text.encode(), AtomicWriteError)


def render_json(report: Report, path=None) -> str:
    text = json.dumps(report.to_dict(), indent=2) + "\n"
    if path is not None:
        _write(path, text)
    return text


def _html_table(header, rows, fail_col=None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        cls = ' class="fail"' if fail_col is not None and ("FAIL" in r[fail_col] or "JUMP" in r[fail_col]) else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def render_html(report: Report, path=None) -> str:
    """A self-contained HTML report (no scripts, no external files)."""
    verdict = "PASS" if report.passed else "FAIL"
    header, rows = output_rows(report.outputs)
    body = [f"<h1>trtbuild parity: {html.escape(str(report.meta.get('model', '')))} "
            f"<span class='{verdict.lower()}'>{verdict}</span></h1>",
            f"<p>{html.escape(_meta_line(report))}</p>",
            "<p>An element fails only if |a-e| &gt; atol and |a-e| &gt; rtol&middot;|e|.</p>",
            "<h2>Outputs</h2>", _html_table(header, rows, fail_col=len(header) - 1),
            "<h2>Error histograms</h2>",
            "<p>Each bar counts the elements whose |a-e| falls in a half-decade bin, labelled by its lower edge "
            "(exact zeros and NaN/Inf errors apart; heights linear). The solid line is the atol used for the "
            "tensor, the dashed one rtol&middot;max|e|; a failing tensor is drawn in red.</p>",
            "<div>" + "".join(svg_histogram(s) for s in report.outputs) + "</div>"]
    if report.layers is not None:
        header, rows = layer_rows(report)
        body += ["<h2>Layerwise</h2>",
                 f"<p>First layer where the error jumps or fails: <b>{html.escape(str(report.suspect_layer))}</b></p>",
                 svg_depth_chart(report),
                 _html_table(header, rows, fail_col=len(header) - 1),
                 "<details><summary>Per-layer histograms</summary><div>"
                 + "".join(svg_histogram(s) for s in report.layers) + "</div></details>"]
    style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
             "tr.fail td{background:#fdd}.pass{color:#080}.fail{color:#c00}svg{margin:4px;border:1px solid #eee}"
             "svg.fail{border-color:#d62728}")
    text = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>trtbuild parity</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
    if path is not None:
        _write(path, text)
    return text


def png_available() -> bool:
    """True if matplotlib (needed by render_png / --png) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def render_png(report: Report, path) -> bool:
    """The PNG report (figures.report_figure: title with PASS/FAIL, error histograms, error against
    depth for layerwise runs), written atomically with parent directories created, only if
    matplotlib is installed; returns whether a file was written."""
    if not png_available():
        return False
    from .figures import report_figure

    fig = report_figure(report)
    target = ensure_parent_dir(path, AtomicWriteError)
    atomic_write(target, lambda tmp: fig.savefig(tmp, format="png"), AtomicWriteError)
    return True

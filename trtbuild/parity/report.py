"""Render a parity Report as aligned text, JSON, self-contained HTML (inline SVG) or PNG (matplotlib)."""

from __future__ import annotations

import html
import json
import math

from trtbuild.weights.atomic import AtomicWriteError, atomic_write, atomic_write_bytes, ensure_parent_dir

from .compare import Report, TensorStats


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


def _aligned(header: list[str], rows: list[list[str]], right_from: int = 1) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < right_from else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _meta_line(report: Report) -> str:
    m = report.meta
    parts = [f"{k}={m[k]}" for k in ("model", "backend", "precision", "batch", "seed", "inputs", "against", "engine")
             if m.get(k) is not None]
    atol = f"atol={fmt(report.atol)}" + ("*max|expected|" if report.atol_relative else "")
    parts += [atol, f"rtol={fmt(report.rtol)}"]
    return "parity: " + " ".join(parts)


def output_rows(stats: list[TensorStats]) -> tuple[list[str], list[list[str]]]:
    header = ["output", "shape", "max|exp|", "max_abs", "mean_abs", "p99_abs", "max_rel", "mean_rel", "p99_rel",
              "cosine", "nan a/e", "inf a/e", "atol", "min_atol", "min_rtol", "failed", "result"]
    rows = [[s.name, "x".join(map(str, s.shape)), fmt(s.expected_max_abs), fmt(s.max_abs), fmt(s.mean_abs),
             fmt(s.p99_abs), fmt(s.max_rel), fmt(s.mean_rel), fmt(s.p99_rel), f"{s.cosine:.6f}",
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
                     fmt(s.rel_l2), f"{s.cosine:.6f}", f"{s.failed}/{s.count}", " ".join(flags)])
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


def svg_histogram(stats: TensorStats, width: int = 420, height: int = 150) -> str:
    """An inline SVG bar chart of log10 |actual - expected| for one tensor."""
    h = stats.hist or {}
    edges, counts = h.get("edges", []), h.get("counts", [])
    bars = [("0", h.get("zeros", 0))] + [(f"{edges[i]:g}", c) for i, c in enumerate(counts)]
    if h.get("nonfinite"):
        bars.append(("inf", h["nonfinite"]))
    top = max((c for _, c in bars), default=0) or 1
    pad_l, pad_b, pad_t = 36, 28, 14
    bw = (width - pad_l - 8) / max(len(bars), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="error histogram of {html.escape(stats.name)}">',
             f'<text x="{pad_l}" y="11" font-size="11">{html.escape(stats.name)}: count per log10 |a-e| bin '
             f'(first bar: exact 0)</text>']
    plot_h = height - pad_b - pad_t
    for i, (label, c) in enumerate(bars):
        bh = plot_h * c / top
        x = pad_l + i * bw
        color = "#999" if label == "0" else "#c33" if label == "inf" else "#3366cc"
        parts.append(f'<rect x="{x + 1:.1f}" y="{pad_t + plot_h - bh:.1f}" width="{max(bw - 2, 1):.1f}" '
                     f'height="{bh:.1f}" fill="{color}"><title>{html.escape(label)}: {c}</title></rect>')
        if len(bars) <= 14 or i % 2 == 0:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{height - 14}" font-size="9" text-anchor="middle">'
                         f'{html.escape(label)}</text>')
    parts.append(f'<text x="2" y="{pad_t + 8}" font-size="9">{top}</text>')
    parts.append(f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{width - 8}" y2="{pad_t + plot_h}" stroke="#333"/>')
    parts.append("</svg>")
    return "".join(parts)


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
            "<h2>Error histograms</h2>", "<div>" + "".join(svg_histogram(s) for s in report.outputs) + "</div>"]
    if report.layers is not None:
        header, rows = layer_rows(report)
        body += ["<h2>Layerwise</h2>",
                 f"<p>First layer where the error jumps or fails: <b>{html.escape(str(report.suspect_layer))}</b></p>",
                 _html_table(header, rows, fail_col=len(header) - 1),
                 "<details><summary>Per-layer histograms</summary><div>"
                 + "".join(svg_histogram(s) for s in report.layers) + "</div></details>"]
    style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
             "tr.fail td{background:#fdd}.pass{color:#080}.fail{color:#c00}svg{margin:4px;border:1px solid #eee}")
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
    """Error histograms as a PNG (written atomically, parent directories created), only if
    matplotlib is installed; returns whether a file was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    stats = report.outputs
    fig, axes = plt.subplots(len(stats), 1, figsize=(6, 2.2 * len(stats)), squeeze=False)
    for ax, s in zip(axes[:, 0], stats):
        edges, counts = s.hist.get("edges", []), s.hist.get("counts", [])
        if counts:
            ax.bar(edges[:-1], counts, width=[b - a for a, b in zip(edges, edges[1:])], align="edge")
        ax.set_title(f"{s.name}: log10 |a-e| ({s.hist.get('zeros', 0)} exact zeros)", fontsize=9)
    fig.tight_layout()
    try:
        target = ensure_parent_dir(path, AtomicWriteError)
        atomic_write(target, lambda tmp: fig.savefig(tmp, format="png"), AtomicWriteError)
    finally:
        plt.close(fig)
    return True

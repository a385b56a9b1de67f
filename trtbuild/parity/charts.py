"""Inline SVG charts of a parity Report: the error histogram of one tensor (bins labelled by their
|error| edges, the tolerances marked, a failing tensor drawn red) and, for layerwise runs, the error
against depth with the first jump and the first failing layer marked. Shared by the PNG figures
(`figures.py`): the bars, the tolerance markers, the notes and the colours.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from .compare import Report, TensorStats

PASS_COLOR = "#3366cc"  # bars / points of a passing tensor
FAIL_COLOR = "#d62728"  # bars / points of a failing tensor
PASS_MARK = "#1b7a3a"   # tolerance marker of a passing tensor
FAIL_MARK = "#8b0000"   # tolerance marker of a failing tensor
ZERO_COLOR = "#999999"  # the exact-zero bar
NONFINITE_COLOR = "#6a3d9a"  # the NaN/Inf bar
JUMP_COLOR = "#e08000"  # the first-jump marker of the depth chart


def error_label(v: float) -> str:
    """An |error| value with 3 significant digits, so that 1e-7 never prints as 0."""
    return "inf" if math.isinf(v) else "nan" if math.isnan(v) else f"{v:.2e}"


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


@dataclass
class Bar:
    """One histogram bar: kind "zero" (|a-e| == 0), "bin" (lo <= |a-e| < hi) or "nonfinite"."""

    kind: str
    label: str
    lo: float
    hi: float
    count: int

    @property
    def title(self) -> str:
        if self.kind == "bin":
            return f"{error_label(self.lo)} <= |a-e| < {error_label(self.hi)}: {self.count} elements"
        what = "|a-e| = 0 exactly" if self.kind == "zero" else "|a-e| not finite (NaN/Inf mismatch)"
        return f"{what}: {self.count} elements"


def histogram_bars(stats: TensorStats) -> list[Bar]:
    """The bars of `stats.hist` (whose edges are log10 |a-e|): exact zeros, then each bin labelled
    by its lower |error| edge, then the non-finite errors if any."""
    h = stats.hist or {}
    edges, counts = h.get("edges", []), h.get("counts", [])
    bars = [Bar("zero", "exact 0", 0.0, 0.0, int(h.get("zeros", 0)))]
    for i, c in enumerate(counts):
        lo, hi = 10.0 ** edges[i], 10.0 ** edges[i + 1]
        bars.append(Bar("bin", error_label(lo), lo, hi, int(c)))
    if h.get("nonfinite"):
        bars.append(Bar("nonfinite", "NaN/Inf", math.inf, math.inf, int(h["nonfinite"])))
    return bars


def tolerance_markers(stats: TensorStats) -> list[tuple[str, str, float]]:
    """(key, label, |error| value): the absolute tolerance used for this tensor, and rtol times its
    largest |expected| (the largest error rtol can excuse). Errors left of the atol line pass; right
    of both lines they fail."""
    marks = [("atol", f"atol {error_label(stats.atol)}", float(stats.atol))]
    bound = stats.rtol * stats.expected_max_abs
    if bound > 0 and math.isfinite(bound):
        marks.append(("rtol", f"rtol·max|e| {error_label(bound)}", float(bound)))
    return marks


def nonfinite_note(stats: TensorStats) -> str:
    """What the histogram leaves out or cannot place: elements whose error is NaN/Inf, and the
    NaN/Inf counts of each side ('' if none)."""
    parts = []
    dropped = int((stats.hist or {}).get("nonfinite", 0))
    if dropped:
        parts.append(f"{dropped} non-finite error(s) (NaN/Inf) not in the |a-e| bins")
    for side in ("actual", "expected"):
        nan, inf = getattr(stats, f"nan_{side}", 0) or 0, getattr(stats, f"inf_{side}", 0) or 0
        total = getattr(stats, f"nonfinite_{side}", None)
        if nan or inf or total:
            parts.append(f"{side} has {nan} NaN and {inf} Inf")
    return "; ".join(parts)


def _text(x, y, s, size=9, anchor="start", cls=None, fill=None, extra="") -> str:
    attrs = f' class="{cls}"' if cls else ""
    attrs += f' fill="{fill}"' if fill else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{attrs}{extra}>'
            f'{html.escape(s)}</text>')


def svg_histogram(stats: TensorStats, height: int = 230) -> str:
    """An inline SVG bar chart of |actual - expected| for one tensor: one bar per half-decade bin
    (labelled by its lower edge), the exact zeros and the NaN/Inf errors apart, the tolerances as
    vertical lines; bars and markers red if the tensor FAILs."""
    bars = histogram_bars(stats)
    passed = bool(stats.passed)
    bar_color, mark_color = (PASS_COLOR, PASS_MARK) if passed else (FAIL_COLOR, FAIL_MARK)
    pad_l, pad_r, pad_t, pad_b = 40, 12, 66, 62
    bw = 30.0
    width = max(460, int(pad_l + pad_r + bw * len(bars)))
    bw = (width - pad_l - pad_r) / len(bars)
    plot_h = height - pad_t - pad_b
    base = pad_t + plot_h
    top = max(b.count for b in bars) or 1
    status = verdict(passed)
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
              f'class="histogram {status.lower()}" '
              f'aria-label="error histogram of {html.escape(stats.name)}: {status}">'),
             _text(4, 12, f"{stats.name}: {status} ({stats.failed}/{stats.count} elements fail)", 11, cls="title",
                   fill=mark_color),
             _text(4, 24, "bars: elements per |a-e| bin, half a decade wide, labelled by its lower edge "
                          "(linear counts)", 8, cls="legend"),
             _text(4, 35, "lines: tolerances used; errors left of atol pass, right of both lines fail", 8,
                   cls="legend")]
    for i, b in enumerate(bars):
        bh = plot_h * b.count / top
        x = pad_l + i * bw
        color = ZERO_COLOR if b.kind == "zero" else NONFINITE_COLOR if b.kind == "nonfinite" else bar_color
        parts.append(f'<rect class="bar {b.kind}" x="{x + 1:.1f}" y="{base - bh:.1f}" width="{max(bw - 2, 1):.1f}" '
                     f'height="{bh:.1f}" fill="{color}"><title>{html.escape(b.title)}</title></rect>')
        cx = x + bw / 2
        parts.append(_text(cx, base + 10, b.label, 8, "end", cls="xlabel",
                           extra=f' transform="rotate(-45 {cx:.1f} {base + 10:.1f})"'))
    finite = [i for i, b in enumerate(bars) if b.kind == "bin"]
    for j, (key, label, value) in enumerate(tolerance_markers(stats)):
        if finite:
            x, off = _bin_x(bars, finite, value, pad_l, bw)
            label += {-1: " (below the bins)", 1: " (beyond the bins)"}.get(off, "")
        else:
            x = pad_l + bw  # no nonzero finite error: the marker stands right of the zero bar
        dash = ' stroke-dasharray="4 3"' if key == "rtol" else ""
        y_top = pad_t - 22 + 10 * j
        parts.append(f'<line class="marker {key}" x1="{x:.1f}" y1="{y_top}" x2="{x:.1f}" y2="{base:.1f}" '
                     f'stroke="{mark_color}" stroke-width="1.5"{dash}><title>{html.escape(label)}</title></line>')
        anchor = "end" if x > width / 2 else "start"
        parts.append(_text(x + (-3 if anchor == "end" else 3), pad_t - 16 + 10 * j, label, 8, anchor,
                           cls=f"marker-label {key}", fill=mark_color))
    note = nonfinite_note(stats)
    if note:
        parts.append(_text(4, height - 4, note, 8, cls="note", fill=NONFINITE_COLOR))
    parts.append(_text(pad_l - 3, pad_t + 8, str(top), 8, "end", cls="ymax"))
    parts.append(f'<line x1="{pad_l}" y1="{base}" x2="{width - pad_r}" y2="{base}" stroke="#333"/>')
    parts.append("</svg>")
    return "".join(parts)


def _bin_x(bars: list[Bar], finite: list[int], value: float, pad_l: float, bw: float) -> tuple[float, int]:
    """x of |error| `value` on the log-spaced bins (interpolated in log10 within its bin) and -1/0/1
    for below / within / beyond the bins (clamped to their ends)."""
    first, last = bars[finite[0]], bars[finite[-1]]
    if not value > first.lo:
        return pad_l + finite[0] * bw, (0 if value == first.lo else -1)
    if value >= last.hi:
        return pad_l + (finite[-1] + 1) * bw, (0 if value == last.hi else 1)
    for i in finite:
        b = bars[i]
        if b.lo <= value < b.hi:
            frac = (math.log10(value) - math.log10(b.lo)) / (math.log10(b.hi) - math.log10(b.lo))
            return pad_l + (i + frac) * bw, 0
    return pad_l + (finite[-1] + 1) * bw, 1


def depth_series(report: Report) -> tuple[list[float], float, float]:
    """(relative L2 error per layer in network order, lowest and highest log10 of the y axis).
    Zeros and non-finite values stay in the list; the axis spans the finite positive ones."""
    errors = [float(s.rel_l2) for s in report.layers or []]
    finite = [e for e in errors if e > 0 and math.isfinite(e)]
    if not finite:
        return errors, -8.0, 0.0
    lo, hi = math.floor(math.log10(min(finite))), math.ceil(math.log10(max(finite)))
    return errors, float(lo), float(hi if hi > lo else lo + 1)


def layer_index(report: Report, name: str | None) -> int | None:
    """Index in network order of the layer named `name`, or None."""
    return next((i for i, s in enumerate(report.layers or []) if s.name == name), None)


def svg_depth_chart(report: Report, height: int = 240) -> str:
    """An inline SVG line chart of the relative L2 error ||a-e||/||e|| of each layer against its
    index in network order (log scale), failing layers in red, the first jump and the first failing
    layer marked by vertical lines."""
    layers = report.layers or []
    errors, lo, hi = depth_series(report)
    n = max(len(layers), 1)
    pad_l, pad_r, pad_t, pad_b = 48, 12, 52, 34
    plot_w = min(max(440.0, 14.0 * n), 1400.0)
    width = int(pad_l + plot_w + pad_r)
    factor = report.meta.get("jump_factor", 10)
    plot_h = height - pad_t - pad_b
    base = pad_t + plot_h

    def x_of(i):
        return pad_l + (i + 0.5) * plot_w / n

    def y_of(err):
        if not math.isfinite(err):
            return pad_t
        if err <= 0:
            return base
        return base - plot_h * (min(max(math.log10(err), lo), hi) - lo) / (hi - lo)

    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
              'class="depth-chart" aria-label="relative L2 error against layer depth">'),
             _text(4, 12, "error against depth: relative L2 error ||a-e||/||e|| per layer, log scale", 10,
                   cls="title"),
             _text(4, 24, f"red points: failing layers; jump: error grew more than {factor:g}x "
                          "over the previous layer; 0 drawn on the bottom axis, NaN/Inf on top", 8, cls="legend")]
    for k in range(int(lo), int(hi) + 1):
        y = y_of(10.0 ** k)
        parts.append(f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + plot_w:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(_text(pad_l - 3, y + 3, f"{10.0 ** k:.0e}", 8, "end", cls="ytick"))
    step = max(1, math.ceil(n / 20))
    for i in range(0, len(layers), step):
        parts.append(_text(x_of(i), base + 11, str(i), 8, "middle", cls="xtick"))
    parts.append(_text(pad_l + plot_w / 2, height - 4, "layer index (network order)", 9, "middle", cls="xaxis"))
    for key, name, color, dy, style in (("jump", report.first_jump, JUMP_COLOR, 0, 'stroke-width="3"'),
                                        ("first-fail", report.first_failure, FAIL_COLOR, 10,
                                         'stroke-width="1.5" stroke-dasharray="4 3"')):
        i = layer_index(report, name)
        if i is None:
            continue
        x = x_of(i)
        label = f"first jump: {name}" if key == "jump" else f"first failing layer: {name}"
        parts.append(f'<line class="marker {key}" x1="{x:.1f}" y1="{pad_t - 14 + dy}" x2="{x:.1f}" y2="{base}" '
                     f'stroke="{color}" {style}><title>{html.escape(label)}</title>'
                     f'</line>')
        anchor = "end" if x > pad_l + plot_w / 2 else "start"
        parts.append(_text(x + (-3 if anchor == "end" else 3), pad_t - 16 + dy, label, 8, anchor,
                           cls=f"marker-label {key}", fill=color))
    points = " ".join(f"{x_of(i):.1f},{y_of(e):.1f}" for i, e in enumerate(errors))
    if points:
        parts.append(f'<polyline class="series" points="{points}" fill="none" stroke="#666" stroke-width="1"/>')
    for i, (s, e) in enumerate(zip(layers, errors)):
        color = PASS_COLOR if s.passed else FAIL_COLOR
        tip = f"#{i} {s.name}: rel_l2 {error_label(e)}, max_abs {error_label(s.max_abs)}, {verdict(s.passed)}"
        parts.append(f'<circle class="point {verdict(s.passed).lower()}" cx="{x_of(i):.1f}" cy="{y_of(e):.1f}" r="3" '
                     f'fill="{color}"><title>{html.escape(tip)}</title></circle>')
    parts.append(f'<line x1="{pad_l}" y1="{base}" x2="{pad_l + plot_w:.1f}" y2="{base}" stroke="#333"/>')
    parts.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{base}" stroke="#333"/>')
    parts.append("</svg>")
    return "".join(parts)

"""Inline SVG charts of a parity Report, for the self-contained HTML report: the error histogram of
one tensor and, for layerwise runs, the error against depth. What they show comes from
``chart_data`` (shared with the PNG figures of ``figures.py``); this module only lays it out as SVG,
which needs nothing beyond the standard library (why there are two renderers: ``chart_data``).
"""

from __future__ import annotations

import html
import math

from .chart_data import (  # noqa: F401  (Bar ... verdict: also importable from here)
    FAIL_COLOR,
    FAIL_MARK,
    JUMP_COLOR,
    NONFINITE_COLOR,
    PASS_COLOR,
    PASS_MARK,
    ZERO_COLOR,
    Bar,
    depth_chart,
    depth_series,
    error_label,
    histogram_bars,
    histogram_chart,
    layer_index,
    nonfinite_note,
    tolerance_markers,
    verdict,
)
from .compare import Report, TensorStats

#: SVG attributes of the depth chart's vertical markers, by LayerMarker.key: (line style, label offset)
_LAYER_MARKER_STYLE = {"jump": ('stroke-width="3"', 0), "first-fail": ('stroke-width="1.5" stroke-dasharray="4 3"', 10)}


def _text(x, y, s, size=9, anchor="start", cls=None, fill=None, extra="") -> str:
    attrs = f' class="{cls}"' if cls else ""
    attrs += f' fill="{fill}"' if fill else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{attrs}{extra}>'
            f'{html.escape(s)}</text>')


def svg_histogram(stats: TensorStats, height: int = 230) -> str:
    """An inline SVG bar chart of |actual - expected| for one tensor: one bar per half-decade bin
    (labelled by its lower edge), the exact zeros and the NaN/Inf errors apart, the tolerances as
    vertical lines; bars and markers red if the tensor FAILs."""
    chart = histogram_chart(stats)
    bars = list(chart.bars)
    mark_color = chart.mark_color
    pad_l, pad_r, pad_t, pad_b = 40, 12, 66, 62
    bw = 30.0
    width = max(460, int(pad_l + pad_r + bw * len(bars)))
    bw = (width - pad_l - pad_r) / len(bars)
    plot_h = height - pad_t - pad_b
    base = pad_t + plot_h
    top = max(b.count for b in bars) or 1
    status = verdict(chart.passed)
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
              f'class="histogram {status.lower()}" '
              f'aria-label="error histogram of {html.escape(chart.name)}: {status}">'),
             _text(4, 12, chart.title, 11, cls="title", fill=mark_color),
             _text(4, 24, "bars: elements per |a-e| bin, half a decade wide, labelled by its lower edge "
                          "(linear counts)", 8, cls="legend"),
             _text(4, 35, "lines: tolerances used; errors left of atol pass, right of both lines fail", 8,
                   cls="legend")]
    for i, b in enumerate(bars):
        bh = plot_h * b.count / top
        x = pad_l + i * bw
        color = ZERO_COLOR if b.kind == "zero" else NONFINITE_COLOR if b.kind == "nonfinite" else chart.bar_color
        parts.append(f'<rect class="bar {b.kind}" x="{x + 1:.1f}" y="{base - bh:.1f}" width="{max(bw - 2, 1):.1f}" '
                     f'height="{bh:.1f}" fill="{color}"><title>{html.escape(b.title)}</title></rect>')
        cx = x + bw / 2
        parts.append(_text(cx, base + 10, b.label, 8, "end", cls="xlabel",
                           extra=f' transform="rotate(-45 {cx:.1f} {base + 10:.1f})"'))
    finite = [i for i, b in enumerate(bars) if b.kind == "bin"]
    for j, (key, label, value) in enumerate(chart.markers):
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
    if chart.notes:
        parts.append(_text(4, height - 4, "; ".join(chart.notes), 8, cls="note", fill=NONFINITE_COLOR))
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


def svg_depth_chart(report: Report, height: int = 240) -> str:
    """An inline SVG line chart of the relative L2 error ||a-e||/||e|| of each layer against its
    index in network order (log scale), failing layers in red, the first jump and the first failing
    layer marked by vertical lines."""
    chart = depth_chart(report)
    lo, hi = chart.lo, chart.hi
    n = max(len(chart.errors), 1)
    pad_l, pad_r, pad_t, pad_b = 48, 12, 52, 34
    plot_w = min(max(440.0, 14.0 * n), 1400.0)
    width = int(pad_l + plot_w + pad_r)
    plot_h = height - pad_t - pad_b
    base = pad_t + plot_h

    def x_of(i):
        return pad_l + (i + 0.5) * plot_w / n

    def y_of(shown):  # a value of DepthChart.shown: within [10**lo, 10**hi]
        return base - plot_h * (min(max(math.log10(shown), lo), hi) - lo) / (hi - lo)

    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
              'class="depth-chart" aria-label="relative L2 error against layer depth">'),
             _text(4, 12, "error against depth: relative L2 error ||a-e||/||e|| per layer, log scale", 10,
                   cls="title"),
             _text(4, 24, f"red points: failing layers; jump: error grew more than {chart.jump_factor:g}x "
                          "over the previous layer; 0 drawn on the bottom axis, NaN/Inf on top", 8, cls="legend")]
    for k in range(int(lo), int(hi) + 1):
        y = y_of(10.0 ** k)
        parts.append(f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + plot_w:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(_text(pad_l - 3, y + 3, f"{10.0 ** k:.0e}", 8, "end", cls="ytick"))
    step = max(1, math.ceil(n / 20))
    for i in range(0, len(chart.errors), step):
        parts.append(_text(x_of(i), base + 11, str(i), 8, "middle", cls="xtick"))
    parts.append(_text(pad_l + plot_w / 2, height - 4, "layer index (network order)", 9, "middle", cls="xaxis"))
    for marker in chart.markers:
        style, dy = _LAYER_MARKER_STYLE[marker.key]
        x = x_of(marker.index)
        parts.append(f'<line class="marker {marker.key}" x1="{x:.1f}" y1="{pad_t - 14 + dy}" x2="{x:.1f}" '
                     f'y2="{base}" stroke="{marker.color}" {style}><title>{html.escape(marker.label)}</title>'
                     f'</line>')
        anchor = "end" if x > pad_l + plot_w / 2 else "start"
        parts.append(_text(x + (-3 if anchor == "end" else 3), pad_t - 16 + dy, marker.label, 8, anchor,
                           cls=f"marker-label {marker.key}", fill=marker.color))
    ys = [y_of(v) for v in chart.shown]
    points = " ".join(f"{x_of(i):.1f},{y:.1f}" for i, y in enumerate(ys))
    if points:
        parts.append(f'<polyline class="series" points="{points}" fill="none" stroke="#666" stroke-width="1"/>')
    for i, (name, e, max_abs, passed, color) in enumerate(zip(chart.names, chart.errors, chart.max_abs, chart.passed,
                                                              chart.colors)):
        tip = f"#{i} {name}: rel_l2 {error_label(e)}, max_abs {error_label(max_abs)}, {verdict(passed)}"
        parts.append(f'<circle class="point {verdict(passed).lower()}" cx="{x_of(i):.1f}" cy="{ys[i]:.1f}" r="3" '
                     f'fill="{color}"><title>{html.escape(tip)}</title></circle>')
    parts.append(f'<line x1="{pad_l}" y1="{base}" x2="{pad_l + plot_w:.1f}" y2="{base}" stroke="#333"/>')
    parts.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{base}" stroke="#333"/>')
    parts.append("</svg>")
    return "".join(parts)

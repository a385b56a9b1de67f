"""The PNG report of a parity Report as a matplotlib Figure (matplotlib: the `report` extra).

report_figure() returns the Figure without saving it: a title naming the model, precision, backend
and PASS/FAIL; one error histogram per output (|a-e| on a log axis, the tolerances marked, a failing
output in red, a note when NaN/Inf errors were left out); for layerwise runs, the error against depth.
What the panels show comes from ``chart_data``, as for the HTML report's SVG charts (``charts.py``).
"""

from __future__ import annotations

import textwrap

from .chart_data import FAIL_MARK, NONFINITE_COLOR, PASS_MARK, depth_chart, histogram_chart, verdict
from .compare import Report, TensorStats

PANEL_HEIGHT = 2.2  # inches per panel; the figure is 6 inches wide


def report_title(report: Report) -> str:
    """'trtbuild parity: MODEL, PRECISION, backend BACKEND: PASS|FAIL'."""
    m = report.meta
    parts = [str(m.get("model") or "model ?"), str(m.get("precision") or "precision ?"),
             f"backend {m.get('backend') or '?'}"]
    return f"trtbuild parity: {', '.join(parts)}: {verdict(report.passed)}"


def report_figure(report: Report):
    """A matplotlib Figure (Agg canvas, no pyplot state): the title, one histogram panel per output
    and, for layerwise runs, the error-against-depth panel."""
    from matplotlib.figure import Figure

    panels = len(report.outputs) + (1 if report.layers else 0)
    fig = Figure(figsize=(6, PANEL_HEIGHT * max(panels, 1)))
    axes = fig.subplots(max(panels, 1), 1, squeeze=False)[:, 0]
    fig.suptitle(textwrap.fill(report_title(report), 75), fontsize=9, fontweight="bold",
                 color=PASS_MARK if report.passed else FAIL_MARK)
    for ax, stats in zip(axes, report.outputs):
        _histogram_panel(ax, stats)
    if report.layers:
        _depth_panel(axes[len(report.outputs)], report)
    fig.tight_layout(rect=(0, 0, 1, 0.96 if panels > 1 else 0.92))
    return fig


def _histogram_panel(ax, stats: TensorStats) -> None:
    chart = histogram_chart(stats)
    ax.set_title(chart.title, fontsize=8, color=chart.mark_color)
    bins, zeros = chart.bins, chart.zeros
    if bins:
        ax.bar([b.lo for b in bins], [b.count for b in bins], width=[b.hi - b.lo for b in bins], align="edge",
               color=chart.bar_color, edgecolor="white", label="elements per |a-e| bin")
        ax.set_xscale("log")
        for key, label, value in chart.markers:
            if value > 0:
                ax.axvline(value, color=chart.mark_color, linestyle="--" if key == "rtol" else "-", linewidth=1.2,
                           label=label)
        ax.legend(fontsize=6, loc="upper right", framealpha=0.8)
    else:
        ax.text(0.5, 0.5, "no nonzero finite error", transform=ax.transAxes, ha="center", fontsize=8)
    ax.set_xlabel("|actual - expected|" + (f"   ({zeros} exact zero(s), not on the log axis)" if zeros else ""),
                  fontsize=7)
    ax.set_ylabel("elements", fontsize=7)
    ax.tick_params(labelsize=6)
    if chart.notes:
        ax.text(0.01, 0.97, "\n".join(chart.notes), transform=ax.transAxes, ha="left", va="top", fontsize=6,
                color=NONFINITE_COLOR, bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})


#: matplotlib line style of the depth chart's vertical markers, by LayerMarker.key
_LAYER_MARKER_STYLE = {"jump": {"linewidth": 3, "alpha": 0.7}, "first-fail": {"linewidth": 1.2, "linestyle": "--"}}


def _depth_panel(ax, report: Report) -> None:
    chart = depth_chart(report)
    shown = chart.shown  # 0 on the floor, NaN/Inf on top
    x = list(range(len(shown)))
    ax.plot(x, shown, color="#666666", linewidth=1, label="relative L2 error ||a-e||/||e||")
    ax.scatter(x, shown, s=10, zorder=3, c=chart.colors)
    ax.set_yscale("log")
    ax.set_ylim(10.0 ** chart.lo / 2, 10.0 ** chart.hi * 2)
    for marker in chart.markers:
        ax.axvline(marker.index, color=marker.color, label=marker.label, **_LAYER_MARKER_STYLE[marker.key])
    ax.set_title("error against depth (red: failing layers)", fontsize=8)
    ax.set_xlabel("layer index (network order)", fontsize=7)
    ax.set_ylabel("relative L2 error", fontsize=7)
    ax.tick_params(labelsize=6)
    ax.legend(fontsize=6, loc="best", framealpha=0.8)

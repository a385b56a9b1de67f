"""The HTML report's SVG charts and the PNG figures draw from one data model (parity.chart_data):
the bins, counts, labels, tolerances, notes and marked layers they show are the same."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from trtbuild.parity import compare
from trtbuild.parity.chart_data import depth_chart, histogram_chart
from trtbuild.parity.charts import svg_depth_chart, svg_histogram
from trtbuild.parity.compare import Report, TensorStats

SVG = "{http://www.w3.org/2000/svg}"


def _layer(name: str, rel_l2: float, passed: bool) -> TensorStats:
    return TensorStats(name, [4], 4, 1e-4, 1e-3, passed, failed=0 if passed else 4, rel_l2=rel_l2, max_abs=rel_l2)


@pytest.fixture
def report() -> Report:
    expected = np.ones(8)
    actual = expected + np.array([0.0, 0.0, 1e-7, 5e-7, 2.5e-6, 3e-5, np.nan, np.inf])
    layers = [_layer("a", 1e-7, True), _layer("b", 0.0, True), _layer("c", 5e-3, True), _layer("d", math.inf, False)]
    outputs = compare({"y": actual}, {"y": expected}, atol=2e-6, rtol=1e-7, names=["y"]).outputs
    return Report(outputs, 2e-6, 1e-7, {"model": "m"}, layers=layers, first_jump="c", first_failure="d")


def test_histogram_model_is_what_the_svg_draws(report):
    stats = report.outputs[0]
    chart = histogram_chart(stats)
    assert chart.title == "y: FAIL (4/8 elements fail)" and not chart.passed
    assert chart.zeros == 2 and [b.kind for b in chart.bars][:1] == ["zero"] and chart.bars[-1].kind == "nonfinite"
    assert sum(b.count for b in chart.bars) == 8
    assert chart.notes == ("2 non-finite error(s) (NaN/Inf) not in the |a-e| bins", "actual has 1 NaN and 1 Inf")
    svg = ET.fromstring(svg_histogram(stats))
    rects = svg.findall(f"{SVG}rect")
    assert [r.get("class") for r in rects] == [f"bar {b.kind}" for b in chart.bars]
    assert [r.find(f"{SVG}title").text for r in rects] == [b.title for b in chart.bars]
    texts = {t.get("class"): t.text for t in svg.iter(f"{SVG}text")}
    assert texts["title"] == chart.title and texts["note"] == "; ".join(chart.notes)
    assert [ln.get("class") for ln in svg.iter(f"{SVG}line") if ln.get("class")] == \
        [f"marker {key}" for key, _, _ in chart.markers]
    assert all(r.get("fill") == chart.bar_color for r in rects if r.get("class") == "bar bin")


def test_histogram_model_is_what_the_png_draws(report):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from trtbuild.parity.figures import report_figure

    chart = histogram_chart(report.outputs[0])
    ax = report_figure(report).axes[0]
    assert ax.get_title() == chart.title
    assert [p.get_height() for p in ax.patches] == [b.count for b in chart.bins]
    assert [p.get_x() for p in ax.patches] == [b.lo for b in chart.bins]
    assert {to_hex(p.get_facecolor()) for p in ax.patches} == {chart.bar_color}
    assert [ln.get_label() for ln in ax.get_lines()] == [label for _, label, v in chart.markers if v > 0]
    assert " ".join(t.get_text() for t in ax.texts) == "\n".join(chart.notes)
    assert f"({chart.zeros} exact zero(s)" in ax.get_xlabel()


def test_depth_model_is_what_both_renderers_draw(report):
    chart = depth_chart(report)
    assert chart.names == ("a", "b", "c", "d") and (chart.lo, chart.hi) == (-7.0, -2.0)
    assert chart.shown == pytest.approx([1e-7, 1e-7, 5e-3, 1e-2])  # 0 on the floor, inf on the top
    assert [(m.key, m.label, m.index) for m in chart.markers] == [("jump", "first jump: c", 2),
                                                                  ("first-fail", "first failing layer: d", 3)]
    svg = ET.fromstring(svg_depth_chart(report))
    points = [c for c in svg.iter(f"{SVG}circle")]
    assert [p.get("fill") for p in points] == chart.colors
    ys = [float(p.get("cy")) for p in points]
    assert ys[0] == ys[1] > ys[2] > ys[3]
    labels = [t.text for t in svg.iter(f"{SVG}text") if re.match(r"marker-label", t.get("class") or "")]
    assert labels == [m.label for m in chart.markers]
    pytest.importorskip("matplotlib")
    from trtbuild.parity.figures import report_figure

    depth = report_figure(report).axes[1]
    assert list(depth.get_lines()[0].get_ydata()) == chart.shown
    assert [ln.get_label() for ln in depth.get_lines()[1:]] == [m.label for m in chart.markers]
    assert [list(ln.get_xdata()) for ln in depth.get_lines()[1:]] == [[m.index] * 2 for m in chart.markers]
    assert depth.get_ylim() == pytest.approx((10.0 ** chart.lo / 2, 10.0 ** chart.hi * 2))

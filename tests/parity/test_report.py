"""The parity reports a person reads: HTML (inline SVG histograms and the error-against-depth chart)
and PNG (the matplotlib Figure, inspected through its artists), and the `report` extra that --png needs.
Every expected value is computed here by hand: bin edges, marker positions, colours, counts."""

from __future__ import annotations

import argparse
import math
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from trtbuild.parity import Report, TensorStats, compare, compare_tensor

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[2]
# |a-e| of five elements, 1e-7 .. 1e-5: log10 from -6.82 to -5.10, so the half-decade bins are
# [1e-7, 10**-6.5), [10**-6.5, 1e-6), [1e-6, 10**-5.5), [10**-5.5, 1e-5), [1e-5, 10**-4.5)
ERRORS = [1.5e-7, 2e-7, 5e-7, 2.5e-6, 8e-6]
EDGE_LABELS = ["1.00e-07", "3.16e-07", "1.00e-06", "3.16e-06", "1.00e-05"]
BIN_COUNTS = [2, 1, 1, 1, 0]
ATOL = 2e-6


def _stats(rtol: float) -> TensorStats:
    """expected 1.0 everywhere, actual off by ERRORS; atol 2e-6 (absolute). rtol 1e-3 passes every
    element; rtol 1e-7 fails the two above atol (2.5e-6, 8e-6)."""
    expected = np.ones(len(ERRORS))
    return compare_tensor("out", expected + np.array(ERRORS), expected, atol=ATOL, rtol=rtol)


def _is_red(color: str) -> bool:
    """A hex colour whose red channel dominates (#d62728, #8b0000 ...), not blue/green/grey."""
    color = color.lstrip("#")
    r, g, b = (int(color[i:i + 2], 16) for i in (0, 2, 4))
    return r >= 0x80 and g <= 0x50 and b <= 0x50


def _svgs(text: str) -> list[ET.Element]:
    """Every inline <svg> of an HTML page, parsed as XML (so each must be well-formed)."""
    return [ET.fromstring(s) for s in re.findall(r"<svg .*?</svg>", text, re.DOTALL)]


def _texts(svg: ET.Element, cls: str) -> list[str]:
    return [t.text for t in svg.iter(f"{SVG}text") if cls in t.get("class", "").split()]


def _by_class(svg: ET.Element, tag: str, *classes: str) -> list[ET.Element]:
    return [e for e in svg.iter(f"{SVG}{tag}") if set(classes) <= set(e.get("class", "").split())]


def _histogram_of(report: Report, name: str) -> ET.Element:
    svgs = [s for s in _svgs(report.to_html()) if s.get("aria-label", "").startswith(f"error histogram of {name}")]
    assert len(svgs) == 1
    return svgs[0]


# ------------------------------------------------------------------------------------------- HTML


def test_histogram_bins_are_labelled_by_their_error_edges():
    report = compare({"out": np.ones(5) + np.array(ERRORS)}, {"out": np.ones(5)}, atol=ATOL, rtol=1e-3)
    svg = _histogram_of(report, "out")
    labels = _texts(svg, "xlabel")
    # the exact-zero bar says so; then one label per bin: its lower |error| edge with 3 significant digits
    assert labels == ["exact 0"] + EDGE_LABELS
    assert [float(x) for x in labels[1:]] == pytest.approx([1e-7, 10 ** -6.5, 1e-6, 10 ** -5.5, 1e-5], rel=5e-3)
    # the largest errors never read as 0 (main printed log10 edges: "-7" ... and "0" for the [1, 3.16) bin)
    assert all(float(x) > 0 for x in labels[1:])
    bars = _by_class(svg, "rect", "bar", "bin")
    assert [int(b.find(f"{SVG}title").text.rsplit(": ", 1)[1].split()[0]) for b in bars] == BIN_COUNTS
    assert bars[3].find(f"{SVG}title").text == "3.16e-06 <= |a-e| < 1.00e-05: 1 elements"


def test_errors_of_order_one_are_not_labelled_zero():
    # |a-e| 0.4 and 2: log10 from -0.40 to 0.30 -> bins [10**-0.5, 1), [1, 10**0.5), [10**0.5, 10)
    report = compare({"out": np.array([1.4, 3.0])}, {"out": np.array([1.0, 1.0])}, atol=0.1, rtol=0.1)
    svg = _histogram_of(report, "out")
    numbers = [float(t.text) for t in svg.iter(f"{SVG}text") if re.fullmatch(r"[-+.\de]+", t.text or "")]
    assert numbers and 0.0 not in numbers  # main labelled the exact zeros and the [1, 3.16) bin both "0"
    labels = _texts(svg, "xlabel")
    assert labels == ["exact 0", "3.16e-01", "1.00e+00", "3.16e+00"]


def test_histogram_has_a_legend_and_the_tolerance_markers():
    svg = ET.fromstring(_html_histogram(_stats(rtol=1e-3)))
    legend = " ".join(_texts(svg, "legend"))
    assert "elements per |a-e| bin" in legend and "linear" in legend and "atol" in legend
    bars = _by_class(svg, "rect", "bar", "bin")
    # atol 2e-6 lies in the bin [1e-6, 10**-5.5), a fraction log10(2) / 0.5 = 0.602 of its width in
    atol_line = _by_class(svg, "line", "marker", "atol")[0]
    slot_left, slot_w = float(bars[2].get("x")) - 1, float(bars[2].get("width")) + 2  # bars are inset by 1
    assert float(atol_line.get("x1")) == pytest.approx(slot_left + 0.60206 * slot_w, abs=0.2)
    assert atol_line.get("x1") == atol_line.get("x2")
    assert _texts(svg, "atol") == ["atol 2.00e-06"]
    # rtol * max|expected| = 1e-3 lies beyond the last bin (10**-4.5): drawn at its right end, and said
    rtol_line = _by_class(svg, "line", "marker", "rtol")[0]
    assert float(rtol_line.get("x1")) == pytest.approx(float(bars[-1].get("x")) - 1 + slot_w, abs=0.2)
    assert _texts(svg, "rtol") == ["rtol·max|e| 1.00e-03 (beyond the bins)"]


def _html_histogram(stats: TensorStats) -> str:
    report = Report([stats], stats.atol, stats.rtol, {"model": "m"})
    return re.search(r"<svg .*?</svg>", report.to_html(), re.DOTALL).group(0)


def test_failing_output_is_drawn_red_and_passing_one_is_not():
    passing, failing = _stats(rtol=1e-3), _stats(rtol=1e-7)
    assert passing.passed and not failing.passed and failing.failed == 2
    for stats, red in ((passing, False), (failing, True)):
        svg = ET.fromstring(_html_histogram(stats))
        fills = [b.get("fill") for b in _by_class(svg, "rect", "bar", "bin")]
        strokes = [m.get("stroke") for m in _by_class(svg, "line", "marker")]
        assert len(fills) == 5 and len(strokes) == 2
        assert all(_is_red(c) == red for c in fills + strokes), (fills, strokes)
        assert ("fail" in svg.get("class").split()) == red
        assert _texts(svg, "title")[0] == f"out: {'FAIL' if red else 'PASS'} ({2 if red else 0}/5 elements fail)"
    # and the failing output's row of the table carries the failing class
    report = Report([passing, failing], ATOL, 1e-7, {"model": "m"})
    failing.name = "bad"
    rows = _TableRows()
    rows.feed(report.to_html())
    assert rows.classes["bad"] == "fail" and rows.classes["out"] is None


class _TableRows(HTMLParser):
    """{first cell text: class of its <tr>} of every table row."""

    def __init__(self):
        super().__init__()
        self.classes, self._cls, self._first = {}, None, False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._cls, self._first = dict(attrs).get("class"), True

    def handle_data(self, data):
        if self._first and self.lasttag == "td":
            self.classes.setdefault(data, self._cls)
            self._first = False


def _layer(name: str, rel_l2: float, passed: bool) -> TensorStats:
    return TensorStats(name, [4], 4, 1e-4, 1e-3, passed, failed=0 if passed else 4, rel_l2=rel_l2,
                       max_abs=rel_l2, module=f"mod_{name}")


def _layerwise_report() -> Report:
    out = compare_tensor("y", np.ones(4), np.ones(4), 1e-4, 1e-3)
    layers = [_layer("conv1", 1e-7, True), _layer("relu1", 2e-7, True), _layer("conv2", 5e-3, True),
              _layer("fc", 1e-2, False)]
    return Report([out], 1e-4, 1e-3, {"model": "tiny", "precision": "fp16", "backend": "reference"}, layers=layers,
                  first_jump="conv2", first_failure="fc")


def test_layerwise_html_has_an_error_against_depth_chart():
    report = _layerwise_report()
    charts = [s for s in _svgs(report.to_html()) if s.get("class") == "depth-chart"]
    assert len(charts) == 1 and not [s for s in _svgs(Report(report.outputs, 1e-4, 1e-3).to_html())
                                     if s.get("class") == "depth-chart"]
    chart = charts[0]
    points = _by_class(chart, "circle", "point")
    xs, ys = [float(p.get("cx")) for p in points], [float(p.get("cy")) for p in points]
    assert len(points) == 4 and xs == sorted(xs) and len(set(xs)) == 4  # network order, left to right
    # log scale: vertical distances proportional to differences of log10(rel_l2); larger error higher up
    logs = [math.log10(v) for v in (1e-7, 2e-7, 5e-3, 1e-2)]
    assert (ys[0] - ys[2]) / (ys[0] - ys[3]) == pytest.approx((logs[2] - logs[0]) / (logs[3] - logs[0]), abs=1e-2)
    assert (ys[0] - ys[1]) / (ys[0] - ys[3]) == pytest.approx((logs[1] - logs[0]) / (logs[3] - logs[0]), abs=1e-2)
    # decades from 1e-7 (floor of the smallest) to 1e-2 (ceiling of the largest)
    assert _texts(chart, "ytick") == ["1e-07", "1e-06", "1e-05", "1e-04", "1e-03", "1e-02"]
    assert "layer index (network order)" in _texts(chart, "xaxis")
    assert [_is_red(p.get("fill")) for p in points] == [False, False, False, True]
    jump, fail = _by_class(chart, "line", "jump")[0], _by_class(chart, "line", "first-fail")[0]
    assert float(jump.get("x1")) == xs[2] and float(fail.get("x1")) == xs[3]
    assert _texts(chart, "jump") == ["first jump: conv2"]
    assert _texts(chart, "first-fail") == ["first failing layer: fc"]


def test_layerwise_run_with_a_broken_layer_marks_it_in_the_html():
    from helpers.tiny_net import TINY_LAYER_MAP, TINY_SHAPE, TinyNet, tiny_define

    import trtbuild.reference as trt
    from trtbuild.engine import Engine, build_plan
    from trtbuild.parity import check_parity, make_inputs

    net = TinyNet(seed=4)
    plan = build_plan(trt, tiny_define(net, corrupt_conv2=True), input_shape=TINY_SHAPE, precision="fp32",
                      progress=False, extra_outputs=list(TINY_LAYER_MAP))
    engine, output_of = Engine(plan, trt, sidecar=plan.info), plan.info["extra_outputs"]
    report = check_parity(engine, net, make_inputs({"input": TINY_SHAPE}, seed=1), output_names=["y"],
                          layer_map=TINY_LAYER_MAP, layer_order=list(output_of), output_of=output_of,
                          meta={"precision": "fp32"})
    chart = next(s for s in _svgs(report.to_html()) if s.get("class") == "depth-chart")
    xs = [float(p.get("cx")) for p in _by_class(chart, "circle", "point")]
    assert float(_by_class(chart, "line", "jump")[0].get("x1")) == xs[2]  # conv2, the corrupted layer
    assert _texts(chart, "jump") == ["first jump: conv2"]
    assert _texts(chart, "first-fail") == ["first failing layer: conv2"]


# -------------------------------------------------------------------------------------------- PNG


def test_png_figure_title_colours_markers_and_nonfinite_note():
    from matplotlib.colors import to_hex

    from trtbuild.parity.figures import report_figure

    expected = np.ones(6)
    actual = expected + np.array([0.0, 1e-7, 5e-7, 2.5e-6, np.nan, np.inf])
    report = compare({"good": np.ones(3), "bad": actual}, {"good": np.ones(3), "bad": expected}, atol=ATOL, rtol=1e-7,
                     meta={"model": "tiny", "precision": "fp16", "backend": "reference"}, names=["good", "bad"])
    fig = report_figure(report)
    title = fig._suptitle
    assert title.get_text() == "trtbuild parity: tiny, fp16, backend reference: FAIL"
    assert _is_red(to_hex(title.get_color()))
    good, bad = fig.axes
    assert "good: PASS" in good.get_title() and "bad: FAIL" in bad.get_title()
    assert all(_is_red(to_hex(p.get_facecolor())) for p in bad.patches if p.get_height() > 0)
    assert bad.get_xscale() == "log"
    atol_lines = [ln for ln in bad.get_lines() if ln.get_label().startswith("atol")]
    assert len(atol_lines) == 1 and list(atol_lines[0].get_xdata()) == [ATOL, ATOL]
    assert atol_lines[0].get_label() == "atol 2.00e-06" and _is_red(to_hex(atol_lines[0].get_color()))
    # the NaN and the Inf cannot be placed on the |a-e| axis: a note says so, with the counts
    texts = " ".join(t.get_text() for t in bad.texts)
    assert "2 non-finite error(s) (NaN/Inf)" in texts and "actual has 1 NaN and 1 Inf" in texts
    assert "1 exact zero(s)" in bad.get_xlabel()
    assert not good.texts or "non-finite" not in " ".join(t.get_text() for t in good.texts)


def test_png_figure_of_a_passing_report():
    from matplotlib.colors import to_hex

    from trtbuild.parity.figures import report_figure

    fig = report_figure(Report([_stats(rtol=1e-3)], ATOL, 1e-3, {"model": "m", "precision": "fp32",
                                                                  "backend": "tensorrt"}))
    assert fig._suptitle.get_text() == "trtbuild parity: m, fp32, backend tensorrt: PASS"
    assert not _is_red(to_hex(fig._suptitle.get_color()))
    assert not any(_is_red(to_hex(p.get_facecolor())) for p in fig.axes[0].patches)
    assert [p.get_height() for p in fig.axes[0].patches] == BIN_COUNTS
    assert [p.get_x() for p in fig.axes[0].patches] == pytest.approx([1e-7, 10 ** -6.5, 1e-6, 10 ** -5.5, 1e-5])


def test_png_has_the_layerwise_chart(tmp_path):
    import matplotlib.image
    from matplotlib.colors import to_hex

    from trtbuild.parity.figures import report_figure

    report = _layerwise_report()
    fig = report_figure(report)
    assert len(fig.axes) == 2
    depth = fig.axes[1]
    assert depth.get_yscale() == "log" and depth.get_xlabel() == "layer index (network order)"
    series = depth.get_lines()[0]
    assert list(series.get_xdata()) == [0, 1, 2, 3]
    assert list(series.get_ydata()) == pytest.approx([1e-7, 2e-7, 5e-3, 1e-2])
    marks = {ln.get_label(): list(ln.get_xdata()) for ln in depth.get_lines()[1:]}
    assert marks == {"first jump: conv2": [2, 2], "first failing layer: fc": [3, 3]}
    colours = [to_hex(c) for c in depth.collections[0].get_facecolors()]
    assert [_is_red(c) for c in colours] == [False, False, False, True]
    # the written PNG has both panels: 6 x (2.2 * 2) inches at 100 dpi
    assert report.to_png(tmp_path / "r.png") is True
    assert matplotlib.image.imread(tmp_path / "r.png").shape[:2] == (440, 600)


# --------------------------------------------------------------------------------- the report extra


def test_pyproject_has_a_report_extra_with_matplotlib_and_the_readme_names_it():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("matplotlib") for r in extras["report"])
    assert any(r.startswith("matplotlib") for r in extras["test"])
    readme = (ROOT / "README.md").read_text()
    assert re.search(r'--png.{0,200}pip install "trtbuild\[report\]"', readme, re.DOTALL)


def test_png_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    from trtbuild.cli import main
    from trtbuild.cli.parity import write_outputs

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    report = Report([_stats(rtol=1e-3)], ATOL, 1e-3)
    png = tmp_path / "r.png"
    with pytest.raises(RuntimeError, match=re.escape(f'cannot write {png}: --png needs matplotlib, which is not '
                                                     'installed (pip install "trtbuild[report]")')):
        write_outputs(report, argparse.Namespace(json=None, html=None, png=str(png)))
    assert not png.exists()
    monkeypatch.chdir(tmp_path)
    assert main(["parity", "alexnet", "--small", "--png", "p.png", "--backend", "reference"]) == 1
    err = capsys.readouterr().err
    assert 'pip install "trtbuild[report]"' in err and not (tmp_path / "p.png").exists()


def test_degenerate_tensors_and_layers_still_draw():
    from trtbuild.parity.figures import report_figure

    exact = compare_tensor("exact", np.ones(3), np.ones(3), 0.0, 0.0)  # no bin: the markers stand after the zeros
    mismatch = compare_tensor("shape", np.ones(3), np.ones(4), 1e-3, 1e-3)  # no histogram at all
    layers = [_layer("zero", 0.0, True), _layer("missing", math.inf, False), _layer("nan", math.nan, False)]
    report = Report([exact, mismatch], 0.0, 0.0, {"model": "m"}, layers=layers, first_jump="missing",
                    first_failure="missing")
    svgs = _svgs(report.to_html())  # every chart is well-formed XML
    assert [_texts(s, "xlabel") for s in svgs[:2]] == [["exact 0"], ["exact 0"]]
    assert _texts(svgs[0], "atol") == ["atol 0.00e+00"]
    chart = next(s for s in svgs if s.get("class") == "depth-chart")
    ys = [float(p.get("cy")) for p in _by_class(chart, "circle", "point")]
    # 0 on the bottom axis, inf and NaN on the top one (no finite error: the axis spans 1e-8 .. 1)
    assert ys[0] > ys[1] == ys[2] and _texts(chart, "ytick")[0] == "1e-08"
    fig = report_figure(report)
    assert len(fig.axes) == 3 and "no nonzero finite error" in [t.get_text() for t in fig.axes[0].texts]

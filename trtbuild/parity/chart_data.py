"""What the charts of a parity Report show, computed once for both renderers.

A report has two charts: the error histogram of each compared tensor (bins labelled by their |error|
edges, the tolerances marked, a failing tensor drawn red) and, for layerwise runs, the error against
depth (relative L2 error per layer in network order, the first jump and the first failing layer
marked). Two renderers draw them, and both draw from the HistogramChart and DepthChart built here:

* ``charts.py`` writes inline SVG for the self-contained HTML report. It stays hand-written because
  ``--html`` must work on a bare install: matplotlib is only in the ``report`` extra, and an HTML
  report with matplotlib-made images would need it, or lose its tooltips and selectable text.
* ``figures.py`` draws the PNG report with matplotlib (``--png``).

Everything a reader compares between the two (bins and counts, labels, titles, tolerance values,
notes, marked layers, colours, the y range and where 0 and NaN/Inf are drawn) is decided here;
the renderers only lay it out.
"""

from __future__ import annotations

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


def nonfinite_notes(stats: TensorStats) -> list[str]:
    """What the histogram leaves out or cannot place: elements whose error is NaN/Inf, and the
    NaN/Inf counts of each side (empty if none)."""
    parts = []
    dropped = int((stats.hist or {}).get("nonfinite", 0))
    if dropped:
        parts.append(f"{dropped} non-finite error(s) (NaN/Inf) not in the |a-e| bins")
    for side in ("actual", "expected"):
        nan, inf = getattr(stats, f"nan_{side}", 0) or 0, getattr(stats, f"inf_{side}", 0) or 0
        total = getattr(stats, f"nonfinite_{side}", None)
        if nan or inf or total:
            parts.append(f"{side} has {nan} NaN and {inf} Inf")
    return parts


def nonfinite_note(stats: TensorStats) -> str:
    """nonfinite_notes as one line ('' if none)."""
    return "; ".join(nonfinite_notes(stats))


@dataclass(frozen=True)
class HistogramChart:
    """The error histogram of one tensor, as both renderers draw it."""

    name: str
    passed: bool
    title: str  # "y: FAIL (3/6 elements fail)"
    bars: tuple[Bar, ...]  # the exact zeros, the half-decade bins, the NaN/Inf errors
    markers: tuple[tuple[str, str, float], ...]  # tolerance_markers
    notes: tuple[str, ...]  # nonfinite_notes
    bar_color: str
    mark_color: str

    @property
    def bins(self) -> list[Bar]:
        return [b for b in self.bars if b.kind == "bin"]

    @property
    def zeros(self) -> int:
        return sum(b.count for b in self.bars if b.kind == "zero")


def histogram_chart(stats: TensorStats) -> HistogramChart:
    passed = bool(stats.passed)
    return HistogramChart(
        name=stats.name, passed=passed,
        title=f"{stats.name}: {verdict(passed)} ({stats.failed}/{stats.count} elements fail)",
        bars=tuple(histogram_bars(stats)), markers=tuple(tolerance_markers(stats)),
        notes=tuple(nonfinite_notes(stats)),
        bar_color=PASS_COLOR if passed else FAIL_COLOR, mark_color=PASS_MARK if passed else FAIL_MARK)


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


@dataclass(frozen=True)
class LayerMarker:
    """A vertical line of the depth chart: key "jump" or "first-fail", at layer `index`."""

    key: str
    label: str  # "first jump: conv2", "first failing layer: fc"
    index: int
    color: str


@dataclass(frozen=True)
class DepthChart:
    """The error against depth of a layerwise report, as both renderers draw it."""

    names: tuple[str, ...]
    errors: tuple[float, ...]  # relative L2 error per layer, network order (0, inf and NaN kept)
    max_abs: tuple[float, ...]
    passed: tuple[bool, ...]
    lo: float  # log10 of the bottom of the y axis
    hi: float  # log10 of its top
    markers: tuple[LayerMarker, ...]
    jump_factor: float

    @property
    def colors(self) -> list[str]:
        return [PASS_COLOR if p else FAIL_COLOR for p in self.passed]

    @property
    def shown(self) -> list[float]:
        """The errors as drawn: clamped to the axis, 0 on the bottom, NaN and Inf on the top."""
        floor, ceil = 10.0 ** self.lo, 10.0 ** self.hi
        return [min(max(e, floor), ceil) if not math.isnan(e) else ceil for e in self.errors]


def depth_chart(report: Report) -> DepthChart:
    layers = report.layers or []
    errors, lo, hi = depth_series(report)
    markers = []
    for key, name, words, color in (("jump", report.first_jump, "first jump", JUMP_COLOR),
                                    ("first-fail", report.first_failure, "first failing layer", FAIL_COLOR)):
        i = layer_index(report, name)
        if i is not None:
            markers.append(LayerMarker(key, f"{words}: {name}", i, color))
    return DepthChart(names=tuple(s.name for s in layers), errors=tuple(errors),
                      max_abs=tuple(float(s.max_abs) for s in layers), passed=tuple(bool(s.passed) for s in layers),
                      lo=lo, hi=hi, markers=tuple(markers), jump_factor=report.meta.get("jump_factor", 10))

"""Compare actual (engine) outputs with expected (PyTorch) outputs, the way Polygraphy does.

An element FAILS only if it exceeds BOTH tolerances: |a - e| > atol and |a - e| > rtol * |e|.
A tensor whose actual values contain NaN or Inf FAILS, even where the expected values have them
too, unless allow_nonfinite: then NaN matches NaN and +-inf matches the same inf. Any other
non-finite mismatch always fails. Cosine and relative L2 error are computed over the elements
finite on both sides (the note says so when some were left out; cosine is NaN, "n/a", when none is).
Per tensor the statistics are: max / mean / p99 of the absolute error; max / mean / p99 of the
relative error |a - e| / |e| (mean and p99 over elements with e != 0; max is inf if some e == 0
with a != 0); cosine similarity; relative L2 error ||a - e|| / ||e||; NaN and Inf counts of
actual and expected separately; the smallest atol that would pass with rtol fixed and the
smallest rtol that would pass with atol fixed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping

import numpy as np

# "kind" of the JSON report, by which check_outputs tells a report from other JSON files
from trtbuild.files.outputs import PARITY_REPORT_KIND

#: Default (atol, rtol) per precision. These atol values are RELATIVE: multiplied by each tensor's
#: largest finite |expected| (seeded models have tiny outputs, so a fixed atol would hide errors).
#: An explicit atol (CLI --atol) is absolute, as in Polygraphy.
#: int8/fp8 (explicit quantization vs the fp32 PyTorch model) are a quantization-error budget: what a
#: PyTorch fake-quant model with the same scales shows against fp32 on the zoo's small models, with margin
#: (largest |error| / max |expected|, 2 calibration batches of 4, method max, 12 input seeds): within int8
#: 0.07 and fp8 0.12 at their outputs. One model is its own case and says so in its ModelSpec.tolerances:
#: unet_gn_deconv (GroupNorm of one channel per group at width 8, 2x2 transposed convs) reaches int8 0.0995
#: at its output and 0.159 at an inner layer (``parity --layerwise`` judges those too), fp8 0.164 and 0.271;
#: loosening every model's budget for it would hide errors twice that size elsewhere.
DEFAULT_TOLERANCES = {"fp32": (1e-4, 1e-3), "fp16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2), "int8": (0.1, 0.1),
                      "fp8": (0.2, 0.2)}


def default_tolerances(precision: str) -> tuple[float, float]:
    """(relative atol, rtol) suited to an engine computing in `precision` compared with fp32 PyTorch."""
    if precision not in DEFAULT_TOLERANCES:
        raise ValueError(f"no default tolerances for precision {precision!r}; choose one of "
                         f"{', '.join(DEFAULT_TOLERANCES)}")
    return DEFAULT_TOLERANCES[precision]


def check_tolerance(name: str, value: float) -> float:
    """`value` as a float if it is a finite number >= 0; ValueError naming the tolerance otherwise."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def to_numpy(x) -> np.ndarray:
    """A float64 numpy copy of a torch tensor / numpy array / number (any device, bf16 too)."""
    if hasattr(x, "detach"):
        x = x.detach().to("cpu")
        if not x.dtype.is_floating_point and not x.dtype.is_complex:
            return x.numpy().astype(np.float64)
        return x.double().numpy()
    return np.asarray(x, dtype=np.float64)


@dataclass
class TensorStats:
    """Error statistics of one compared tensor (an output, or a layer in layerwise mode)."""

    name: str
    shape: list
    count: int
    atol: float
    rtol: float
    passed: bool
    failed: int = 0
    max_abs: float = 0.0
    mean_abs: float = 0.0
    p99_abs: float = 0.0
    max_rel: float = 0.0
    mean_rel: float = 0.0
    p99_rel: float = 0.0
    rel_l2: float = 0.0
    cosine: float = 1.0
    nan_actual: int = 0
    nan_expected: int = 0
    inf_actual: int = 0
    inf_expected: int = 0
    nonfinite_actual: int = 0  # NaN + Inf among the actual (engine) values
    nonfinite_expected: int = 0  # NaN + Inf among the expected (PyTorch) values
    min_atol: float = 0.0
    min_rtol: float = 0.0
    expected_max_abs: float = 0.0
    note: str = ""
    module: str = ""
    hist: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and math.isnan(v) else
                    ("inf" if v == math.inf else "-inf" if v == -math.inf else v) if isinstance(v, float) else v)
                for k, v in d.items()}


#: the error statistics of a TensorStats (all but the counts, tolerances and notes)
_ERROR_STATS = ("max_abs", "mean_abs", "p99_abs", "max_rel", "mean_rel", "p99_rel", "rel_l2", "cosine", "min_atol",
                "min_rtol")


def not_compared(name: str, shape, count: int, atol: float, rtol: float, note: str, failed: int = 0) -> TensorStats:
    """A failing row whose values could not be compared (a size mismatch, a missing output, a module
    that never ran): every error statistic NaN, shown as "nan" / cosine "n/a" and written as null,
    never a number (inf, cosine 1.0) that reads as if values had been compared."""
    return TensorStats(name, list(shape), count, atol, rtol, False, failed=failed, note=note,
                       **{k: math.nan for k in _ERROR_STATS})


def _histogram(diff: np.ndarray, max_bins: int = 24) -> dict:
    """Counts of log10(|a - e|) in half-decade bins, plus exact zeros and non-finite errors."""
    finite = diff[np.isfinite(diff)]
    positive = finite[finite > 0]
    hist = {"zeros": int((finite == 0).sum()), "nonfinite": int((~np.isfinite(diff)).sum()), "edges": [], "counts": []}
    if positive.size:
        logs = np.log10(positive)
        lo, hi = math.floor(logs.min() * 2) / 2, math.ceil(logs.max() * 2) / 2 + 0.5
        step = max(0.5, math.ceil((hi - lo) / max_bins * 2) / 2)
        edges = np.arange(lo, hi + step / 2, step)
        if edges.size < 2:
            edges = np.array([lo, lo + step])
        counts, edges = np.histogram(logs, bins=edges)
        hist["edges"] = [float(e) for e in edges]
        hist["counts"] = [int(c) for c in counts]
    return hist


def compare_tensor(name: str, actual, expected, atol: float, rtol: float, atol_relative: bool = False,
                   allow_nonfinite: bool = False) -> TensorStats:
    """Statistics for one tensor; see the module docstring for the rules.

    atol_relative: use atol * max finite |expected| of this tensor as the absolute tolerance
    (the effective value is stored in the returned stats' `atol`). allow_nonfinite: NaN/Inf in the
    actual values pass where the expected values have the same (otherwise they fail).
    """
    a, e = to_numpy(actual), to_numpy(expected)
    if atol_relative:
        finite_e = np.abs(e[np.isfinite(e)])
        atol = atol * float(finite_e.max()) if finite_e.size else 0.0
    note = ""
    if a.shape != e.shape:
        if a.size != e.size:
            return not_compared(name, e.shape, int(e.size), atol, rtol, failed=int(e.size),
                                note=f"shape mismatch: actual {tuple(a.shape)} vs expected {tuple(e.shape)}")
        note = (f"shape mismatch: actual {tuple(a.shape)} vs expected {tuple(e.shape)} (same number of values, "
                "so the statistics compare them flattened)")
    a, e = a.ravel(), e.ravel()
    stats = TensorStats(name, list(np.shape(to_numpy(expected))), int(e.size), atol, rtol, True, note=note)
    if e.size == 0:
        return stats
    nan_a, nan_e, inf_a, inf_e = np.isnan(a), np.isnan(e), np.isinf(a), np.isinf(e)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
    diff[(nan_a & nan_e) | (inf_a & inf_e & (a == e))] = 0.0
    diff[np.isnan(diff)] = math.inf
    if not allow_nonfinite:
        diff[nan_a | inf_a] = math.inf  # no tolerance makes a NaN/Inf output pass
    abs_e = np.abs(e)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(abs_e > 0, diff / abs_e, np.inf)
    rel[diff == 0] = 0.0
    rel[np.isnan(rel)] = math.inf
    nonfinite_err = np.isinf(diff)
    fails_rtol = (diff > rtol * abs_e) | nonfinite_err
    fails_atol = (diff > atol) | nonfinite_err
    failed = fails_rtol & fails_atol
    nonzero_e = abs_e > 0
    finite_both = np.isfinite(a) & np.isfinite(e)
    af, ef = a[finite_both], e[finite_both]
    na, ne = float(np.linalg.norm(af)), float(np.linalg.norm(ef))
    stats.failed = int(failed.sum())
    stats.passed = stats.failed == 0 and not note.startswith("shape mismatch")
    stats.max_abs = float(diff.max())
    stats.mean_abs = float(diff.mean())
    stats.p99_abs = float(np.quantile(diff, 0.99, method="higher"))
    stats.max_rel = float(rel.max())
    if nonzero_e.any():
        stats.mean_rel = float(rel[nonzero_e].mean())
        stats.p99_rel = float(np.quantile(rel[nonzero_e], 0.99, method="higher"))
    if not af.size:
        stats.cosine = math.nan  # no finite pair: not 1.0
    else:
        stats.cosine = 1.0 if na == ne == 0 else (0.0 if na == 0 or ne == 0 else float(af @ ef / (na * ne)))
    stats.rel_l2 = (float(np.linalg.norm(af - ef)) / ne if ne > 0 else (0.0 if na == 0 else math.inf))
    if nonfinite_err.any():
        stats.rel_l2 = math.inf
    stats.nan_actual, stats.nan_expected = int(nan_a.sum()), int(nan_e.sum())
    stats.inf_actual, stats.inf_expected = int(inf_a.sum()), int(inf_e.sum())
    stats.nonfinite_actual = stats.nan_actual + stats.inf_actual
    stats.nonfinite_expected = stats.nan_expected + stats.inf_expected
    _judge_nonfinite(stats, int(finite_both.sum()), allow_nonfinite)
    stats.min_atol = float(diff[fails_rtol].max()) if fails_rtol.any() else 0.0
    stats.min_rtol = float(rel[fails_atol].max()) if fails_atol.any() else 0.0
    finite_e = abs_e[np.isfinite(e)]
    stats.expected_max_abs = float(finite_e.max()) if finite_e.size else 0.0
    stats.hist = _histogram(diff)
    return stats


def _add_note(stats: TensorStats, text: str) -> None:
    stats.note = f"{stats.note}; {text}" if stats.note else text


def _judge_nonfinite(stats: TensorStats, finite_pairs: int, allow_nonfinite: bool) -> None:
    """Fail a tensor with NaN/Inf actual values unless allowed, and say which values the cosine used."""
    a, e = stats.nonfinite_actual, stats.nonfinite_expected
    if a and not allow_nonfinite:  # compare_tensor counted them as failing elements
        _add_note(stats, f"FAIL: {a} of {stats.count} actual values are NaN/Inf ({stats.nan_actual} NaN, "
                         f"{stats.inf_actual} Inf; expected: {e}), which fail unless allowed (--allow-nonfinite)")
    elif a or e:
        _add_note(stats, f"non-finite values: {a} actual, {e} expected")
    if finite_pairs < stats.count:
        _add_note(stats, f"cosine over the {finite_pairs} of {stats.count} elements finite on both sides"
                  if finite_pairs else "cosine n/a (no element finite on both sides)")


@dataclass
class Report:
    """The result of a parity check: per-output stats, optional layerwise rows, and metadata."""

    outputs: list[TensorStats]
    atol: float
    rtol: float
    meta: dict = field(default_factory=dict)
    layers: list[TensorStats] | None = None
    first_jump: str | None = None
    first_failure: str | None = None
    atol_relative: bool = False

    @property
    def passed(self) -> bool:
        """True if every compared output passed (layer rows are diagnostics)."""
        return bool(self.outputs) and all(s.passed for s in self.outputs)

    @property
    def suspect_layer(self) -> str | None:
        """The first layer where the error jumps or fails (whichever comes first in network order)."""
        if not self.layers:
            return None
        for row in self.layers:
            if row.name in (self.first_jump, self.first_failure):
                return row.name
        return None

    def to_dict(self) -> dict:
        return {"kind": PARITY_REPORT_KIND, "passed": self.passed, "atol": self.atol, "rtol": self.rtol,
                "atol_mode": "relative to max |expected| per tensor" if self.atol_relative else "absolute",
                "meta": self.meta,
                "outputs": [s.to_dict() for s in self.outputs],
                "layers": [s.to_dict() for s in self.layers] if self.layers is not None else None,
                "first_jump": self.first_jump, "first_failure": self.first_failure,
                "suspect_layer": self.suspect_layer}

    def to_table(self) -> str:
        """Plain aligned text: one row per output, then one per layer in layerwise mode."""
        from .report import render_table

        return render_table(self)

    def to_json(self, path=None) -> str:
        """The report as JSON text; written atomically to `path` if given."""
        from .report import render_json

        return render_json(self, path)

    def to_html(self, path=None) -> str:
        """A self-contained HTML page with tables and inline-SVG error histograms."""
        from .report import render_html

        return render_html(self, path)

    def to_png(self, path) -> bool:
        """Write error histograms as PNG if matplotlib is installed; return whether it did."""
        from .report import render_png

        return render_png(self, path)


def compare(actual: Mapping, expected: Mapping, atol: float = 1e-4, rtol: float = 1e-3,
            names=None, meta: dict | None = None, atol_relative: bool = False,
            allow_nonfinite: bool = False) -> Report:
    """Compare every tensor of `expected` (or `names`) with the same-named tensor of `actual`.

    atol is absolute unless atol_relative (then atol * max |expected| per tensor). Both must be
    finite and >= 0. NaN/Inf actual values fail unless allow_nonfinite (see the module doc)."""
    atol, rtol = check_tolerance("atol", atol), check_tolerance("rtol", rtol)
    rows = []
    for name in (names if names is not None else list(expected)):
        if name not in expected:
            raise ValueError(f"no expected (reference) value for output '{name}'; have {list(expected)}")
        if name not in actual:
            rows.append(not_compared(name, np.shape(to_numpy(expected[name])), 0, atol, rtol,
                                     note=f"missing from the actual outputs {list(actual)}"))
            continue
        rows.append(compare_tensor(name, actual[name], expected[name], atol, rtol, atol_relative, allow_nonfinite))
    return Report(rows, atol, rtol, dict(meta or {}), atol_relative=atol_relative)


def judge_argmax_ties(row: TensorStats, actual, expected, expected_scores, score_row: TensorStats) -> None:
    """Re-judge `row`, an index output that is the argmax over the last dim of the scores PyTorch gave as
    `expected_scores` (compared in `score_row`), forgiving near-ties.

    Where two classes score within the scores' own tolerance, an engine computing in fp16 or int8 may pick
    either one, as TensorRT's TopK does; exact index equality would then fail a network whose scores pass.
    An index that differs from PyTorch's passes where PyTorch's score at the engine's index is within the
    score tolerance of its score at its own index (|difference| <= the score row's atol, or <= rtol times
    that score); any other difference, or an index outside the classes, still fails. The error statistics
    are left as measured; the note says how many differences were near-ties."""
    if row.note.startswith("shape mismatch") or row.nonfinite_actual:
        return
    a = to_numpy(actual).astype(np.int64).ravel()
    e = to_numpy(expected).astype(np.int64).ravel()
    scores = to_numpy(expected_scores)
    classes = scores.shape[-1] if scores.ndim else 0
    if scores.size != e.size * classes or classes == 0:
        _add_note(row, f"near-ties not judged: the scores '{score_row.name}' {tuple(scores.shape)} are not "
                       f"{tuple(row.shape)} x classes")
        return
    scores = scores.reshape(e.size, classes)
    differ = np.flatnonzero(a != e)
    inside = differ[(a[differ] >= 0) & (a[differ] < classes)]
    picked, best = scores[inside, a[inside]], scores[inside, e[inside]]
    gap = np.abs(best - picked)
    ties = int(((gap <= score_row.atol) | (gap <= score_row.rtol * np.abs(best))).sum())
    row.failed = int(differ.size) - ties
    row.passed = row.failed == 0
    if differ.size:
        _add_note(row, f"{ties} of the {differ.size} indices that differ from PyTorch's are near-ties of "
                       f"'{score_row.name}' (PyTorch's scores at both indices within its tolerance)")


def robust_rel_error(actual, expected) -> float:
    """max_i |a_i - r_i| / max(|r_i|, 1e-2 * max|r|, smallest normal of actual's type); inf if any
    output is non-finite. The metric of docs/robustness.md: elements of at least 1 % of the largest
    reference value are judged relative to themselves, smaller ones against 1 % of the largest
    (a half-precision result rounds intermediates of the output's scale to ~2**-11 of it, so
    near-cancelling elements cannot be judged relative to themselves)."""
    import torch

    a, r = torch.as_tensor(actual), torch.as_tensor(expected).double()
    tiny = torch.finfo(a.dtype).tiny if a.is_floating_point() else 0.0
    a = a.double()
    if not torch.isfinite(a).all():
        return float("inf")
    floor = max(1e-2 * r.abs().max().item(), tiny, 1e-30) if r.numel() else 1.0
    return ((a - r).abs() / r.abs().clamp_min(floor)).max().item() if r.numel() else 0.0


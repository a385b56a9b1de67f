"""Ranges (amax) of |x| from a histogram accumulated over calibration batches.

    hist = AbsHistogram()
    for x in batches:
        hist.collect(x)
    amax = compute_amax(hist, "percentile", percentile=99.99)

The histogram and the four methods follow NVIDIA's pytorch-quantization / ModelOpt calibrators
(``HistogramCalibrator``): 2048 bins of equal width over [0, max|x|] at the first batch; a later
batch with a larger max adds bins of the same width. On a histogram of counts ``h`` with edges ``e``:

* ``max``: the running max of |x| (exact, no histogram);
* ``percentile``: the smallest bin edge at or below which ``percentile`` % of the values lie
  (the upper edge of the bin where the cumulative count reaches it; NVIDIA takes that bin's lower
  edge, one bin width, max/2048, lower);
* ``mse``: the bin centre ``c_i`` (i >= 128) minimising sum_j h_j (fq(c_j; c_i) - c_j)^2, where
  ``fq(x; a)`` is INT8 fake quantization with scale a/127 (round half to even, clamp to [-128, 127]);
* ``entropy``: TensorRT's legacy entropy calibrator (KL divergence): for each i >= 128, the
  reference distribution is h[:i] with the tail sum(h[i:]) added to its last bin, the candidate
  spreads each of 128 equal groups of h[:i] evenly over the group's non-empty bins; amax is the edge
  e_i of the i with the smallest KL(reference || candidate) (the largest such i on ties). The zero
  bin's count is replaced by bin 1's, as NVIDIA does, so a spike of exact zeros (after ReLU) does
  not dominate.

FP8 (E4M3) uses the same amax with scale amax/448.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "DEFAULT_BINS",
    "METHODS",
    "START_BIN",
    "AbsHistogram",
    "amax_entropy",
    "amax_mse",
    "amax_percentile",
    "compute_amax",
    "int8_fake_quant",
]

METHODS = ("max", "percentile", "mse", "entropy")
DEFAULT_BINS = 2048
START_BIN = 128  # the smallest candidate bin of mse and entropy, as NVIDIA's
_INT8_GROUPS = 128  # quantized magnitudes of signed INT8 (entropy's candidate distribution)


class AbsHistogram:
    """Running max and histogram of |x| over the batches passed to :meth:`collect`.

    ``histogram=False`` keeps only the max (the ``max`` method). Edges are ``width * arange(n + 1)``
    starting at 0; values equal to the top edge fall in the last bin. Where NVIDIA's histogram grows
    without bound (an outlier 100x the first batch's max gives 200k bins, and mse and entropy then
    take minutes), this one merges adjacent bins in pairs (doubling the width) whenever it would
    hold more than 2 * num_bins bins."""

    def __init__(self, num_bins: int = DEFAULT_BINS, histogram: bool = True):
        self.num_bins = int(num_bins)
        self.histogram = histogram
        self.amax = 0.0
        self.count = 0
        self.counts: np.ndarray | None = None  # float64 counts per bin
        self.width = 0.0
        self._zeros = 0  # exact zeros seen before the first non-zero batch (no width yet)

    @property
    def edges(self) -> np.ndarray:
        return self.width * np.arange(len(self.counts) + 1, dtype=np.float64)

    def collect(self, x: torch.Tensor) -> None:
        x = x.detach().abs().float().reshape(-1)
        if x.numel() == 0:
            return
        x_max = float(x.max())
        if not math.isfinite(x_max):
            raise ValueError("the tensor holds NaN or Inf values")
        self.amax = max(self.amax, x_max)
        self.count += x.numel()
        if not self.histogram:
            return
        if self.counts is None:
            if x_max == 0.0:
                self._zeros += x.numel()
                return
            self.width = x_max / self.num_bins
            self.counts = np.zeros(self.num_bins, dtype=np.float64)
            self.counts[0] += self._zeros
        top = self.width * len(self.counts)
        if x_max > top:  # more bins of the same width, up to the new max
            grown = math.ceil(x_max / self.width)
            self.counts = np.concatenate([self.counts, np.zeros(grown - len(self.counts))])
            while len(self.counts) > 2 * self.num_bins:  # merge pairs: at most 2 * num_bins bins
                self.counts = np.pad(self.counts, (0, len(self.counts) % 2)).reshape(-1, 2).sum(axis=1)
                self.width *= 2
            top = self.width * len(self.counts)
        hist = torch.histc(x, bins=len(self.counts), min=0.0, max=top)
        self.counts += hist.double().numpy()


def amax_percentile(counts: np.ndarray, edges: np.ndarray, percentile: float) -> float:
    """The upper edge of the first bin where the cumulative share of the counts reaches `percentile` %."""
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile {percentile} must be in (0, 100]")
    cdf = np.cumsum(counts) / counts.sum()
    idx = int(np.searchsorted(cdf, percentile / 100.0 - 1e-12))
    return float(edges[min(idx, len(counts) - 1) + 1])


def int8_fake_quant(x: np.ndarray, amax) -> np.ndarray:
    """Symmetric INT8 quantize-dequantize with scale amax/127: round half to even, clamp to [-128, 127]."""
    scale = np.asarray(amax, dtype=np.float64) / 127.0
    return np.clip(np.round(x / scale), -128, 127) * scale


def amax_mse(counts: np.ndarray, edges: np.ndarray, start_bin: int = START_BIN, chunk: int = 256) -> float:
    """The bin centre (from `start_bin` on) minimising the histogram-weighted squared error of INT8 fake quant."""
    centers = (edges[1:] + edges[:-1]) / 2
    first = min(start_bin, len(centers) - 1)
    best, best_err = None, math.inf
    for lo in range(first, len(centers), chunk):
        cand = centers[lo:lo + chunk, None]
        err = (counts[None, :] * (int8_fake_quant(centers[None, :], cand) - centers[None, :]) ** 2).sum(axis=1)
        i = int(np.argmin(err))
        if err[i] < best_err:
            best, best_err = lo + i, float(err[i])
    return float(centers[best])


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p, q = p / p.sum(), q / q.sum()
    nz = p > 0
    if np.any(q[nz] == 0):
        return math.inf
    return float(np.sum(p[nz] * np.log(p[nz] / q[nz])))


def amax_entropy(counts: np.ndarray, edges: np.ndarray, start_bin: int = START_BIN) -> float:
    """TensorRT's legacy entropy calibration (see the module docstring)."""
    bins = np.array(counts, dtype=np.float64)
    if len(bins) > 1:
        bins[0] = bins[1]
    first = min(start_bin, len(bins))
    best_i, best_kl = len(bins), math.inf
    for i in range(first, len(bins) + 1):
        head = bins[:i]
        reference = head.copy()
        reference[-1] += bins[i:].sum()
        group = (np.arange(i) * _INT8_GROUPS) // i  # = np.digitize(range(i), linspace(0, i, 129)) - 1
        nonzero = head != 0
        sums = np.bincount(group[nonzero], weights=head[nonzero], minlength=_INT8_GROUPS)
        sizes = np.bincount(group[nonzero], minlength=_INT8_GROUPS)
        candidate = np.where(nonzero, sums[group] / np.maximum(sizes[group], 1), 0.0)
        if reference.sum() == 0 or candidate.sum() == 0:
            continue
        kl = _kl(reference, candidate)
        if kl <= best_kl:  # the last minimum, as NVIDIA's
            best_i, best_kl = i, kl
    return float(edges[best_i])


def compute_amax(hist: AbsHistogram, method: str, percentile: float = 99.99) -> float:
    """amax of the collected |x| by `method` (one of METHODS); 0.0 for a tensor that was all zeros."""
    if method not in METHODS:
        raise ValueError(f"calibration method {method!r} is not one of {', '.join(METHODS)}")
    if method == "max" or hist.amax == 0.0:
        return hist.amax
    if hist.counts is None:
        raise ValueError(f"method {method!r} needs a histogram, but it was collected with histogram=False")
    edges = hist.edges
    if method == "percentile":
        amax = amax_percentile(hist.counts, edges, percentile)
    elif method == "mse":
        amax = amax_mse(hist.counts, edges)
    else:
        amax = amax_entropy(hist.counts, edges)
    return min(amax, hist.amax) if amax > 0 else hist.amax

"""An independent involution for tests: the op definition transcribed with Python loops (float64).

Shared by tests/ops/test_involution.py and tests/layers/test_involution_plugin.py so that
neither compares trtbuild's involution with itself.
"""

from __future__ import annotations

import itertools

import torch


def naive_involution(x, w, k, stride, padding, dilation, groups):
    """Direct transcription of the op definition with Python loops.

    x: (N, C, H, W); w: (N, G, K*K, Ho, Wo). Returns (N, C, Ho, Wo) float64 on the CPU.
    """
    n_, c_, h_, w_ = x.shape
    ho = (h_ + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    wo = (w_ + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = torch.zeros(n_, c_, ho, wo, dtype=torch.float64)
    cg = c_ // groups
    for n, c, i, j in itertools.product(range(n_), range(c_), range(ho), range(wo)):
        acc = 0.0
        for kh, kw in itertools.product(range(k), range(k)):
            hi = i * stride - padding + kh * dilation
            wi = j * stride - padding + kw * dilation
            if 0 <= hi < h_ and 0 <= wi < w_:
                acc += float(w[n, c // cg, kh * k + kw, i, j]) * float(x[n, c, hi, wi])
        out[n, c, i, j] = acc
    return out

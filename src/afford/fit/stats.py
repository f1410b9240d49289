"""Robust statistics of raw samples: medians, their distribution-free precision, spreads.

The precision of a median is the half-width of its distribution-free confidence interval,
from binomial order statistics (Conover, *Practical Nonparametric Statistics*, 3rd ed.,
section 3.2), relative to the median. No normality is assumed: step times are skewed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np


def median(samples: Sequence[float]) -> float:
    if len(samples) == 0:
        raise ValueError("median of no samples")
    return float(np.median(np.asarray(samples, dtype=float)))


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: order statistics x_(j), x_(k)
    with j, k from Binomial(n, 1/2). With fewer than 6 samples it is the whole range."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("median_ci of no samples")
    if n < 6:
        return float(x[0]), float(x[-1])
    alpha = 1.0 - confidence
    # largest 1-based rank r with coverage of [x_(r), x_(n+1-r)] = 1 - 2 P(B <= r-1) >= confidence
    r = max(0, int(n / 2.0 + NormalDist().inv_cdf(alpha / 2.0) * math.sqrt(n) / 2.0))
    while r >= 1 and 2.0 * binom_half_cdf(r - 1, n) > alpha:
        r -= 1
    while 2.0 * binom_half_cdf(r, n) <= alpha:
        r += 1
    r = max(r, 1)
    j, k = r - 1, n - r
    return float(x[j]), float(x[k])


def binom_half_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2), summed exactly in integers (sum of C(n, i) over
    i <= k, over 2^n; one correctly rounded division). Exact where scipy's would do, and it
    spares every child process the ~1-2 s import of scipy.stats."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    term, total = 1, 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return total / (1 << n)


def median_precision(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of the median's confidence interval over the median (0.01 = known to 1 %)."""
    lo, hi = median_ci(samples, confidence)
    m = median(samples)
    if m <= 0.0:
        return math.inf
    return (hi - lo) / 2.0 / m


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / median: how far independent children disagree."""
    m = median(values)
    if m <= 0.0:
        return math.inf
    return (max(values) - min(values)) / m


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot; for constant ``y``, 1 when the
    prediction is exact and 0 otherwise."""
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot

"""Robust statistics of raw samples: medians, their distribution-free precision, spreads.

The precision of a median is the half-width of its distribution-free confidence interval,
from binomial order statistics (Conover, *Practical Nonparametric Statistics*, 3rd ed.,
section 3.2), relative to the median. No normality is assumed: step times are skewed.

numpy is imported inside the functions that need it: a command that reads a certificate
takes medians and nothing else from here, and answers faster without loading numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def median(samples: Sequence[float]) -> float:
    """The middle sample, or the mean of the two middle ones; NaN where a sample is NaN.
    numpy's median to the last bit (the same comparisons, one addition and one halving),
    in plain Python."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("median of no samples")
    if any(math.isnan(x) for x in xs):
        return math.nan
    xs.sort()
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: order statistics x_(j), x_(k)
    with j, k from Binomial(n, 1/2). With fewer than 6 samples it is the whole range."""
    import numpy as np

    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("median_ci of no samples")
    if n < 6:
        return float(x[0]), float(x[-1])
    alpha = 1.0 - confidence
    # the largest 1-based rank r with coverage of [x_(r), x_(n+1-r)] = 1 - 2 P(B <= r-1)
    # >= confidence: r counts the k with 2 P(B <= k) <= alpha, P summed exactly in integers
    # (C(n, i) over i <= k, over 2^n; one correctly rounded division), which spares every
    # child process the ~1-2 s import of scipy.stats
    r, term, total = 0, 1, 1  # term = C(n, r), total = sum of C(n, i) over i <= r
    while 2.0 * (total / (1 << n)) <= alpha:
        r += 1
        term = term * (n - r + 1) // r
        total += term
    r = max(r, 1)
    j, k = r - 1, n - r
    return float(x[j]), float(x[k])


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


PROCESS_BAND_LEVEL = 0.90  # the launch floor's band: where 9 fresh processes in 10 land


def prediction_band(samples: Sequence[float], level: float = PROCESS_BAND_LEVEL
                    ) -> tuple[float, float]:
    """Where one more independent sample lands, at ``level``: the prediction interval of a
    log-normal population, ``exp(mean +- t(n-1) s sqrt(1 + 1/n))`` over the samples' logs
    (Student's t with n - 1 degrees of freedom; Hahn, Meeker & Escobar, *Statistical
    Intervals*, 2nd ed.; docs/REFERENCES.md, "Statistics of readings"), never narrower than
    the samples' own lowest and highest. With
    fewer than 3 samples (no spread to speak of) it is their range.

    Why not the range alone: the range of n samples holds one more sample with probability
    (n - 1) / (n + 1) whatever their distribution (50 % with 3 children, 71 % with 6), so
    its coverage would change with the number of readings; this interval states its level.
    The logs, because a process's speed multiplies its step (a step cannot be negative, and
    the floor's spread is relative: 10-60 % between processes)."""
    xs = [float(x) for x in samples]
    if not xs or min(xs) <= 0.0 or not all(math.isfinite(x) for x in xs):
        raise ValueError("prediction_band needs positive, finite samples")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level {level} is not in (0, 1)")
    lo, hi = min(xs), max(xs)
    n = len(xs)
    if n < 3:
        return lo, hi
    from scipy.special import stdtrit  # here: reading a certificate needs no scipy

    logs = [math.log(x) for x in xs]
    m = sum(logs) / n
    s = math.sqrt(sum((v - m) ** 2 for v in logs) / (n - 1))
    h = float(stdtrit(n - 1, 0.5 + level / 2.0)) * s * math.sqrt(1.0 + 1.0 / n)
    return min(lo, math.exp(m - h)), max(hi, math.exp(m + h))


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot; for constant ``y``, 1 when the
    prediction is exact and 0 otherwise."""
    import numpy as np

    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot

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
from dataclasses import dataclass
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


PROCESS_BAND_LEVEL = 0.95  # the launch floor's band: where 19 fresh processes in 20 land


@dataclass(frozen=True)
class SpreadPrior:
    """What recorded certificates say of the spread between processes, as a prior for one
    certificate's few (Smyth 2004; :func:`spread_prior`): ``sd``, the typical standard
    deviation of a log reading between processes; ``dof``, how many degrees of freedom of
    a certificate's own readings it weighs as (``inf``: every certificate alike);
    ``session_sd``, that of a certificate's mean reading between certificates minutes apart
    on one machine, beyond their processes' spread (0: not known)."""

    sd: float
    dof: float
    session_sd: float = 0.0

    def words(self) -> str:
        dof = "inf" if math.isinf(self.dof) else f"{self.dof:.3g}"
        session = f"; {self.session_sd:.1%} between certificates minutes apart" \
            if self.session_sd else ""
        return (f"moderated by recorded certificates' spread ({self.sd:.1%} between "
                f"processes, weighing as {dof} degrees of freedom{session})")


def _log_groups(groups: Sequence[Sequence[float]]) -> list[list[float]]:
    out = []
    for g in groups:
        xs = [float(x) for x in g]
        if not xs or min(xs) <= 0.0 or not all(math.isfinite(x) for x in xs):
            raise ValueError("a process band needs positive, finite readings in each group")
        out.append([math.log(x) for x in xs])
    if not out:
        raise ValueError("a process band needs positive, finite readings in each group")
    return out


def pooled_log_variance(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The within-group variance of the readings' logs, pooled over the groups, and its
    degrees of freedom (the sum of each group's size less one). A group is one shape, each
    reading one process's: the variance is between processes, with the shapes' own levels
    taken out."""
    return _pooled(_log_groups(groups))


def _pooled(logs: list[list[float]]) -> tuple[float, int]:
    ss, dof = 0.0, 0
    for lg in logs:
        m = sum(lg) / len(lg)
        ss += sum((v - m) ** 2 for v in lg)
        dof += len(lg) - 1
    return (ss / dof if dof else 0.0), dof


def spread_prior(variances: Sequence[tuple[float, int]]) -> tuple[float, float]:
    """(sd0, d0) of the scaled inverse chi-square prior that many groups' sample variances
    ``(s^2, dof)`` were drawn under, by Smyth's moments of log s^2 (Smyth 2004, *Stat. Appl.
    Genet. Mol. Biol.* 3(1) art. 3, section 6.2;
    docs/REFERENCES.md, "Statistics of readings"): the excess variance of log s^2 beyond
    its sampling variance (the trigamma function of dof / 2) is trigamma(d0 / 2). ``d0`` is
    ``inf`` where there is no excess: every group then shares one variance, ``sd0``^2."""
    from scipy.optimize import brentq
    from scipy.special import digamma, polygamma

    vs = [(float(v), int(d)) for v, d in variances if d > 0 and v > 0.0]
    if len(vs) < 3:
        raise ValueError("spread_prior needs at least 3 groups with a positive variance")
    e = [math.log(v) - float(digamma(d / 2)) + math.log(d / 2) for v, d in vs]
    mean = sum(e) / len(e)
    excess = sum((x - mean) ** 2 for x in e) / (len(e) - 1) - \
        sum(float(polygamma(1, d / 2)) for _, d in vs) / len(vs)
    if excess <= 0.0:
        return math.sqrt(math.exp(mean)), math.inf
    half = brentq(lambda x: float(polygamma(1, x)) - excess, 1e-8, 1e8)
    d0 = 2.0 * half
    return math.sqrt(math.exp(mean + float(digamma(half)) - math.log(half))), d0


def between_log_variance(sets: Sequence[Sequence[Sequence[float]]]) -> tuple[float, int]:
    """The variance component between groups of readings, beyond the readings' own spread
    within each group, and its degrees of freedom: ``sets`` holds sets of groups (e.g. one
    shape's certificates, each its processes' readings); per set of m >= 2 groups,
    ``var(the groups' mean logs) - (mean within-group variance) / n`` (n the mean group
    size), pooled over the sets with weights m - 1 (the ANOVA estimator of one-way random
    effects; docs/REFERENCES.md, "Statistics of readings"; unbiased, so a set's negative
    share stays in the sum). 0 where the pooled estimate is negative or no set has two
    groups of two readings."""
    num, dof = 0.0, 0
    for groups in sets:
        logs = [g for g in _log_groups(groups) if len(g) >= 2] if groups else []
        m = len(logs)
        if m < 2:
            continue
        means = [sum(g) / len(g) for g in logs]
        mean_of_means = sum(means) / m
        between = sum((x - mean_of_means) ** 2 for x in means) / (m - 1)
        within = sum(_pooled([g])[0] for g in logs) / m
        n = sum(len(g) for g in logs) / m
        num += (m - 1) * (between - within / n)
        dof += m - 1
    return (max(0.0, num / dof) if dof else 0.0), dof


def process_band(groups: Sequence[Sequence[float]], level: float = PROCESS_BAND_LEVEL,
                 prior: SpreadPrior | None = None) -> tuple[float, float]:
    """Where one more process's reading lands, at ``level``: ``groups`` holds, per shape,
    each process's reading (scaled to one level, e.g. per kernel issued). The prediction
    interval of a log-normal population, ``exp(mean +- t(d) s sqrt(1 + 1/n))`` over every
    reading's log (Hahn, Meeker & Escobar, *Statistical Intervals*, 2nd ed.;
    docs/REFERENCES.md, "Statistics of readings"), where s^2 is the variance between
    processes (within the groups, pooled: :func:`pooled_log_variance`) and n the processes
    (the largest group); with a ``prior``, s^2 is moderated by it, ``(d0 sd0^2 + d s^2) /
    (d0 + d)`` on ``d0 + d`` degrees of freedom (Smyth 2004: three processes say little of
    their own spread, and many recorded certificates say more), and the prior's
    ``session_sd`` enters twice, ``t sqrt(s^2 (1 + 1/n) + 2 session_sd^2)``: the readings'
    mean carries their session's offset and the next process, minutes or hours later, its
    own (variance components: docs/REFERENCES.md, "Statistics of readings"). Never
    narrower than the readings' own lowest and highest. With no prior and fewer than 2
    degrees of freedom (no spread to speak of) it is their range.

    Why not the range alone: the range of n readings holds one more with probability
    (n - 1) / (n + 1) whatever their distribution (50 % with 3 children), so its coverage
    would change with the number of readings; this interval states its level. The logs,
    because a process's speed multiplies its step (a step cannot be negative, and the
    floor's spread is relative: 10-60 % between processes)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level {level} is not in (0, 1)")
    logs = _log_groups(groups)
    flat = [v for g in logs for v in g]
    raw = [float(x) for g in groups for x in g]
    lo, hi = min(raw), max(raw)
    var, dof = _pooled(logs)
    d0 = prior.dof if prior is not None else 0.0
    if prior is None and dof < 2:
        return lo, hi
    if math.isinf(d0):
        s2, total = prior.sd ** 2, math.inf
    else:
        s2 = (d0 * (prior.sd ** 2 if prior else 0.0) + dof * var) / (d0 + dof)
        total = d0 + dof
    from scipy.special import ndtri, stdtrit  # here: reading a certificate needs no scipy

    q = float(ndtri(0.5 + level / 2.0)) if math.isinf(total) else \
        float(stdtrit(total, 0.5 + level / 2.0))
    n = max(len(g) for g in logs)
    m = sum(flat) / len(flat)
    session = prior.session_sd if prior is not None else 0.0
    h = q * math.sqrt(s2 * (1.0 + 1.0 / n) + 2.0 * session ** 2)
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

"""The noise verdict of a workload's step-time measurements.

Noise is a verdict, not a footnote: independent children that disagree at a work-regime
point beyond ``child_tolerance``, or a work-regime held-out shape missed by more than
``held_out_tolerance``, ask for one re-measurement (REMEASURE); if it persists after that
(``remeasured=True``) the verdict is NOISY. Points on the launch floor (a step under
``WORK_OVER_FLOOR`` x the smallest measured: :func:`afford.fit.time.time_fit.work_regime`) are
judged against ``floor_tolerance`` only: the floor's level differs from process to process
(by up to 2x for one shape), so its spread is the floor's uncertainty,
recorded, and noise only when extreme. A held-out shape on the floor is not judged on its
wall time (a two-sided GPU model judges it on its device side instead,
:func:`afford.certification.stage_time.judged_errors`). With no held-out shape judged and nothing
else wrong the verdict is UNJUDGED, never OK.
A work-regime point near the floor inherits part of the floor's process-to-process spread:
its children may disagree by ``child_tolerance + (floor_tolerance - child_tolerance) x
(F / t)^2`` (:func:`tolerance_at`; F the floor, t the point's step): 16 % at twice the floor,
7 % at five times it (children of a point just above its floor disagree by several per cent
where those of a point far above it agree within 1 %).
Certify's tolerances: 5 % on a GPU, 10 % on a CPU (:mod:`afford.certification.stage_time`).

A held-out miss that survives the re-measurement while the children of that shape agree is
not noise: the measurement reproduced and the model does not describe it (e.g. a shape that
runs slower than another of the same FLOPs, a fact FLOPs cannot see). The
verdict is then OK, and the miss is kept as a ``model_misses`` line for the certificate's
warnings: the model's accuracy is stated, never called noise.
"""

from __future__ import annotations

from collections.abc import Sequence

from afford.fit.stats import median, relative_spread
from afford.schema.time_law import TimeVerdict

__all__ = ["LOADED_WAIT", "OUTLIER_RATIO", "TimeVerdict", "disagreement", "noisy_points",
           "outlier_children", "time_verdict", "tolerance_at"]

CHILD_SPREAD_TOL = 0.10  # children of a point disagreeing by more: a noisy point
HELD_OUT_TOL = 0.05  # held-out error tolerance on a GPU (the worst-case target)
HELD_OUT_TOL_CPU = 0.10
FLOOR_SPREAD_TOL = 0.50  # a floor point's children disagreeing by more: extreme, a noisy point
#: a child whose threads waited for a CPU this share of their time was delayed by other work
#: (a CPU's per-step accounting, afford.fit.time.contention.wait_share)
LOADED_WAIT = 0.10
#: a child whose median lies this many times above or below the others' is an outlier by far:
#: beyond the launch floor's own process-to-process range (up to 2x for one shape on an H200)
OUTLIER_RATIO = 3.0


def outlier_children(meds: Sequence[float], ratio: float = OUTLIER_RATIO) -> list[int]:
    """Indices of the children whose median is an outlier by far: at least ``ratio`` times
    above or below the median of all the children's medians, while the others -- a
    majority, at least two -- lie within ``ratio`` of one another. One child's 0.557 s
    against the others' 0.005-0.0066 s (a CPU certify, issue 40) is one; two children
    against two, or a spread with no coherent majority, is disagreement, not an outlier:
    none is listed.

    The point's value is the median over all its children, which a minority cannot move
    outside the others' range: such a child is outvoted by them, or re-measured where
    certify can (:func:`afford.certification.stage_time.offending`)."""
    n = len(meds)
    if n < 3 or min(meds) <= 0:
        return []
    centre = median(meds)
    out = [i for i, m in enumerate(meds) if max(m / centre, centre / m) >= ratio]
    inliers = [m for i, m in enumerate(meds) if i not in out]
    if not out or 2 * len(out) >= n or max(inliers) / min(inliers) >= ratio:
        return []
    return out


def disagreement(meds: Sequence[float]) -> float:
    """How much a point's children disagree: (max - min) / median of their medians
    (fit.stats.relative_spread); with four or more (a re-measured point) the smallest such
    spread with one child left out, so one disturbed child is outvoted by the re-measure."""
    if len(meds) < 4:
        return relative_spread(meds)
    return min(relative_spread([m for j, m in enumerate(meds) if j != i])
               for i in range(len(meds)))


def tolerance_at(floor_share: float | None, child_tolerance: float,
                 floor_tolerance: float = FLOOR_SPREAD_TOL) -> float:
    """The children's tolerance of a work-regime point whose step is ``1 / floor_share``
    times the floor (module docstring); ``child_tolerance`` when the share is unknown."""
    if floor_share is None:
        return child_tolerance
    share = min(1.0, max(0.0, float(floor_share)))
    return child_tolerance + (floor_tolerance - child_tolerance) * share * share


def noisy_points(child_medians: Sequence[Sequence[float]],
                 tolerance: float | Sequence[float] = CHILD_SPREAD_TOL) -> list[int]:
    """Indices of the points whose independent children disagree by more than
    ``tolerance`` (one for all, or one per point; :func:`disagreement`). A point with fewer
    than two children cannot show disagreement and is not listed."""
    tols = [tolerance] * len(child_medians) if isinstance(tolerance, (int, float)) \
        else list(tolerance)
    return [i for i, (meds, tol) in enumerate(zip(child_medians, tols))
            if len(meds) >= 2 and disagreement(meds) > tol]


def time_verdict(child_medians: Sequence[Sequence[float]], held_out_errors: Sequence[float],
                 *, child_tolerance: float = CHILD_SPREAD_TOL,
                 held_out_tolerance: float = HELD_OUT_TOL,
                 remeasured: bool = False, work: Sequence[bool] | None = None,
                 held_out_work: Sequence[bool] | None = None,
                 floor_tolerance: float = FLOOR_SPREAD_TOL,
                 labels: Sequence[str] | None = None,
                 held_out_labels: Sequence[str] | None = None,
                 floor_shares: Sequence[float | None] | None = None) -> TimeVerdict:
    """The verdict (module docstring). ``child_medians``: per point (fitted and held out)
    its children's medians; ``held_out_errors``: predicted / measured - 1 per held-out
    shape; ``work`` / ``held_out_work``: which lie in the work regime (default: all);
    ``labels`` name the points in the reasons (default: their indices); ``floor_shares``:
    per point the floor over its step, which widens a work point's tolerance
    (:func:`tolerance_at`; default: none)."""
    n = len(child_medians)
    work = [True] * n if work is None else list(work)
    held_work = [True] * len(held_out_errors) if held_out_work is None else list(held_out_work)
    shares = [None] * n if floor_shares is None else list(floor_shares)
    tols = [tolerance_at(sh, child_tolerance, floor_tolerance) if w else floor_tolerance
            for w, sh in zip(work, shares)]
    noisy = noisy_points(child_medians, tols)
    failed = [i for i, (e, w) in enumerate(zip(held_out_errors, held_work))
              if w and abs(e) > held_out_tolerance]
    name = (lambda i: labels[i]) if labels else (lambda i: f"point {i}")
    held_name = (lambda i: held_out_labels[i]) if held_out_labels else (lambda i: f"held-out {i}")
    reasons = []
    for i in noisy:
        where = "" if work[i] else " (on the floor)"
        reasons.append(f"{name(i)}{where}: children disagree by "
                       f"{disagreement(child_medians[i]):.1%} > {tols[i]:.1%}")
    n_fit = n - len(held_out_errors)  # held-out shapes follow the fitted ones in child_medians
    misses = []
    for i in failed:
        line = (f"{held_name(i)}: error {held_out_errors[i]:+.1%} beyond "
                f"{held_out_tolerance:.1%}")
        if remeasured and n_fit + i not in noisy:  # reproduced, children agree: the model's
            misses.append(line + " (re-measured; its children agree: the model's error, "
                          "not noise)")
        else:
            reasons.append(line)
    abs_err = [abs(e) for e, w in zip(held_out_errors, held_work) if w]
    label = ("OK" if abs_err else "UNJUDGED") if not reasons else \
        ("NOISY" if remeasured else "REMEASURE")
    return TimeVerdict(label=label, reasons=reasons, noisy_points=noisy,
                       failed_held_out=failed, child_tolerance=child_tolerance,
                       held_out_tolerance=held_out_tolerance, remeasured=remeasured,
                       floor_tolerance=floor_tolerance,
                       held_out_median=median(abs_err) if abs_err else None,
                       held_out_worst=max(abs_err) if abs_err else None,
                       judged=len(abs_err), model_misses=misses)

"""The throughput law: step seconds against a sweep value n (docs/DESIGN.md section 4).

Two forms are fitted over resident points only and both are kept:

- ``power``:        t = exp(a) * n^b, least squares in log-log. Right when the step is
  compute-bound (Kaplan et al. 2020 use the same log-log form for their laws).
- ``floor_power``:  t = F + c * n^b, a fixed per-step floor plus a power term. On a fast
  GPU small shapes are launch-bound and the step has a floor (a small step then takes as long
  in fp32 as in bf16, though their arithmetic rates differ many times over).

Both report R^2 in log space (so the two are comparable), relative residuals, the fitted
range and the leave-one-out relative prediction error; predictions use the form with the
smaller leave-one-out error, and say which. A prediction outside the fitted range is
flagged as extrapolated.

A batch ladder is fitted as t = F + c * tokens (:func:`fit_linear_floor`); F / t is the
fixed share of the step: large means launch-bound.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from afford.fit.stats import r2_score
from afford.schema.laws import Excluded, LawFit, ThroughputLaw, evaluate

R2_WARN = 0.99


def _check(x: Sequence[float], y: Sequence[float], need: int) -> tuple[np.ndarray, np.ndarray]:
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError("x and y must be 1-d and of equal length")
    if len(xa) < need:
        raise ValueError(f"need at least {need} points, got {len(xa)}")
    if np.any(xa <= 0) or np.any(ya <= 0) or not np.all(np.isfinite(ya)):
        raise ValueError("x and y must be positive and finite")
    if len(np.unique(xa)) < 2:  # polyfit would return a slope anyway (a RankWarning)
        raise ValueError("need at least two distinct x values: one says nothing of a law")
    return xa, ya


def _power_params(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    b, a = np.polyfit(np.log(x), np.log(y), 1)
    return {"a": float(a), "b": float(b)}


def _floor_power_params(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from scipy import optimize  # here, not at the top: ~0.5 s that only a fit needs

    p0 = _power_params(x, y)
    start = (0.5 * float(y.min()), float(np.exp(p0["a"])) * 0.5, max(min(p0["b"], 3.9), 0.01))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        popt, _ = optimize.curve_fit(
            lambda xx, F, c, b: F + c * xx ** b, x, y, p0=start, sigma=y,
            bounds=([0.0, 0.0, 0.0], [float(y.min()), np.inf, 4.0]), maxfev=20000)
    return {"F": float(popt[0]), "c": float(popt[1]), "b": float(popt[2])}


def _linear_floor_params(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from scipy import optimize  # here, not at the top: ~0.5 s that only a fit needs

    # weighted by 1/y so relative errors count equally; F may not be negative
    res = optimize.lsq_linear(np.stack([1.0 / y, x / y], axis=1), np.ones_like(y),
                              bounds=([0.0, -np.inf], [np.inf, np.inf]))
    return {"F": float(res.x[0]), "c": float(res.x[1])}


_PARAMS = {"power": _power_params, "floor_power": _floor_power_params,
           "linear_floor": _linear_floor_params}
_NEED = {"power": 2, "floor_power": 4, "linear_floor": 2}  # points to fit
_N_PARAMS = {"power": 2, "floor_power": 3, "linear_floor": 2}


def _fit(form: str, x: Sequence[float], y: Sequence[float]) -> LawFit:
    xa, ya = _check(x, y, _NEED[form])
    params = _PARAMS[form](xa, ya)
    pred = np.asarray(evaluate(form, params, xa))
    loo = None
    if len(xa) - 1 >= _N_PARAMS[form]:  # each left-out fit still determines the form
        loo = []
        for i in range(len(xa)):
            keep = np.arange(len(xa)) != i
            p_i = _PARAMS[form](xa[keep], ya[keep])
            loo.append(float(evaluate(form, p_i, xa[i]) / ya[i] - 1.0))
    r2_log = r2_score(np.log(ya), np.log(np.maximum(pred, 1e-300)))  # R^2 in log space
    return LawFit(form=form, params=params, r2=r2_log,
                  residuals=[float(v) for v in pred / ya - 1.0], loo_rel_errors=loo)


def fit_power(x: Sequence[float], y: Sequence[float]) -> LawFit:
    """t = exp(a) * x^b by least squares in log-log."""
    return _fit("power", x, y)


def fit_floor_power(x: Sequence[float], y: Sequence[float]) -> LawFit:
    """t = F + c * x^b, F in [0, min t], by relative least squares (needs 4 points)."""
    return _fit("floor_power", x, y)


def fit_linear_floor(tokens: Sequence[float], y: Sequence[float]) -> LawFit:
    """t = F + c * tokens: the batch-ladder law; F / t is the fixed (launch) share."""
    return _fit("linear_floor", tokens, y)


def fit_throughput(x_name: str, x: Sequence[float], seconds: Sequence[float],
                   excluded: Sequence[Excluded] = ()) -> ThroughputLaw:
    """Fit both forms over resident points ``x`` and choose by leave-one-out error."""
    power = fit_power(x, seconds)
    floor = fit_floor_power(x, seconds) if len(x) >= 4 else None
    chosen = "power"
    if floor is not None and floor.loo_max is not None and power.loo_max is not None \
            and floor.loo_max < power.loo_max:
        chosen = "floor_power"
    notes = []
    best = floor if chosen == "floor_power" else power
    if best.r2 < R2_WARN:
        notes.append(f"R^2 {best.r2:.4f} < {R2_WARN}: the {chosen} law describes these "
                     "points poorly; predictions from it are rough")
    if len(x) < 3:
        notes.append(f"only {len(x)} resident points: no leave-one-out check is possible")
    return ThroughputLaw(x_name=x_name, x=[float(v) for v in x],
                         seconds=[float(v) for v in seconds], x_min=float(min(x)),
                         x_max=float(max(x)), power=power, floor_power=floor, chosen=chosen,
                         excluded=list(excluded), warnings=notes)

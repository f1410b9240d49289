"""The step-time model of one workload: forms fitted over measured shapes, one
chosen by prediction error, and checked at held-out shapes it never saw.

Forms (:mod:`afford.fit.time.step_forms`, features in :mod:`afford.fit.time.step_features`):
``max``, ``sum``, ``smooth_max``, a host floor F and the device's work W over counted FLOPs
(GEMM and attention apart) or, without counts, the shape (tokens, B*s^2). The one-axis
power laws are the sweep's throughput law (:mod:`afford.fit.time.throughput`), the last
fallback of a prediction (:func:`afford.figures.time_figures.step_at`), not forms of this
model.

Choice, by prediction error only: each form's leave-one-out relative errors (refit without
the point, predict it); the smallest worst |error| wins; forms within ``LOO_TIE`` of it are
split by the order of ``FORMS`` (max first). R^2 is reported, never used.
The errors at work-regime points (a step at least ``WORK_OVER_FLOOR`` times the smallest
measured one, :func:`work_regime`) count in full when there are at least ``MIN_JUDGED``;
a floor point's error counts ``FLOOR_WEIGHT`` (a tenth) of its size: the launch floor is a
per-process figure (one shape's floor differs from process to process by up to 2x),
so its tolerance is 10x the work regime's (50 % against 5 %, as in the noise verdict).
Judged on every point alike, the floor points' noise decides the choice (a form wins by
fitting that noise); ignoring the floor points, forms that tie on the work regime can miss
held-out floor shapes by tens of per cent; weighted, the floor still counts but its noise
does not decide.

Held-out points are measured shapes the judged model was never fitted on: they are predicted
by the chosen model after it is fitted and chosen, and their errors are reported separately
(the verdict's); they NEVER enter the choice or their own judgement (:func:`evaluate_held_out`
only reads the fitted model). Only after that are the chosen forms refitted over them too
(:func:`refit_with_held_out`, ``fitted_with_held_out``), so the model that predicts rests on
every shape the certificate measured.

Whether the fitted points left the floor (``floor_left``): the step grew at least
``GROWTH_WORK`` x per doubling of tokens between the two largest token counts measured, or
the model's work at the largest point is at least ``WORK_OVER_FLOOR`` x its floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from afford.fit.time.step_features import CountedShape, FeatureScaling, fit_scaling, shape_axes
from afford.fit.time.step_forms import (
    WORK_OVER_FLOOR,
    StepPoint,
    candidates,
    choose_form,
    feature_rows,
    fit_forms,
    work_regime,
)
from afford.fit.time.step_sides import SidePoint, profiled_busy, refit_sides
from afford.schema.time_law import (
    FORMS,
    CandidateFit,
    FormName,
    ModelPoint,
    SidesModel,
    StepTimeModel,
    evaluate_form,
    predict_at,
)

__all__ = ["FORMS", "WORK_OVER_FLOOR", "CandidateFit", "FormName", "ModelPoint", "StepPoint",
           "StepTimeModel", "choose_form", "evaluate_held_out", "fit_step_time",
           "top_growth_per_doubling", "work_regime"]

GROWTH_WORK = 1.5  # per doubling of tokens: the step clearly grows (the work regime)


def _sigma(points: Sequence[StepPoint]) -> np.ndarray:
    return np.array([p.rel_sigma if p.rel_sigma is not None else np.nan for p in points])


# ---- the floor ----------------------------------------------------------------------------


def top_growth_per_doubling(tokens: Sequence[float], seconds: Sequence[float]
                            ) -> float | None:
    """How much the step grows per doubling of tokens between the two largest token counts
    measured (the median step at each): (t_top / t_next)^(1 / log2(tok_top / tok_next)).
    None with fewer than two distinct token counts."""
    by: dict[float, list[float]] = {}
    for t, s in zip(tokens, seconds):
        by.setdefault(float(t), []).append(float(s))
    levels = sorted(by)
    if len(levels) < 2:
        return None
    hi, lo = levels[-1], levels[-2]
    ratio = float(np.median(by[hi]) / np.median(by[lo]))
    return ratio ** (1.0 / math.log2(hi / lo))


def _floor_state(params: dict[str, float], rows: Sequence[dict], tokens: Sequence[float],
                 y: np.ndarray) -> tuple[bool, str]:
    growth = top_growth_per_doubling(tokens, y)
    parts = []
    left = False
    if growth is not None:
        parts.append(f"the step grew {growth:.2f}x per doubling of tokens at the top "
                     f"(work regime: >= {GROWTH_WORK:g}x)")
        left = growth >= GROWTH_WORK
    # the largest point: the most tokens, of those the slowest (a key, not tokens x 1e12
    # + seconds: at 1e12 x tokens a float's step is above any step's seconds)
    top = max(range(len(y)), key=lambda i: (float(tokens[i]), float(y[i])))
    W = evaluate_form("sum", {**params, "F": 0.0}, rows[top])
    F = params["F"]  # every form has a floor parameter (0 when fitted away)
    if F > 0:
        ratio = W / F
        parts.append(f"the model's work is {ratio:.2f}x its floor at the largest point "
                     f"(work regime: >= {WORK_OVER_FLOOR:g}x)")
        left = left or ratio >= WORK_OVER_FLOOR
    else:
        parts.append("the model has no floor")
        left = True
    return left, "; ".join(parts)


# ---- the model ----------------------------------------------------------------------------


def _model_point(p: CountedShape, row: dict, seconds: float, predicted: float,
                 loo: float | None, extrapolated: bool, label: str | None) -> ModelPoint:
    return ModelPoint(batch=p.batch, seq=p.seq, n=p.n, tokens=p.tokens,
                      gemm_flops=row.get("gemm_flops"), attn_flops=row.get("attn_flops"),
                      measured_seconds=seconds, predicted_seconds=float(predicted),
                      rel_error=float(predicted / seconds - 1.0), loo_rel_error=loo,
                      extrapolated=extrapolated, label=label)


def fit_step_time(points: Sequence[StepPoint], *, held_out: Sequence[StepPoint] = (),
                  scaling: FeatureScaling | None = None,
                  forms: Sequence[str] = FORMS,
                  gemm_rate: float | None = None,
                  sides: SidesModel | None = None,
                  refit_held_out: bool = True) -> StepTimeModel:
    """Fit every form in ``forms`` over ``points``, choose one (module docstring), and
    predict the ``held_out`` shapes with it. ``scaling``: the features' laws (default: fitted
    from the points' own counts). Where every point carries its device side (a GPU's
    profiled busy time and kernels, :class:`afford.fit.time.step_sides.SidePoint`) and there are
    at least three, the two-sided model (:mod:`afford.fit.time.step_sides`) is fitted too and is
    the model; the one-sided forms are kept beside it. Raises ``ValueError`` with fewer than
    two points."""
    points = list(points)
    if len(points) < 2:
        raise ValueError(f"{len(points)} point(s): a step-time model needs at least 2")
    y = np.array([p.seconds for p in points], dtype=float)
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("step seconds must be positive and finite")
    axes = shape_axes(points)
    if scaling is None:
        scaling = fit_scaling(points)
    if scaling.axes != axes:
        raise ValueError(f"the scaling is over {scaling.axes}, the points over {axes}")
    rows = feature_rows(points, scaling)
    sigma = _sigma(points)
    fitted = candidates(forms, rows, y, sigma, gemm_rate)
    cands = [fitted[f] for f in forms if f in fitted]
    form, reason = choose_form(cands, work_regime(y))
    chosen = fitted[form]
    model_points = [
        _model_point(p, r, float(y[i]), float(y[i] * (1 + chosen.residuals[i])),
                     chosen.loo_rel_errors[i] if chosen.loo_rel_errors else None, False,
                     p.label)
        for i, (p, r) in enumerate(zip(points, rows))]
    left, note = _floor_state(chosen.params, rows, [p.tokens for p in points], y)
    # the one-sided fit's identification is the model's only where it is the model: a
    # two-sided model's work rests on the busy time at every point (step_sides)
    warnings = [chosen.note] if sides is None and chosen.note and \
        "not identified" in chosen.note else []
    if sides is not None:
        worst = max(abs(e) for e in sides.loo_rel_errors or [0.0])
        reason = (f"sides: the device's busy time and the host's issue time, measured apart "
                  f"(wall leave-one-out worst {worst:.1%}); one-sided, {reason}")
        derived = sum(1 for p in points if isinstance(p, SidePoint) and p.busy_derived)
        read = "profiled busy time" + (
            f"; at {derived} device-bound point(s) not profiled, the wall less the gap"
            if derived else "")
        left, note = True, (f"the device side was read apart from the host ({read}): the "
                            f"work is seen under the floor; one-sided: {note}")
        model_points = _sides_points(model_points, sides, points, rows)
    elif not left:
        warnings.append("the fitted points did not leave the launch floor: predictions "
                        "beyond the largest measured shape are unsupported")
    model = StepTimeModel(axes=axes, form=form, params=dict(chosen.params), reason=reason,
                          scaling=scaling, candidates=cands, points=model_points,
                          floor_left=left, floor_note=note,
                          gemm_rate=gemm_rate, warnings=warnings, sides=sides)
    if held_out:
        model = model.model_copy(update={"held_out": evaluate_held_out(model, held_out)})
        if refit_held_out:
            model = refit_with_held_out(model, points, held_out, gemm_rate)
    return model


def refit_with_held_out(model: StepTimeModel, points: Sequence[StepPoint],
                        held_out: Sequence[StepPoint], gemm_rate: float | None
                        ) -> StepTimeModel:
    """The judged model's forms refitted over every measured shape, fitted and held out.
    Once the held-out shapes have judged the model (their errors stay: the verdict's), they
    are measurements the model need not throw away: the design holds out the longest
    sequence and the largest batch, so refitted the model rests on the widest base the
    certificate measured (a long held-out sequence carries attention's falling cost per FLOP
    past the fitted ones). No form is chosen again and no leave-one-out error computed again:
    the choice and its errors are the judged model's; the fitted points' predictions are the
    refitted model's own."""
    every = [*points, *held_out]
    rows = feature_rows(every, model.scaling)
    y = np.array([p.seconds for p in every], dtype=float)
    params = fit_forms([model.form], rows, y, _sigma(every), gemm_rate)[model.form][0]
    sides = model.sides
    if sides is not None and all(isinstance(p, SidePoint) for p in every):
        sides = refit_sides(sides, every, rows, gemm_rate)
    final = model.model_copy(update={
        "params": params, "sides": sides, "fitted_with_held_out": True,
        "reason": f"{model.reason}; then refitted over the {len(held_out)} held-out shape(s) "
                  "too, after they judged it"})
    refit_points = []
    for mp in model.points:
        pred = predict_at(final, batch=mp.batch, seq=mp.seq, n=mp.n).seconds
        refit_points.append(mp.model_copy(update={
            "predicted_seconds": pred, "rel_error": pred / mp.measured_seconds - 1.0}))
    return final.model_copy(update={"points": refit_points})


def evaluate_held_out(model: StepTimeModel, held_out: Sequence[StepPoint]) -> list[ModelPoint]:
    """The fitted model's predictions at shapes it never saw, with their errors (and, for a
    two-sided model, the device's busy time predicted against the one profiled there).
    Reads the model only: a held-out point's seconds cannot move any parameter."""
    out = []
    model = model.model_copy(update={"held_out": []})  # extrapolated: beyond the fitted
    for p in held_out:
        pred = predict_at(model, batch=p.batch, seq=p.seq, n=p.n)
        feats = model.scaling.features(batch=p.batch, seq=p.seq, n=p.n)
        mp = _model_point(p, feats, p.seconds, pred.seconds, None, pred.extrapolated, p.label)
        if model.sides is not None:
            mp = _with_sides(mp, pred, profiled_busy(p))
        out.append(mp)
    return out


def _with_sides(mp: ModelPoint, sp, busy: float | None) -> ModelPoint:
    """``sp``: the two sides' prediction at the point (a :class:`SidesPrediction` or a
    :class:`~afford.schema.time_law.TimePrediction` of a two-sided model)."""
    upd = {"regime": sp.regime, "band": sp.band, "device_predicted_seconds": sp.device_busy}
    if busy:
        upd.update(device_measured_seconds=busy, device_rel_error=sp.device_busy / busy - 1.0)
    return mp.model_copy(update=upd)


def _sides_points(model_points: list[ModelPoint], sides, points, rows) -> list[ModelPoint]:
    """The fitted points as the two-sided model predicts them (its in-sample wall errors and
    leave-one-out errors, and each point's device side)."""
    out = []
    for mp, p, r, loo in zip(model_points, points, rows, sides.loo_rel_errors or []):
        sp = sides.predict(r, float(p.tokens), p.seq)
        mp = mp.model_copy(update={"predicted_seconds": sp.seconds,
                                   "rel_error": sp.seconds / p.seconds - 1.0,
                                   "loo_rel_error": loo})
        out.append(_with_sides(mp, sp, profiled_busy(p)))
    return out

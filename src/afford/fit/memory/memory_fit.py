"""The memory law of one training step, fitted by least squares (docs/DESIGN.md section 4).

    peak_bytes = states + fixed + L * (C_res * B*s*d + C_op * B*H*s^2)

``states`` = params x bytes/param, counted tensor by tensor after a training loop (weights,
gradients and optimizer state); ``C_res`` is bytes per token, per unit of width, per layer
(activations kept for the backward pass); ``C_op`` is bytes per sequence, per head, per s^2,
per layer (score matrices that are materialised). In this notation Korthikanti et al. 2022,
eq. 1, ``s*b*h*(34 + 5*a*s/h)`` bytes per layer in 16-bit, is C_res = 34 and C_op = 5; with
flash/fused attention the s^2 term vanishes (``34*s*b*h + 4*a*s*b``).

Two forms are fitted over the same points; predictions use the one with the smaller
leave-one-out error, and the result says which (and every form's leave-one-out error):

- ``states_measured``: fixed = 0, the law as written; two coefficients.
- ``states_plus_fixed``: a fitted constant as well. The measured states are the states at
  rest (after ``optimizer.step``: weights, gradients, moments), but the peak of a step comes
  at the start of backward, where the gradients of the previous step were set to ``None``
  and autocast holds 16-bit copies of the weights; and the caching allocator also holds
  cuBLAS workspaces. All of these are constant for a workload at fixed d, L, H, so one
  fitted constant absorbs them, and on a GPU it usually predicts better (a 32 MiB workspace
  is 3 % of a 1 GiB peak).

Each form comes with and without the ``C_op`` s^2 term. A workload whose attention never
stores the s x s scores (``scaled_dot_product_attention``: flash or memory-efficient
kernels) has no s^2 term (Korthikanti's fused variant, ``34*s*b*h + 4*a*s*b``), and a free
``C_op`` then only fits noise: from readings that wobble by 1 % it picks up a small
spurious coefficient, which grows as s^2 into extra error at longer sequences. So the
workload declares it (``Workload.attention``, passed here as ``s2_term``); undeclared, the
forms with and without the term compete by leave-one-out like the two above. Ties go to
the form with fewer coefficients, then to the law as written.

Least squares is ordinary (unweighted): the peaks that decide residency are the large
ones, and the noise of a measurement (CPU RSS pages, heap reuse) is absolute, not relative,
so small shapes should not pull the law as hard as large ones. ``C_res`` and ``C_op`` are bounded
below by 0 (a negative activation coefficient would predict memory shrinking with length);
``fixed`` is free (it is negative when the gradients missing at the peak outweigh the rest).
Solved with ``scipy.optimize.lsq_linear`` (bounded-variable least squares), columns scaled.

Also here, pure: the batch-linearity check, the largest batch under a budget for any
monotone predictor, and the verdict on a default constant (CONFIRMED or WRONG, with its
direction and its consequence for the largest resident batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from afford.fit.stats import r2_score
from afford.schema.memory_section import DefaultVerdict, Form, MemoryFit, activation_features

if TYPE_CHECKING:
    import numpy as np  # imported by the fits themselves: a reader of a law needs none

FORMS: tuple[Form, ...] = ("states_measured", "states_plus_fixed")
BATCH_CAP = 1 << 24  # largest_batch never searches beyond this many sequences
LOO_TIE = 1e-9  # leave-one-out maxima closer than this are a tie (exact data, rounding)


class MemoryObservation(BaseModel):
    """One measured shape: transformer dims, states counted at rest, and the peak."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    B: int
    s: int
    d: int
    L: int
    H: int
    states_bytes: float
    peak_bytes: float


def columns(form: Form, s2_term: bool) -> tuple[str, ...]:
    """The fitted coefficients of a form, in the order of the design matrix."""
    return ("c_res",) + (("c_op",) if s2_term else ()) + \
        (("fixed_bytes",) if form == "states_plus_fixed" else ())


def candidate_forms(s2_term: bool | None) -> list[tuple[Form, bool]]:
    """The forms to try, fewest coefficients first, the law as written first at a tie;
    ``s2_term`` None: with and without the s^2 term."""
    s2s = (False, True) if s2_term is None else (s2_term,)
    forms = [(f, s) for f in FORMS for s in s2s]
    return sorted(forms, key=lambda c: (len(columns(*c)), FORMS.index(c[0])))


def _design(obs: Sequence[MemoryObservation]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(L*B*s*d, L*B*H*s^2, 1) per shape, the peaks, and the states."""
    import numpy as np

    feats = np.array([(*activation_features(o.B, o.s, o.d, o.L, o.H), 1.0) for o in obs],
                     dtype=float)  # (n, 3)
    y = np.array([o.peak_bytes for o in obs], dtype=float)
    states = np.array([o.states_bytes for o in obs], dtype=float)
    return feats, y, states


_FEATURE = {"c_res": 0, "c_op": 1, "fixed_bytes": 2}


def _solve(feats: np.ndarray, y: np.ndarray, states: np.ndarray, cols: tuple[str, ...]
           ) -> dict[str, float]:
    import numpy as np
    from scipy import optimize  # here, not at the top: ~0.5 s that only a fit needs

    a = feats[:, [_FEATURE[c] for c in cols]]
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0.0] = 1.0
    norm = float(np.max(np.abs(y)))  # bytes -> order 1, for the solver's tolerances
    lower = np.array([-np.inf if c == "fixed_bytes" else 0.0 for c in cols])
    res = optimize.lsq_linear(a / scale, (y - states) / norm, bounds=(lower, np.inf),
                              method="bvls")
    theta = res.x / scale * norm
    # c_res is a column of every form; c_op and fixed_bytes are 0 where they are not
    return {"c_op": 0.0, "fixed_bytes": 0.0, **dict(zip(cols, (float(v) for v in theta)))}


def _predict_rows(feats: np.ndarray, states: np.ndarray, p: dict[str, float]) -> np.ndarray:
    return states + p["fixed_bytes"] + feats[:, 0] * p["c_res"] + feats[:, 1] * p["c_op"]


def _check(obs: Sequence[MemoryObservation], need: int) -> None:
    if len(obs) < need:
        raise ValueError(f"the memory law needs at least {need} measured shapes, got {len(obs)}")
    for o in obs:
        if not (math.isfinite(o.peak_bytes) and o.peak_bytes > 0):
            raise ValueError(f"peak bytes must be positive and finite, got {o.peak_bytes!r}")
        if not (math.isfinite(o.states_bytes) and o.states_bytes >= 0):
            raise ValueError(f"states bytes must be finite and >= 0, got {o.states_bytes!r}")


def fit_form(obs: Sequence[MemoryObservation], quantity: str, form: Form,
             s2_term: bool = True) -> MemoryFit:
    """One form by bounded least squares, with leave-one-out errors."""
    import numpy as np

    cols = columns(form, s2_term)
    k = len(cols)
    _check(obs, k)
    feats, y, states = _design(obs)
    p = _solve(feats, y, states, cols)
    pred = _predict_rows(feats, states, p)
    loo = None
    if len(obs) > k:
        loo = []
        for i in range(len(obs)):
            keep = np.arange(len(obs)) != i
            p_i = _solve(feats[keep], y[keep], states[keep], cols)
            loo.append(float(_predict_rows(feats[i:i + 1], states[i:i + 1], p_i)[0] / y[i] - 1))
    return MemoryFit(quantity=quantity, form=form, c_res=p["c_res"], c_op=p["c_op"],
                     fixed_bytes=p["fixed_bytes"], s2_term=s2_term, r2=r2_score(y, pred),
                     residuals=[float(v) for v in pred / y - 1.0], loo_rel_errors=loo,
                     n_points=len(obs))


def fit_memory(obs: Sequence[MemoryObservation], quantity: str,
               s2_term: bool | None = None) -> MemoryFit:
    """Every candidate form (:func:`candidate_forms`); the one with the smallest
    leave-one-out max is returned, ties to the earlier candidate. Forms with too few points
    for a leave-one-out check compete only when no form has one."""
    fits = [fit_form(obs, quantity, f, s) for f, s in candidate_forms(s2_term)
            if len(obs) >= len(columns(f, s))]
    if not fits:
        _check(obs, min(len(columns(f, s)) for f, s in candidate_forms(s2_term)))
    scored = [f for f in fits if f.loo_max is not None]
    if not scored:
        return fits[0]
    best = min(f.loo_max for f in scored)
    chosen = next(f for f in scored if f.loo_max <= best + LOO_TIE)
    others = [f.loo_max for f in scored if f is not chosen]
    return chosen.model_copy(update={"other_form_loo_max": min(others) if others else None,
                                     "candidates": {f.name: f.loo_max for f in scored}})


def fit_params_affine(s_values: Sequence[float], params: Sequence[float]) -> tuple[float, float]:
    """params = p0 + p_s * s by least squares (learned positions grow with s; most models
    are constant in s, p_s = 0). Exact for the built-in workloads."""
    import numpy as np

    s = np.asarray(s_values, dtype=float)
    p = np.asarray(params, dtype=float)
    if len(s) == 0:
        raise ValueError("no shapes to count parameters over")
    if len(set(s.tolist())) < 2:
        return float(p.mean()), 0.0
    slope, intercept = np.polyfit(s, p, 1)
    return float(intercept), float(slope)


def batch_linearity(batches: Sequence[float], peaks: Sequence[float]) -> tuple[float, float]:
    """R^2 and the largest relative residual of ``peak = a + b*B`` over a batch sweep: the law
    assumes memory linear in B at fixed s."""
    import numpy as np

    b = np.asarray(batches, dtype=float)
    y = np.asarray(peaks, dtype=float)
    if len(b) < 3:
        raise ValueError("a linearity check needs at least 3 batch sizes")
    slope, intercept = np.polyfit(b, y, 1)
    pred = intercept + slope * b
    return r2_score(y, pred), float(np.max(np.abs(pred / y - 1.0)))


def largest_batch(predict: Callable[[int], float], budget: float, cap: int = BATCH_CAP,
                  guess: int = 1) -> int:
    """The largest B >= 1 with ``predict(B) <= budget`` for a predictor non-decreasing in B;
    0 when even B = 1 does not fit; ``cap`` when everything up to it fits (searched from
    ``guess``: :func:`largest_true`)."""
    if not budget > 0:
        return 0
    return largest_true(lambda b: predict(b) <= budget, guess, cap)


def largest_true(ok: Callable[[int], bool], guess: int = 1, cap: int = BATCH_CAP) -> int:
    """The largest b in [1, cap] with ``ok(b)``, for a predicate true up to some b and false
    after; 0 when ``ok(1)`` is false. From ``guess`` outwards in doubling steps, then
    bisection: a good guess (the memory law's largest batch, for the replay's) costs two or
    three calls, each of which may be a replay of a whole step."""
    g = min(max(1, guess), cap)
    if ok(g):
        lo, step = g, 1
        while lo + step <= cap and ok(lo + step):
            lo, step = lo + step, step * 2
        hi = min(lo + step, cap + 1)  # ok(lo), not ok(hi) (or hi past the cap)
    else:
        hi, step = g, 1
        while hi - step >= 1 and not ok(hi - step):
            hi, step = hi - step, step * 2
        lo = hi - step
        if lo < 1:
            if not ok(1):
                return 0
            lo = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def judge(constant: str, default_name: str, citation: str, *,
          default_value: float | None, fitted_value: float | None,
          fitted: Callable[[int], float], default: Callable[[int], float],
          budgeted: Callable[[int, float], float], target: dict[str, int],
          budget_bytes: float | None, tolerance: float) -> DefaultVerdict:
    """Judge one default. ``fitted(B)`` and ``default(B)`` predict the law's quantity at the
    target's s for batch B; ``budgeted(B, bytes)`` turns it into what residency is decided
    on (reserved, or host RSS), so the consequence is judged where it matters."""
    b = target["B"]
    fit_b, def_b = fitted(b), default(b)
    effect = def_b / fit_b - 1.0
    wrong = abs(effect) > tolerance
    direction = ("optimistic" if effect < 0 else "pessimistic") if wrong else None
    mb_fit = mb_def = None
    if budget_bytes:
        mb_fit = largest_batch(lambda n: budgeted(n, fitted(n)), budget_bytes)
        mb_def = largest_batch(lambda n: budgeted(n, default(n)), budget_bytes)
    return DefaultVerdict(constant=constant, default_name=default_name, citation=citation,
                   default_value=default_value, fitted_value=fitted_value, target=target,
                   fitted_bytes=fit_b, default_bytes=def_b, effect=effect, tolerance=tolerance,
                   status="WRONG" if wrong else "CONFIRMED", direction=direction,
                   budget_bytes=budget_bytes, max_batch_fitted=mb_fit, max_batch_default=mb_def,
                   consequence=consequence_text(mb_fit, mb_def, target["s"]))


def consequence_text(mb_fit: int | None, mb_def: int | None, s: int) -> str:
    if mb_fit is None or mb_def is None:
        return "largest resident batch not judged: the device memory is unknown"
    if mb_def >= BATCH_CAP:
        return (f"largest resident batch at s={s}: {mb_fit} by the fit; the default admits "
                "any batch (it counts no activations)")
    head = f"largest resident batch at s={s}: {mb_def} by the default, {mb_fit} by the fit"
    if mb_def > mb_fit:
        return head + f"; the default admits batches {mb_fit + 1}..{mb_def} that do not fit"
    if mb_def < mb_fit:
        return head + f"; the default leaves batches {mb_def + 1}..{mb_fit} unused"
    return head + "; unchanged"

"""The step-time forms over a shape's counted work, fitted with non-negative coefficients.

The host issues a step's kernels asynchronously, so a warm step costs about the larger of
the host's time to issue them (a floor F, the same at every shape of a workload) and the
device's work W, which grows with the counted work of the step::

    W = w0 + w_gemm * gemm_flops + w_attn * attn_flops + w_tokens * tokens
         (+ w_seq_tokens * B*s^2 where attention FLOPs were not counted)

    max:         t = max(F, W)
    sum:         t = F + W                       (host and device never overlap; no w0)
    smooth_max:  t = (F^k + W^k)^(1/k), 1 <= k <= 50   (k = 1 is sum, large k is max)

Every coefficient is >= 0 (a second per FLOP cannot be negative), ``w_gemm`` at least
``1 / gemm_rate`` when a FLOP/s ceiling is given and ``w_attn`` at least half that
(attention's matrix products run on the same units as the GEMMs, no faster, but a causal
kernel does only half the FLOPs counted for it: ``BOUND_SHARE``). Fits minimise relative residuals
(pred / measured - 1), each weighted by ``SIGMA_FLOOR / max(sigma, SIGMA_FLOOR)`` where
sigma is the point's relative uncertainty (half its children's spread), so a point whose
children disagree counts less.

Columns: in the priority order of ``COLUMNS``; a column that is absent, zero, or within
``COLLINEAR`` of the span of the columns before it is dropped (tokens is exactly
proportional to GEMM FLOPs in most workloads: it goes, and the model says so). When fewer
points lie on the work side of the fit than it has work columns, the split among them is not
identified by the data: a small ridge (``RIDGE``, negligible where the data decide) pulls it
to a prior, the simplest physics: no constant work, an attention FLOP costs what a GEMM FLOP
costs, and, without counted FLOPs, work in proportion to the tokens (no B*s^2 term); the fit
says so (``notes``).

``max`` is fitted by trying each split of the points into floor and work sides (sorted by
seconds), each side's least squares closed, then polishing the best on the true residuals;
``smooth_max`` starts from the max and sum fits. Evaluating a fitted form at a shape is
:func:`afford.schema.time_law.evaluate_form` (a stored model needs no scipy). The same forms
fit the wall step (:mod:`afford.fit.time.time_fit`) and the device's busy time
(:mod:`afford.fit.time.step_sides`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from afford.fit.stats import r2_score
from afford.fit.time.step_features import CountedShape, FeatureScaling, seq_tokens
from afford.schema.time_law import FORMS, PARAM_OF, CandidateFit, FormName, evaluate_form

COLUMNS = ("const", "gemm_flops", "attn_flops", "tokens", "seq_tokens")  # priority
RIDGE = 1e-6  # pulls an unidentified split of the work to the prior; negligible otherwise
COLLINEAR = 1e-6  # a column within this relative norm of the span of earlier ones is dropped
SIGMA_FLOOR = 0.01  # relative uncertainty below which points weigh the same (the protocol's 1 %)
SMOOTH_K = (1.0, 50.0)
# The share of its counted FLOPs a column must run at the ceiling's rate, at least. Attention
# is counted as the full s x s square (torch's FlopCounterMode: "we aren't accounting for
# causal attention"); a causal kernel skips the masked half, so a counted attention FLOP
# can cost half a GEMM FLOP (a long causal sequence runs its counted attention FLOPs faster
# than the GEMM ceiling's rate).
BOUND_SHARE = {"gemm_flops": 1.0, "attn_flops": 0.5}


@dataclass
class _Design:
    """One fit's normalised problem: seconds / ys, each kept column / its scale."""

    columns: list[str]
    X: np.ndarray
    col_scale: np.ndarray
    y: np.ndarray
    ys: float
    w: np.ndarray
    lb: np.ndarray
    penalty: np.ndarray  # rows P: the prior says P c = 0
    dropped: list[str] = field(default_factory=list)

    def without_const(self) -> _Design:
        """The sum's design: the same without the const column (:func:`design` always keeps
        const, its first column: nothing before it can make it collinear)."""
        i = self.columns.index("const")
        keep = [j for j in range(len(self.columns)) if j != i]
        P = self.penalty[:, keep]
        P = P[np.any(P != 0, axis=1)]
        return _Design([self.columns[j] for j in keep], self.X[:, keep], self.col_scale[keep],
                       self.y, self.ys, self.w, self.lb[keep], P, self.dropped)


def feature_rows(points: Sequence[CountedShape], scaling: FeatureScaling) -> list[dict]:
    """Each point's features: the scaling laws' values, the counted ones where counted."""
    rows = []
    for p in points:
        feats = scaling.features(batch=p.batch, seq=p.seq, n=p.n)
        feats["tokens"] = p.tokens
        feats["seq_tokens"] = seq_tokens(p.batch, p.seq)
        for f in ("gemm_flops", "attn_flops"):
            if getattr(p, f) is not None:
                feats[f] = getattr(p, f)
        rows.append(feats)
    return rows


def weights(sigma: np.ndarray) -> np.ndarray:
    s = np.where(np.isfinite(sigma), sigma, SIGMA_FLOOR)
    return SIGMA_FLOOR / np.maximum(s, SIGMA_FLOOR)


def design(rows: Sequence[dict], seconds: np.ndarray, sigma: np.ndarray,
           gemm_rate: float | None) -> _Design:
    """The normalised design of one fit: the kept work columns, bounds and weights.
    ``seq_tokens`` (B*s^2) enters only where attention FLOPs were not counted: it stands
    in for them."""
    y = np.asarray(seconds, dtype=float)
    ys = float(np.max(y))
    cols, mats, scales, dropped = [], [], [], []
    for name in COLUMNS:
        if name == "seq_tokens" and "attn_flops" in cols:
            continue
        v = (np.ones(len(rows)) if name == "const"
             else np.array([r.get(name) if r.get(name) is not None else np.nan
                            for r in rows], dtype=float))
        if not np.all(np.isfinite(v)) or np.max(v) <= 0:
            continue
        s = float(np.max(v))
        vn = v / s
        if mats:
            A = np.stack(mats, axis=1)
            coef, *_ = np.linalg.lstsq(A, vn, rcond=None)
            if np.linalg.norm(A @ coef - vn) <= COLLINEAR * np.linalg.norm(vn):
                dropped.append(name)
                continue
        cols.append(name)
        mats.append(vn)
        scales.append(s)
    X = np.stack(mats, axis=1) if mats else np.zeros((len(rows), 0))
    scale = np.array(scales)
    lb = np.zeros(len(cols))
    for name in ("gemm_flops", "attn_flops") if gemm_rate else ():
        if name in cols:  # attention runs on the same matrix units: no faster either
            i = cols.index(name)
            lb[i] = scale[i] * BOUND_SHARE[name] / gemm_rate / ys
    penalty = prior_rows(cols, scale)
    return _Design(cols, X, scale, y / ys, ys, weights(np.asarray(sigma, dtype=float)), lb,
                   penalty, dropped)


def prior_rows(cols: list[str], scale: np.ndarray) -> np.ndarray:
    """The prior that decides what the points leave open (see the module docstring): no
    constant work, a FLOP of attention costs what a GEMM FLOP costs, and without counted
    attention no B*s^2 term. Rows P over the normalised coefficients, P c = 0 wanted."""
    rows = []
    m = len(cols)
    for name in ("const", "seq_tokens"):
        if name in cols:
            r = np.zeros(m)
            r[cols.index(name)] = 1.0
            rows.append(r)
    if "gemm_flops" in cols and "attn_flops" in cols:
        g, a = cols.index("gemm_flops"), cols.index("attn_flops")
        r = np.zeros(m)
        ref = max(scale[g], scale[a])
        r[g], r[a] = ref / scale[g], -ref / scale[a]
        rows.append(r)
    if "tokens" in cols and ("gemm_flops" in cols or "attn_flops" in cols):
        r = np.zeros(m)
        r[cols.index("tokens")] = 1.0
        rows.append(r)
    return np.array(rows).reshape(len(rows), m)


# ---- the linear pieces ---------------------------------------------------------------------


def _nnls_rel(X: np.ndarray, y: np.ndarray, w: np.ndarray, lb: np.ndarray,
              penalty: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """argmin sum(w_i (X_i c / y_i - 1))^2 + ridge^2 |P c|^2 subject to c >= lb."""
    from scipy import optimize  # here: evaluating a stored model needs no scipy

    m = X.shape[1]  # penalty: (rows, m), (0, m) without a prior; every caller passes it 2-d
    A = np.vstack([X * (w / y)[:, None], ridge * penalty, 1e-9 * np.eye(m)])
    b = np.concatenate([w, np.zeros(len(penalty) + m)])
    b = b - A @ lb  # c = lb + v, v >= 0
    v, _ = optimize.nnls(A, b, maxiter=50 * m)  # m >= 1: every caller has a column
    return lb + v


def _floor_level(y: np.ndarray, w: np.ndarray) -> float:
    """argmin_F sum(w_i (F / y_i - 1))^2."""
    a = w ** 2 / y
    return float(np.sum(a) / np.sum(a / y))


def predict_norm(form: str, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Normalised seconds: theta = [F, coefs...] (max, sum) or [F, coefs..., k]."""
    F = theta[0]
    if form == "smooth_max":
        W = X @ theta[1:-1]
        k = theta[-1]
        Wc = np.maximum(W, 1e-300)
        Fc = max(F, 1e-300)
        return np.exp(np.logaddexp(k * np.log(Fc), k * np.log(Wc)) / k)
    W = X @ theta[1:]
    return F + W if form == "sum" else np.maximum(F, W)


def _residuals(form: str, theta: np.ndarray, d: _Design) -> np.ndarray:
    r = (predict_norm(form, theta, d.X) / d.y - 1.0) * d.w
    m = d.X.shape[1]
    coefs = theta[1:1 + m]
    extra = RIDGE * (d.penalty @ coefs) if d.penalty.size else np.zeros(0)
    return np.concatenate([r, extra])


def _jacobian(form: str, theta: np.ndarray, d: _Design) -> np.ndarray:
    """d :func:`_residuals` / d theta, in closed form (the polish's least squares would
    otherwise difference every column: most of a step-time fit's cost). ``max`` takes the
    side that is strictly larger (a tie counts as the floor's), as its residuals do."""
    m = d.X.shape[1]
    F = theta[0]
    scale = (d.w / d.y)[:, None]
    if form == "smooth_max":
        W = d.X @ theta[1:-1]
        k = theta[-1]
        Wc = np.maximum(W, 1e-300)
        Fc = max(F, 1e-300)
        lf, lw = np.log(Fc), np.log(Wc)
        L = np.logaddexp(k * lf, k * lw)
        pred = np.exp(L / k)
        sf, sw = np.exp(k * lf - L), np.exp(k * lw - L)
        dF = pred * sf / Fc if F > 1e-300 else np.zeros_like(pred)
        dW = np.where(W > 1e-300, pred * sw / Wc, 0.0)
        dk = pred * ((sf * lf + sw * lw) / k - L / k ** 2)
        J = np.column_stack([dF, dW[:, None] * d.X, dk])
    elif form == "sum":
        J = np.column_stack([np.ones(len(d.y)), d.X])
    else:
        work = (d.X @ theta[1:]) > F
        J = np.column_stack([(~work).astype(float), d.X * work[:, None]])
    J = J * scale
    if d.penalty.size:
        ridge = np.zeros((len(d.penalty), len(theta)))
        ridge[:, 1:1 + m] = RIDGE * d.penalty
        J = np.vstack([J, ridge])
    return J


def _cost(form: str, theta: np.ndarray, d: _Design) -> float:
    return float(np.sum(_residuals(form, theta, d) ** 2))


def _polish(form: str, theta0: np.ndarray, d: _Design) -> np.ndarray:
    from scipy import optimize

    m = d.X.shape[1]
    lo = np.concatenate([[0.0], d.lb] + ([[SMOOTH_K[0]]] if form == "smooth_max" else []))
    hi = np.full(len(lo), np.inf)
    if form == "smooth_max":
        hi[-1] = SMOOTH_K[1]
    x0 = np.clip(theta0, lo, hi)
    x0 = np.where(x0 >= hi, hi - 1e-9, x0)
    try:
        res = optimize.least_squares(lambda t: _residuals(form, t, d), x0, bounds=(lo, hi),
                                     jac=lambda t: _jacobian(form, t, d),
                                     x_scale=np.maximum(np.abs(x0), 1e-3), max_nfev=200 * (m + 2))
    except ValueError:
        return x0
    return min((res.x, x0), key=lambda t: _cost(form, t, d))  # a tie keeps the polished


def _fit_sum(d: _Design) -> np.ndarray:
    X = np.hstack([np.ones((len(d.y), 1)), d.X])
    lb = np.concatenate([[0.0], d.lb])
    P = np.hstack([np.zeros((len(d.penalty), 1)), d.penalty]) if d.penalty.size else \
        np.zeros((0, X.shape[1]))
    return _nnls_rel(X, d.y, d.w, lb, P)


def _fit_max(d: _Design) -> np.ndarray:
    """Each split of the points (sorted by seconds) into a floor side and a work side, each
    side's least squares closed; the best polished on the true residuals."""
    n = len(d.y)
    order = np.argsort(d.y)
    tries = []
    for k in range(0, n + 1):
        floor_i, work_i = order[:k], order[k:]
        if k == n:  # all floor (the max's design always has the const column: m >= 1)
            F = _floor_level(d.y, d.w)
            theta = np.concatenate([[F], np.maximum(d.lb, 0.0)])
        else:
            coefs = _nnls_rel(d.X[work_i], d.y[work_i], d.w[work_i], d.lb, d.penalty)
            if k:
                F = _floor_level(d.y[floor_i], d.w[floor_i])
            else:  # no floor point: the floor sits at or below the smallest step
                F = float(min(np.min(d.X @ coefs), np.min(d.y)))
            theta = np.concatenate([[F], coefs])
        tries.append((_cost("max", theta, d), k, theta))
    tries.sort(key=lambda t: t[0])
    return min((_polish("max", theta, d) for _, _, theta in tries[:3]),
               key=lambda t: _cost("max", t, d))  # a tie keeps the earlier start


def _fit_smooth(d: _Design, base_max: np.ndarray, base_sum: np.ndarray) -> np.ndarray:
    starts = [np.concatenate([base_max, [8.0]]), np.concatenate([base_max, [SMOOTH_K[1] - 1]])]
    F = max(base_sum[0], 1e-9)
    starts.append(np.concatenate([[F], base_sum[1:], [1.5]]))
    return min((_polish("smooth_max", theta, d) for theta in starts),
               key=lambda t: _cost("smooth_max", t, d))  # a tie keeps the earlier start


def _to_params(form: str, theta: np.ndarray, d: _Design) -> dict[str, float]:
    params = {"F": 0.0, "w0": 0.0, "w_tokens": 0.0, "w_gemm": 0.0, "w_attn": 0.0,
              "w_seq_tokens": 0.0}
    if form == "sum":
        params.pop("w0")
    m = len(d.columns)
    params["F"] = float(theta[0] * d.ys)
    for name, c, s in zip(d.columns, theta[1:1 + m], d.col_scale):
        params[PARAM_OF[name]] = float(c * d.ys / s)
    if form == "smooth_max":
        params["k"] = float(theta[-1])
    return params


def work_side(form: str, theta: np.ndarray, d: _Design) -> int:
    """Points whose fitted work is at least the floor (max, smooth_max) or half the step
    (sum): the points that determine the work coefficients."""
    m = len(d.columns)
    W = d.X @ theta[1:1 + m]
    if form == "sum":
        return int(np.sum(W >= theta[0]))
    return int(np.sum(W >= theta[0] * (1 - 1e-9)))


def fit_forms(forms: Sequence[str], rows: Sequence[dict], y: np.ndarray, sigma: np.ndarray,
              gemm_rate: float | None) -> dict[str, tuple[dict[str, float], int, list[str]]]:
    """Fit ``forms`` (of :data:`~afford.schema.time_law.FORMS`) over one set of points: per
    form its parameters (SI units), its number of free parameters and its notes."""
    full = design(rows, y, sigma, gemm_rate)
    out: dict[str, tuple[dict[str, float], int, list[str]]] = {}
    fitted: dict[str, np.ndarray] = {}
    for form in FORMS:
        if form not in forms and not (form != "smooth_max" and "smooth_max" in forms):
            continue
        d = full.without_const() if form == "sum" else full
        if form == "max":
            theta = _fit_max(d)
        elif form == "sum":
            theta = _polish("sum", _fit_sum(d), d)
        else:
            sum_theta = fitted["sum"]
            # the sum fit has no const column: put a zero in its place
            if "const" in full.columns:
                i = full.columns.index("const")
                sum_theta = np.insert(sum_theta, 1 + i, 0.0)
            theta = _fit_smooth(d, fitted["max"], sum_theta)
        fitted[form] = theta
        if form not in forms:
            continue
        notes = []
        if full.dropped:
            notes.append("columns dropped as proportional to earlier ones: "
                         + ", ".join(full.dropped))
        m = len(d.columns)
        on_work = work_side(form, theta, d)
        if m and on_work < m:
            notes.append(f"work coefficients not identified: {on_work} point(s) determine "
                         f"{m} work term(s) ({', '.join(d.columns)}); their split is a prior "
                         "(no constant work, an attention FLOP costs a GEMM FLOP)")
        n_params = 1 + m + (1 if form == "smooth_max" else 0)
        out[form] = (_to_params(form, theta, d), n_params, notes)
    return out


def candidates(forms: Sequence[str], rows: Sequence[dict], y: np.ndarray, sigma: np.ndarray,
               gemm_rate: float | None, with_loo: bool = True) -> dict[str, CandidateFit]:
    """Each of ``forms`` fitted over the points (:func:`fit_forms`), with its in-sample
    residuals and, from three points on (``with_loo``), its leave-one-out errors: each point
    predicted by the form refitted without it. Seconds ``y`` are the wall step
    (:mod:`afford.fit.time.time_fit`) or the device's busy time
    (:mod:`afford.fit.time.step_sides`)."""
    if not forms:
        return {}
    fits = fit_forms(forms, rows, y, sigma, gemm_rate)
    n = len(y)
    loo: dict[str, list[float]] = {f: [] for f in fits}
    if n >= 3 and with_loo:
        for i in range(n):
            keep = [j for j in range(n) if j != i]
            sub = fit_forms(list(fits), [rows[j] for j in keep], y[keep], sigma[keep],
                            gemm_rate)
            for f in fits:
                loo[f].append(float(evaluate_form(f, sub[f][0], rows[i]) / y[i] - 1.0))
    out = {}
    for f, (params, n_params, notes) in fits.items():
        pred = np.array([evaluate_form(f, params, r) for r in rows])
        out[f] = CandidateFit(form=f, params=params, n_params=n_params,
                              r2_log=r2_score(np.log(y), np.log(np.maximum(pred, 1e-300))),
                              residuals=[float(v) for v in pred / y - 1.0],
                              loo_rel_errors=loo[f] or None, note="; ".join(notes) or None)
    return out


# ---- the choice among fitted forms ---------------------------------------------------------

LOO_TIE = 0.01  # worst leave-one-out errors closer than 1 point are a tie (children agree
# within ~2 % in the work regime: a smaller difference is not evidence)
WORK_OVER_FLOOR = 2.0  # or: the model's work at the largest point is >= 2x its floor
MIN_JUDGED = 3  # fewer work-regime points than this: the choice judges every point
FLOOR_WEIGHT = 0.1  # a floor point's LOO error counts a tenth: its tolerance is 10x (50 % / 5 %)


class StepPoint(CountedShape):
    """A measured shape: its warm step's seconds and their relative uncertainty."""

    seconds: float
    rel_sigma: float | None = None
    label: str | None = None


def work_regime(seconds: Sequence[float], floor: float | None = None) -> list[bool]:
    """Which measured steps lie in the work regime: at least ``WORK_OVER_FLOOR`` times the
    floor, estimated by the smallest step measured (or given). The floor itself is a
    per-process figure, so its points say little about a form."""
    y = [float(v) for v in seconds]
    base = min(y) if floor is None else floor
    return [v >= WORK_OVER_FLOOR * base for v in y]


def _judged_errors(c: CandidateFit, judged: Sequence[bool] | None) -> list[float]:
    errors = c.loo_rel_errors or []
    if judged is None:
        return [abs(e) for e in errors]
    return [abs(e) * (1.0 if j else FLOOR_WEIGHT) for e, j in zip(errors, judged)]


def choose_form(candidates: Sequence[CandidateFit], judged: Sequence[bool] | None = None
                ) -> tuple[FormName, str]:
    """The form with the smallest worst leave-one-out |error|; forms within ``LOO_TIE`` of it
    are split by the order of ``FORMS`` (max first: a step issued asynchronously costs
    the larger of host and device time; then sum, smooth_max).
    ``judged``: which points' errors count (the work regime, :func:`work_regime`; every point
    when None or when fewer than ``MIN_JUDGED`` are). Returns the form and a one-line reason.
    R^2 plays no part. Without leave-one-out errors (two points): the first candidate, said
    so."""
    if not candidates:
        raise ValueError("no form could be fitted to these points")
    if judged is not None and sum(bool(j) for j in judged) < MIN_JUDGED:
        judged = None
    scored = [(c, _judged_errors(c, judged)) for c in candidates if c.loo_rel_errors]
    if not scored:
        first = candidates[0]
        return first.form, (f"{first.form}: no leave-one-out check was possible "
                            f"({len(first.residuals)} points); the first form tried")
    worst = {c.form: max(e) for c, e in scored}
    best = min(worst.values())
    tied = [c for c, _ in scored if worst[c.form] <= best + LOO_TIE]
    pick = min(tied, key=lambda c: FORMS.index(c.form))
    others = ", ".join(f"{c.form} {worst[c.form]:.1%}" for c, _ in
                       sorted(scored, key=lambda ce: worst[ce[0].form]) if c is not pick)
    tie = ""
    if len(tied) > 1:
        tie = (f"; tied within {LOO_TIE:.1%} with "
               f"{', '.join(c.form for c in tied if c is not pick)}: the first of "
               f"{', '.join(FORMS)} (max: the asynchronous step's physics)")
    over = ("" if judged is None else
            f" over the {sum(bool(j) for j in judged)} work-regime points (floor points' "
            f"errors at {FLOOR_WEIGHT:g}x)")
    return pick.form, (f"{pick.form}: LOO worst {worst[pick.form]:.1%}{over}"
                       + (f" vs {others}" if others else "") + tie)

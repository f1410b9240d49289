"""The memory law of one training step, fitted by least squares (DESIGN section 4).

    peak_bytes = states + fixed + L * (C_res * B*s*d + C_op * B*H*s^2)

``states`` = params x bytes/param, counted tensor by tensor after a training loop (weights,
gradients and optimizer state); ``C_res`` is bytes per token, per unit of width, per layer
(activations kept for the backward pass); ``C_op`` is bytes per sequence, per head, per s^2,
per layer (score matrices that are materialised). In this notation Korthikanti et al. 2022,
eq. 1, ``s*b*h*(34 + 5*a*s/h)`` bytes per layer in 16-bit, is C_res = 34 and C_op = 5; with
flash/fused attention the s^2 term vanishes (``34*s*b*h + 4*a*s*b``).

Two forms are fitted over the same points and both are kept; predictions use the one with
the smaller leave-one-out error, and the result says which:

- ``states_measured``: fixed = 0, the law as written; two coefficients.
- ``states_plus_fixed``: a fitted constant as well. The measured states are the states at
  rest (after ``optimizer.step``: weights, gradients, moments), but the peak of a step comes
  at the start of backward, where the gradients of the previous step were set to ``None``
  and autocast holds 16-bit copies of the weights; and the caching allocator also holds
  cuBLAS workspaces. All of these are constant for a workload at fixed d, L, H, so one
  fitted constant absorbs them, and on a GPU it usually predicts better (a 32 MiB workspace
  is 3 % of a 1 GiB peak).

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
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import optimize

Form = Literal["states_measured", "states_plus_fixed"]
FORMS: tuple[Form, ...] = ("states_measured", "states_plus_fixed")
_COLUMNS = {"states_measured": ("c_res", "c_op"),
            "states_plus_fixed": ("c_res", "c_op", "fixed_bytes")}
BATCH_CAP = 1 << 24  # largest_batch never searches beyond this many sequences
LOO_TIE = 1e-9  # leave-one-out maxima closer than this are a tie (exact data, rounding)


class MemoryObservation(BaseModel):
    """One measured shape: transformer dims, states counted at rest, and the peak."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    B: int
    s: int
    d: int
    L: int
    H: int
    states_bytes: float
    peak_bytes: float


def activation_features(B: float, s: float, d: float, L: float, H: float
                        ) -> tuple[float, float]:
    """(L*B*s*d, L*B*H*s^2): the two regressors of the law."""
    return float(L * B * s * d), float(L * B * H * s * s)


class MemoryFit(BaseModel):
    """One fitted form of the law over one measured quantity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    quantity: Literal["allocated", "reserved", "rss_increment"]
    form: Form
    c_res: float = Field(description="bytes per (B*s*d) per layer")
    c_op: float = Field(description="bytes per (B*H*s^2) per layer")
    fixed_bytes: float = Field(0.0, description="constant bytes (0 in states_measured)")
    r2: float = Field(description="coefficient of determination of the peaks, linear space")
    residuals: list[float] = Field(description="relative: predicted / measured - 1")
    loo_rel_errors: list[float] | None = Field(
        None, description="leave-one-out: predicted without the point / measured - 1")
    other_form_loo_max: float | None = Field(
        None, description="the leave-one-out max of the form not chosen, for comparison")
    n_points: int

    @property
    def loo_max(self) -> float | None:
        if not self.loo_rel_errors:
            return None
        return max(abs(e) for e in self.loo_rel_errors)

    def predict(self, states_bytes: float, B: float, s: float, d: float, L: float, H: float,
                **override: float) -> float:
        """Peak bytes at a shape; ``override`` replaces c_res, c_op or fixed_bytes."""
        c = {"c_res": self.c_res, "c_op": self.c_op, "fixed_bytes": self.fixed_bytes, **override}
        x_res, x_op = activation_features(B, s, d, L, H)
        return float(states_bytes + c["fixed_bytes"] + c["c_res"] * x_res + c["c_op"] * x_op)

    def describe(self) -> str:
        fixed = f" + {self.fixed_bytes / 2**20:+.1f} MiB" if self.form == "states_plus_fixed" \
            else ""
        return (f"states{fixed} + L*({self.c_res:.2f} B*s*d + {self.c_op:.3f} B*H*s^2) "
                f"({self.quantity}, {self.form}, R^2 {self.r2:.5f}, {self.n_points} shapes)")


def _design(obs: Sequence[MemoryObservation], form: Form) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray]:
    feats = np.array([activation_features(o.B, o.s, o.d, o.L, o.H) for o in obs], dtype=float)
    if form == "states_plus_fixed":
        feats = np.column_stack([feats, np.ones(len(obs))])
    y = np.array([o.peak_bytes for o in obs], dtype=float)
    states = np.array([o.states_bytes for o in obs], dtype=float)
    return feats, y - states, y


def _solve(feats: np.ndarray, rhs: np.ndarray, y: np.ndarray, form: Form) -> dict[str, float]:
    scale = np.linalg.norm(feats, axis=0)
    scale[scale == 0.0] = 1.0
    norm = float(np.max(np.abs(y)))  # bytes -> order 1, for the solver's tolerances
    lower = np.array([0.0, 0.0, -np.inf][: feats.shape[1]])
    res = optimize.lsq_linear(feats / scale, rhs / norm, bounds=(lower, np.inf), method="bvls")
    theta = res.x / scale * norm
    params = dict(zip(_COLUMNS[form], (float(v) for v in theta)))
    params.setdefault("fixed_bytes", 0.0)
    return params


def _predict_rows(feats: np.ndarray, states: np.ndarray, p: dict[str, float]) -> np.ndarray:
    return states + p["fixed_bytes"] + feats[:, 0] * p["c_res"] + feats[:, 1] * p["c_op"]


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


def _check(obs: Sequence[MemoryObservation], need: int) -> None:
    if len(obs) < need:
        raise ValueError(f"the memory law needs at least {need} measured shapes, got {len(obs)}")
    for o in obs:
        if not (math.isfinite(o.peak_bytes) and o.peak_bytes > 0):
            raise ValueError(f"peak bytes must be positive and finite, got {o.peak_bytes!r}")
        if not (math.isfinite(o.states_bytes) and o.states_bytes >= 0):
            raise ValueError(f"states bytes must be finite and >= 0, got {o.states_bytes!r}")


def fit_form(obs: Sequence[MemoryObservation], quantity: str, form: Form) -> MemoryFit:
    """One form by relative, bounded least squares, with leave-one-out errors."""
    k = len(_COLUMNS[form])
    _check(obs, k)
    feats, rhs, y = _design(obs, form)
    states = y - rhs
    p = _solve(feats, rhs, y, form)
    pred = _predict_rows(feats, states, p)
    loo = None
    if len(obs) > k:
        loo = []
        for i in range(len(obs)):
            keep = np.arange(len(obs)) != i
            p_i = _solve(feats[keep], rhs[keep], y[keep], form)
            loo.append(float(_predict_rows(feats[i:i + 1], states[i:i + 1], p_i)[0] / y[i] - 1))
    return MemoryFit(quantity=quantity, form=form, c_res=p["c_res"], c_op=p["c_op"],
                     fixed_bytes=p["fixed_bytes"], r2=_r2(y, pred),
                     residuals=[float(v) for v in pred / y - 1.0], loo_rel_errors=loo,
                     n_points=len(obs))


def fit_memory(obs: Sequence[MemoryObservation], quantity: str) -> MemoryFit:
    """Both forms; the one with the smaller leave-one-out max is returned (ties, and too few
    points for a leave-one-out check of the fixed form, go to ``states_measured``, the law
    as written)."""
    plain = fit_form(obs, quantity, "states_measured")
    if len(obs) <= len(_COLUMNS["states_plus_fixed"]):
        return plain
    fixed = fit_form(obs, quantity, "states_plus_fixed")
    if plain.loo_max is not None and fixed.loo_max is not None and \
            fixed.loo_max + LOO_TIE < plain.loo_max:
        return fixed.model_copy(update={"other_form_loo_max": plain.loo_max})
    return plain.model_copy(update={"other_form_loo_max": fixed.loo_max})


def fit_params_affine(s_values: Sequence[float], params: Sequence[float]) -> tuple[float, float]:
    """params = p0 + p_s * s by least squares (learned positions grow with s; most models
    are constant in s, p_s = 0). Exact for the built-in workloads."""
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
    b = np.asarray(batches, dtype=float)
    y = np.asarray(peaks, dtype=float)
    if len(b) < 3:
        raise ValueError("a linearity check needs at least 3 batch sizes")
    slope, intercept = np.polyfit(b, y, 1)
    pred = intercept + slope * b
    return _r2(y, pred), float(np.max(np.abs(pred / y - 1.0)))


def largest_batch(predict: Callable[[int], float], budget: float, cap: int = BATCH_CAP) -> int:
    """The largest B >= 1 with ``predict(B) <= budget`` for a predictor non-decreasing in B;
    0 when even B = 1 does not fit; ``cap`` when everything up to it fits."""
    if not budget > 0 or predict(1) > budget:
        return 0
    lo = 1
    while lo < cap and predict(min(2 * lo, cap)) <= budget:
        lo = min(2 * lo, cap)
    if lo == cap:
        return cap
    hi = min(2 * lo, cap)  # predict(hi) > budget >= predict(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predict(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


class Verdict(BaseModel):
    """A default constant (or a whole default formula) judged against this box's fit.

    ``effect`` = default prediction / fitted prediction - 1 at the target shape, the default
    replacing the fitted value and everything else left as fitted. CONFIRMED when
    ``|effect| <= tolerance``; otherwise WRONG, ``optimistic`` when the default under-predicts
    memory (a run it admits may not fit), ``pessimistic`` when it over-predicts. The
    consequence compares the largest resident batch at the target's sequence length.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    constant: str = Field(description="bytes_per_param, c_res, c_op, fixed_bytes or formula")
    default_name: str
    citation: str
    default_value: float | None = None
    fitted_value: float | None = None
    target: dict[str, int]
    fitted_bytes: float
    default_bytes: float
    effect: float
    tolerance: float
    status: Literal["CONFIRMED", "WRONG"]
    direction: Literal["optimistic", "pessimistic"] | None = None
    budget_bytes: float | None = None
    max_batch_fitted: int | None = None
    max_batch_default: int | None = None
    consequence: str


def judge(constant: str, default_name: str, citation: str, *,
          default_value: float | None, fitted_value: float | None,
          fitted: Callable[[int], float], default: Callable[[int], float],
          budgeted: Callable[[int, float], float], target: dict[str, int],
          budget_bytes: float | None, tolerance: float) -> Verdict:
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
    return Verdict(constant=constant, default_name=default_name, citation=citation,
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

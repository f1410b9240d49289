"""The step-time model as a certificate stores it: how a workload's features grow with the
shape, the candidate forms and the chosen one, the points and held-out shapes with their
errors, and a workload's noise verdict.

Fitted by :mod:`afford.fit.time.time_fit` (the forms, the choice and the reasons are
documented there, the features in :mod:`afford.fit.time.step_features`, the fitting in
:mod:`afford.fit.time.step_forms`, the verdict in :mod:`afford.fit.time.time_noise`); kept
here, below the fit layer, with what reading a stored model needs: evaluating a form at a
shape (:func:`evaluate_form`) and each feature's law (:meth:`FeatureScaling.features`).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from afford.schema.quantities import Duration, Extent, Flops, Rate, Ratio, Seconds

Axes = Literal["batch_seq", "n"]
FEATURES = ("tokens", "gemm_flops", "attn_flops")
FormName = Literal["max", "sum", "smooth_max", "power", "floor_power"]
ALL_FORMS: tuple[FormName, ...] = ("max", "sum", "smooth_max", "power", "floor_power")
PARAM_OF = {"const": "w0", "gemm_flops": "w_gemm", "attn_flops": "w_attn",
            "tokens": "w_tokens", "seq_tokens": "w_seq_tokens"}
WORK_FEATURES = ("tokens", "gemm_flops", "attn_flops", "seq_tokens")


def seq_tokens(batch: float | None, seq: float | None) -> float | None:
    """B*s^2: the shape-only stand-in for attention work where attention FLOPs were not
    counted (the step-time model's ``seq_tokens`` column); None without batch and seq."""
    return None if batch is None or seq is None else float(batch) * float(seq) ** 2


def monomial(term: str, batch: float | None, seq: float | None, n: float | None) -> float:
    """The value of one menu term at a shape."""
    values = {"B*s": lambda: batch * seq, "B*s^2": lambda: batch * seq * seq,
              "B": lambda: batch, "1": lambda: 1.0, "n": lambda: n, "n^2": lambda: n * n,
              "n^3": lambda: n ** 3}
    return float(values[term]())


class FeatureLaw(BaseModel):
    """One feature as ``sum(coef * term)`` over monomials of the shape (empty: always 0)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feature: str
    terms: list[str]
    coefs: list[float]
    n_counted: int = Field(description="shapes the law was fitted on")
    max_rel_error: float = Field(description="worst |law / counted - 1| over them")
    varied: list[str] = Field(description="axes that varied among the counted shapes")
    warnings: list[str] = []

    def at(self, batch: float | None = None, seq: float | None = None,
           n: float | None = None) -> float:
        return float(sum(c * monomial(t, batch, seq, n) for t, c in zip(self.terms, self.coefs)))

    def describe(self) -> str:
        if not self.terms:
            return f"{self.feature} = 0"
        return f"{self.feature} = " + " + ".join(f"{c:.6g}*{t}" for t, c in
                                               zip(self.terms, self.coefs))


class FeatureScaling(BaseModel):
    """How each feature of one workload grows with the shape: exact laws fitted by
    :func:`afford.fit.time.step_features.fit_scaling` (see that module).

    ``laws`` holds one :class:`FeatureLaw` per feature that was counted; a feature absent
    from it is unknown (never counted) and :meth:`features` gives ``None`` for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    axes: Axes
    laws: dict[str, FeatureLaw]

    def features(self, *, batch: float | None = None, seq: float | None = None,
                 n: float | None = None) -> dict[str, float | None]:
        """``{"tokens": ..., "gemm_flops": ..., "attn_flops": ...}`` at a shape, and for
        transformer-shaped workloads ``seq_tokens`` (B*s^2, by definition)."""
        if self.axes == "batch_seq" and (batch is None or seq is None):
            raise ValueError("this workload's features need batch and seq")
        if self.axes == "n" and n is None:
            raise ValueError("this workload's features need n")
        out = {f: (self.laws[f].at(batch, seq, n) if f in self.laws else None)
               for f in FEATURES}
        if self.axes == "batch_seq":
            out["seq_tokens"] = seq_tokens(batch, seq)
        return out

    def describe(self) -> str:
        return "; ".join(law.describe() for law in self.laws.values())



def evaluate_form(form: str, params: dict[str, float], feats: dict[str, float | None],
             x: float | None) -> float:
    """Seconds of ``form`` with ``params`` at a shape's features (``x``: the one axis of
    the old forms, tokens or n)."""
    if form == "power":
        return float(math.exp(params["a"]) * x ** params["b"])
    if form == "floor_power":
        return float(params["F"] + params["c"] * x ** params["b"])
    W = params.get("w0", 0.0) + sum(params.get(PARAM_OF[f], 0.0) * (feats.get(f) or 0.0)
                                    for f in WORK_FEATURES)
    F = params["F"]
    if form == "sum":
        return float(F + W)
    if form == "max":
        return float(max(F, W))
    k = params["k"]
    with np.errstate(divide="ignore"):
        return float(np.exp(np.logaddexp(k * np.log(F), k * np.log(W)) / k))


class CandidateFit(BaseModel):
    """One form fitted over the points, with its errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    form: FormName
    params: dict[str, float] = Field(description="SI: seconds, seconds per token / FLOP")
    n_params: int
    r2_log: float = Field(description="R^2 in log space (reported, never used to choose)")
    residuals: list[float] = Field(description="predicted / measured - 1, in-sample")
    loo_rel_errors: list[float] | None = Field(None, description="leave-one-out errors")
    note: str | None = None

    @property
    def loo_max(self) -> float | None:
        return max(abs(e) for e in self.loo_rel_errors) if self.loo_rel_errors else None

    @property
    def loo_median(self) -> float | None:
        if not self.loo_rel_errors:
            return None
        return float(np.median(np.abs(self.loo_rel_errors)))


class CountedShape(BaseModel):
    """A shape and what was counted there: ``batch`` and ``seq`` (two axes) or ``n`` (one),
    its tokens per step, and its GEMM / attention FLOPs where counted (None: not counted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch: Extent | None = None
    seq: Extent | None = None
    n: Extent | None = None
    tokens: Extent
    gemm_flops: Flops | None = None
    attn_flops: Flops | None = None


class ModelPoint(CountedShape):
    """A point as the model sees it: shape, features, measured and predicted seconds."""

    measured_seconds: Seconds
    predicted_seconds: float
    rel_error: float = Field(description="predicted / measured - 1")
    loo_rel_error: float | None = Field(None, description="fitted points: without it")
    extrapolated: bool = False
    label: str | None = None
    regime: Literal["device", "host"] | None = Field(
        None, description="two-sided models: which side the prediction says bounds the step")
    band: tuple[float, float] | None = Field(
        None, description="two-sided models, host-bound shapes: the step's range across "
        "processes (the floor's spread)")
    device_measured_seconds: Seconds | None = Field(None, description="the device's busy time "
                                                  "measured at the shape (profiled)")
    device_predicted_seconds: float | None = None
    device_rel_error: float | None = Field(None, description="predicted / measured busy - 1")


class DeviceLaw(BaseModel):
    """The device's busy time per warm step as a function of the shape's counted work: a
    form of :mod:`afford.fit.time.step_forms` fitted to profiled busy times (its floor ``F`` is
    the device's own latency floor, not the host's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    form: FormName
    params: dict[str, float]
    reason: str
    candidates: list[CandidateFit]
    bounds: list[str] = Field([], description="the physical bounds applied, and any fit "
                              "refused for needing a coefficient beyond them")

    def at(self, feats: dict[str, float | None], x: float | None) -> float:
        return evaluate_form(self.form, self.params, feats, x)


class HostSide(BaseModel):
    """The host's issue time per step: kernels per step x the issue cost of one kernel,
    read off the wall time of host-bound steps (the device idle a share of the step)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    issue_seconds: Duration = Field(description="host seconds per kernel issued (median)")
    issue_range: tuple[float, float] = Field(description="its lowest and highest over the "
                                             "host-bound points' children: the band")
    points: list[str] = Field(description="the host-bound points it was read off")


class KernelCount(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: Extent
    seq: Extent | None = None
    kernels: Ratio


class SidesModel(BaseModel):
    """A GPU step as its two sides (docs/DESIGN.md section 4): ``max(host, device + gap)``,
    host = kernels x issue cost, device = the busy-time law, gap = kernels x the device's
    own cost per kernel boundary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: DeviceLaw
    host: HostSide | None = Field(None, description="None: no measured step was host-bound "
                                  "(the host side was never seen above the device's)")
    kernels: list[KernelCount]
    gap_seconds: Duration = Field(description="device seconds per kernel boundary")
    gap_source: str
    loo_rel_errors: list[float] | None = Field(None, description="wall-time leave-one-out "
                                               "errors of the two-sided model")
    notes: list[str] = []

    def kernels_at(self, tokens: float, seq: float | None) -> float:
        """Kernels per step at a shape: the measured count nearest in tokens (then seq);
        the count barely moves with the shape (a few % over 64x the tokens)."""
        def key(k: KernelCount) -> tuple[float, float]:
            ds = abs(math.log((seq or 1.0) / (k.seq or 1.0))) if seq and k.seq else 0.0
            return (abs(math.log(tokens / k.tokens)), ds)
        return min(self.kernels, key=key).kernels

    def predict(self, feats: dict[str, float | None], x: float | None, tokens: float,
                seq: float | None) -> SidesPrediction:
        k = self.kernels_at(tokens, seq)
        busy = self.device.at(feats, x)
        device = busy + k * self.gap_seconds
        if self.host is None:
            return SidesPrediction(seconds=device, device_busy=busy, device=device, host=None,
                                   regime="device", band=None)
        host = k * self.host.issue_seconds
        lo, hi = (k * c for c in self.host.issue_range)
        regime = "device" if device >= host else "host"
        band = None if device >= hi else (max(device, lo), hi)
        return SidesPrediction(seconds=max(device, host), device_busy=busy, device=device,
                               host=host, regime=regime, band=band)


class SidesPrediction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seconds: float
    device_busy: float
    device: float = Field(description="busy + kernels x gap")
    host: float | None
    regime: Literal["device", "host"]
    band: tuple[float, float] | None


class StepTimeModel(BaseModel):
    """The chosen step-time model of one workload (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    axes: Literal["batch_seq", "n"]
    form: FormName
    params: dict[str, float]
    reason: str = Field(description="why this form: its leave-one-out error vs the others")
    scaling: FeatureScaling
    candidates: list[CandidateFit]
    points: list[ModelPoint]
    ranges: dict[str, tuple[Extent, Extent]] = Field(description="fitted range per axis")
    held_out: list[ModelPoint] = Field([], description="never fitted: predicted vs measured")
    floor_left: bool = Field(description="the fitted points reach the work regime")
    floor_note: str
    gemm_rate: Rate | None = Field(None, description="FLOP/s ceiling used as a bound")
    warnings: list[str] = []
    sides: SidesModel | None = Field(None, description="GPU: the step as host issue time "
                                     "and device busy time; when present it is the model "
                                     "(``form`` is then the best one-sided fit, kept beside)")

    @property
    def loo_rel_errors(self) -> list[float] | None:
        return self.chosen.loo_rel_errors

    @property
    def chosen(self) -> CandidateFit:
        return next(c for c in self.candidates if c.form == self.form)

    def predict(self, *, batch: float | None = None, seq: float | None = None,
                n: float | None = None) -> tuple[float, bool]:
        """Seconds of a warm step at a shape, and whether it lies outside the fitted range
        on any axis (batch, seq, n or tokens)."""
        feats = self.scaling.features(batch=batch, seq=seq, n=n)
        seconds = self.seconds_at(feats, batch=batch, seq=seq, n=n)
        return seconds, self.is_extrapolated(batch=batch, seq=seq, n=n,
                                             tokens=feats["tokens"])

    def seconds_at(self, feats: dict[str, float | None], *, batch: float | None = None,
                   seq: float | None = None, n: float | None = None) -> float:
        """The model's warm step at a shape's features: the two sides where measured, else
        the chosen one-sided form."""
        x = feats["tokens"] if self.axes == "batch_seq" else n
        if self.sides is not None:
            return self.sides.predict(feats, x, feats["tokens"], seq).seconds
        return evaluate_form(self.form, self.params, feats, x)

    def sides_at(self, *, batch: float | None = None, seq: float | None = None,
                 n: float | None = None) -> SidesPrediction | None:
        """The two sides at a shape (None for a one-sided model)."""
        if self.sides is None:
            return None
        feats = self.scaling.features(batch=batch, seq=seq, n=n)
        x = feats["tokens"] if self.axes == "batch_seq" else n
        return self.sides.predict(feats, x, feats["tokens"], seq)

    @property
    def used(self) -> str:
        """The model the predictions come from: ``sides`` or the one-sided form."""
        return "sides" if self.sides is not None else self.form

    def is_extrapolated(self, **axes: float | None) -> bool:
        for name, value in axes.items():
            if value is None or name not in self.ranges:
                continue
            lo, hi = self.ranges[name]
            if value < lo * (1 - 1e-9) or value > hi * (1 + 1e-9):
                return True
        return False

    def held_out_errors(self) -> list[float]:
        return [p.rel_error for p in self.held_out]

    def describe(self) -> str:
        p = self.params
        x = "tokens" if self.axes == "batch_seq" else "n"
        if self.form == "power":
            return f"t = {math.exp(p['a']):.3g} {x}^{p['b']:.3f} (power, one axis)"
        if self.form == "floor_power":
            return (f"t = {p['F']:.4g} s + {p['c']:.3g} {x}^{p['b']:.3f} "
                    "(floor_power, one axis)")
        if self.sides is not None:
            return self.sides_text()
        work = " + ".join(f"{v:.3g}*{k[2:] if k != 'w0' else '1'}" for k, v in p.items()
                          if k.startswith("w") and v > 0) or "0"
        if self.form == "max":
            return f"t = max({p['F']:.4g} s, {work})"
        if self.form == "sum":
            return f"t = {p['F']:.4g} s + {work}"
        return f"t = ({p['F']:.4g}^k + ({work})^k)^(1/k), k = {p['k']:.3g}"


    def sides_text(self) -> str:
        sd = self.sides
        host = (f"{sd.host.issue_seconds * 1e6:.3g} us/kernel" if sd.host else "not seen")
        return (f"t = max(host, device + gap): device busy {sd.device.form} law, gap "
                f"{sd.gap_seconds * 1e6:.3g} us/kernel boundary, host {host}")


class TimeVerdict(BaseModel):
    """OK, REMEASURE (measure the listed points once more) or NOISY (still after that)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: Literal["OK", "REMEASURE", "NOISY", "UNJUDGED"] = Field(
        description="UNJUDGED: OK as far as it goes, but no held-out shape could be judged")
    reasons: list[str]
    noisy_points: list[int] = Field(description="indices of points beyond child_tolerance")
    failed_held_out: list[int] = Field(description="indices of held-out points beyond "
                                       "held_out_tolerance")
    child_tolerance: Ratio = Field(description="work-regime points' children may disagree "
                                   "by this much (relative spread)")
    held_out_tolerance: Ratio = Field(description="work-regime held-out |error| allowed")
    floor_tolerance: Ratio = Field(description="floor points' children may "
                                   "disagree by this much (the floor differs by process)")
    remeasured: bool = Field(description="the verdict is on a second measurement")
    held_out_median: float | None = Field(None, description="median |error| of the judged "
                                          "(work-regime) held-out points")
    held_out_worst: float | None = None
    judged: int | None = Field(None, description="held-out shapes judged (None: older "
                               "certificates, which did not count them)")
    model_misses: list[str] = Field([], description="held-out shapes the model missed "
                                    "beyond tolerance whose re-measurement reproduced (the "
                                    "children agree): the model's error, stated, not noise")


# --- Reading a stored model at a shape (plans, `afford size`, reports) ----------------------
# Pure functions of a stored model, appended so the model classes above stay as fitted.

MEASURED_AXES = ("batch", "seq", "n", "tokens")


class TimePrediction(BaseModel):
    """A stored model's warm-step seconds at one shape, and whether the shape lies beyond
    every shape the certificate measured for this model (fitted and held-out alike)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seconds: float
    tokens: float | None = Field(None, description="B*s at the shape (batch_seq models)")
    extrapolated: bool = Field(description="beyond the measured range on some axis")
    beyond: list[str] = Field([], description="each axis beyond it, e.g. 'batch 128 > 64'")


def measured_ranges(model: StepTimeModel) -> dict[str, tuple[float, float]]:
    """[min, max] per axis (batch, seq, n, tokens) over every shape measured for the model:
    its fitted points and its held-out shapes (measured, never fitted). A shape inside on
    every axis is covered by measurements; tokens (B*s) bounds the corner the cross of a
    2-D design leaves unmeasured (large batch at long sequence)."""
    pts = [*model.points, *model.held_out]
    out: dict[str, tuple[float, float]] = {}
    for axis in MEASURED_AXES:
        vals = [v for v in (getattr(p, axis) for p in pts) if v is not None]
        if vals:
            out[axis] = (float(min(vals)), float(max(vals)))
    return out


def beyond_measured(model: StepTimeModel, **axes: float | None) -> list[str]:
    """Each axis of ``axes`` (batch, seq, n, tokens) outside :func:`measured_ranges`, in
    words: ``["batch 128 > 64", "tokens 262144 > 131072"]``; empty inside."""
    ranges = measured_ranges(model)
    out = []
    for name, value in axes.items():
        if value is None or name not in ranges:
            continue
        lo, hi = ranges[name]
        if value > hi * (1 + 1e-9):
            out.append(f"{name} {value:g} > {hi:g}")
        elif value < lo * (1 - 1e-9):
            out.append(f"{name} {value:g} < {lo:g}")
    return out


def predict_at(model: StepTimeModel, *, batch: float | None = None,
               seq: float | None = None, n: float | None = None) -> TimePrediction:
    """The model's seconds at (batch, seq) (or at n for a one-axis model), marked
    extrapolated beyond the measured range. ValueError when the shape lacks the model's axes
    or the model gives no positive finite time there."""
    feats = model.scaling.features(batch=batch, seq=seq, n=n)
    seconds = model.seconds_at(feats, batch=batch, seq=seq, n=n)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"the {model.used} model gives {seconds!r} s at batch={batch}, "
                         f"seq={seq}, n={n}")
    tokens = feats["tokens"] if model.axes == "batch_seq" else None
    beyond = beyond_measured(model, batch=batch, seq=seq, n=n, tokens=tokens)
    return TimePrediction(seconds=seconds, tokens=tokens, extrapolated=bool(beyond),
                          beyond=beyond)


def held_out_accuracy(model: StepTimeModel) -> tuple[int, float | None, float | None]:
    """(held-out shapes, median |error|, worst |error|) of the model; the errors are
    ``predicted / measured - 1`` at shapes measured and never fitted."""
    errs = [abs(p.rel_error) for p in model.held_out]
    if not errs:
        return 0, None, None
    return len(errs), float(np.median(errs)), float(max(errs))


def accuracy_text(model: StepTimeModel) -> str:
    """The model's form and held-out error in words, for a figure's source."""
    n, med, worst = held_out_accuracy(model)
    if n == 0:
        loo = model.chosen.loo_max
        return f"{model.form} form; no held-out shape measured" + \
            (f" (leave-one-out worst {loo:.1%})" if loo is not None else "")
    return f"{model.form} form, held-out error median {med:.1%}, worst {worst:.1%} over {n} " \
        "shapes never fitted"


def _factor(model: StepTimeModel, tokens: float | None, seq: float | None, n: float | None
            ) -> tuple[float, float, str]:
    """(the asked shape's factor beyond the fitted range, the factor the held-out shapes
    tested, on which axis): tokens and sequence (or n), the larger factor."""
    fitted = {a: max(v for v in (getattr(p, a) for p in model.points) if v is not None)
              for a in ("tokens", "seq", "n")
              if any(getattr(p, a) is not None for p in model.points)}
    held = {a: max([v for v in (getattr(p, a) for p in model.held_out) if v is not None],
                   default=0.0) for a in fitted}
    best = (1.0, 1.0, "tokens")
    for axis, value in (("tokens", tokens), ("seq", seq), ("n", n)):
        if value is None or axis not in fitted or fitted[axis] <= 0:
            continue
        f, tested = value / fitted[axis], max(1.0, held[axis] / fitted[axis])
        if f / tested > best[0] / best[1]:
            best = (f, tested, axis)
    return best


def _errors_text(errors: list[float], what: str) -> str:
    errs = [abs(e) for e in errors]
    return (f"{what} held-out error median {float(np.median(errs)):.1%}, worst {max(errs):.1%} "
            f"over {len(errs)} shape(s)")


def accuracy_at(model: StepTimeModel, *, batch: float | None = None, seq: float | None = None,
                n: float | None = None) -> str:
    """The error that applies at an asked shape, in words: the held-out error measured in
    the shape's own regime (device-bound or host-bound for a two-sided model; the work
    regime or the floor for a one-sided one), and how far the shape lies beyond the fitted
    range against how far the held-out shapes tested it. Past the tested factor it says so
    instead of quoting a smaller error."""
    tokens = batch * seq if batch is not None and seq is not None else None
    f, tested, axis = _factor(model, tokens, seq, n)
    beyond = ""
    if f > tested * (1 + 1e-9):
        beyond = (f"; {f:.3g}x the fitted {axis}, past the {tested:.3g}x its held-out shapes "
                  "tested: the error there is not measured")
    if model.sides is None:
        judged = [p.rel_error for p in model.held_out]
        text = (_errors_text(judged, f"{model.form} form,") if judged
                else f"{model.form} form; no held-out shape measured")
        return text + beyond
    sp = model.sides_at(batch=batch, seq=seq, n=n)
    same = [p for p in model.held_out if p.regime == sp.regime]
    device = [p.device_rel_error for p in model.held_out if p.device_rel_error is not None]
    parts = [f"two-sided, {sp.regime}-bound here"]
    if sp.band is not None:
        inside = sum(1 for p in same if p.band and p.band[0] <= p.measured_seconds <= p.band[1])
        parts.append(f"predicted in the band {sp.band[0] * 1e3:.4g}-{sp.band[1] * 1e3:.4g} ms "
                     f"(the host floor's spread across processes); {inside} of {len(same)} "
                     "host-bound held-out shape(s) inside theirs")
    elif same:
        parts.append(_errors_text([p.rel_error for p in same], "device-bound"))
    else:
        parts.append("no device-bound held-out shape measured")
    if device:
        parts.append(_errors_text(device, "device busy time"))
    return "; ".join(parts) + beyond

"""The step-time model as a certificate stores it, and the one function that reads it at a
shape (:func:`predict_at`).

How a prediction is made, in two modules: :func:`afford.figures.time_figures.step_at` picks
the answer (measured at that very shape, else this model, else the sweep's throughput law);
:func:`predict_at` here is the model's answer: the two sides of a GPU step where they were
measured apart (``max(host, device + gap)``, :class:`SidesModel`), else the chosen one-sided
form (:func:`evaluate_form`) over the shape's counted work (:mod:`afford.schema.time_features`);
a band where the host can bound the step (the floor differs from process to process); and
whether the shape lies beyond every shape measured for the model.

Fitted by :mod:`afford.fit.time.time_fit` (the forms, the choice and the reasons are
documented there, the fitting in :mod:`afford.fit.time.step_forms` and
:mod:`afford.fit.time.step_sides`); the noise verdict by :mod:`afford.fit.time.time_noise`.
Older certificates are upgraded on load (:meth:`StepTimeModel._upgrade`,
:meth:`TimeVerdict._upgrade`).
"""

import math
from collections.abc import Sequence
from statistics import median
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from afford.schema.quantities import Duration, Extent, Rate, Ratio, Seconds
from afford.schema.time_features import CountedShape, FeatureScaling

FormName = Literal["max", "sum", "smooth_max"]
FORMS: tuple[FormName, ...] = ("max", "sum", "smooth_max")
ONE_AXIS_FORMS = ("power", "floor_power")  # fitted by older afford beside FORMS; upgraded away
PARAM_OF = {"const": "w0", "gemm_flops": "w_gemm", "attn_flops": "w_attn",
            "tokens": "w_tokens", "seq_tokens": "w_seq_tokens"}
WORK_FEATURES = ("tokens", "gemm_flops", "attn_flops", "seq_tokens")


def evaluate_form(form: str, params: dict[str, float], feats: dict[str, float | None]) -> float:
    """Seconds of ``form`` with ``params`` at a shape's features: the floor ``F`` and the
    work ``W = w0 + sum(w_f * feature_f)`` combined as ``max(F, W)``, ``F + W`` or
    ``(F^k + W^k)^(1/k)`` (:mod:`afford.fit.time.step_forms`)."""
    W = params.get("w0", 0.0) + sum(params.get(PARAM_OF[f], 0.0) * (feats.get(f) or 0.0)
                                    for f in WORK_FEATURES)
    F = params["F"]
    if form == "sum":
        return float(F + W)
    if form == "max":
        return float(max(F, W))
    k = params["k"]
    import numpy as np  # here: only this form needs it, and reading a model needs no numpy

    with np.errstate(divide="ignore"):
        return float(np.exp(np.logaddexp(k * np.log(F), k * np.log(W)) / k))


class CandidateFit(BaseModel):
    """One form fitted over the points, with its errors."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

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
        return float(median(abs(e) for e in self.loo_rel_errors))


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
        None, description="two-sided models, where the host can bound the step: the range "
        "a process may see (:meth:`SidesModel.predict`)")
    device_measured_seconds: Seconds | None = Field(None, description="the device's busy time "
                                                  "measured at the shape (profiled)")
    device_predicted_seconds: float | None = None
    device_rel_error: float | None = Field(None, description="predicted / measured busy - 1")


class DeviceLaw(BaseModel):
    """The device's busy time per warm step as a function of the shape's counted work: a
    form of :mod:`afford.fit.time.step_forms` fitted to profiled busy times (its floor ``F`` is
    the device's own latency floor, not the host's)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    form: FormName
    params: dict[str, float]
    reason: str
    candidates: list[CandidateFit]
    bounds: list[str] = Field([], description="the physical bounds applied, and any fit "
                              "refused for needing a coefficient beyond them")

    def at(self, feats: dict[str, float | None]) -> float:
        return evaluate_form(self.form, self.params, feats)

    @property
    def rel_error(self) -> float:
        """The law's worst leave-one-out |error| over the busy times (0 where none was
        computed): the device side's uncertainty at a shape it was not fitted on."""
        chosen = next((c for c in self.candidates if c.form == self.form), None)
        return (chosen.loo_max or 0.0) if chosen is not None else 0.0


class HostSide(BaseModel):
    """The host's issue time per step: kernels per step x the issue cost of one kernel,
    read off the wall time of host-bound steps (the device idle a share of the step)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    issue_seconds: Duration = Field(description="host seconds per kernel issued (median)")
    issue_range: tuple[float, float] = Field(description="the band of the issue cost a "
                                             "process may see (``band_level`` says which)")
    band_level: float | None = Field(
        None, gt=0, lt=1, description="the share of fresh processes the band holds: the "
        "prediction interval over the host-bound points' children, never narrower than their "
        "lowest and highest (afford.fit.stats.process_band); None: their lowest and "
        "highest alone (certificates made before it)")
    band_prior: str | None = Field(
        None, description="the spread between processes the children's own was moderated "
        "with, in words (recorded certificates'; None: the children's alone)")
    points: list[str] = Field(description="the host-bound points it was read off")

    def band_words(self) -> str:
        """What the band is, in words, for a figure's source."""
        if self.band_level is None:
            return "the lowest and highest issue cost over the children's processes"
        prior = f", {self.band_prior}" if self.band_prior else ""
        return f"where {self.band_level:.0%} of fresh processes land: the children's spread{prior}"


class KernelCount(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    tokens: Extent
    seq: Extent | None = None
    kernels: Ratio


def nearest_kernels(counts: Sequence[KernelCount], tokens: float, seq: float | None) -> float:
    """Kernels per step at a shape: the measured count nearest in tokens (then seq); the
    count barely moves with the shape (a few % over 64x the tokens)."""
    def key(k: KernelCount) -> tuple[float, float]:
        ds = abs(math.log((seq or 1.0) / (k.seq or 1.0))) if seq and k.seq else 0.0
        return (abs(math.log(tokens / k.tokens)), ds)
    return min(counts, key=key).kernels


class SidesPrediction(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    seconds: float
    device_busy: float
    device: float = Field(description="busy + kernels x gap")
    host: float | None
    regime: Literal["device", "host"]
    band: tuple[float, float] | None


class SidesModel(BaseModel):
    """A GPU step as its two sides (docs/DESIGN.md section 4): ``max(host, device + gap)``,
    host = kernels x issue cost, device = the busy-time law, gap = kernels x the device's
    own cost per kernel boundary."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

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
        return nearest_kernels(self.kernels, tokens, seq)

    def predict(self, feats: dict[str, float | None], tokens: float, seq: float | None
                ) -> SidesPrediction:
        """The step at a shape: ``max(host, device)``; and its band where the host can bound
        it: the host's lowest and highest issue cost seen across processes (children) times
        the shape's kernels, against the device side within its own leave-one-out error
        (:attr:`DeviceLaw.rel_error`): ``[max(host lo, device lo), max(host hi, device hi)]``
        wherever the host's high end reaches the device's low end, else None (the device
        bounds the step in every process)."""
        k = self.kernels_at(tokens, seq)
        busy = self.device.at(feats)
        device = busy + k * self.gap_seconds
        if self.host is None:
            return SidesPrediction(seconds=device, device_busy=busy, device=device, host=None,
                                   regime="device", band=None)
        host = k * self.host.issue_seconds
        h_lo, h_hi = (k * c for c in self.host.issue_range)
        e = self.device.rel_error
        d_lo, d_hi = device * (1.0 - e), device * (1.0 + e)
        band = None if d_lo >= h_hi else (max(h_lo, d_lo), max(h_hi, d_hi))
        return SidesPrediction(seconds=max(device, host), device_busy=busy, device=device,
                               host=host, regime="device" if device >= host else "host",
                               band=band)


class StepTimeModel(BaseModel):
    """The chosen step-time model of one workload (see the module docstring)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    axes: Literal["batch_seq", "n"]
    form: FormName
    params: dict[str, float]
    reason: str = Field(description="why this form: its leave-one-out error vs the others")
    scaling: FeatureScaling
    candidates: list[CandidateFit]
    points: list[ModelPoint]
    held_out: list[ModelPoint] = Field([], description="predicted by the model fitted without "
                                       "them vs measured (the judgement; see "
                                       "``fitted_with_held_out``)")
    floor_left: bool = Field(description="the fitted points reach the work regime")
    floor_note: str
    gemm_rate: Rate | None = Field(None, description="FLOP/s ceiling used as a bound")
    warnings: list[str] = []
    sides: SidesModel | None = Field(None, description="GPU: the step as host issue time "
                                     "and device busy time; when present it is the model "
                                     "(``form`` is then the best one-sided fit, kept beside)")
    fitted_with_held_out: bool = Field(False, description="after the held-out shapes judged "
                                       "the model (``held_out`` keeps that judgement), its "
                                       "parameters were refitted over them too: it predicts "
                                       "from every shape measured")

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, raw: Any) -> Any:
        """A model stored by an older afford: its one-axis candidates (``power``,
        ``floor_power``: the throughput law's forms, which stays as the last fallback) and
        its fitted ``ranges`` (the measured range is the one judge of extrapolation,
        :func:`beyond_measured`) are dropped (:func:`upgrade_one_axis`)."""
        if not isinstance(raw, dict):
            return raw
        raw = {k: v for k, v in raw.items() if k != "ranges"}
        cands = raw.get("candidates")
        if isinstance(cands, list) and any(isinstance(c, dict) and c.get("form") in
                                           ONE_AXIS_FORMS for c in cands):
            try:
                raw = upgrade_one_axis(raw)
            except (TypeError, KeyError, AttributeError, ValueError, ZeroDivisionError):
                return raw  # too malformed to upgrade: validation says what is wrong
        return raw

    @property
    def loo_rel_errors(self) -> list[float] | None:
        return self.chosen.loo_rel_errors

    @property
    def chosen(self) -> CandidateFit:
        return next(c for c in self.candidates if c.form == self.form)

    @property
    def used(self) -> str:
        """The model the predictions come from: ``sides`` or the one-sided form."""
        return "sides" if self.sides is not None else self.form

    def held_out_errors(self) -> list[float]:
        return [p.rel_error for p in self.held_out]

    def describe(self) -> str:
        if self.sides is not None:
            return self.sides_text()
        p = self.params
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


def upgrade_one_axis(raw: dict) -> dict:
    """A stored model without its one-axis candidates. Where one was the chosen form, the
    remaining candidate with the smallest worst leave-one-out error answers, its points'
    and held-out shapes' predictions computed again from it (a two-sided model's stay:
    they are the two sides'), and the model's warnings say so."""
    cands = [c for c in raw["candidates"] if c.get("form") not in ONE_AXIS_FORMS]
    out = dict(raw, candidates=cands)
    if raw["form"] not in ONE_AXIS_FORMS or not cands:
        return out
    best = min(cands, key=lambda c: max((abs(e) for e in c.get("loo_rel_errors") or []),
                                        default=math.inf))
    out.update(form=best["form"], params=best["params"], warnings=[
        *raw.get("warnings", []), f"upgraded on load: the one-axis form {raw['form']} an older "
        f"afford chose is no longer fitted; {best['form']} (the smallest worst leave-one-out "
        "error of the rest) answers, its held-out errors computed again"])
    if raw.get("sides") is None:
        scaling = FeatureScaling.model_validate(raw["scaling"])
        loo = best.get("loo_rel_errors") or []
        out["points"] = [_repredict(p, best, scaling, loo[i] if i < len(loo) else None)
                         for i, p in enumerate(raw["points"])]
        out["held_out"] = [_repredict(p, best, scaling, None) for p in raw.get("held_out", [])]
    return out


def _repredict(p: dict, cand: dict, scaling: FeatureScaling, loo: float | None) -> dict:
    feats = scaling.features(batch=p.get("batch"), seq=p.get("seq"), n=p.get("n"))
    pred = evaluate_form(cand["form"], cand["params"], feats)
    return dict(p, predicted_seconds=pred, rel_error=pred / p["measured_seconds"] - 1.0,
                loo_rel_error=loo)


class TimeVerdict(BaseModel):
    """OK, REMEASURE (measure the listed points once more), NOISY (still after that), MISSED
    (a judged held-out shape beyond tolerance whose re-measurement reproduced: the model's
    error, named in ``reasons``) or UNJUDGED. OK only when every judged held-out shape
    passed: a verdict built OK with a failed held-out shape, or stored so by an older
    afford, is MISSED (:meth:`_upgrade`)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    label: Literal["OK", "REMEASURE", "NOISY", "MISSED", "UNJUDGED"] = Field(
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

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, raw: Any) -> Any:
        """OK with a failed held-out shape is MISSED, its reasons naming each shape and its
        error (the misses' lines)."""
        if not isinstance(raw, dict) or raw.get("label") != "OK":
            return raw
        failed, misses, reasons = (raw.get(k) or [] for k in ("failed_held_out",
                                                              "model_misses", "reasons"))
        if not all(isinstance(x, list) for x in (failed, misses, reasons)) or \
                not (failed or misses):
            return raw  # nothing failed, or malformed: validation says what is wrong
        misses = misses or [f"held-out shape {i}: beyond the tolerance" for i in failed]
        return dict(raw, label="MISSED", reasons=[*reasons, *misses])


# --- Reading a stored model at a shape (plans, `afford size`, reports) ----------------------

MEASURED_AXES = ("batch", "seq", "n", "tokens")


class TimePrediction(BaseModel):
    """A stored model's warm-step seconds at one shape: the band a process may see where the
    host can bound the step, which side bounds it, and whether the shape lies beyond every
    shape the certificate measured for this model (fitted and held-out alike)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    seconds: float
    low: float | None = Field(None, description="the band's low end (None: a point)")
    high: float | None = Field(None, description="the band's high end")
    regime: Literal["device", "host"] | None = Field(None, description="two-sided models: "
                                                     "the side that bounds the step")
    device_busy: float | None = Field(None, description="two-sided models: the device's "
                                      "busy time there")
    tokens: float | None = Field(None, description="B*s at the shape (batch_seq models)")
    extrapolated: bool = Field(description="beyond the measured range on some axis")
    beyond: list[str] = Field([], description="each axis beyond it, e.g. 'batch 128 > 64'")

    @property
    def band(self) -> tuple[float, float] | None:
        return None if self.low is None else (self.low, self.high)


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
    words: ``["batch 128 > 64", "tokens 262144 > 131072"]``; empty inside. The one judge of
    "extrapolated" (a model being fitted has no held-out shapes yet: there it is the fitted
    range)."""
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
    """The model's warm step at (batch, seq) (or at n for a one-axis model): the two sides
    where measured (with the band where the host can bound the step), else the chosen
    one-sided form; marked extrapolated beyond the measured range. ValueError when the shape
    lacks the model's axes or the model gives no positive finite time there."""
    feats = model.scaling.features(batch=batch, seq=seq, n=n)
    tokens = feats["tokens"]
    side = model.sides.predict(feats, tokens, seq) if model.sides is not None else None
    seconds = side.seconds if side is not None else evaluate_form(model.form, model.params,
                                                                 feats)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"the {model.used} model gives {seconds!r} s at batch={batch}, "
                         f"seq={seq}, n={n}")
    at = tokens if model.axes == "batch_seq" else None
    beyond = beyond_measured(model, batch=batch, seq=seq, n=n, tokens=at)
    low, high = side.band if side is not None and side.band is not None else (None, None)
    return TimePrediction(seconds=seconds, low=low, high=high,
                          regime=side.regime if side else None,
                          device_busy=side.device_busy if side else None, tokens=at,
                          extrapolated=bool(beyond), beyond=beyond)

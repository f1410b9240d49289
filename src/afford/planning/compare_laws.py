"""Cross-device reproduction: does box A's law describe box B, within a tolerance stated
before B's numbers were read? (docs/DESIGN.md section 3, rule 7.)

The order is the point, and :func:`compare_files` reads top to bottom in it:

1. the tolerance is parsed (a bad one fails before anything is read);
2. certificate A is loaded;
3. the result is created (:class:`Stated`, frozen) holding the tolerance and A's laws;
4. only then is certificate B loaded, and :func:`judge` checks B's measured points against
   the stated result. ``judge`` takes no tolerance argument: it can only use the one stated.

For each law of A (one per workload and dtype mode), A's model predicts each of B's
resident, measured points of the same workload, mode and fixed shape; the error is
``predicted / measured - 1`` (the sign convention of a law's residuals), and the law
REPRODUCES when every point is within the tolerance. A and B are never pooled: no law is
fitted here, B's own law is not used, and a point of A is never a point of B.

The verdict words: REPRODUCES (A's laws describe B within the tolerance), DOES NOT REPRODUCE
(they do not), NOT COMPARED (no law of A could be checked against B: nothing is said either
way). A certificate whose time verdict is NOISY is named with its reasons beside any verdict:
a REPRODUCES between step times that could not be trusted says little.

A's model is its step-time model where A has one (it predicts every measured shape of B, the
sweep's and the time design's, at its batch and sequence), else its throughput law (the
sweep's points, one axis). With the step-time model, a point that A's model places on the
launch floor (predicted under ``WORK_OVER_FLOOR`` = 2x A's floor, its smallest measured
step: the floor regime as A's time verdict defines it) is judged against A's floor
tolerance (``floor_tolerance``, 50 %), not ``--tol``: the floor's level differs from
process to process on one device, by far more than a work-regime tolerance, even between two
certificates of one machine, and A's certificate states that tolerance; the tolerance of the
work regime is ``--tol``. Both are fixed before B is read.

Where A measured the very shape B measured, A's statement about it is its measurement, not
its model: the prediction is A's median there (MEASURED), the model only where A did not
measure (FITTED). So a certificate compared with itself agrees at every shape, and two runs
of one box are compared measurement to measurement where they overlap; a held-out shape the
model misses (its error is in A's certificate, and in its warnings) does not make a box fail
to reproduce its own measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.core.errors import InputError
from afford.core.provenance import Tagged, fitted, measured, module, run_label
from afford.core.units import UnitError, parse_fraction
from afford.figures.time_figures import noisy_reasons, verdict_label
from afford.fit.time.time_fit import WORK_OVER_FLOOR
from afford.schema.cert import Certificate, WorkloadResult, load_certificate
from afford.schema.laws import ThroughputLaw
from afford.schema.point import Point
from afford.schema.time_law import StepTimeModel, predict_at

COMPARE_SCHEMA = "afford.compare/1"
REPRODUCES, NOT_REPRODUCED, NOT_COMPARED = "REPRODUCES", "DOES NOT REPRODUCE", "NOT COMPARED"
FLOOR_TOLERANCE = 0.50  # a floor point's tolerance when A's certificate states none
Verdict = Literal["REPRODUCES", "DOES NOT REPRODUCE", "NOT COMPARED"]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid",
                              populate_by_name=True)


class CertRef(_Frozen):
    path: str
    device: str
    started_at: datetime
    torch: str


class LawRef(_Frozen):
    """One of A's laws, whole, with the fixed shape it was measured at."""

    workload: str
    mode: str
    fixed_shape: dict[str, int]
    law: ThroughputLaw | None = None
    time: StepTimeModel | None = Field(None, description="A's step-time model: used when set")
    batch_key: str | None = None
    seq_key: str | None = None
    floor_tolerance: float = FLOOR_TOLERANCE
    floor_seconds: float | None = Field(None, description="A's floor: its smallest warm step")
    measured_at: dict[str, float] = Field({}, description="A's measured median step at each "
                                          "shape A measured (B x s), stated with the model")
    description: str


class Stated(_Frozen):
    """The comparison as it stands before B is read: the tolerance and A's laws."""

    schema_id: str = Field(COMPARE_SCHEMA, alias="schema")
    tolerance: float
    tolerance_text: str
    a: CertRef
    laws: list[LawRef]
    a_noisy: list[str] = Field([], description="why A's certificate is NOISY (empty: it is "
                               "not): its laws rest on step times it could not trust")


class PointCheck(_Frozen):
    x: float
    shape: str | None = Field(None, description="B x s (the step-time model's points)")
    floor: bool = Field(False, description="on A's launch floor: judged at its floor "
                        "tolerance")
    measured: Tagged
    predicted: Tagged
    error: Tagged
    within: bool


class LawCheck(_Frozen):
    workload: str
    mode: str
    law: str
    points: list[PointCheck]
    worst: Tagged | None
    verdict: Verdict
    note: str = ""


class Comparison(Stated):
    b: CertRef
    checks: list[LawCheck]
    verdict: Verdict
    b_noisy: list[str] = Field([], description="why B's certificate is NOISY (empty: it is "
                               "not): its measured points are not to be trusted to the "
                               "tolerance")

    @property
    def noisy(self) -> bool:
        return bool(self.a_noisy or self.b_noisy)


def parse_tolerance(text: str) -> float:
    """``"5%"`` or ``"0.05"`` -> 0.05; InputError unless 0 < tol < 1."""
    try:
        tol = parse_fraction(text)
    except UnitError as exc:
        raise InputError(f"--tol {text!r}: {exc}") from None
    if not 0.0 < tol < 1.0:
        raise InputError(f"--tol {text!r}: the tolerance must be above 0 and below 100%")
    return tol


def _ref(cert: Certificate, path: str) -> CertRef:
    e = cert.environment
    return CertRef(path=path, device=e.device_name, started_at=e.started_at,
                   torch=e.torch_version)


def fixed_shape(r: WorkloadResult, also: tuple[str | None, ...] = ()) -> dict[str, int]:
    """The shape without the swept dimension (the same at every point of a sweep), and
    without the keys in ``also`` (the time design's batch)."""
    shapes = [p.shape for p in r.points if p.shape]
    base = shapes[0] if shapes else {}
    return {k: v for k, v in sorted(base.items()) if k != r.sweep_param and k not in also}


def _law_ref(a: Certificate, r: WorkloadResult) -> LawRef | None:
    t = r.time
    if t is not None and t.model is not None:
        floor_tol = a.time_verdict.floor_tolerance if a.time_verdict else FLOOR_TOLERANCE
        return LawRef(workload=r.name, mode=r.mode,
                      fixed_shape=fixed_shape(r, (t.batch_key, t.seq_key)), law=r.law,
                      time=t.model, batch_key=t.batch_key, seq_key=t.seq_key,
                      floor_tolerance=floor_tol, floor_seconds=t.floor_seconds,
                      measured_at={label: p.median_seconds for p in
                                   [*r.points, *r.design_points] if p.usable
                                   and (label := _shape_label(t.model.axes, t.batch_key,
                                                              t.seq_key, p)) is not None},
                      description=f"step-time model {t.model.describe()}")
    if r.law is not None:
        return LawRef(workload=r.name, mode=r.mode, fixed_shape=fixed_shape(r), law=r.law,
                      description=r.law.describe())
    return None


def state(a: Certificate, a_path: str, tolerance: float, tolerance_text: str) -> Stated:
    """The result before B exists: the tolerance and every law of A (its step-time model
    where it has one)."""
    laws = [ref for ref in (_law_ref(a, r) for r in a.workloads) if ref is not None]
    if not laws:
        raise InputError(f"{a_path}: certificate A has no law to test (no workload has two "
                         "resident points)")
    return Stated(tolerance=tolerance, tolerance_text=tolerance_text, a=_ref(a, a_path),
                  laws=laws, a_noisy=noisy_reasons(a) or _noisy_label(a))


def _check_point(law: LawRef, r: WorkloadResult, x: int, secs: float, tol: float,
                 run: str) -> PointCheck:
    pred, extra = law.law.predict(x)
    err = pred / secs - 1.0
    return PointCheck(
        x=float(x),
        measured=measured(secs, "s", f"B: {r.name} {r.mode} {r.sweep_param}={x}, {run}"),
        predicted=fitted(pred, "s", f"A's law: {law.description}", extrapolated=extra),
        error=module(err, "ratio", "predicted by A's law / measured on B - 1"),
        within=abs(err) <= tol)


def _axes(axes: str, batch_key: str | None, seq_key: str | None, p: Point
          ) -> tuple[float | None, float | None, float | None]:
    """(batch, seq, n) of a point as a step-time model reads shapes."""
    if axes == "n":
        return None, None, float(p.value)
    batch = p.batch if p.batch is not None else p.shape.get(batch_key or "")
    seq = p.seq if p.seq is not None else p.shape.get(seq_key or "")
    return (None if batch is None else float(batch)), (None if seq is None else float(seq)), None


def _shape_label(axes: str, batch_key: str | None, seq_key: str | None, p: Point
                 ) -> str | None:
    batch, seq, n = _axes(axes, batch_key, seq_key, p)
    if axes == "n":
        return f"n={n:g}"
    return None if batch is None or seq is None else f"{batch:g} x {seq:g}"


def _time_axes(law: LawRef, p: Point) -> tuple[float | None, float | None, float | None]:
    """(batch, seq, n) of one of B's points as A's step-time model reads shapes."""
    return _axes(law.time.axes, law.batch_key, law.seq_key, p)


def _check_time_point(law: LawRef, r: WorkloadResult, p: Point, tol: float,
                      run: str) -> PointCheck | None:
    m = law.time
    batch, seq, n = _time_axes(law, p)
    if m.axes == "batch_seq" and (batch is None or seq is None):
        return None
    label = f"{batch:g} x {seq:g}" if m.axes == "batch_seq" else f"n={n:g}"
    if label in law.measured_at:  # A measured this shape: its measurement is its statement
        pred = law.measured_at[label]
        stated = measured(pred, "s", f"A measured {label} (its median over children)")
        how = "A's measurement / B's - 1"
    else:
        got = predict_at(m, batch=batch, seq=seq, n=n)
        pred = got.seconds
        stated = fitted(pred, "s", f"A's {law.description}", extrapolated=got.extrapolated)
        how = "predicted by A's model / measured on B - 1"
    floor = law.floor_seconds is not None and pred < WORK_OVER_FLOOR * law.floor_seconds
    err = pred / p.median_seconds - 1.0
    return PointCheck(
        x=float(p.value), shape=label, floor=floor,
        measured=measured(p.median_seconds, "s", f"B: {r.name} {r.mode} {label} ({p.role}), "
                          f"{run}"),
        predicted=stated, error=module(err, "ratio", how),
        within=abs(err) <= (max(tol, law.floor_tolerance) if floor else tol))


def _check_law(law: LawRef, b: Certificate, tol: float) -> LawCheck:
    r = next((w for w in b.workloads if w.name == law.workload and w.mode == law.mode), None)
    head = dict(workload=law.workload, mode=law.mode, law=law.description)
    if r is None:
        return LawCheck(**head, points=[], worst=None, verdict=NOT_COMPARED,
                        note=f"B has no {law.workload} ({law.mode}) workload")
    b_fixed = fixed_shape(r, (law.batch_key, law.seq_key) if law.time is not None else ())
    if b_fixed != law.fixed_shape:
        return LawCheck(**head, points=[], worst=None, verdict=NOT_COMPARED,
                        note=f"shapes differ: A {law.fixed_shape}, B {b_fixed}")
    run = run_label(b)
    points = [*r.points, *r.design_points] if law.time is not None else r.points
    if law.time is not None:
        checks = [c for c in (_check_time_point(law, r, p, tol, run) for p in points
                              if p.usable) if c is not None]
    else:
        checks = [_check_point(law, r, p.value, p.median_seconds, tol, run) for p in points
                  if p.usable]
    if not checks:
        return LawCheck(**head, points=[], worst=None, verdict=NOT_COMPARED,
                        note="B has no resident measured point of this workload")
    worst = max(checks, key=lambda c: abs(c.error.value))
    skipped = len(points) - len(checks)
    notes = [f"{skipped} point(s) of B not resident or not measured: not judged"] \
        if skipped else []
    if any(c.floor for c in checks):
        notes.append(f"points on A's launch floor are judged at {law.floor_tolerance:.0%} "
                     "(the floor's level differs from process to process)")
    return LawCheck(**head, points=checks, worst=worst.error,
                    verdict=REPRODUCES if all(c.within for c in checks) else NOT_REPRODUCED,
                    note="; ".join(notes))


def judge(stated: Stated, b: Certificate, b_path: str) -> Comparison:
    """B's points against the stated laws, with the stated tolerance (and no other)."""
    checks = [_check_law(law, b, stated.tolerance) for law in stated.laws]
    judged = [c for c in checks if c.verdict != NOT_COMPARED]
    verdict = NOT_COMPARED if not judged else \
        REPRODUCES if all(c.verdict == REPRODUCES for c in judged) else NOT_REPRODUCED
    return Comparison(**dict(stated), b=_ref(b, b_path), checks=checks,
                      verdict=verdict, b_noisy=noisy_reasons(b) or _noisy_label(b))


def _noisy_label(cert: Certificate) -> list[str]:
    return ["its time verdict is NOISY"] if verdict_label(cert) == "NOISY" else []


def compare_files(a_path: str | Path, b_path: str | Path, tol_text: str, *,
                  load: Callable[[str | Path], Certificate] = load_certificate,
                  on_stated: Callable[[Stated], None] = lambda s: None) -> Comparison:
    """The four steps, in the order that makes the tolerance honest (module docstring)."""
    tolerance = parse_tolerance(tol_text)                  # 1. the tolerance, first
    a = load(a_path)                                       # 2. box A
    stated = state(a, str(a_path), tolerance, tol_text)    # 3. the result: tol + A's laws
    on_stated(stated)
    b = load(b_path)                                       # 4. only now box B's readings
    return judge(stated, b, str(b_path))

"""The step-time model's figures of a certificate, each with its provenance tag: the chosen
form and why, and every held-out shape measured vs predicted (issue 19, items 1 and 4).

Derived from the certificate alone; the renderers (:mod:`afford.report.time_certify`) print
these and nothing else. The "old law" column is the certificate's throughput law (one axis:
the sweep value at the sweep's base batch), scaled by batch / base batch off that batch:
what a reader of the old law alone could predict there.
"""

from __future__ import annotations

from dataclasses import dataclass

from afford.provenance import Tagged, fitted, measured, module
from afford.schema.cert import Certificate, WorkloadResult


@dataclass(frozen=True)
class HeldOutRow:
    shape: str
    role: str
    measured: Tagged
    predicted: Tagged
    error: Tagged
    old_law: Tagged | None
    old_error: Tagged | None
    judged: bool  # in the work regime: judged against the tolerance


@dataclass(frozen=True)
class TimeSummary:
    name: str
    mode: str
    form: str | None
    formula: str | None
    reason: str
    features: str
    held_out: tuple[HeldOutRow, ...]
    verdict: str | None
    reasons: tuple[str, ...]
    floor: Tagged | None
    floor_spread: Tagged | None
    notes: tuple[str, ...]


def _run(cert: Certificate) -> str:
    e = cert.environment
    return f"{e.device_name}, {e.started_at:%Y-%m-%d %H:%M} UTC"


def old_law_at(r: WorkloadResult, batch: float | None, seq: float | None,
               n: float | None) -> tuple[float, bool] | None:
    """The throughput law's seconds at a shape (scaled by batch / base batch), or None."""
    if r.law is None:
        return None
    t = r.time
    x = seq if seq is not None else n
    if x is None:
        return None
    secs, extra = r.law.predict(x)
    if t is not None and t.base_batch and batch is not None and batch != t.base_batch:
        secs *= batch / t.base_batch
        extra = True
    return secs, extra


def summarize_time(cert: Certificate, r: WorkloadResult) -> TimeSummary | None:
    t = r.time
    if t is None:
        return None
    run = _run(cert)
    where = f"{r.name} {r.mode}, {run}"
    notes = list(t.design_notes) + ([t.not_fitted] if t.not_fitted else [])
    if t.extension is not None:
        shapes = ", ".join(f"{b} x {s}" for b, s in t.extension.shapes) or "none"
        notes.append(f"extension measured: {shapes}; left the floor: "
                     f"{'yes' if t.extension.left_floor else 'no'}"
                     + ("; " + "; ".join(t.extension.notes) if t.extension.notes else ""))
    m = t.model
    if m is None:
        return TimeSummary(name=r.name, mode=r.mode, form=None, formula=None,
                           reason=t.not_fitted or "no model", features=t.features,
                           held_out=(), verdict=None, reasons=(), floor=None,
                           floor_spread=None, notes=tuple(notes))
    work = {g.label: g.work for g in t.regimes if g.role.startswith("held_out")}
    rows = []
    for h in m.held_out:
        shape = h.label or ""
        old = old_law_at(r, h.batch, h.seq, h.n)
        rows.append(HeldOutRow(
            shape=shape, role=next((g.role for g in t.regimes if g.label == shape
                                    and g.role.startswith("held_out")), "held_out"),
            measured=measured(h.measured_seconds, "s", f"{where}: median of child medians"),
            predicted=fitted(h.predicted_seconds, "s", f"{where}: {m.describe()}",
                             extrapolated=h.extrapolated),
            error=module(h.rel_error, "ratio", "predicted / measured - 1"),
            old_law=fitted(old[0], "s", f"{where}: {r.law.describe()}", extrapolated=old[1])
            if old else None,
            old_error=module(old[0] / h.measured_seconds - 1.0, "ratio",
                             "old law / measured - 1") if old else None,
            judged=work.get(shape, True)))
    v = t.verdict
    return TimeSummary(
        name=r.name, mode=r.mode, form=m.form, formula=m.describe(), reason=m.reason,
        features=t.features, held_out=tuple(rows), verdict=v.label if v else None,
        reasons=tuple(v.reasons) if v else (),
        floor=measured(t.floor_seconds, "s", f"{where}: smallest warm step")
        if t.floor_seconds else None,
        floor_spread=module(t.floor_spread, "ratio", "worst children spread of the floor "
                            "points") if t.floor_spread is not None else None,
        notes=tuple(notes))


def summarize_times(cert: Certificate) -> list[TimeSummary]:
    return [s for s in (summarize_time(cert, r) for r in cert.workloads) if s is not None]

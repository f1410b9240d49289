"""A certificate's step-time model read at any shape, and its noise verdict.

Plans, ``afford predict`` and reports ask "what is a warm step of this workload at this
shape?". The answer, in order:

1. MEASURED, where the certificate timed that very shape (a sweep point, or a point of the
   step-time design: across, held out, extension);
2. FITTED from the workload's step-time model (:class:`afford.schema.time_law.StepTimeModel`)
   at the shape's (batch, seq), or n for a one-axis model; marked extrapolated beyond every
   shape measured for it (:func:`afford.schema.time_law.predict_at`), its source naming the
   form and its held-out error;
3. FITTED from the throughput law, where only the sweep parameter differs from the
   certified family (a certificate without a step-time model, or a workload with no model);
4. nothing, with the reason (:class:`StepAt.why`).

The model describes the certified model's steps at any batch and sequence; another width,
depth or head count is another model, which the time model does not describe (the memory law
does: :func:`afford.figures.predicted_memory`).

The noise side: a certificate whose time verdict is NOISY (or one of whose workloads' is)
carries its reasons here (:func:`noisy_reasons`), for plans to show first and preflight to
refuse on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from afford.core.errors import InputError
from afford.core.provenance import Tagged, fitted, measured, module, run_label
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.point import Point
from afford.schema.time_law import StepTimeModel, accuracy_at, held_out_accuracy, predict_at
from afford.schema.time_section import WorkloadTime

HF_PREFIX = "hf:"


# --- which workload a run names ----------------------------------------------------------


def split_shape_option(spec: str) -> tuple[str, int | None, int | None]:
    """An ``hf:`` spec without its shape option (``+b8s1024``), and that option's batch and
    seq: ``hf:gpt2+b8s1024+fused`` -> (``hf:gpt2+fused``, 8, 1024). Other names pass
    unchanged. (The full grammar is :func:`afford.workloads.hf_models.parse_spec`; this reads the
    one option that names a shape, without importing a model library.)"""
    if not spec.startswith(HF_PREFIX):
        return spec, None, None
    head, *options = spec.split("+")
    kept, batch, seq = [head], None, None
    for opt in options:
        b, s = _shape_option(opt)
        if b is None and s is None:
            kept.append(opt)
        else:
            batch, seq = b, s
    return "+".join(kept), batch, seq


def _shape_option(opt: str) -> tuple[int | None, int | None]:
    m = re.fullmatch(r"(?:b([1-9][0-9]{0,11}))?(?:s([1-9][0-9]{0,11}))?", opt.strip())
    if not opt or m is None:
        return None, None
    return (int(m.group(1)) if m.group(1) else None, int(m.group(2)) if m.group(2) else None)


def find_workload(cert: Certificate, name: str, mode: str | None = None) -> WorkloadResult:
    """The certificate's result for a workload named as a run file names it: exactly as in
    the certificate (``tinylm``, ``pkg.module:factory``, ``hf:gpt2``), or an ``hf:`` spec
    whose shape option (``+b8s1024``) differs from the certified one's. InputError naming
    what the certificate holds and how to certify the workload when it is not there."""
    exact = [r for r in cert.workloads if r.name == name and (mode is None or r.mode == mode)]
    if exact:
        return exact[0]
    base = split_shape_option(name)[0]
    near = [r for r in cert.workloads if name.startswith(HF_PREFIX)
            and split_shape_option(r.name)[0] == base and (mode is None or r.mode == mode)]
    if len(near) == 1:
        return near[0]
    have = ", ".join(f"{r.name} ({r.mode})" for r in cert.workloads) or "none"
    if len(near) > 1:
        raise InputError(f"workload {name!r} matches several of the certificate's: "
                         + ", ".join(r.name for r in near) + "; name one exactly")
    other = [r.mode for r in cert.workloads if r.name == name]
    if other:
        raise InputError(f"the certificate has no workload {name!r} in mode {mode} (it has "
                         f"{name} in {', '.join(other)}); certify that mode "
                         f"(afford certify -w {name} --mode {mode})")
    raise InputError(f"the certificate has no workload {name!r}"
                     f"{f' in mode {mode}' if mode else ''}; it has: {have}. A plan reads "
                     f"every step time and memory figure from a certificate: certify it first "
                     f"(afford certify -w {name})")


# --- the time section ----------------------------------------------------------------------


def time_of(r: WorkloadResult) -> WorkloadTime | None:
    return r.time


def model_of(r: WorkloadResult) -> StepTimeModel | None:
    return r.time.model if r.time is not None else None


def family_shape(r: WorkloadResult) -> dict[str, int] | None:
    """The certified family's shape (any measured point's)."""
    return next((dict(p.shape) for p in r.points if p.shape), None)


def shape_keys(r: WorkloadResult) -> tuple[str | None, str | None]:
    """(batch key, seq key) of the workload's shape: the time section's, else ``batch`` and
    ``seq`` where the shape has them (else ``None``)."""
    t = r.time
    if t is not None and (t.batch_key or t.seq_key):
        return t.batch_key, t.seq_key
    fam = family_shape(r) or {}
    return ("batch" if "batch" in fam else None), ("seq" if "seq" in fam else None)


def shape_label(shape: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def measured_point(r: WorkloadResult, shape: dict[str, int]) -> Point | None:
    """A usable point (sweep or design) measured at exactly ``shape``; the sweep's first."""
    for p in [*r.points, *r.design_points]:
        if p.usable and p.shape and dict(p.shape) == dict(shape):
            return p
    return None


@dataclass(frozen=True)
class StepAt:
    """A warm step at a shape (``None`` with ``why`` when the certificate cannot say)."""

    step: Tagged | None
    why: str = ""
    point: Point | None = None  # the measured point at this shape, if any
    beyond: tuple[str, ...] = ()  # axes beyond the model's measured range


def _differs(r: WorkloadResult, shape: dict[str, int], free: set[str]) -> list[str]:
    fam = family_shape(r) or {}
    return [f"{k} {shape.get(k)} vs {fam.get(k)}" for k in sorted(set(fam) | set(shape))
            if k not in free and fam.get(k) != shape.get(k)]


def model_step(cert: Certificate, r: WorkloadResult, shape: dict[str, int]) -> StepAt:
    """The step-time model's warm step at ``shape``, FITTED (extrapolated beyond the
    measured range); ``step`` None with the reason where the model cannot answer."""
    m = model_of(r)
    if m is None:
        why = (r.time.not_fitted or "no model was fitted") if r.time is not None else \
            "the certificate has no step-time model (it predates it)"
        return StepAt(None, f"{r.name} {r.mode}: {why}")
    bk, sk = shape_keys(r)
    free = {bk, sk} if m.axes == "batch_seq" else {r.sweep_param}
    diff = _differs(r, shape, {k for k in free if k})
    if diff:
        return StepAt(None, f"the step-time model of {r.name} describes its certified model at "
                      f"any {' and '.join(k for k in free if k)}; the run's shape differs in "
                      f"{', '.join(diff)} (run vs certificate): certify that model")
    if m.axes == "batch_seq":
        if bk not in shape or sk not in shape:
            return StepAt(None, f"the shape {shape_label(shape)} lacks {bk!r} or {sk!r}")
        kw = {"batch": shape[bk], "seq": shape[sk]}
    else:
        kw = {"n": shape[r.sweep_param]}
    try:
        pred = predict_at(m, **kw)
    except ValueError as exc:
        return StepAt(None, f"{r.name} {r.mode}: {exc}")
    src = (f"{r.name} {r.mode} step-time model at {shape_label(kw)}: {m.describe()}; "
           f"{accuracy_at(m, **kw)}; {run_label(cert)}")
    if pred.beyond:
        src += "; beyond the measured range: " + ", ".join(pred.beyond)
    v = r.time.verdict if r.time is not None else None
    if v is not None and v.label != "OK":
        src += f"; time verdict {v.label}"
    return StepAt(fitted(pred.seconds, "s", src, extrapolated=pred.extrapolated),
                  beyond=tuple(pred.beyond))


def step_at(cert: Certificate, name: str, shape: dict[str, int], mode: str | None = None
            ) -> StepAt:
    """A warm step of ``name`` at ``shape``: measured there, else the step-time model, else
    the throughput law where only the sweep parameter differs from the family (module
    docstring)."""
    r = find_workload(cert, name, mode)
    p = measured_point(r, shape)
    if p is not None:
        role = "" if p.role == "sweep" else f" ({p.role} point of the step-time design)"
        return StepAt(measured(p.median_seconds, "s", f"{r.name} {r.mode} at "
                               f"{shape_label(shape)}{role}: median of "
                               f"{len(p.child_medians)} child medians, {run_label(cert)}"),
                      point=p)
    got = model_step(cert, r, shape)
    if got.step is not None:
        return got
    if r.law is not None and r.sweep_param in shape and \
            not _differs(r, shape, {r.sweep_param}):
        secs, extra = r.law.predict(shape[r.sweep_param])
        note = "" if r.time is None else f" ({got.why})"
        return StepAt(fitted(secs, "s", f"{r.name} {r.mode}: throughput law "
                             f"{r.law.describe()}{note}", extrapolated=extra))
    diff = _differs(r, shape, {r.sweep_param})
    why = got.why
    if diff and r.law is not None:
        why += (f"; its throughput law sweeps {r.sweep_param} only, and the shape differs "
                f"from the certificate's {r.name} in {', '.join(diff)} (run vs certificate)")
    elif r.law is None:
        why += "; no throughput law either"
    return StepAt(None, why)


def tokens_at(r: WorkloadResult, shape: dict[str, int]) -> Tagged | None:
    """Tokens one step consumes at ``shape``: batch x seq where the shape has both keys
    (MODULE), else ``None``."""
    bk, sk = shape_keys(r)
    if bk in shape and sk in shape:
        return module(shape[bk] * shape[sk], "tokens", f"{bk} x {sk} of {r.name}'s shape")
    return None


# --- the noise verdict -------------------------------------------------------------------


def verdict_label(cert: Certificate) -> str | None:
    """OK, NOISY or UNJUDGED: the certificate's time verdict, NOISY also when a workload's
    is, UNJUDGED when a workload's model was judged at no held-out shape; ``None`` for a
    certificate without a time section."""
    labels = [r.time.verdict.label for r in cert.workloads
              if r.time is not None and r.time.verdict is not None]
    v = cert.time_verdict
    if v is None and not labels:
        return None
    every = labels + ([v.label] if v is not None else [])
    return "NOISY" if "NOISY" in every else "UNJUDGED" if "UNJUDGED" in every else "OK"


def noisy_reasons(cert: Certificate) -> list[str]:
    """Why the certificate's step times are NOISY (empty when they are not): the
    certificate's own reasons, then each NOISY workload's not already among them. For an
    UNJUDGED certificate: which workloads were judged at no held-out shape."""
    v = cert.time_verdict
    out: list[str] = []
    if verdict_label(cert) == "UNJUDGED":
        return [f"{r.name} ({r.mode}): no held-out shape could be judged" for r in cert.workloads
                if r.time is not None and r.time.verdict is not None
                and r.time.verdict.label == "UNJUDGED"] or list(v.reasons if v else [])
    if v is not None and v.label == "NOISY":
        out.extend(v.reasons or ["the certificate's time verdict is NOISY"])
    for r in cert.workloads:
        w = r.time.verdict if r.time is not None else None
        if w is None or w.label != "NOISY":
            continue
        mine = [f"{r.name} ({r.mode}): {x}" for x in (w.reasons or ["time verdict NOISY"])]
        out.extend(x for x in mine if x not in out)
    return out


def noisy_rule(cert: Certificate) -> str:
    v = cert.time_verdict
    return v.rule if v is not None else ""


def time_warnings(cert: Certificate) -> list[str]:
    """The certificate's warnings (first, when it is partial, what it lacks), then its
    models' and unresolved verdicts' (REMEASURE: measured once, never re-measured), each
    once."""
    out = [f"the certificate is PARTIAL (certify exited 3): {'; '.join(cert.failures)}"] \
        if cert.status == "partial" else []
    context = _in_context(cert)
    out += [context.get(w, w) for w in cert.warnings]
    for r in cert.workloads:
        t = r.time
        if t is None:
            continue
        if t.model is not None:
            out.extend(f"{r.name} ({r.mode}) step-time model: {w}" for w in t.model.warnings)
        if t.verdict is not None and t.verdict.label == "REMEASURE":
            out.append(f"{r.name} ({r.mode}): time verdict REMEASURE, never re-measured: "
                       + "; ".join(t.verdict.reasons))
    return list(dict.fromkeys(out))


def _in_context(cert: Certificate) -> dict[str, str]:
    """Sweep notes the step-time stage puts in context, as the certificate's warning text
    -> the text plans and predictions print. Where a step-time model answers, the sweep's
    throughput-law notes are that law's, not the predictions'; a sweep point on the launch
    floor is judged by the floor's spread (a launch-bound step varies from process to
    process), not by the 5 % of a point's precision notes, and they say so, with the
    verdict."""
    out: dict[str, str] = {}
    v = cert.time_verdict
    for r in cert.workloads:
        t = r.time
        if t is None:
            continue
        head = f"{r.name} ({r.mode}): "
        if r.law is not None and t.model is not None:
            for w in r.law.warnings:
                out[head + w] = (head + w + " (the sweep's throughput law: plans and "
                                 "predictions read the step-time model instead)")
        floor = {x.label for x in t.regimes if x.role == "sweep" and not x.work}
        if v is None or not floor:
            continue
        for p in r.points:
            if f"{p.batch} x {p.seq}" in floor:
                for w in p.quality_notes(r.sweep_param):
                    out[head + w] = (head + w + f" (a point on the launch floor: the time "
                                     f"verdict judges it by the floor's spread, "
                                     f"{v.floor_tolerance:.0%}, and says {v.label})")
    return out


# --- the model for reports ---------------------------------------------------------------


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
    """One workload's step-time model, every figure tagged: the chosen form and why, the
    held-out shapes measured vs predicted (the throughput law beside them), the verdict."""

    name: str
    mode: str
    form: str | None
    formula: str | None
    reason: str
    features: str
    held_out: tuple[HeldOutRow, ...]
    held_out_median: Tagged | None
    held_out_worst: Tagged | None
    verdict: str | None
    reasons: tuple[str, ...]
    floor: Tagged | None
    floor_spread: Tagged | None
    notes: tuple[str, ...]


def old_law_at(r: WorkloadResult, batch: float | None, seq: float | None,
               n: float | None) -> tuple[float, bool] | None:
    """The throughput law's seconds at a shape, scaled by batch / base batch off the sweep's
    batch (what a reader of the one-axis law alone could predict there), or None."""
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
    """The workload's :class:`TimeSummary`; ``None`` without a time section."""
    t = r.time
    if t is None:
        return None
    where = f"{r.name} {r.mode}, {run_label(cert)}"
    notes = list(t.design_notes) + ([t.not_fitted] if t.not_fitted else [])
    if t.extension is not None:
        shapes = ", ".join(f"{b} x {s}" for b, s in t.extension.shapes) or "none"
        notes.append(f"extension measured: {shapes}; left the floor: "
                     f"{'yes' if t.extension.left_floor else 'no'}"
                     + ("; " + "; ".join(t.extension.notes) if t.extension.notes else ""))
    m = t.model
    v = t.verdict
    floor = measured(t.floor_seconds, "s", f"{where}: smallest warm step measured") \
        if t.floor_seconds else None
    spread = module(t.floor_spread, "ratio", "worst children spread of the floor points") \
        if t.floor_spread is not None else None
    if m is None:
        return TimeSummary(name=r.name, mode=r.mode, form=None, formula=None,
                           reason=t.not_fitted or "no model", features=t.features,
                           held_out=(), held_out_median=None, held_out_worst=None,
                           verdict=v.label if v else None,
                           reasons=tuple(v.reasons) if v else (), floor=floor,
                           floor_spread=spread, notes=tuple(notes))
    notes.append(m.floor_note)
    notes.extend(m.warnings)
    roles = {g.label: g for g in t.regimes if g.role.startswith("held_out")}
    rows = []
    for h in m.held_out:
        shape = h.label or ""
        old = old_law_at(r, h.batch, h.seq, h.n)
        g = roles.get(shape)
        rows.append(HeldOutRow(
            shape=shape, role=g.role if g else "held_out",
            measured=measured(h.measured_seconds, "s", f"{where}: median of child medians"),
            predicted=fitted(h.predicted_seconds, "s", f"{where}: {m.describe()}",
                             extrapolated=h.extrapolated),
            error=module(h.rel_error, "ratio", "predicted / measured - 1"),
            old_law=fitted(old[0], "s", f"{where}: {r.law.describe()}", extrapolated=old[1])
            if old else None,
            old_error=module(old[0] / h.measured_seconds - 1.0, "ratio",
                             "old law / measured - 1") if old else None,
            judged=g.work if g else True))
    n, med, worst = held_out_accuracy(m)
    what = f"over {n} held-out shapes (measured, never fitted)"
    return TimeSummary(
        name=r.name, mode=r.mode, form=m.form, formula=m.describe(), reason=m.reason,
        features=t.features, held_out=tuple(rows),
        held_out_median=module(med, "ratio", f"median |predicted / measured - 1| {what}")
        if med is not None else None,
        held_out_worst=module(worst, "ratio", f"max |predicted / measured - 1| {what}")
        if worst is not None else None,
        verdict=v.label if v else None, reasons=tuple(v.reasons) if v else (),
        floor=floor, floor_spread=spread, notes=tuple(notes))


def summarize_times(cert: Certificate) -> list[TimeSummary]:
    return [s for s in (summarize_time(cert, r) for r in cert.workloads) if s is not None]

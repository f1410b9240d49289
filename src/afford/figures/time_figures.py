"""A certificate's step-time model read at any shape, and its noise verdict.

Plans, ``afford predict`` and reports ask "what is a warm step of this workload at this
shape?". The answer, in order:

1. MEASURED, where the certificate timed that very shape (a sweep point, or a point of the
   step-time design: across, held out, extension);
2. FITTED from the workload's step-time model (:class:`afford.schema.time_law.StepTimeModel`)
   at the shape's (batch, seq), or n for a one-axis model: :func:`afford.schema.time_law.
   predict_at`, the one function that reads the model; marked extrapolated beyond every
   shape measured for it, its source naming the form and its held-out error;
3. FITTED from the throughput law, where only the sweep parameter differs from the
   certified family (a certificate without a step-time model, or a workload with no model);
4. nothing, with the reason (:class:`StepAt.why`).

This is the one fallback path: :func:`step_seconds` (a sweep value) and every
plan, prediction and report read a step through :func:`step_at`. Where the host can bound
the step (a two-sided model says so at the shape), the figure carries a band (``low`` and
``high`` on :class:`~afford.core.provenance.Tagged`): the range a process may see, the floor
differing from process to process. A measured point gets it too: its median is one
reading of that range, its children's spread a part of it.

The model describes the certified model's steps at any batch and sequence; another width,
depth or head count is another model, which the time model does not describe (the memory law
does: :func:`afford.figures.memory_figures.predicted_memory`).

The noise side: a certificate whose time verdict is NOISY (or one of whose workloads' is)
carries its reasons here (:func:`noisy_reasons`), for plans to show first and preflight to
refuse on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from afford.core.errors import InputError
from afford.core.provenance import Tagged, fitted, measured, module, run_label
from afford.figures.cert_lookup import shape_at, workload
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.point import Point
from afford.schema.time_accuracy import accuracy_at, held_out_accuracy
from afford.schema.time_law import StepTimeModel, TimePrediction, predict_at
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
    prediction: TimePrediction | None = None  # the model's answer, where it gave the step


def _differs(r: WorkloadResult, shape: dict[str, int], free: set[str]) -> list[str]:
    fam = family_shape(r) or {}
    return [f"{k} {shape.get(k)} vs {fam.get(k)}" for k in sorted(set(fam) | set(shape))
            if k not in free and fam.get(k) != shape.get(k)]


def _model_axes(r: WorkloadResult, m: StepTimeModel, shape: dict[str, int]
                ) -> tuple[dict[str, int] | None, str]:
    """The model's axes at ``shape`` (``{"batch": .., "seq": ..}`` or ``{"n": ..}``), or
    None with why the model cannot answer there."""
    bk, sk = shape_keys(r)
    free = {bk, sk} if m.axes == "batch_seq" else {r.sweep_param}
    diff = _differs(r, shape, {k for k in free if k})
    if diff:
        return None, (f"the step-time model of {r.name} describes its certified model at "
                      f"any {' and '.join(k for k in free if k)}; the run's shape differs in "
                      f"{', '.join(diff)} (run vs certificate): certify that model")
    if m.axes == "n":
        return {"n": shape[r.sweep_param]}, ""
    if bk not in shape or sk not in shape:
        return None, f"the shape {shape_label(shape)} lacks {bk!r} or {sk!r}"
    return {"batch": shape[bk], "seq": shape[sk]}, ""


def model_step(cert: Certificate, r: WorkloadResult, shape: dict[str, int]) -> StepAt:
    """The step-time model's warm step at ``shape``, FITTED (extrapolated beyond the
    measured range; with its band where the host can bound the step); ``step`` None with
    the reason where the model cannot answer."""
    m = model_of(r)
    if m is None:
        why = (r.time.not_fitted or "no model was fitted") if r.time is not None else \
            "the certificate has no step-time model (it predates it)"
        return StepAt(None, f"{r.name} {r.mode}: {why}")
    kw, why = _model_axes(r, m, shape)
    if kw is None:
        return StepAt(None, why)
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
    step = fitted(pred.seconds, "s", src, extrapolated=pred.extrapolated)
    return StepAt(step.with_band(*pred.band) if pred.band else step, beyond=tuple(pred.beyond),
                  prediction=pred)


def measured_step(cert: Certificate, r: WorkloadResult, shape: dict[str, int], p: Point
                  ) -> StepAt:
    """The point measured at ``shape``, MEASURED; where the host can bound the step there
    (the model's band at the shape), with a band holding that band, the point's own
    children and its median: on the floor one process's reading is not what another's
    loop will see."""
    where = f"{r.sweep_param}={p.value}" if p.role == "sweep" else \
        f"at {shape_label(shape)} ({p.role} point of the step-time design)"
    src = (f"{r.name} {r.mode} {where}: median of {len(p.child_medians)} child medians, "
           f"{run_label(cert)}")
    step = measured(p.median_seconds, "s", src)
    band = model_step(cert, r, shape).step
    if band is None or band.band is None:
        return StepAt(step, point=p)
    readings = [p.median_seconds, *p.child_medians]
    lo, hi = min(band.low, *readings), max(band.high, *readings)
    step = step.model_copy(update={"source": src + (
        f"; host-bound here: a band of {lo * 1e3:.4g}-{hi * 1e3:.4g} ms, the step-time "
        f"model's band at this shape (the host floor: {model_of(r).sides.host.band_words()}) "
        f"and this point's {len(p.child_medians)} children")})
    return StepAt(step.with_band(lo, hi), point=p)


def step_at(cert: Certificate, name: str, shape: dict[str, int], mode: str | None = None
            ) -> StepAt:
    """A warm step of ``name`` at ``shape``: measured there, else the step-time model, else
    the throughput law where only the sweep parameter differs from the family (module
    docstring)."""
    r = find_workload(cert, name, mode)
    p = measured_point(r, shape)
    if p is not None:
        return measured_step(cert, r, shape, p)
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


def step_seconds(cert: Certificate, name: str, value: int, mode: str | None = None
                 ) -> Tagged | None:
    """Warm step seconds at sweep value ``value``: the one fallback path,
    :func:`step_at`, at the workload's shape there (measured,
    else the step-time model, else the throughput law; a band where the host can bound the
    step); ``None`` where none answers."""
    r = workload(cert, name, mode)
    shape = shape_at(cert, name, value, mode) or {r.sweep_param: int(value)}
    return step_at(cert, r.name, shape, r.mode).step


def tokens_at(r: WorkloadResult, shape: dict[str, int]) -> Tagged | None:
    """Tokens one step consumes at ``shape``: batch x seq where the shape has both keys
    (MODULE), else ``None``."""
    bk, sk = shape_keys(r)
    if bk in shape and sk in shape:
        return module(shape[bk] * shape[sk], "tokens", f"{bk} x {sk} of {r.name}'s shape")
    return None


# --- the noise verdict -------------------------------------------------------------------


LABEL_ORDER = ("NOISY", "MISSED", "UNJUDGED", "OK")  # the worst first


def verdict_label(cert: Certificate) -> str | None:
    """The certificate's time verdict, the worst of its own and its workloads' (NOISY, then
    MISSED: a held-out shape the model missed, reproduced; then UNJUDGED: a model judged at
    no held-out shape; then OK); ``None`` for a certificate without a time section."""
    labels = [r.time.verdict.label for r in cert.workloads
              if r.time is not None and r.time.verdict is not None]
    v = cert.time_verdict
    if v is None and not labels:
        return None
    every = labels + ([v.label] if v is not None else [])
    return next(x for x in LABEL_ORDER if x in every)


def noisy_reasons(cert: Certificate) -> list[str]:
    """Why the certificate's step times are not OK (empty when they are), for its label
    (:func:`verdict_label`): NOISY, the certificate's own reasons, then each NOISY workload's
    not already among them; MISSED, each held-out shape a model missed, with its error;
    UNJUDGED, which workloads were judged at no held-out shape."""
    label = verdict_label(cert)
    v = cert.time_verdict
    if label == "UNJUDGED":
        return _workload_reasons(cert, "UNJUDGED", "no held-out shape could be judged") \
            or list(v.reasons if v else [])
    out = list(v.reasons or ["the certificate's time verdict is NOISY"]) \
        if label == "NOISY" and v is not None and v.label == "NOISY" else []
    if label in ("NOISY", "MISSED"):
        out.extend(x for x in _workload_reasons(cert, label) if x not in out)
    return out


def _workload_reasons(cert: Certificate, label: str, fixed: str = "") -> list[str]:
    """Each workload's reasons whose verdict is ``label`` (``fixed``: one line instead)."""
    out = []
    for r in cert.workloads:
        w = r.time.verdict if r.time is not None else None
        if w is not None and w.label == label:
            why = [fixed] if fixed else (w.reasons or [f"time verdict {label}"])
            out.extend(f"{r.name} ({r.mode}): {x}" for x in why)
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
    throughput_law: Tagged | None
    throughput_error: Tagged | None
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


def throughput_law_at(r: WorkloadResult, batch: float | None, seq: float | None,
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
        law = throughput_law_at(r, h.batch, h.seq, h.n)
        g = roles.get(shape)
        rows.append(HeldOutRow(
            shape=shape, role=g.role if g else "held_out",
            measured=measured(h.measured_seconds, "s", f"{where}: median of child medians"),
            predicted=fitted(h.predicted_seconds, "s", f"{where}: {m.describe()}",
                             extrapolated=h.extrapolated),
            error=module(h.rel_error, "ratio", "predicted / measured - 1"),
            throughput_law=fitted(law[0], "s", f"{where}: {r.law.describe()}",
                                  extrapolated=law[1]) if law else None,
            throughput_error=module(law[0] / h.measured_seconds - 1.0, "ratio",
                                    "throughput law / measured - 1") if law else None,
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

"""GO / NO-GO for a concrete run: every reason, never just the first.

NO-GO when the run's shape is not resident within the budget (or its memory is unknown),
the margin does not cover the startup, the live checkpoints do not fit on disk, a chunk
cannot reach one checkpoint, the target is out of reach within the weeks the run allows, no
step time is known at the run's shape, or the certificate was measured on another device
than the platform's (docs/DESIGN.md section 3, rule 7: devices are never pooled). Warnings
(GO stays GO): an old certificate, another torch version, data not pinned (counts provisional),
figures that fell back to ASSUMED values, an extrapolated step time, and every warning the
certificate carries.

NOISY: a certificate whose step-time verdict is NOISY (or one of whose
workloads' is) measured times it could not reproduce; every plan figure rests on them, so
preflight says NO-GO with the certificate's reasons, unless the user accepts them
(``--accept-noisy``: GO stays possible, the NOISY reasons stay among the warnings).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from afford.core.provenance import Tagged
from afford.core.units import format_bytes, format_duration
from afford.plan.derive import num
from afford.plan.result import ChunkRow, PlanResult, Verdict

OLD_CERT_DAYS = 30  # ASSUMED: drivers, torch and notebook images change about monthly


class Facts(BaseModel):
    """What preflight knows besides the plan: the certificate's age and torch version, this
    environment's torch version, and how many weeks the run allows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cert_age_days: float | None = None
    cert_torch: str | None = None
    here_torch: str | None = None
    max_weeks: Tagged | None = None
    accept_noisy: bool = False


def run_row(plan: PlanResult) -> ChunkRow:
    row = next((r for r in plan.rows if r.is_run), None)
    if row is None:
        raise ValueError("preflight needs a plan made with a run")
    return row


def verdict(plan: PlanResult, facts: Facts) -> Verdict:
    reasons = _noisy(plan, facts) + _device(plan) + _memory(plan) + _startup(plan) + \
        _checkpoints(plan) + _disk(plan) + _target(plan, facts)
    return Verdict(go=not reasons, reasons=tuple(reasons),
                   warnings=tuple(_warnings(plan, facts)), plan=plan)


def noisy_text(plan: PlanResult) -> str:
    """The NOISY verdict in one line: its reasons and the rule they broke."""
    rule = f" (rule: {plan.noisy_rule})" if plan.noisy_rule else ""
    return ("the certificate's step times are NOISY: " + "; ".join(plan.noisy) + rule)


def _noisy(plan: PlanResult, facts: Facts) -> list[str]:
    if plan.time_verdict != "NOISY" or facts.accept_noisy:
        return []
    return [noisy_text(plan) + ". Every figure below rests on them: re-certify on a quiet "
            "host, or pass --accept-noisy to go on them anyway"]


def _where(plan: PlanResult, row: ChunkRow) -> str:
    if plan.run is not None and not plan.run.in_family:
        return f"{row.workload} at " + ", ".join(f"{k}={v}" for k, v in plan.run.shape.items())
    return f"{row.workload} {row.sweep_param}={row.value}"


def _device(plan: PlanResult) -> list[str]:
    if plan.device_matches is not False:
        return []
    return [f"the certificate was measured on {plan.certificate_device}, but platform "
            f"{plan.platform} runs on {plan.platform_device}: afford never pools devices. "
            "Certify on that device (afford certify there), or test whether this "
            "certificate's laws describe it (afford compare)"]


def _memory(plan: PlanResult) -> list[str]:
    row = run_row(plan)
    out = []
    if row.step_seconds is None:
        why = plan.run.step_why if plan.run is not None and plan.run.step_why else \
            "not measured and no throughput law"
        out.append(f"no step time at {_where(plan, row)}: {why}; certify that shape")
    budget = plan.memory.budget_bytes
    if row.excluded:
        out.append(f"the certificate's sweep did not use {row.sweep_param}={row.value}: "
                   f"{row.excluded}")
    if row.fits is None:
        out.append(f"no memory figure at {_where(plan, row)}: not measured and no memory "
                   "law; certify that shape (afford certify --sweep "
                   f"{row.sweep_param}={row.value})")
    elif row.fits_level == "uncertain":
        out.append(f"memory not vouched for: {row.memory_why} "
                   f"({'; '.join(row.memory_reasons)}); measure it: {row.memory_settle}")
    elif not row.fits:
        out.append(f"not resident: projected reserved "
                   f"{format_bytes(num(row.projected_reserved_bytes))} is "
                   f"{num(row.budget_share):.0%} of the budget {format_bytes(num(budget))} "
                   f"({num(plan.memory.fraction):.0%} of the device's memory)"
                   + (f": {row.memory_why}" if row.memory_why else ""))
    return out


def _startup(plan: PlanResult) -> list[str]:
    c = plan.chunk
    if c.covered is not False:
        return []
    return [f"the margin {format_duration(num(c.margin_seconds))} does not cover the startup "
            f"{format_duration(num(c.startup.total_seconds))}: the final save would be cut off "
            "by the session cap; raise the platform's margin"]


def _checkpoints(plan: PlanResult) -> list[str]:
    row, cad = run_row(plan), plan.cadence
    if row.steps_per_chunk is not None and num(row.steps_per_chunk) == 0:
        return [f"a step ({format_duration(num(row.step_seconds))}) is longer than the chunk"]
    if cad is None or cad.reaches_checkpoint is not False or row.steps_per_chunk is None:
        return []  # (no chunk: a platform without a session cap has none to reach)
    need = f"; an overhead budget of {num(cad.min_budget_to_reach):.2%} would reach one" \
        if cad.min_budget_to_reach is not None else ""
    return [f"a chunk of {int(num(row.steps_per_chunk))} steps cannot reach one checkpoint: "
            f"save_every is {int(num(cad.save_every))} steps at the "
            f"{num(cad.overhead_budget):.2%} overhead budget{need}"]


def _disk(plan: PlanResult) -> list[str]:
    d = plan.disk
    if d is None or d.fits is not False:
        return []
    k = int(num(d.live_copies))
    return [f"{k} live checkpoint(s) of {format_bytes(num(d.checkpoint_bytes))} plus the one "
            f"being written do not fit on the disk of {format_bytes(num(d.disk_bytes), False)} "
            f"({int(num(d.copies_fit))} fit)"]


def _target(plan: PlanResult, facts: Facts) -> list[str]:
    t = plan.target
    if t is None:
        return []
    if t.weeks is None:
        return ["the target is out of reach: the weekly quota trains no step"]
    if facts.max_weeks is None or num(t.weeks) <= num(facts.max_weeks):
        return []
    return [f"the target of {int(num(t.target_steps))} steps takes {num(t.weeks):.2f} weeks "
            f"({t.limited_by}), more than the run's max_weeks {num(facts.max_weeks):g}"]


def _warnings(plan: PlanResult, facts: Facts) -> list[str]:
    out = []
    if plan.device_matches is None:
        out.append(f"platform {plan.platform} names no device: the figures are those of "
                   f"{plan.certificate_device}")
    if facts.cert_age_days is not None and facts.cert_age_days > OLD_CERT_DAYS:
        out.append(f"the certificate is {facts.cert_age_days:.0f} days old (> {OLD_CERT_DAYS}): "
                   "drivers and libraries change; re-certify")
    if facts.cert_torch and facts.here_torch and facts.cert_torch != facts.here_torch:
        out.append(f"the certificate was measured with torch {facts.cert_torch}, this "
                   f"environment has torch {facts.here_torch}: step times may differ")
    if plan.run and plan.run.unpinned:
        out.append(f"data not pinned ({', '.join(plan.run.unpinned)}): token counts and the "
                   "target are provisional; pin them with afford pin")
    if plan.time_verdict == "NOISY" and facts.accept_noisy:
        out.append(noisy_text(plan) + " (accepted with --accept-noisy)")
    if plan.time_verdict == "MISSED":
        out.append("the step-time model missed held-out shape(s) beyond its tolerance (its "
                   "error, reproduced): " + "; ".join(plan.noisy))
    row = run_row(plan)
    if row.step_seconds is not None and row.step_seconds.extrapolated:
        out.append(f"the step time at {_where(plan, row)} is extrapolated beyond the "
                   f"measured range ({row.step_seconds.tag.value}: {row.step_seconds.source})")
    if plan.disk is not None and plan.disk.fits is None:
        what = "the platform's disk" if plan.disk.disk_bytes.value is None else \
            "the checkpoint's size"
        out.append(f"checkpoints not checked against the disk: {what} is unknown")
    if facts.max_weeks is None and plan.target is not None:
        out.append("the run states no max_weeks: the time to the target was not checked")
    out.extend(f"assumed: {a}" for a in plan.assumptions)
    out.extend(f"certificate: {w}" for w in plan.certificate_warnings)
    return out

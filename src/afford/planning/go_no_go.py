"""GO / NO-GO for a concrete run: every reason, never just the first.

NO-GO when the run's shape is not resident within the budget (or its memory is unknown),
the margin does not cover the startup, the live checkpoints do not fit on disk, a chunk
cannot reach one checkpoint, the target is out of reach within the weeks the run allows, no
step time is known at the run's shape, or the certificate was measured on another device
than the platform's (docs/DESIGN.md section 3, rule 7: devices are never pooled). Warnings
(GO stays GO): an old certificate, another torch version, data not pinned (counts provisional),
figures that fell back to ASSUMED values, an extrapolated step time, and every warning the
certificate carries.

NOISY: a certificate whose step-time verdict is NOISY (or one of whose workloads' is)
measured times its children could not agree on. A decision that holds across the measured
spread is still a decision: preflight plans the run again at the slow end of the step's
spread (:func:`slow_step`) and says NO-GO only where that flips the decision (a check that
passes at the step fails at its slow end); otherwise GO, the spread stated among the
warnings. Where no slow end is known, or it flips the decision, NO-GO unless the user
accepts the NOISY step (``--accept-noisy``: GO stays possible on the step as measured, the
NOISY reasons and what the slow end would do among the warnings).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from afford.core.provenance import Tagged
from afford.core.units import format_bytes, format_duration
from afford.planning.derive import derive, num
from afford.planning.result import ChunkRow, PlanResult, Verdict

OLD_CERT_DAYS = 30  # ASSUMED: drivers, torch and notebook images change about monthly


class Facts(BaseModel):
    """What preflight knows besides the plan: the certificate's age and torch version, this
    environment's torch version, and how many weeks the run allows."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

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


def verdict(plan: PlanResult, facts: Facts, slow: PlanResult | None = None) -> Verdict:
    """GO or NO-GO with every reason; ``slow``: the same run planned at the slow end of the
    step's measured spread (a NOISY certificate), whose decision is compared (module
    docstring)."""
    checks = _checks(plan, facts)
    noisy, spread = _noisy(plan, facts, checks, slow)
    reasons = noisy + [r for found in checks.values() for r in found]
    return Verdict(go=not reasons, reasons=tuple(reasons),
                   warnings=tuple(spread + _warnings(plan, facts)), plan=plan)


def _checks(plan: PlanResult, facts: Facts) -> dict[str, list[str]]:
    """Every check's reasons for NO-GO, by check (empty where it passes)."""
    return {"device": _device(plan), "memory": _memory(plan), "startup": _startup(plan),
            "checkpoints": _checkpoints(plan), "disk": _disk(plan),
            "target": _target(plan, facts)}


def slow_step(step: Tagged, children: Tagged | None) -> Tagged | None:
    """The slow end of the run's step inside its measured spread: the figure a NOISY
    certificate's decision is checked at. Where the step carries a band (a host-bound
    step: :attr:`Tagged.high`), its high end; else the step x the children's slow-end factor
    (:func:`afford.figures.noise.children_slow_end`: the slowest child's median over the median,
    at the run's point, or the workload's typical factor for a shape no point measured).
    ``None`` where neither is known."""
    if step.high is not None:
        return derive(max(step.high, num(step)), "s", "the slow end of the measured spread: "
                      "the high end of the step's band", step)
    if children is None:
        return None
    return derive(num(step) * max(1.0, num(children)), "s", "the slow end of the measured "
                  "spread: the step x the slowest child's median over the median", step,
                  children)


def noisy_text(plan: PlanResult) -> str:
    """The NOISY verdict in one line: its reasons and the rule they broke."""
    rule = f" (rule: {plan.noisy_rule})" if plan.noisy_rule else ""
    return ("the certificate's step times are NOISY: " + "; ".join(plan.noisy) + rule)


def _noisy(plan: PlanResult, facts: Facts, checks: dict[str, list[str]],
           slow: PlanResult | None) -> tuple[list[str], list[str]]:
    """(reasons, warnings) a NOISY certificate adds: NO-GO where the slow end of the step's
    spread flips a check that passes at the step (or no slow end is known), else GO with the
    spread stated; with ``accept_noisy``, warnings only."""
    if plan.time_verdict != "NOISY":
        return [], []
    if slow is None:
        if facts.accept_noisy:
            return [], [noisy_text(plan) + " (accepted with --accept-noisy)"]
        return [noisy_text(plan) + ". No slow end of the spread is known to check the "
                "decision at: re-certify on a quiet host, or pass --accept-noisy to go on "
                "the step as measured"], []
    flips = [r for k, found in _checks(slow, facts).items() if not checks[k] for r in found]
    step, end = run_row(plan).step_seconds, run_row(slow).step_seconds
    span = (f"the step {format_duration(num(step))} to {format_duration(num(end))} at its "
            f"slow end ({num(end) / num(step):.2f}x: {end.source.split(': ', 1)[-1]})")
    first = f"{plan.noisy[0]}{f' and {len(plan.noisy) - 1} more' if len(plan.noisy) > 1 else ''}"
    if not flips:
        return [], [f"the certificate's step times are NOISY ({first}), and the decision holds "
                    f"across their measured spread: {span}"]
    flipped = (f"the certificate's step times are NOISY ({first}), and the decision flips "
               f"inside their measured spread: at the slow end, " + "; ".join(flips) +
               f" ({span})")
    if facts.accept_noisy:
        return [], [flipped + " (accepted with --accept-noisy)"]
    return [flipped + ". Re-certify on a quiet host, or pass --accept-noisy to go on the "
            "step as measured"], []


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
        why = f" ({'; '.join(row.memory_reasons)})" if row.memory_reasons else ""
        out.append(f"memory not vouched for: {row.memory_why}{why}; measure it: "
                   f"{row.memory_settle}")
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

"""certificate + platform (+ run) -> plan -> verdict: the only place that sequences them.

The certificate is read only through :mod:`afford.figures` (its workloads and points from
:mod:`~afford.figures.cert_lookup`, steps from :mod:`~afford.figures.time_figures`, memory
from :mod:`~afford.figures.memory_figures`, start-up and checkpoint costs from
:mod:`~afford.figures.session_costs`). Where it holds no figure (no probes section yet:
checkpoint write time and size, import time), the plan falls back to an ASSUMED value
whose source says why, and lists the fallback in ``plan.assumptions`` so that preflight
repeats it. Nothing here does I/O: the command line loads the files and passes ``now`` and
this environment's torch version in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from pydantic import BaseModel

from afford.core.errors import InputError
from afford.core.provenance import Tagged, assumed, measured, module, run_label
from afford.figures import cert_lookup, memory_figures, noise, session_costs
from afford.figures import time_figures as ft
from afford.figures.memory_at import MemoryAnswer
from afford.planning import cadence as cadmod
from afford.planning import chunk as chunkmod
from afford.planning import disk as diskmod
from afford.planning import failures as failmod
from afford.planning import quota as quotamod
from afford.planning.derive import derive, num
from afford.planning.go_no_go import Facts, run_row, slow_step, verdict
from afford.planning.result import ChunkRow, PlanResult, RunInfo, StartupComponent, Verdict
from afford.schema.cert import Certificate
from afford.schema.platform import Platform
from afford.schema.run import RunFile

NO_PROBES = "certificate has no probes section; run afford certify with probes"
ASSUMED_IMPORT_SECONDS = 20.0
ASSUMED_PREFLIGHT_SECONDS = 10.0
ASSUMED_FIRST_STEP_SECONDS = 60.0
ASSUMED_WRITE_BYTES_PER_SECOND = 200e6
ASSUMED_WRITE_SECONDS = 60.0
ASSUMED_CHECKPOINT_BYTES_PER_PARAM = 12


@dataclass
class _Gather:
    """What the plan collects on the way: fallbacks taken and notes to show."""

    assumptions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fallback(self, value, unit: str, reason: str) -> Tagged:
        self.assumptions.append(reason)
        return assumed(value, unit, reason)


@dataclass(frozen=True)
class RunShape:
    """The run's shape against the certificate: ``value`` its sweep value, ``shape`` the full
    shape, ``workload`` the certificate's name for it; ``in_family``: it is the certified
    family's shape at that value (only the sweep value may differ), so the figures read at a
    sweep value apply; else the models answer at ``shape``."""

    value: int
    shape: dict[str, int]
    sweep_param: str
    workload: str = ""
    in_family: bool = True

    @property
    def label(self) -> str:
        return ft.shape_label(self.shape)


def run_shape(cert: Certificate, run: RunFile) -> RunShape:
    """The run's sweep value and full shape (value / shape / batch of the run file, or the
    shape option of an ``hf:`` spec, over the certified family's shape); InputError when the
    workload is not in the certificate, or the shape names a dimension it does not have."""
    r = ft.find_workload(cert, run.workload, run.mode)
    param = r.sweep_param
    bk, sk = ft.shape_keys(r)
    want = dict(run.shape or {})
    if run.value is not None:
        want[param] = run.value
    if run.batch is not None:
        if bk is None:
            raise InputError(f"run file {run.name}: batch given, but {r.name}'s shape has no "
                             f"batch dimension (its shape: "
                             f"{ft.shape_label(ft.family_shape(r) or {})})")
        if bk in want and want[bk] != run.batch:
            raise InputError(f"run file {run.name}: batch {run.batch} contradicts "
                             f"{bk}={want[bk]}")
        want[bk] = run.batch
    # an hf: spec's shape option (+b16s2048) fills what the run file leaves out
    _, spec_batch, spec_seq = ft.split_shape_option(run.workload)
    for key, v in ((bk, spec_batch), (sk, spec_seq)):
        if key is not None and v is not None and key not in want:
            want[key] = v
    if param not in want:
        raise InputError(f"run shape {want} lacks the sweep parameter {param!r} of "
                         f"{r.name}: give value (or {param} in shape)")
    family = ft.family_shape(r)
    if family is not None:
        unknown = sorted(set(want) - set(family))
        if unknown:
            raise InputError(f"run file {run.name}: {r.name} has no dimension "
                             f"{', '.join(map(repr, unknown))} (its shape: "
                             f"{ft.shape_label(family)})")
    value = want[param]
    base = cert_lookup.shape_at(cert, r.name, value, r.mode) or {param: value}
    full = {**base, **want}
    return RunShape(value, full, param, r.name, in_family=full == base)


def plan(cert: Certificate, platform: Platform, run: RunFile | None = None, *,
         pins: dict[str, bool] | None = None, step: Tagged | None = None) -> PlanResult:
    """The whole cost model for ``run`` (or, without one, the chunk table and quota);
    ``step``: the run's step in place of the certificate's (preflight plans a NOISY
    certificate at the slow end of the step's spread too)."""
    g = _Gather()
    matches = platform.device.matches(cert_lookup.device_name(cert)) if platform.device else None
    memory = chunkmod.memory_budget(_device_memory(cert, platform, matches),
                                    platform.budget_fraction.tagged())
    shape = run_shape(cert, run) if run else None
    rf = run_figures(cert, run, shape, memory.budget_bytes) if run else None
    if rf is not None and step is not None:
        rf = replace(rf, step=step)
    unpinned = tuple(s for s in (run.data_sources if run else []) if not (pins or {}).get(s))
    step = rf.step if rf else None
    ckpt_bytes, write = _checkpoint(cert, run, shape, rf, g)
    start = chunkmod.startup(_startup(cert, platform, run, shape, rf, write, g))
    ch = chunkmod.chunk(platform.session_cap.tagged(), platform.margin.tagged(), start)
    rows = [_row(cert, name, mode, value, memory, ch.chunk_seconds)
            for name, mode, _ in cert_lookup.workload_keys(cert)
            for value in cert_lookup.sweep_values(cert, name, mode)]
    info = run_row = None
    if run:
        info, run_row = _run_row(run, shape, rf, memory, ch.chunk_seconds, unpinned)
        rows.insert(0, run_row)
    quota = _quota(platform, ch, step, run_row, g)
    target = cad = fails = dsk = None
    if run and step is not None:
        target, cad, fails = _run_sections(run, info, step, ch, run_row, quota, write, platform,
                                           unpinned)
        dsk = diskmod.disk_plan(platform.disk.tagged(), ckpt_bytes,
                                run.figure("checkpoints_kept", "copies", run.name))
    _notes(platform, matches, run, rf, dsk, g)
    return PlanResult(certificate_device=cert_lookup.device_name(cert), platform=platform.name,
                      platform_device=platform.device.label if platform.device else None,
                      device_matches=matches, memory=memory, chunk=ch, rows=tuple(rows),
                      run=info, quota=quota, target=target, cadence=cad, failures=fails,
                      disk=dsk, assumptions=tuple(dict.fromkeys(g.assumptions)),
                      notes=tuple(g.notes), time_verdict=ft.verdict_label(cert),
                      noisy=tuple(ft.noisy_reasons(cert)), noisy_rule=ft.noisy_rule(cert),
                      certificate_warnings=tuple(ft.time_warnings(cert)))


@dataclass(frozen=True)
class RunFigures:
    """What the certificate says of the run's shape: each figure, or ``None`` (``step_why``
    and ``memory_why`` say why for the two a plan cannot do without)."""

    step: Tagged | None
    memory: MemoryAnswer | None
    params: Tagged | None
    tokens_per_step: Tagged | None
    step0: Tagged | None
    excluded: str | None
    step_why: str = ""
    memory_why: str = ""


def run_figures(cert: Certificate, run: RunFile, shape: RunShape,
                budget: Tagged | None = None) -> RunFigures:
    """The run's figures: read at its sweep value where the run is the certified family's
    shape there; else measured at that very shape (a point of the step-time design) or
    predicted by the certificate's step-time model; memory is the one memory answer at the
    shape (judged against ``budget`` bytes where given). InputError when the certificate
    can give neither a step time nor a memory figure at the shape."""
    name, mode, v = shape.workload, run.mode, shape.value
    mem = memory_figures.memory_answer(cert, name, shape.shape, mode, budget=budget)
    mem_why = "" if mem is not None else "not measured and no memory law"
    if shape.in_family:
        step = ft.step_seconds(cert, name, v, mode)
        why = "" if step is not None else (
            ft.step_at(cert, name, shape.shape, mode).why or "not measured and no "
            "throughput law")
        return RunFigures(step, mem, cert_lookup.params(cert, name, v, mode),
                          cert_lookup.tokens_per_step(cert, name, v, mode)
                          or ft.tokens_at(ft.find_workload(cert, name, mode), shape.shape),
                          cert_lookup.step0_seconds(cert, name, v, mode),
                          cert_lookup.point_status(cert, name, v, mode), step_why=why,
                          memory_why=mem_why)
    r = ft.find_workload(cert, name, mode)
    at = ft.step_at(cert, name, shape.shape, mode)
    where = f"{r.name} {r.mode} at {shape.label}, {run_label(cert)}"
    p = at.point
    if p is not None:  # measured there by the step-time design
        params = module(p.params, "params", f"trainable parameters counted, {where}") \
            if p.params is not None else None
        tokens = module(p.tokens_per_step, "tokens", f"the workload's tokens per step, "
                        f"{where}") if p.tokens_per_step is not None else None
        step0 = measured(p.step0_seconds, "s", f"step 0, median over children, {where}") \
            if p.step0_seconds is not None else None
        return RunFigures(at.step, mem, params, tokens, step0, None, memory_why=mem_why)
    if mem is None:
        mem_why = f"the certificate has no memory law for {r.name} ({r.mode})"
    if at.step is None and mem is None:
        raise InputError(f"run file {run.name}: the certificate can say nothing of {r.name} "
                         f"({r.mode}) at {shape.label}: no step time ({at.why}) and no memory "
                         f"figure ({mem_why}). Certify that shape, or give one the "
                         "certificate's models cover")
    return RunFigures(at.step, mem, _params_at(cert, r, shape), ft.tokens_at(r, shape.shape),
                      None, None, step_why=at.why, memory_why=mem_why)


def _params_at(cert, r, shape: RunShape) -> Tagged | None:
    """Parameters at a shape the sweep did not measure: the memory law's count; else, where
    only the batch differs from a measured point, that point's count (a batch holds no
    parameters)."""
    got = memory_figures.predicted_params(cert, r.name, shape.shape, r.mode)
    if got is not None:
        return got
    bk, _ = ft.shape_keys(r)
    p = cert_lookup.point(r, shape.value)
    if p is not None and p.params is not None and p.shape and \
            {k: x for k, x in p.shape.items() if k != bk} == \
            {k: x for k, x in shape.shape.items() if k != bk}:
        return module(p.params, "params", f"trainable parameters counted at "
                      f"{ft.shape_label(p.shape)} (the batch holds none), {run_label(cert)}")
    return None


def on_unpinned(plan: PlanResult, unpinned: tuple[str, ...]) -> PlanResult:
    """The plan as data not pinned leaves it (docs/DESIGN.md section 3, rule 8): the one rule
    ``afford plan`` and ``afford report --plan`` share. Only what depends on the data's size
    is provisional: the target (its tokens or steps count the data) and whatever was
    derived from it. The session cap, the chunk table, steps per hour and the weekly quota
    do not depend on the data (COSTS section 0: "the chunk table ... is a steps-per-hour
    table and does not depend on them").

    A plan computed with these sources unpinned already carries exactly those marks (each
    figure derived from a provisional one is provisional, :func:`afford.planning.derive.derive`);
    it is returned as it is. A plan computed while they were pinned gets the target marked,
    and, without a session cap (the cadence and failure ledger then span the target), the
    cadence and the failure ledger too."""
    new = tuple(u for u in unpinned if not plan.run or u not in plan.run.unpinned)
    if not new or plan.run is None:
        return plan
    update: dict = {"run": plan.run.model_copy(update={
        "unpinned": tuple(dict.fromkeys((*plan.run.unpinned, *new)))})}
    for key in ("target",) + (("cadence", "failures") if plan.chunk.chunk_seconds is None
                              else ()):
        if getattr(plan, key) is not None:
            update[key] = _provisional(getattr(plan, key))
    return plan.model_copy(update=update)


def _provisional(obj):
    """``obj`` with every tagged figure in it marked provisional (models, tuples, lists)."""
    if isinstance(obj, Tagged):
        return obj.model_copy(update={"provisional": True})
    if isinstance(obj, (tuple, list)):
        return type(obj)(_provisional(x) for x in obj)
    if isinstance(obj, BaseModel):
        return obj.model_copy(update={k: _provisional(getattr(obj, k))
                                      for k in type(obj).model_fields})
    return obj


def preflight(cert: Certificate, platform: Platform, run: RunFile, *,
              pins: dict[str, bool] | None = None, now: datetime | None = None,
              here_torch: str | None = None, accept_noisy: bool = False) -> Verdict:
    """GO / NO-GO with every reason (:func:`afford.planning.go_no_go.verdict`). On a NOISY
    certificate the run is planned twice, at its step and at the slow end of the step's
    measured spread (:func:`afford.planning.go_no_go.slow_step`): NO-GO only where the slow end
    flips the decision, unless ``accept_noisy``."""
    p = plan(cert, platform, run, pins=pins)
    slow = None
    step = run_row(p).step_seconds
    if p.time_verdict == "NOISY" and step is not None:
        shape = run_shape(cert, run)
        spread = noise.children_slow_end(cert, shape.workload,
                                         shape.value if shape.in_family else None, run.mode)
        end = slow_step(step, spread)
        slow = plan(cert, platform, run, pins=pins, step=end) if end is not None else None
    age = (now - cert_lookup.certified_at(cert)).total_seconds() / 86400 if now else None
    facts = Facts(cert_age_days=age, cert_torch=cert_lookup.torch_version(cert),
                  here_torch=here_torch, max_weeks=run.figure("max_weeks", "weeks", run.name),
                  accept_noisy=accept_noisy)
    return verdict(p, facts, slow)


def _device_memory(cert, platform: Platform, matches: bool | None) -> Tagged:
    """The certificate's measured memory when it was measured on the platform's device (or
    the platform names none); else the platform's figure."""
    measured = cert_lookup.device_memory(cert)
    stated = platform.device.memory.tagged() if platform.device and platform.device.memory \
        else None
    if stated is not None and stated.value is not None and not (matches and measured):
        return stated
    if measured is not None:
        return measured
    raise InputError(f"no device memory is known: platform {platform.name} states none and the "
                     "certificate holds none")


def _checkpoint(cert, run, shape, rf, g: _Gather) -> tuple[Tagged | None, Tagged]:
    """(bytes, write seconds) of one checkpoint of the run's workload (or the largest
    measured one without a run), measured by the probes stage or ASSUMED."""
    if run is None:
        found = []
        for n, m, _ in cert_lookup.workload_keys(cert):
            mine = _Gather()
            found.append((_checkpoint_of(cert, n, m, _largest_params(cert, n, m), mine), mine))
        (size, write), mine = max(found, key=lambda f: num(f[0][1]))
        g.assumptions.extend(mine.assumptions)
        return size, write
    return _checkpoint_of(cert, shape.workload, run.mode, rf.params, g)


def _checkpoint_of(cert, name, mode, params: Tagged | None, g: _Gather):
    size = session_costs.checkpoint_bytes(cert, name, mode)
    if size is None and params is not None:
        size = g.fallback(int(num(params)) * ASSUMED_CHECKPOINT_BYTES_PER_PARAM, "B",
                          f"checkpoint size of {name} not measured: {NO_PROBES}; assumed 12 "
                          "bytes/param (fp32 weights 4 + AdamW moments 8)")
    write = session_costs.checkpoint_write_seconds(cert, name, mode)
    if write is None and size is not None:
        write = g.fallback(num(size) / ASSUMED_WRITE_BYTES_PER_SECOND, "s",
                           f"checkpoint write time of {name} not measured: {NO_PROBES}; "
                           "assumed size / 200 MB/s")
    if write is None:
        write = g.fallback(ASSUMED_WRITE_SECONDS, "s", f"checkpoint write time of {name} not "
                           f"measured and its size unknown: {NO_PROBES}; assumed 60 s")
    return size, write


def _largest_params(cert, name, mode) -> Tagged | None:
    found = [cert_lookup.params(cert, name, v, mode)
             for v in cert_lookup.sweep_values(cert, name, mode)]
    found = [p for p in found if p is not None]
    return max(found, key=num) if found else None


def _startup(cert, platform: Platform, run, shape, rf, write, g: _Gather
             ) -> list[StartupComponent]:
    measured = session_costs.startup_seconds(cert)
    comps = [StartupComponent(name=k, what=f"{k.replace('_', ' ')} in a fresh process",
                              seconds=v) for k, v in measured.items() if k.startswith("import")]
    if not comps:
        comps.append(StartupComponent(
            name="import", what="interpreter + framework import in a fresh process",
            seconds=g.fallback(ASSUMED_IMPORT_SECONDS, "s", "interpreter + torch import not "
                               f"measured: {NO_PROBES}; assumed 20 s")))
    pre = measured.get("preflight") or g.fallback(
        ASSUMED_PREFLIGHT_SECONDS, "s", "the run's own checks before step 0 (afford "
        "preflight, data checks) are not something certify can time; assumed 10 s")
    comps.append(StartupComponent(name="preflight", what="checks before step 0", seconds=pre))
    comps.append(StartupComponent(name="first_step", what="step 0 (allocation, autotuning)",
                                  seconds=_first_step(cert, run, shape, rf, g)))
    comps.extend(StartupComponent(name=k, what=p.what or k.replace("_", " "), seconds=p.tagged())
                 for k, p in platform.startup.items())
    comps.append(StartupComponent(name="final_save", what="final checkpoint write",
                                  seconds=write, final=True))
    return comps


def _first_step(cert, run, shape, rf, g: _Gather) -> Tagged:
    """Step 0 at the run's shape: measured, or the warm step x the median step-0/warm ratio;
    without a run, the slowest measured step 0 in the certificate."""
    if run is None:
        found = [cert_lookup.step0_seconds(cert, n, v, m)
                 for n, m, _ in cert_lookup.workload_keys(cert)
                 for v in cert_lookup.sweep_values(cert, n, m)]
        found = [t for t in found if t is not None]
        if found:
            return max(found, key=num)
    else:
        if rf.step0 is not None:
            return rf.step0
        ratio = cert_lookup.step0_over_warm(cert, shape.workload, run.mode)
        if ratio is not None and rf.step is not None:
            return derive(num(rf.step) * num(ratio), "s", "warm step x median step-0/warm "
                          "ratio", rf.step, ratio)
    return g.fallback(ASSUMED_FIRST_STEP_SECONDS, "s", "step 0 not measured at this shape; "
                      "assumed 60 s")


def _row(cert, name, mode, value, memory, chunk_seconds) -> ChunkRow:
    step = ft.step_seconds(cert, name, value, mode)
    shape = cert_lookup.shape_at(cert, name, value, mode)
    mem = memory_figures.memory_answer(cert, name, shape, mode, budget=memory.budget_bytes) \
        if shape else None
    status = cert_lookup.point_status(cert, name, value, mode)
    return chunkmod.chunk_row(workload=name, mode=mode,
                              sweep_param=cert_lookup.sweep_param(cert, name, mode), value=value,
                              step=step, mem=mem, memory=memory,
                              chunk_seconds=chunk_seconds, excluded=status)


def _run_row(run: RunFile, shape: RunShape, rf: RunFigures, memory, chunk_seconds,
             unpinned):
    tps = run.figure("tokens_per_step", "tokens", run.name) or rf.tokens_per_step
    if tps is None:
        raise InputError(f"run file {run.name}: give tokens_per_step (the certificate has no "
                         f"figure for {shape.workload} at {shape.label})")
    note = "the run's shape" + ("" if shape.in_family else f": {shape.label}")
    if rf.step is None:
        note += f"; no step time: {rf.step_why}"
    row = chunkmod.chunk_row(workload=shape.workload, mode=run.mode,
                             sweep_param=shape.sweep_param, value=shape.value, step=rf.step,
                             mem=rf.memory, memory=memory,
                             chunk_seconds=chunk_seconds, is_run=True, tokens_per_step=tps,
                             params=rf.params, excluded=rf.excluded, note=note)
    info = RunInfo(name=run.name or "run", workload=shape.workload, mode=run.mode,
                   sweep_param=shape.sweep_param, value=shape.value, shape=shape.shape,
                   tokens_per_step=tps, data_sources=tuple(run.data_sources), unpinned=unpinned,
                   in_family=shape.in_family, step_why=rf.step_why,
                   memory_why=rf.memory_why)
    return info, row


def _quota(platform: Platform, ch, step, run_row, g: _Gather):
    q = platform.weekly_quota
    if q.sentinel == "unknown":
        g.notes.append(f"weekly quota unknown on {platform.name}: {q.assumed or q.cite}; the "
                       "quota figures are left out")
    if q.sentinel is not None or ch.chunk_seconds is None:
        return None
    return quotamod.weekly_quota(q.tagged(), ch.chunk_seconds, ch.startup, step,
                                 run_row.steps_per_chunk if run_row else None,
                                 run_row.tokens_per_step if run_row else None)


def _run_sections(run: RunFile, info: RunInfo, step, ch, run_row, quota, write, platform,
                  unpinned):
    tokens = run.figure("target_tokens", "tokens", run.name)
    steps = run.figure("target_steps", "steps", run.name)
    if unpinned:
        tokens = tokens and tokens.model_copy(update={"provisional": True})
        steps = steps and steps.model_copy(update={"provisional": True})
    t_steps, t_tokens = quotamod.target_steps(info.tokens_per_step, tokens=tokens, steps=steps)
    target = quotamod.time_to_target(t_steps, t_tokens, step, ch.startup,
                                     run_row.steps_per_chunk, quota)
    budget = run.figure("checkpoint_overhead", "ratio", run.name) \
        if "checkpoint_overhead" in run.model_fields_set else \
        assumed(run.checkpoint_overhead, "ratio", "afford's default checkpoint overhead budget: "
                "1 % of wall clock")
    span_steps, span_seconds = run_row.steps_per_chunk, ch.chunk_seconds
    if span_steps is None:  # no session cap: the whole run is one session
        span_steps = t_steps
        span_seconds = derive(int(num(t_steps)) * num(step), "s", "target steps x step", t_steps,
                              step)
    cad = cadmod.cadence(write, step, budget, span_steps, span_seconds)
    mtbf = platform.mtbf.tagged() if platform.mtbf else None
    fails = failmod.failures(ch.startup.restart_seconds, write, step, span_steps, cad.save_every,
                             quota.quota_seconds if quota else None, mtbf)
    return target, cad, fails


def _notes(platform: Platform, matches: bool | None, run, rf, dsk, g: _Gather) -> None:
    if platform.device and platform.device.count > 1:
        g.notes.append(f"{platform.name} has {platform.device.count} devices; this plan is for "
                       "one of them")
    if matches is None:
        g.notes.append(f"platform {platform.name} names no device: the certificate's device is "
                       "taken for it, and every time below is that device's")
    if matches is False:
        g.notes.append("the certificate's device is not the platform's: every time below is "
                       "the certificate's device's, not the platform's")
    if platform.session_cap.sentinel == "none":
        g.notes.append("no session cap: the cadence and failure ledger treat the whole run as "
                       "one session")
    if run is None:
        g.notes.append("no run given (--run): the target, cadence, failure ledger and disk "
                       "need one")
    elif rf.step is None:
        g.notes.append(f"no step time at the run's shape ({rf.step_why}): the target, "
                       "cadence, failure ledger and disk are left out")
    elif rf.step.extrapolated:
        g.notes.append(f"the run's step time is {rf.step.tag.value} beyond the measured "
                       f"range (*): {rf.step.source}")
    if dsk is not None and dsk.disk_bytes.value is None:
        g.notes.append(f"disk unknown on {platform.name}: {dsk.disk_bytes.source}")

"""One sweep point from its children's raw records, and the throughput law over a workload's
points (docs/DESIGN.md section 3, rules 2 and 3).

:func:`assemble_point` derives a point's medians of medians, spread and residency from the
events its children sent; :func:`fit_workload` fits the law over the resident points only,
keeping every exclusion with its reason. Every certify stage that times points through the
child protocol (the sweep, the model sizes, the levers) assembles them here;
:func:`protocol_of` writes how they were timed into the certificate.
"""

from __future__ import annotations

from afford.core.units import format_duration
from afford.core.user_code import added_folder
from afford.fit.stats import median, relative_spread
from afford.fit.time.contention import idle_step, wait_share
from afford.fit.time.throughput import fit_throughput
from afford.fit.time.time_noise import LOADED_WAIT, outlier_children
from afford.measure.children import Event
from afford.measure.timing import BLOCK_SECONDS, TimingRule
from afford.schema.cert import Protocol, WorkloadResult
from afford.schema.laws import Excluded
from afford.schema.point import ChildPoint, Point
from afford.workloads.base import Workload
from afford.workloads.clock import clock_name


def point_key(spec: str, mode: str, value: int, batch: int | None = None) -> str:
    """The key of a point in the children's job: the sweep's points by value, the time
    design's other shapes by value and batch."""
    return f"{spec}|{mode}|{value}" + ("" if batch is None else f"|b{batch}")


def assemble_point(value: int, events: list[Event], device_memory: int | None, *,
                   need: int | None = None, design: dict | None = None) -> Point:
    """One point from its children's raw records: medians of medians, spread, residency.
    ``need``: how many children must have measured it (default: every child whose record
    is here; a point re-measured by a fresh child after one died needs the protocol's
    count). ``design``: the time design's fields of the point (batch, seq, role, held_out)."""
    kids = [ChildPoint(**e["record"]) for e in events]
    first = next((e for e in events if "shape" in e), {})
    ok = [k for k in kids if k.median_seconds is not None]
    meds = [k.median_seconds for k in ok]
    step0 = [k.step0_seconds for k in ok if k.step0_seconds is not None]
    synced = [median(k.synced_seconds) for k in ok if k.synced_seconds]
    runs = [k.timed_run_seconds / len(k.timed_seconds) for k in ok
            if k.timed_run_seconds is not None and k.timed_seconds]
    m = median(meds) if meds else None
    p = Point(value=value, shape=first.get("shape", {}), params=first.get("params"),
              frozen_params=first.get("frozen_params"),
              tokens_per_step=first.get("tokens_per_step"), vocab=first.get("vocab"),
              children=kids, median_seconds=m,
              child_medians=meds, child_spread=relative_spread(meds) if len(meds) > 1 else None,
              worst_precision=max((k.precision for k in ok if k.precision is not None),
                                  default=None),
              step0_seconds=median(step0) if step0 else None,
              step0_over_warm=(median(step0) / m) if step0 and m else None,
              peak_allocated_bytes=_max(k.peak_allocated_bytes for k in kids),
              peak_reserved_bytes=_max(k.peak_reserved_bytes for k in kids),
              peak_rss_bytes=_max(k.peak_rss_bytes for k in kids),
              memory_source=next((k.memory_source for k in kids if k.memory_source), None),
              flops=next((k.flops for k in kids if k.flops is not None), None),
              synced_median_seconds=median(synced) if synced else None,
              run_mean_seconds=median(runs) if runs else None,
              **device_side(kids), **contention(ok, m),
              remeasured=any(k.round == "remeasure" for k in kids),
              resident=True, **outliers(ok), **(design or {}))
    reason = _exclusion(p, kids, device_memory, len(kids) if need is None else need)
    if reason is None:
        return p
    resident = False if reason.startswith("not resident") else None  # None: unknown
    return p.model_copy(update={"resident": resident, "excluded_reason": reason})


def outliers(kids: list[ChildPoint]) -> dict:
    """A point's outlier children (:func:`afford.fit.time.time_noise.outlier_children`) and
    the note that says what they measured, what the children's own accounting says of the
    cause, and what was done: a fresh child that re-measured the point sides with the others
    (or is itself the outlier), and the others outvote them (the point's median over every
    child stays within their range)."""
    idx = outlier_children([k.median_seconds for k in kids])
    if not idx:
        return {}
    odd = [kids[i] for i in idx]
    rest = [k for i, k in enumerate(kids) if i not in idx]
    lo, hi = (min(k.median_seconds for k in rest), max(k.median_seconds for k in rest))
    centre = median([k.median_seconds for k in rest])
    parts = []
    for k in odd:
        ratio = k.median_seconds / centre
        far = f"{ratio:.0f}x" if ratio >= 1 else f"1/{1 / ratio:.0f}"
        parts.append(f"child {k.child}'s median {format_duration(k.median_seconds)} is {far} "
                     f"the others' ({format_duration(lo)}-{format_duration(hi)})"
                     + _wait_cause(k, rest, slow=ratio >= 1))
    fresh = [k for k in kids if k.round == "remeasure"]
    if not fresh:
        done = "outvoted by the others: the point's median is theirs"
    elif fresh[0] in odd:
        done = (f"the fresh child that re-measured the point (child {fresh[0].child}) is the "
                "outlier: outvoted by the others")
    else:
        done = (f"re-measured in a fresh child (child {fresh[0].child}: "
                f"{format_duration(fresh[0].median_seconds)}), which sides with the others: "
                "outvoted")
    return {"outlier_children": [k.child for k in odd],
            "outlier_note": "; ".join(parts) + "; " + done}


def _wait_cause(k: ChildPoint, rest: list[ChildPoint], slow: bool) -> str:
    """What the children's own accounting says of an outlier's cause (a CPU: the share of
    their threads' time spent waiting for a CPU): a slow outlier's own waits, a fast one's
    against the others' (other work delays the others then); nothing where not recorded."""
    own = _share(k)
    if own is None:
        return ""
    if slow:
        if own >= LOADED_WAIT:
            return f"; its threads waited for a CPU {own:.0%} of their time: other work " \
                   "delayed it"
        return (f"; its threads waited for a CPU only {own:.1%} of their time, so the "
                "host's load does not explain it")
    others = [x for x in map(_share, rest) if x is not None]
    theirs = median(others) if others else None
    if theirs is not None and theirs >= LOADED_WAIT and theirs > own:
        return (f"; the others' threads waited for a CPU {theirs:.0%} of their time, its own "
                f"{own:.0%}: other work delayed the others more")
    return (f"; its threads waited for a CPU {own:.0%} of their time, the others' "
            f"{theirs or 0:.0%}: the host's load does not explain it")


def _share(k: ChildPoint) -> float | None:
    return wait_share(k.timed_seconds, k.timed_wait_seconds, k.threads or 0) \
        if k.timed_wait_seconds else None


def device_side(kids: list[ChildPoint]) -> dict:
    """A point's device-side figures from its children's profiled steps: medians over the
    children of each child's median (busy time, kernels per step, queued gap)."""
    busy = [median([d.busy_seconds for d in k.device_steps]) for k in kids if k.device_steps]
    if not busy or min(busy) <= 0:
        return {}
    kernels = [median([float(d.kernels) for d in k.device_steps]) for k in kids
               if k.device_steps]
    gaps = [median(g) for k in kids
            if (g := [d.queued_gap_seconds for d in k.device_steps
                      if d.queued_gap_seconds is not None])]
    return {"device_busy_seconds": median(busy),
            "device_busy_spread": relative_spread(busy) if len(busy) > 1 else None,
            "kernels_per_step": median(kernels),
            "device_gap_seconds": median(gaps) if gaps else None}


def contention(kids: list[ChildPoint], wall: float | None) -> dict:
    """A point's step on an idle box and what the load cost it, from its children's
    per-step waits (:mod:`afford.fit.time.contention`; a CPU device), with the CPU time per step
    and the threads beside them."""
    timed = [k for k in kids if k.timed_cpu_seconds]
    if not timed:
        return {}
    out: dict = {"cpu_step_seconds": median([median(k.timed_cpu_seconds) for k in timed]),
                 "threads": timed[0].threads}
    waited = [k for k in timed if len(k.timed_wait_seconds) == len(k.timed_seconds)]
    shares = [s for k in waited if k.threads and
              (s := wait_share(k.timed_seconds, k.timed_wait_seconds, k.threads)) is not None]
    if shares:
        out["wait_share"] = median(shares)
    idle = idle_step([(k.timed_seconds, k.timed_wait_seconds) for k in waited])
    if idle is not None and wall is not None:
        out.update(idle_seconds=idle, load_seconds=max(0.0, wall - idle))
    return out


def _max(values) -> int | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _exclusion(p: Point, kids: list[ChildPoint], device_memory: int | None,
               need: int) -> str | None:
    for k in kids:
        if k.oom:
            return f"not resident: ran out of memory in child {k.child}: {k.error}"
    for k in kids:
        if k.refused:
            return f"refused in child {k.child}: {k.refused}"
    reserved = p.peak_reserved_bytes
    if device_memory and reserved and reserved > device_memory:
        return (f"not resident: reserved {reserved} B exceeds the device's "
                f"{device_memory} B")
    if device_memory and p.peak_rss_bytes and p.peak_rss_bytes > device_memory:
        return f"not resident: peak RSS {p.peak_rss_bytes} B exceeds host memory"
    swapped = [k.child for k in kids if (k.swap_bytes or 0) > 0]
    if swapped:
        return f"not resident: paged to swap in child(ren) {swapped}"
    measured = sum(1 for k in kids if k.median_seconds is not None)
    for k in kids:
        if k.error and measured < need:
            return f"failed in child {k.child}: {k.error}"
    return None


def died(p: Point) -> bool:
    """A child failed at this point for a reason other than memory or a refusal (it died,
    or the step raised): worth one more try in a fresh child."""
    return any(k.error and not k.oom and not k.refused for k in p.children) and \
        not any(k.oom or k.refused for k in p.children)


def fit_workload(spec: str, w: Workload, mode: str, points: list[Point],
                 law_fit: bool = True) -> WorkloadResult:
    """The law over resident, fully measured points; exclusions kept with reasons.
    ``law_fit=False``: the result without its throughput law (certify's early round reads
    the points only, and the law's fits with their leave-one-out cost it a second)."""
    notes: list[str] = []
    used = [p for p in points if p.usable]
    excluded = [Excluded(value=p.value, reason=p.excluded_reason or "not measured")
                for p in points if p not in used]
    refused = next((p.excluded_reason for p in points
                    if p.excluded_reason and p.excluded_reason.startswith("refused")), None)
    law = None
    if len(used) >= 2 and law_fit:
        law = fit_throughput(w.sweep_param, [p.value for p in used],
                             [p.median_seconds for p in used], excluded)
        notes.extend(law.warnings)
    elif len(used) < 2 and not refused:
        notes.append(f"only {len(used)} resident point(s): no law fitted")
    for p in used:
        notes.extend(p.quality_notes(w.sweep_param))
    user = ":" in spec.partition("+")[0] and not spec.startswith("hf:")  # pkg.mod:factory
    return WorkloadResult(name=spec, source="builtin" if ":" not in spec else spec,
                          import_folder=added_folder(spec) if user else None,
                          description=getattr(w, "description", ""), mode=mode,
                          sweep_param=w.sweep_param, points=points, law=law, refused=refused,
                          warnings=notes)


def protocol_of(req, rule: TimingRule, device_type: str, prewarmed: list[int] = ()) -> Protocol:
    """The certificate's protocol block: how every point was timed (``req``: the
    :class:`~afford.certification.request.CertifyRequest`; ``prewarmed``: the children spawned
    ahead that created their CUDA context before their first point)."""
    return Protocol(precision=req.precision, children=req.children,
                    warmup_steps=rule.warmup_steps, warmup_seconds=rule.warmup_seconds,
                    min_timed_steps=rule.min_steps, floor_seconds=rule.floor_seconds,
                    max_floor_seconds=rule.max_floor_seconds,
                    precise_seconds=rule.precise_seconds,
                    precise_min_steps=rule.precise_min_steps, block_seconds=BLOCK_SECONDS,
                    target_rel_precision=rule.target_rel_precision,
                    clock=clock_name(device_type), seed=req.seed,
                    prewarmed_children=list(prewarmed))

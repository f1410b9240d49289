"""measure -> fit -> Certificate: the only place that sequences them (DESIGN section 2).

:func:`certify` resolves the workloads and sweeps (bad input fails here, before anything is
timed), runs the children, derives each point from its raw samples (:func:`assemble_point`),
fits the throughput law over the resident points, and returns a :class:`Certificate`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from afford.errors import InputError, MeasurementError
from afford.fit.stats import median, relative_spread
from afford.fit.throughput import Excluded, fit_throughput
from afford.measure import env as envmod
from afford.measure.children import Event, run_children
from afford.measure.timing import CudaClock, HostClock, rule_for
from afford.schema.cert import (Certificate, ChildPoint, Point, Protocol, WorkloadResult)
from afford.workloads import DEFAULT, resolve
from afford.workloads.base import MODES, Workload, validate_shape

MIN_CHILDREN = 3
SPREAD_WARN = 0.05


@dataclass
class CertifyRequest:
    """What to certify. Empty ``workloads`` means the built-in default set."""

    workloads: list[str] = field(default_factory=list)
    sweeps: dict[str, list[int]] = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)
    precision: str = "adaptive"
    children: int = MIN_CHILDREN
    device: str | None = None
    seed: int = 0
    command: str = ""
    gates: bool | None = None  # None: init-loss gate only; True: all gates + audit; False: none
    sizes: bool = False  # the sizes stage: tinylm across model sizes (afford.measure.sizes)
    levers: bool = False  # the levers stage: measured A/B pairs (afford.measure.levers)
    memory: bool = True  # the memory-law stage (afford.memory_stage)
    probes: bool = True  # the probes stage (afford.probes_stage)
    checkpoint_dir: str | None = None  # where the probes write checkpoints; None: cwd


@dataclass
class StageContext:
    """What a stage after the sweep sees. A stage returns certificate fields to set
    (e.g. ``{"probes": ProbesSection(...)}``) and may emit events for the progress bar."""

    req: CertifyRequest
    env: object  # afford.schema.cert.Environment
    plan: "Plan"
    results: list[WorkloadResult]
    on_event: Callable[[Event], None]
    sweep_starts: list[Event] = field(default_factory=list)  # the sweep children's start events
    ahead: dict = field(default_factory=dict)  # stage name -> its child, spawned ahead (CUDA)


Stage = Callable[[StageContext], dict]


def stages_for(req: CertifyRequest) -> list[Stage]:
    """The stages that run after the sweep, in order: device probes, the memory law, the
    gates (init loss by default), then the opt-in model sizes and levers."""
    chosen: list[Stage] = []
    if req.probes:
        from afford.probes_stage import probes_stage

        chosen.append(probes_stage)
    if req.memory:
        from afford.memory_stage import memory_stage

        chosen.append(memory_stage)
    if req.gates is not False:
        from afford.gating import gates_stage

        chosen.append(gates_stage)
    if req.sizes:
        from afford.measure.sizes import sizes_stage

        chosen.append(sizes_stage)
    if req.levers:
        from afford.measure.levers import levers_stage

        chosen.append(levers_stage)
    return chosen


def spawners_for(req: CertifyRequest, device: str) -> dict[str, Callable[[], object]]:
    """On CUDA, the stages whose child certify starts while the sweep's last child measures
    (imports, CUDA context, cuBLAS and fused-optimizer warm-up off the critical path, as for
    the sweep's own children); none on a CPU, where a spawn would compete for the cores the
    timed steps use. Each spawner returns a :class:`~afford.measure.children.Spawned`."""
    if not device.startswith("cuda"):
        return {}
    out: dict[str, Callable[[], object]] = {}
    if req.probes:
        from afford.measure.probes.runner import spawn_probe_child

        out["probes"] = lambda: spawn_probe_child(device, overlapped=True)
    if req.memory:
        from afford.measure.memory_sweep import STAGGER_SECONDS, spawn_memory_child

        out["memory"] = lambda: spawn_memory_child(
            device, overlapped=True, stagger=STAGGER_SECONDS if req.probes else 0.0)
    return out


@dataclass(frozen=True)
class Plan:
    """The resolved request: what each child will time."""

    device: str
    device_class: str
    workloads: list[tuple[str, Workload, str, list[int]]]  # (spec, workload, mode, values)

    @property
    def items(self) -> list[dict]:
        return [{"key": point_key(spec, mode, v), "workload": spec, "mode": mode, "value": v}
                for spec, _, mode, values in self.workloads for v in values]


def point_key(spec: str, mode: str, value: int) -> str:
    return f"{spec}|{mode}|{value}"


def default_mode(device_type: str) -> str:
    """bf16 autocast on a CUDA card that supports it, fp32 otherwise."""
    if device_type == "cuda":
        import torch

        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "fp32"


def resolve_request(req: CertifyRequest, device_type: str, device_class: str,
                    device: str) -> Plan:
    """Check everything a user typed before any time is spent; InputError otherwise."""
    if req.children < MIN_CHILDREN:
        raise InputError(f"--children {req.children}: the protocol needs at least "
                         f"{MIN_CHILDREN} independent child processes")
    for m in req.modes:
        if m not in MODES:
            raise InputError(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    modes = req.modes or [default_mode(device_type)]
    specs = list(dict.fromkeys(req.workloads or DEFAULT))
    resolved = []
    used_keys: set[str] = set()
    for spec in specs:
        w = resolve(spec, device_class)
        values, key = _sweep_for(w, req.sweeps, device_class)
        if key:
            used_keys.add(key)
        for v in values:
            try:
                validate_shape(w, v)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        for mode in modes:
            resolved.append((spec, w, mode, values))
    unused = set(req.sweeps) - used_keys
    if unused:
        params = sorted({w.sweep_param for _, w, _, _ in resolved})
        raise InputError(f"--sweep {', '.join(sorted(unused))}=...: no selected workload sweeps "
                         f"that parameter (they sweep {', '.join(params)}; use n=... for all)")
    return Plan(device=device, device_class=device_class, workloads=resolved)


def _sweep_for(w: Workload, sweeps: dict[str, list[int]], device_class: str):
    if w.sweep_param in sweeps:
        return sweeps[w.sweep_param], w.sweep_param
    if "n" in sweeps:
        return sweeps["n"], "n"
    return w.default_sweep(device_class), None


def parse_sweep(text: str) -> tuple[str, list[int]]:
    """``"seq=128,256,512"`` -> ("seq", [128, 256, 512]); InputError when malformed."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise InputError(f"--sweep {text!r}: write it as NAME=V1,V2,... (e.g. n=2048,4096)")
    try:
        values = [int(float(v)) for v in rest.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--sweep {text!r}: the values must be positive integers") from None
    if not values or any(v <= 0 for v in values):
        raise InputError(f"--sweep {text!r}: the values must be positive integers")
    if len(set(values)) != len(values):
        raise InputError(f"--sweep {text!r}: a value appears twice")
    return name, sorted(values)


def assemble_point(value: int, events: list[Event], device_memory: int | None) -> Point:
    """One point from its children's raw records: medians of medians, spread, residency."""
    kids = [ChildPoint(**e["record"]) for e in events]
    first = next((e for e in events if "shape" in e), {})
    ok = [k for k in kids if k.median_seconds is not None]
    meds = [k.median_seconds for k in ok]
    step0 = [k.step0_seconds for k in ok if k.step0_seconds is not None]
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
              resident=True)
    reason = _exclusion(p, kids, device_memory)
    if reason is None:
        return p
    resident = False if reason.startswith("not resident") else None  # None: unknown
    return p.model_copy(update={"resident": resident, "excluded_reason": reason})


def _max(values) -> int | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _exclusion(p: Point, kids: list[ChildPoint], device_memory: int | None) -> str | None:
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
    for k in kids:
        if k.error:
            return f"failed in child {k.child}: {k.error}"
    return None


def fit_workload(spec: str, w: Workload, mode: str, points: list[Point]) -> WorkloadResult:
    """The law over resident, fully measured points; exclusions kept with reasons."""
    notes: list[str] = []
    used = [p for p in points if p.resident and p.excluded_reason is None
            and p.median_seconds is not None]
    excluded = [Excluded(value=p.value, reason=p.excluded_reason or "not measured")
                for p in points if p not in used]
    refused = next((p.excluded_reason for p in points
                    if p.excluded_reason and p.excluded_reason.startswith("refused")), None)
    law = None
    if len(used) >= 2:
        law = fit_throughput(w.sweep_param, [p.value for p in used],
                             [p.median_seconds for p in used], excluded)
        notes.extend(law.warnings)
    elif not refused:
        notes.append(f"only {len(used)} resident point(s): no law fitted")
    for p in used:
        if p.child_spread is not None and p.child_spread > SPREAD_WARN:
            notes.append(f"{w.sweep_param}={p.value}: children disagree by "
                         f"{p.child_spread:.1%} (> {SPREAD_WARN:.0%})")
        if p.worst_precision is not None and p.worst_precision > 0.01:
            notes.append(f"{w.sweep_param}={p.value}: a child's median is known to "
                         f"+/-{p.worst_precision:.1%} only (target 1%)")
    return WorkloadResult(name=spec, source="builtin" if ":" not in spec else spec,
                          description=getattr(w, "description", ""), mode=mode,
                          sweep_param=w.sweep_param, points=points, law=law, refused=refused,
                          warnings=notes)


def certify(req: CertifyRequest,
            on_event: Callable[[Event], None] = lambda e: None,
            on_plan: Callable[[Plan], None] = lambda p: None) -> Certificate:
    """Measure, fit, and return the certificate (not yet written)."""
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    device = envmod.choose_device(req.device)
    env = envmod.capture(device, req.command or " ".join(sys.argv), started)
    plan = resolve_request(req, device.type, env.device_class, str(device))
    on_plan(plan)
    rule = rule_for(req.precision)
    starts: list[Event] = []

    def tap(event: Event) -> None:
        if event["event"] == "start":
            starts.append(event)
        on_event(event)

    spawners = spawners_for(req, plan.device)
    ahead: dict = {}

    def spawn_ahead() -> None:
        for name, spawn in spawners.items():
            try:
                ahead[name] = spawn()
            except OSError:  # the stage starts its own child later, and reports a failure
                pass

    seconds = {"setup": time.perf_counter() - t0}
    try:
        t0 = time.perf_counter()
        per_child = run_children(plan.items, children=req.children, device=plan.device,
                                 device_class=plan.device_class, rule=rule, seed=req.seed,
                                 on_event=tap, on_last=spawn_ahead if spawners else None)
        seconds["sweep"] = time.perf_counter() - t0
        results = []
        for spec, w, mode, values in plan.workloads:
            points = [assemble_point(v, [c[point_key(spec, mode, v)] for c in per_child],
                                     env.device_memory_bytes) for v in values]
            results.append(fit_workload(spec, w, mode, points))
        if not any(p.median_seconds for r in results for p in r.points) and \
                not any(r.refused for r in results):
            errors = {c.error for r in results for p in r.points for c in p.children
                      if c.error}
            raise MeasurementError("no point could be timed: " +
                                   "; ".join(sorted(errors))[:1500])
        sections: dict = {}
        ctx = StageContext(req=req, env=env, plan=plan, results=results, on_event=on_event,
                           sweep_starts=starts, ahead=ahead)
        for stage in stages_for(req):
            t0 = time.perf_counter()
            sections.update(stage(ctx))
            seconds[stage.__name__.removesuffix("_stage")] = time.perf_counter() - t0
    finally:
        for kid in ahead.values():  # those no stage took (one failed, or none ran)
            kid.kill()
    ended = datetime.now(timezone.utc)
    env = env.model_copy(update={"ended_at": ended,
                                 "elapsed_seconds": (ended - started).total_seconds(),
                                 "stage_seconds": seconds})
    clock = CudaClock.name if device.type == "cuda" else HostClock.name
    protocol = Protocol(precision=req.precision, children=req.children,
                        warmup_steps=rule.warmup_steps, warmup_seconds=rule.warmup_seconds,
                        min_timed_steps=rule.min_steps, floor_seconds=rule.floor_seconds,
                        max_floor_seconds=rule.max_floor_seconds,
                        target_rel_precision=rule.target_rel_precision, clock=clock,
                        seed=req.seed,
                        prewarmed_children=sorted(e["child"] for e in starts
                                                  if e.get("prewarmed")))
    return Certificate(environment=env, protocol=protocol, workloads=results,
                       warnings=[f"{r.name} ({r.mode}): {n}" for r in results
                                 for n in r.warnings], **sections)


def default_filename(cert: Certificate) -> str:
    env = cert.environment
    slug = "".join(ch if ch.isalnum() else "-" for ch in env.device_name.lower())
    slug = "-".join(part for part in slug.split("-") if part)[:40] or env.device_type
    return f"afford-cert-{slug}-{env.started_at.strftime('%Y%m%d-%H%M%S')}.json"


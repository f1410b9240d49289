"""measure -> fit -> Certificate: the only place that sequences them (docs/DESIGN.md section 2).

:func:`certify` resolves the request (bad input fails there, before anything is timed:
:mod:`afford.certify.request`), runs the sweep's children, derives each point from its raw
samples and fits the throughput law over the resident points (:mod:`afford.certify.sweep`),
then runs the stages after the sweep, one module each, in this order:

- :mod:`afford.certify.probes`: device ceilings, launch-boundness, FLOPs, checkpoint I/O,
  startup costs;
- :mod:`afford.certify.memory`: the memory law, validated at held-out shapes;
- :mod:`afford.certify.gates`: the gates (the init-loss gate by default) and the audit;
- :mod:`afford.certify.sizes` (opt-in): throughput across model sizes;
- :mod:`afford.certify.levers` (opt-in): measured A/B levers;

and returns a :class:`Certificate`. Under torchrun, :mod:`afford.certify.distributed` adds
the node's collectives and data-parallel scaling before the sweep.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone

from afford.certify.gates import gates_stage
from afford.certify.levers import levers_stage
from afford.certify.memory import memory_stage
from afford.certify.partial import gate_failures, run_stage, sweep_failures
from afford.certify.probes import probes_stage
from afford.certify.request import CertifyRequest, Plan, Stage, StageContext, resolve
from afford.certify.sizes import sizes_stage
from afford.certify.sweep import assemble_point, fit_workload, point_key, protocol_of
from afford.measure import env as envmod
from afford.measure.children import Event, run_children
from afford.measure.memory_sweep import STAGGER_SECONDS, spawn_memory_child
from afford.measure.probes.runner import spawn_probe_child
from afford.measure.timing import rule_for
from afford.schema.cert import Certificate


def stages_for(req: CertifyRequest) -> list[Stage]:
    """The stages that run after the sweep, in order: device probes, the memory law, the
    gates (init loss by default), then the opt-in model sizes and levers."""
    chosen: list[tuple[bool, Stage]] = [
        (req.probes, probes_stage), (req.memory, memory_stage),
        (req.gates is not False, gates_stage), (req.sizes, sizes_stage),
        (req.levers, levers_stage)]
    return [stage for wanted, stage in chosen if wanted]


def spawners_for(req: CertifyRequest, device: str) -> dict[str, Callable[[], object]]:
    """On CUDA, the stages whose child certify starts while the sweep's last child measures
    (imports, CUDA context, cuBLAS and fused-optimizer warm-up off the critical path, as for
    the sweep's own children); none on a CPU, where a spawn would compete for the cores the
    timed steps use. Each spawner returns a :class:`~afford.measure.children.Spawned`."""
    if not device.startswith("cuda"):
        return {}
    out: dict[str, Callable[[], object]] = {}
    if req.probes:
        out["probes"] = lambda: spawn_probe_child(device, overlapped=True)
    if req.memory:
        out["memory"] = lambda: spawn_memory_child(
            device, overlapped=True, stagger=STAGGER_SECONDS if req.probes else 0.0)
    return out


def certify(req: CertifyRequest,
            on_event: Callable[[Event], None] = lambda e: None,
            on_plan: Callable[[Plan], None] = lambda p: None) -> Certificate:
    """Measure, fit, and return the certificate (not yet written)."""
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    device = envmod.choose_device(req.device)
    env = envmod.capture(device, req.command or " ".join(sys.argv), started)
    plan = resolve(req, device.type, env.device_class, str(device))
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
        failures = sweep_failures(results)  # partial certificate, exit 3 (issue 14)
        usable = any(p.usable for r in results for p in r.points)
        sections: dict = {}
        ctx = StageContext(req=req, env=env, plan=plan, results=results, on_event=on_event,
                           sweep_starts=starts, ahead=ahead)
        for stage in stages_for(req) if usable else []:
            t0 = time.perf_counter()
            sections.update(run_stage(stage, ctx, failures))
            seconds[stage.__name__.removesuffix("_stage")] = time.perf_counter() - t0
        failures += gate_failures(sections.get("gates"))
    finally:
        for kid in ahead.values():  # those no stage took (one failed, or none ran)
            kid.kill()
    ended = datetime.now(timezone.utc)
    env = env.model_copy(update={"ended_at": ended,
                                 "elapsed_seconds": (ended - started).total_seconds(),
                                 "stage_seconds": seconds})
    protocol = protocol_of(req, rule, device.type,
                           prewarmed=sorted(e["child"] for e in starts if e.get("prewarmed")))
    return Certificate(environment=env, protocol=protocol, workloads=results,
                       warnings=[f"{r.name} ({r.mode}): {n}" for r in results
                                 for n in r.warnings], **sections,
                       status="partial" if failures else "complete", failures=failures)
